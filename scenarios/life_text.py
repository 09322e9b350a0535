"""The text of the ``life`` world: phrase banks and the functions that compose turns from them.

The truth (``memsim.scenarios.life_truth``) says what is told; this module
says how. A user turn is composed of clauses: a task request (recipes,
planning, writing, code, budgets, training, gifts, repairs, languages,
reading) with per-session details, at most one fact of the user's life
stated in one of many direct or indirect ways, and now and then a
distractor (a hypothetical, a negation, or a passing remark about someone
else with a value of the same type). An assistant turn answers the task with
concrete details and sometimes recommends a book or a film the user may ask
about later. Questions have their own wording, not the evidence's.

Each ``fact`` function returns the clause and the strings of which at least
one appears in it (the value, or the alias the clause used), so that a
rewritten turn can be checked to still carry its fact. Text is drawn from a
``random.Random`` that the scenario seeds from its generator (one per user):
a turn takes dozens of choices, and the standard library's are many times
cheaper than numpy's one at a time.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from memsim.scenarios import life_truth as W

__all__ = [
    "THEMES", "DIET_ALIASES", "BOOKS", "FILMS", "GREETINGS", "BREAKUP_WORDS", "pick", "greeting", "when_phrase",
    "fact_clause", "distractor", "mirror", "quote", "reaction", "teaser", "news_prompt", "reveal", "recall", "greetings_of", "greet", "slip", "correction", "session_details", "FORGET_PHRASES", "forget_request", "forget_reply", "user_turn", "assistant_turn", "question_text",
]

GREETINGS = ("Hi!", "Hello again.", "Hey, quick one.", "Morning!", "Good afternoon.", "Evening.", "Hi there.", "Hey!",
             "Hiya.", "Hello!", "Hey you.", "Hi again!", "Hey there.", "Good morning.", "Afternoon!", "Good evening.",
             "Hello, it's me again.", "Hi, me again.", "Yo.", "Howdy.", "Hey hey.", "Hi hi.", "Hello hello.")
"""Greetings said before the first turn of a session."""
_BY_HOUR = ((12, ("Morning!", "Good morning.")), (18, ("Good afternoon.", "Afternoon!")),
            (24, ("Evening.", "Good evening.")))
_TIMELESS = tuple(g for g in GREETINGS if g not in {x for _, h in _BY_HOUR for x in h})


def greetings_of(rng: random.Random) -> tuple[str, ...]:
    """The few greetings one user uses, whatever the hour."""
    return tuple(rng.sample(_TIMELESS, rng.randint(2, 5)))


def greeting(rng: random.Random, hour: int, own: Sequence[str] = ()) -> str:
    """A greeting that fits the user's local ``hour`` (no "Morning!" after noon), from the user's ``own`` habits."""
    timed = next(g for h, g in _BY_HOUR if hour < h)
    return pick(rng, (*(own or ("Hi!", "Hello again.", "Hey, quick one.", "Hi there.")), *timed))


def _low(first: str, *, bare: bool = False) -> str:
    """A turn's first word as it reads after an opener: lower case where it is a common sentence start (a name
    keeps its capital); ``bare``: the word is matched as it stands, trailing comma or colon included."""
    return first.lower() if (first if bare else first.rstrip(",:")) in _COMMON_STARTS else first


def greet(rng: random.Random, hello: str, text: str) -> str:
    """``text`` opened with the greeting ``hello``, as a sentence of its own or run into the first one ("Hi, can you...")."""
    if rng.random() < 0.5 or "," in hello:
        return f"{hello} {text}"
    first, _, rest = text.partition(" ")
    low = _low(first)
    return f"{hello.rstrip('.!')}{pick(rng, (', ', ' - ', '! '))}{low if not hello.endswith('!') else first} {rest}".rstrip()


DIET_ALIASES: Mapping[str, tuple[str, ...]] = {
    # Each alias reads as an adjective ("I'm meat-free", "keep it plant-based").
    "vegetarian": ("vegetarian", "meat-free"),
    "vegan": ("vegan", "plant-based"),
    "pescatarian": ("pescatarian",),
    "gluten-free": ("gluten-free", "wheat-free"),
    "dairy-free": ("dairy-free", "lactose-free"),
    "omnivore": ("omnivore",),
}

BOOKS = (
    ("The Salt Road", "Inez Marlow"), ("A Clock Made of Rain", "Tobias Fenn"), ("Northern Lanterns", "Ada Quist"),
    ("The Cartographer's Daughter", "Milo Arden"), ("Seven Bridges Down", "Ruth Okafor"), ("Glass Orchards", "Pia Lund"),
    ("The Quiet Harbour", "Samir Haddad"), ("Winter Apprentice", "Lena Vogt"), ("The Lighthouse Ledger", "Owen Carr"),
    ("Under the Copper Hill", "Dara Moss"), ("The Paper Astronomer", "Jun Takeda"), ("Field Notes on Ghosts", "Maren Holt"),
    ("An Orchard in Exile", "Karim Bensaid"), ("The Last Ferryman", "Beatrix Lowe"), ("Tides of the Iron Coast", "Felix Grau"),
    ("The Honey Thief", "Noemi Russo"), ("Small Gods of Tuesday", "Arlo Finch"), ("The Map Room", "Greta Sund"),
)
FILMS = (
    "The Long Weekend in Oporto", "Static Summer", "A House for Ravens", "The Night Garden Heist", "Blue Hour Motel",
    "Paper Moons Over Harbour Street", "The Reluctant Tenor", "Dust and Marigolds", "Harbour Lights", "The Bookkeeper's Tango",
    "Seven Kinds of Snow", "The Orchard Keeper's Son", "Lanterns in July", "The Borrowed Bicycle",
)

_DISHES = (
    "mushroom risotto", "lentil dal", "shakshuka", "vegetable lasagne", "nasi goreng", "chickpea curry", "paella",
    "ramen", "bibimbap", "moussaka", "pierogi", "falafel wraps", "minestrone", "black bean tacos", "gnocchi",
    "stuffed peppers", "banana bread", "focaccia", "miso aubergine", "pumpkin soup", "carrot cake", "fish pie",
)
_INGREDIENTS = (
    "smoked paprika", "feta", "coconut milk", "fresh dill", "tahini", "capers", "leeks", "chickpeas", "saffron",
    "lemon zest", "brown butter", "miso paste", "spinach", "roasted garlic", "pine nuts", "sumac", "chilli flakes",
)
_DOCS = (
    "cover letter", "wedding toast", "newsletter intro", "complaint email to my landlord", "birthday card",
    "grant proposal summary", "LinkedIn post", "resignation letter", "thank-you note", "team update",
    "conference abstract", "retirement speech", "product description", "apology email", "short story opening",
)
_CODE = (
    ("Python", "parse a CSV with messy dates"), ("SQL", "find duplicate customer rows"), ("JavaScript", "debounce a search box"),
    ("Bash", "rename a folder of photos by date"), ("Python", "merge two dictionaries of lists"),
    ("R", "plot monthly averages"), ("SQL", "compute a running total per month"), ("Python", "retry a flaky HTTP call"),
    ("JavaScript", "sort a table by two columns"), ("Bash", "back up a folder every night"),
    ("Python", "count words in a text file"), ("Excel", "look up prices from another sheet"),
)
_ERRORS = ("a KeyError", "an off-by-one bug", "a timeout", "a null value", "an encoding error", "a syntax error",
           "a permissions error", "a type mismatch")
_EXERCISES = ("squats", "lunges", "push-ups", "planks", "deadlifts", "kettlebell swings", "burpees", "step-ups",
              "hill sprints", "rowing intervals")
_GIFTS = ("a cast-iron pan", "a star map print", "a cooking class", "noise-cancelling headphones", "a plant subscription",
          "a leather notebook", "concert tickets", "a board game", "a fountain pen", "a weekend spa voucher")
_REPAIRS = ("a leaking tap", "a squeaky door", "a wobbly table leg", "peeling paint in the hall", "a blocked sink",
            "a draughty window", "a loose shelf", "a flickering light")
_LANGS = ("Spanish", "Italian", "German", "Portuguese", "Finnish", "French", "Dutch", "Welsh")
_BUDGET = ("groceries", "eating out", "the holiday fund", "transport", "subscriptions", "rent", "the gym", "hobbies")
_GENRES = ("a slow-burn mystery", "something funny", "a big sprawling novel", "a short read", "a historical saga",
           "something hopeful", "a page-turner")
_FILM_GENRES = ("a heist comedy", "something gentle", "a twisty thriller", "a feel-good drama", "a documentary",
                "something with subtitles", "a road movie")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

THEMES = ("recipe", "writing", "code", "budget", "training", "gift", "repair", "language", "reading", "film", "planning")
"""The kinds of task a session is about."""


def pick(rng: random.Random, options: Sequence[Any]) -> Any:
    """One of ``options``, uniformly."""
    return options[rng.randrange(len(options))]


def _n(rng: random.Random, lo: int, hi: int) -> int:
    return rng.randint(lo, hi)


# -- task chat --------------------------------------------------------------------


def _task_request(rng: random.Random, theme: str, d: Mapping[str, Any]) -> str:
    dish, ing, doc, who = d["dish"], d["ingredient"], d["doc"], d["who"]
    lang, task = d["code"]
    bank = {
        "recipe": (f"Can you give me a {dish} recipe for {d['n']} people that uses {ing}?",
                   f"I want to make {dish} tonight; how long does it need if I add {ing}?",
                   f"What can I use instead of {ing} in {dish}? I'm cooking for {d['n']}.",
                   f"Is {dish} something I can prepare the day before, for {d['n']} guests?",
                   f"My {dish} came out bland last time; would {ing} help, and how much?",
                   f"We're having {d['n']} people over; could {dish} work with {ing} in it?"),
        "writing": (f"Could you help me tighten this {doc}? It runs to about {d['words']} words.",
                    f"I need {_a(doc)} for {who}, warm but not gushing, under {d['words']} words.",
                    f"Can you suggest an opening line for {_a(doc)}? It's going to {who}.",
                    f"Please make my {doc} sound less stiff; {who} will read it on {d['day']}."),
        "code": (f"How do I {task} in {lang}? I keep hitting {d['error']}.",
                 f"Can you show me a small {lang} example to {task}?",
                 f"My {lang} script to {task} fails with {d['error']} on row {d['row']}. Any idea why?",
                 f"What's the cleanest way to {task} with {lang}? The file has {d['rows']} rows."),
        "budget": (f"I've put {d['money']} aside over the years; how should I split it between {d['cat']} and a rainy-day fund?",
                   f"I overspent on {d['cat']} by {d['small']} this month; how do I claw it back?",
                   f"Is {d['small']} a week reasonable for {d['cat']}, roughly?"),
        "training": (f"Can you put together a {d['mins']}-minute session with {d['ex']} for {who}?",
                     f"How many sets of {d['ex']} suit a beginner at {d['times']} sessions a week? It's for {who}.",
                     f"What could replace {d['ex']} in a {d['mins']}-minute workout for {who}? Their knees complain."),
        "gift": (f"Is {d['gift']} a good present for {who}? Budget is around {d['small']}.",
                 f"I need a gift idea for {who} by {d['day']}, ideally under {d['small']}.",
                 f"Would {who} prefer {d['gift']} or something handmade, do you think?"),
        "repair": (f"How do I fix {d['repair']} without calling someone in?",
                   f"What tools do I need for {d['repair']}? I have maybe {d['mins']} minutes on {d['day']}.",
                   f"Is {d['repair']} a job for a beginner, honestly?",
                   f"We keep putting off {d['repair']}; can I do it myself in {d['mins']} minutes?"),
        "language": (f"How would I say 'see you on {d['day']}' in {d['lang']}?",
                     f"Can you give me {d['n']} useful {d['lang']} phrases for ordering food?",
                     f"Quiz me on {d['lang']} numbers up to {10 * d['rest']}, please."),
        "reading": (f"I'm after {d['genre']} for the evenings, any suggestion?",
                    f"Can you recommend {d['genre']}? I finished my last book on {d['day']}.",
                    f"What should I read next if I want {d['genre']}?"),
        "film": (f"What's a film for a quiet {d['day']} night, {d['film_genre']} if possible?",
                 f"We want a film for {d['day']} night, ideally {d['film_genre']}; any ideas?",
                 f"Can you suggest a movie for {d['n']} of us, something like {d['film_genre']}?"),
        "planning": (f"Help me plan {d['day']}: errands, a {d['mins']}-minute walk and dinner for {d['n']}.",
                     f"Can you make me a to-do list for the next {d['nights']} days?",
                     f"I have {d['n']} things due by {d['day']}; how should I order them?",
                     f"We have {d['n']} errands and a {d['mins']}-minute gap on {d['day']}; what goes first?"),
    }[theme]
    return pick(rng, bank)


_ASKS: Mapping[str, tuple[str, ...]] = {
    # What the user wants done, as a verb phrase; ``_request`` wraps it in one of many frames.
    "recipe": ("give me a {dish} recipe for {n} people that uses {ing}", "tell me how long {dish} takes for {n}",
               "suggest a swap for {ing} in {dish}", "scale a {dish} recipe up to {n} portions",
               "work out how much {ing} goes into {dish} for {n}", "walk me through {dish} from scratch",
               "tell me what goes well with {dish} as a side", "check whether {dish} freezes well"),
    "writing": ("tighten my {doc}, it runs to {words} words", "draft {a_doc} for {who}",
                "make my {doc} sound less stiff", "suggest a first line for {a_doc}",
                "cut my {doc} down to {words} words", "look over {a_doc} I wrote for {who}",
                "give my {doc} a friendlier ending"),
    "code": ("show me how to {task} in {lang}", "explain why my {lang} code to {task} throws {error}",
             "write a short {lang} snippet to {task}", "check my approach to {task} in {lang}",
             "help me debug {error} in my {lang} script"),
    "budget": ("split {money} between {cat} and savings", "set a weekly limit for {cat}",
               "tell me if {small} a week on {cat} is too much", "sketch a savings plan with {money} to start"),
    "training": ("put together a {mins}-minute workout with {ex} for {who}", "tell me how many sets of {ex} suit {who}",
                 "suggest a swap for {ex} for {who}, whose knees hate it",
                 "plan {times} short sessions a week around {ex} for {who}"),
    "gift": ("think of a present for {who} under {small}", "tell me if {gift} is a good gift for {who}",
             "come up with a gift for {who} by {day}", "compare {gift} and {gift2} as presents"),
    "repair": ("explain how to fix {repair}", "list the tools I'd need for {repair}",
               "tell me if {repair} is a beginner job", "walk me through {repair} step by step"),
    "language": ("teach me {n} {lang} phrases for a restaurant", "quiz me on {lang} numbers",
                 "translate 'see you on {day}' into {lang}", "correct my {lang} greeting"),
    "reading": ("recommend {genre}", "suggest a book, ideally {genre}", "find me {genre} for the evenings"),
    "film": ("suggest a film for {day} night, {film_genre} if possible", "pick a movie for {n} of us, {film_genre} ideally",
             "recommend {film_genre} for tonight"),
    "planning": ("plan my {day} around {n} errands and a {mins}-minute walk", "make a to-do list for the next {nights} days",
                 "order {n} tasks due by {day}", "draw up a rough timetable for {day}"),
}
_FRAMES = (
    "Can you {a}?", "Could you {a}?", "Would you {a}?", "Any chance you could {a}?", "I was wondering if you could {a}.",
    "Please {a}.", "I need you to {a}.", "Can you please {a}?", "Could you maybe {a}?", "I'd love it if you could {a}.",
    "Would you mind if I asked you to {a}?", "Are you able to {a}?", "Do you have a minute to {a}?",
    "Quick favour: could you {a}?", "Today's job for you: {a}.", "Can I get you to {a}?", "Help needed: {a}?",
    "I'd like you to {a}, if possible.", "When you can, {a}.", "Could you help and {a}?", "Is there any way you could {a}?",
    "Would it be possible to {a}?", "I'm hoping you can {a}.", "Mind if I ask you to {a}?", "Can you {a} for me?",
    "Got a sec to {a}?", "Think you could {a}?", "Hoping you can {a}.", "Okay, can you {a}?", "So, could you {a}?",
    "Would you kindly {a}?", "Wanna {a}?", "Next up: {a}.", "If it's not too much trouble, {a}.", "I'm stuck; can you {a}?",
    "It would really help if you could {a}.", "Could you please {a}?", "Any way you could {a}?",
    "Could you {a} for me?", "Would you be able to {a}?", "I'd be grateful if you could {a}.",
)


def _request(rng: random.Random, theme: str, d: Mapping[str, Any]) -> str:
    """A task request: a verb phrase in one of many frames, or one of the theme's own questions."""
    if rng.random() < 0.45:
        return _task_request(rng, theme, d)
    fields = {**d, "ing": d["ingredient"]}
    if theme == "code":
        fields.update(lang=d["code"][0], task=d["code"][1])
    return pick(rng, _FRAMES).format(a=pick(rng, _ASKS[theme]).format(**fields))


_STEPS: Mapping[str, tuple[str, ...]] = {
    # Steps of an answer, any two or three in any order: a procedure, not a canned reply.
    "recipe": ("soften the onions for {mins} minutes", "stir in the {ing} near the end", "season with {ingredient2}",
               "let it rest for {mins2} minutes", "bake at {temp} degrees for {mins} minutes", "toast the {ingredient2} in a dry pan",
               "add a splash of water if it catches", "taste before you add salt", "cook it a day ahead and reheat it gently",
               "swap the {ing} for {ingredient2} if you're out", "use about {spoons} tablespoons of {ing} for {n}",
               "double the sauce for {n} people", "keep the heat low once the {ing} goes in"),
    "writing": ("cut it to about {words} words", "move the key point to the first line", "drop the second paragraph",
                "open with something specific about {who}", "end on the date, {day}", "read it aloud once",
                "replace the long words with short ones", "keep one idea per paragraph", "say thank you once, not three times",
                "trim the opening by {cut} words", "put the ask in the last line"),
    "code": ("read the file in chunks", "check for {error} before row {row}", "wrap the parse step in a try block",
             "print row {row} first", "use a key function to {task}", "test it on {rows} rows before the full run",
             "log the input that triggers {error}", "write a tiny test for the edge case", "split the job into two functions",
             "build the result in one pass", "pin the library versions"),
    "budget": ("keep {pct}% of the {money} untouched", "cap {cat} at {small} a week", "review it after {times} weeks",
               "move {small} into savings each week", "track every purchase for {nights} days", "pay the {times} bills first",
               "set up a standing order on payday", "round up what you spend on {cat}"),
    "training": ("warm up for {times} minutes", "do {sets} rounds of {ex}", "rest {rest} seconds between sets",
                 "add reps before weight", "swap {ex} for something gentler on the knees", "stretch for {mins2} minutes after",
                 "keep one day a week easy", "film one set to check your form", "finish with {sets} minutes of walking"),
    "gift": ("go with {gift}", "add a handwritten note", "keep it under {small}", "wrap {gift2} as a backup",
             "ask a friend of {who} what they'd like", "order by {day} to be safe", "make something small yourself"),
    "repair": ("turn off the supply first", "take photos before you undo anything", "give yourself {mins} minutes",
               "use {a_tool}", "tighten it a quarter turn at a time", "lay a towel down", "buy a spare part before you start",
               "test it before you put the tools away", "watch for a slow drip afterwards"),
    "language": ("learn the polite form first", "practise {times} times a day", "say each phrase out loud",
                 "write {n} phrases on cards", "listen to a native speaker for {mins} minutes", "start with numbers and greetings",
                 "use the phrase the same day you learn it", "record yourself once a week"),
    "planning": ("do the errands first thing on {day}", "walk for {mins} minutes after lunch", "start dinner for {n} by six",
                 "pack layers and one smart outfit", "put the chargers in first", "do laundry after night {half}",
                 "block {mins} minutes for the hardest task", "leave a gap before dinner", "write the list the night before"),
}
_CONNECT = ((", then ", ", then "), (" and ", ", and "), ("; after that, ", "; then "), (". Then ", ". After that, "),
            (", and after that ", "; finally, "))
_ANSWER_INTROS = ("I'd {s}", "{S}", "{S}", "First, {s}", "My advice: {s}", "The trick is to {s}", "Try this: {s}",
                  "You'll want to {s}", "Start by {ing}", "Best is to {s}", "I would {s}", "The simplest plan: {s}",
                  "Here's the order: {s}", "What works for most people is to {s}", "I'd suggest you {s}",
                  "You could {s}", "It helps to {s}", "The usual advice is to {s}", "Begin by {ing}", "Honestly, {s}",
                  "In your place I'd {s}", "One way: {s}", "A good plan is to {s}", "Step one: {s}")
_TOPICS: Mapping[str, tuple[str, ...]] = {
    # How an answer may name what it is about before it starts ("For the ramen, ...").
    "recipe": ("For the {dish}", "With {ing} in it", "For {n} people", "For {dish} with {ing}", "If it's {dish} tonight",
               "Cooking for {n}"),
    "writing": ("For {a_doc}", "For {who}", "At {words} words", "For the {doc}", "If {who} reads it first"),
    "code": ("In {lang}", "With {rows} rows", "For {error}", "If it breaks at row {row}", "For my {lang} script"),
    "budget": ("With {money}", "For {cat}", "At {small} a week", "If {cat} is the leak"),
    "training": ("For {ex}", "In {mins} minutes", "At {times} sessions a week", "With {ex} in the mix"),
    "gift": ("For {who}", "Under {small}", "By {day}", "If {who} likes practical things"),
    "repair": ("For {repair}", "With {a_tool}", "In {mins} minutes", "If it's {repair}"),
    "language": ("In {lang}", "For {lang} beginners", "With {mins} minutes to spare"),
    "planning": ("For {day}", "Over {nights} days", "With {n} errands", "If {day} is packed"),
}
_WHY = ("", "", "", " so it doesn't go wrong halfway", " so you're not rushing at the end", ", which saves time later",
        " - that's where most people slip", ", and you're done", " to keep it simple")


def _gerund(phrase: str) -> str:
    """"turn off the supply" -> "turning off the supply" (the verbs of ``_STEPS`` only)."""
    verb, _, rest = phrase.partition(" ")
    irregular = {"put": "putting", "cut": "cutting", "set": "setting", "swap": "swapping", "stir": "stirring",
                 "drop": "dropping", "pin": "pinning", "plan": "planning", "use": "using", "make": "making",
                 "give": "giving", "write": "writing", "move": "moving", "replace": "replacing", "leave": "leaving",
                 "taste": "tasting", "bake": "baking", "wrap": "wrapping", "trim": "trimming", "store": "storing",
                 "save": "saving", "record": "recording", "double": "doubling", "pay": "paying"}
    return f"{irregular.get(verb, verb + 'ing')} {rest}".strip()


def _task_answer(rng: random.Random, theme: str, d: Mapping[str, Any]) -> str:
    """Two or three steps of the theme, in a random order, joined as one or two sentences."""
    fields = {**d, "ing": d["ingredient"], "lang": d["code"][0] if theme == "code" else d["lang"], "task": d["code"][1],
              "who": str(d["who"]).replace("my ", "your ")}
    bank = _STEPS[theme]
    steps = [bank[i].format(**fields) for i in sorted(rng.sample(range(len(bank)), rng.choice((2, 2, 3))))]
    text = steps[0]
    for step in steps[1:-1]:
        text += pick(rng, _CONNECT)[0] + step
    if len(steps) > 1:
        text += pick(rng, _CONNECT)[1] + steps[-1]
    intro = pick(rng, _ANSWER_INTROS)
    text = intro.format(s=text, S=text[0].upper() + text[1:], ing=_gerund(steps[0]) + text[len(steps[0]):])
    if rng.random() < 0.55:
        first, _, rest = text.partition(" ")
        text = f"{pick(rng, _TOPICS[theme]).format(**fields)}, {_low(first)} {rest}"
    return text + pick(rng, _WHY) + "."



_CONTEXT: Mapping[str, tuple[str, ...]] = {
    # A second sentence of a task request, with details of its own: task chat never repeats itself.
    "recipe": ("I've got {ingredient2} left over and about {mins} minutes", "I'd like to bake it at {temp} degrees",
               "{n} of us are eating around {mins} past seven"),
    "writing": ("it's due on {day}", "the current draft is {words} words", "{who} will read it first"),
    "code": ("the input has {rows} rows", "it runs every {times} hours", "it worked until row {row}"),
    "budget": ("the {money} is all I've saved so far", "I'd like to save {pct}% a month", "I've got {times} bills due on {day}"),
    "training": ("{who} has {mins} minutes on {day}", "{who} is just starting out", "{who} wants {rest} seconds of rest between sets"),
    "gift": ("the party is on {day}", "I can spend {small}", "{who} already has {gift2}"),
    "repair": ("it's been like that for {times} weeks", "I have {mins} minutes before guests arrive on {day}",
               "I own {a_tool} and not much else"),
    "language": ("I can spare {mins} minutes at lunch", "my course starts in {times} weeks", "I know about {words} words so far"),
    "reading": ("it's for a rainy {day}", "{who} lent me their last pick",
                "my last read took {nights} nights"),
    "film": ("our film night starts around {mins} past eight", "{n} people will be watching",
             "it's for {day} night"),
    "planning": ("my first call is at {times} o'clock", "I have {n} errands on {day}", "the next {nights} days are busy"),
}
_IFS = ("", "", "If that takes longer than {mins2} minutes,", "If it goes wrong,", "If you're short on time,",
        "Once it's done,", "If you get stuck,", "Before {day},", "If {who} asks,", "Either way,", "Next time,")
_ADVICE = ("skip step {half}", "tell me on {day} how it went", "budget roughly {small} for anything you need to buy",
           "try it {times} times before changing anything", "keep notes for {nights} days and compare",
           "send me what you've got", "take a photo for next time", "give it {mins2} minutes and check again",
           "don't rush step {half}", "come back and we'll adjust it", "write down what worked")


def _closing(rng: random.Random, d: Mapping[str, Any]) -> str:
    """A last sentence of advice: a condition, maybe, then what to do."""
    d = {**d, "who": str(d["who"]).replace("my ", "your ")}
    cond, advice = pick(rng, _IFS).format(**d), pick(rng, _ADVICE).format(**d)
    return f"{cond} {advice}." if cond else f"{advice[0].upper()}{advice[1:]}."


_ASIDES = (
    # Small talk with the words news is told with, so that none of them marks a turn that bears a fact.
    "the last attempt was a mess", "it needs to be better than last time", "I'm working from home on {day}",
    "we eat around {mins} past seven", "I'm not even sure where to start", "keep it simple, please",
    "the week has been long", "I've meant to sort this out for years", "I want to set it up properly",
    "that would be a big help for me", "I need it done soon", "I'd like more ideas than last time",
    "I tried something similar yesterday", "I only had time for it today", "I started on it {k} days ago",
    "a friend asked me the same {k} days ago", "I got home late yesterday", "it was on my list today",
    "{who2} mentioned it {k} days ago", "I'm not even halfway yet", "it has been on my mind for weeks",
    "nothing fancy, please", "it's the one thing I keep forgetting", "I've been meaning to ask you",
    "right now I'm a bit stuck", "I want to brush up my basics", "now is a good time for it",
    "that's part of my problem", "it's harder than I thought", "I had it all planned out", "it took longer than I hoped",
    "it's part of my plan for {day}", "nothing is planned for {day} yet", "we're eating late tonight",
    "I eat at my desk too often", "more or less, anyway", "I'm off to the shops later", "I'll add more detail if needed",
    "back to the point", "whatever we eat has to be quick", "I came across this idea yesterday",
    "mornings are short this week", "I was going to ask you last week", "I was hoping for something quick",
    "the weather has been grim all week", "it needs to be quick", "it's for someone who hates fuss", "I keep craving sweet things",
    "my favourite mug broke this morning", "the whole week got away from me", "my neighbour says hi, by the way",
    "the parcel finally arrived", "I still haven't started", "the flat is a mess this week", "I've had this problem for years",
    "I can't keep it up for long", "we're meeting friends for lunch", "I'm learning as I go", "I told a friend I'd sort it",
    "it's my comfort project", "the trip to the shops can wait", "anything quick would do", "I'll be home soon",
    "my job is quiet this week", "my job eats my evenings lately", "my job leaves me tired on weekdays",
    "work has been hectic", "the office is freezing", "I got home early for once",
    "now I have a free evening", "I came home starving", "mornings have been slow lately",
    "things at home are calm", "I'm at home all day", "our team at work is tiny", "I'm easing into the week",
    "it's late and the shops are shut", "the house is chaos today", "I've got time today and the energy",
    "it's raining and the bus is late again",
    "my neighbour's cat is on the wall again, it sleeps there all afternoon", "I'm still catching up after the weekend",
    "I'm still half asleep, sorry", "I tried once and the result was a disaster", "my laptop is slow and the wifi worse",
)


_FOLLOW_NEWS: Mapping[str, tuple[str, ...]] = {
    # Follow-ons that tell of a change: said only after dated news of it, never as small talk.
    "city": ("our neighbourhood is quieter than I expected", "rent is higher, but the flat gets more light",
             "I still get lost walking home", "my commute is shorter from here", "I'm still learning which bus goes where"),
    "employer": ("the work is more interesting than at my last place", "I'm still learning everyone's names"),
    "partner": ("it's early days, but it feels right", "we met through friends", "I haven't stopped smiling"),
}
_NEWS_ONLY = frozenset({"partner"})
_FAMILY = frozenset({"sister", "brother", "mother", "father"})
_FAMILY_ONLY = frozenset({"we were close growing up", "they're the organised one in the family"})
"""Topics whose every-day follow-ons tell of a settled state ("we argue about the thermostat"): after news, only news."""

_SMALL_TALK = ("city", "employer", "occupation", "diet", "cuisine", "music", "person")
"""Topics of a follow-on sentence that is true of every user at any time, so it is also said as small talk."""


def _context(rng: random.Random, theme: str, d: Mapping[str, Any]) -> str:
    r = rng.random()
    if r < 0.12:
        # The sentences said after a fact are said without one too: none of them marks a turn that bears a fact.
        return pick(rng, _FOLLOW_ON[pick(rng, _SMALL_TALK)])
    if r < 0.35:
        return pick(rng, _ASIDES).format(**d)
    return pick(rng, _CONTEXT[theme]).format(**d)


def session_details(rng: random.Random, relations: Sequence[str], names: Sequence[str] = ()) -> dict[str, Any]:
    """The per-session details task chat is written with (dish, document, code task, amounts, days).

    ``names``: the names of people the user has introduced, which task chat uses bare ("a gift for Ana"):
    a name alone says nothing of who the person is to the user.
    """
    who_options = ("my boss", "a neighbour", "my best friend", "a colleague", "my landlord", *[f"my {r}" for r in relations],
                   *names)
    out = {
        "who2": pick(rng, who_options), "k": 2 + int(rng.expovariate(1 / 3.0)),
        "dish": pick(rng, _DISHES), "ingredient": pick(rng, _INGREDIENTS), "ingredient2": pick(rng, _INGREDIENTS),
        "doc": pick(rng, _DOCS), "who": pick(rng, who_options), "code": pick(rng, _CODE), "error": pick(rng, _ERRORS),
        "ex": pick(rng, _EXERCISES), "gift": pick(rng, _GIFTS), "gift2": pick(rng, _GIFTS), "repair": pick(rng, _REPAIRS),
        "lang": pick(rng, _LANGS), "cat": pick(rng, _BUDGET), "genre": pick(rng, _GENRES), "day": pick(rng, _WEEKDAYS),
        "film_genre": pick(rng, _FILM_GENRES),
        "tool": pick(rng, ("adjustable spanner", "screwdriver set", "putty knife", "spirit level", "drill")),
        "n": _n(rng, 2, 9), "mins": _n(rng, 10, 55), "mins2": _n(rng, 5, 25), "temp": 10 * _n(rng, 16, 22),
        "words": 50 * _n(rng, 3, 16), "cut": 10 * _n(rng, 3, 9), "row": _n(rng, 12, 4800), "rows": _n(rng, 200, 90000),
        "money": f"{50 * _n(rng, 20, 120)} euros", "small": f"{5 * _n(rng, 4, 60)} euros", "pct": 5 * _n(rng, 2, 8),
        "times": _n(rng, 2, 6), "sets": _n(rng, 3, 6), "rest": 15 * _n(rng, 2, 6), "spoons": _n(rng, 1, 4),
        "nights": _n(rng, 2, 12), "half": _n(rng, 2, 5),
    }
    return {**out, "a_doc": _a(out["doc"]), "a_tool": _a(out["tool"])}


# -- facts of a life ------------------------------------------------------------


def when_phrase(event: date, said: date) -> str:
    """How a user dates news told on ``said`` about ``event``: ``today``, ``yesterday``, ``N days ago`` or ``on D Month``."""
    gap = (said - event).days
    if gap <= 0:
        return "today"
    if gap == 1:
        return "yesterday"
    if gap < 14:
        return f"{gap} days ago"
    return f"on {event.day} {event:%B}"


def _a(noun: str) -> str:
    low = noun.lower()
    vowel = low[:1] in "aeiou" and not low.startswith(("ux", "uni", "use", "usu", "eu", "one"))  # "a UX researcher"
    return ("an " if vowel else "a ") + noun


_FOLLOW_ON: Mapping[str, tuple[str, ...]] = {
    # A second sentence on the same topic, without the value, said only while the value still holds.
    "city": ("every morning the trams are packed", "in spring the parks are lovely", "summers here are long and hot",
             "there's a market on our street on Saturdays", "the city feels different in winter",
             "tourists fill the old town all year"),
    "employer": ("my team there is small but friendly", "the office is a twenty-minute cycle away",
                 "there's a big deadline at work on Friday", "meetings there never end on time",
                 "my manager there is very hands-off", "the company canteen is surprisingly good"),
    "occupation": ("the job has its stressful weeks", "I spend half my day in meetings", "the work suits me",
                   "my job keeps me on my feet"),
    # Nothing here says the couple live together: they may have met last week.
    "partner": ("we're trying a new café every weekend", "they plan far better than I do", "they make me laugh constantly"),
    "diet": ("so most recipes need a swap or two", "eating out is easier than it sounds", "I read food labels a lot"),
    "cuisine": ("we go at least once a month", "the spicier the better", "I've even tried cooking it at home",
                "it's my comfort food"),
    "music": ("it helps me concentrate", "I've been making playlists for long walks", "the neighbours must know every track"),
    "pets": ("feeding time is chaos", "the vet says all is well", "it sleeps most of the day"),
    "habits": ("it's the best part of my week", "I keep it up even when I'm tired", "my progress is slow but steady"),
    "trip_plans": ("I still need to sort out travel insurance", "the packing list is already a page long",
                   "I've started a list of places to eat", "I keep checking the weather forecast",
                   "the guidebook is on my bedside table", "I need a bigger suitcase", "I've been practising a few phrases"),
    "trips": ("the food was incredible", "we walked about twenty kilometres a day", "I've got hundreds of photos to sort",
              "the flights were a nightmare", "I'd go back in a heartbeat"),
    "illnesses": ("the doctor told me to rest", "work was understanding about it", "I slept for most of it",
                  "I'm still a bit tired", "soup was all I could manage", "I missed a whole week of plans"),
    "injuries": ("the doctor told me to rest", "work was understanding about it", "the stairs were a challenge for a while",
                 "the physio exercises are dull", "I missed a whole week of plans"),
    "purchases": ("it cost more than I planned", "setting it up took a whole evening", "the box barely fit through the door",
                  "I read about a hundred reviews first", "I'm still getting the hang of it", "it was on sale, to be fair"),
    "person": ("we talk most weekends", "we don't see each other enough", "we were close growing up",
               "we've been texting a lot lately", "I owe them a call", "they're the organised one in the family",
               "we're meeting up next month", "they send me memes at midnight", "we haven't caught up in ages",
               "they just got back from a long weekend away", "they've been very busy lately",
               "they always give me good advice"),
}

def news_topic(telling: Mapping[str, Any]) -> str:
    """The topic the user's own news is followed and reacted to by: its attribute, ``single`` for a breakup,
    ``injuries`` for an injury (hurt, not ill)."""
    if telling["attr"] == "partner" and telling["value"] == "single":
        return "single"
    if telling["attr"] == "illnesses" and telling["value"] in W.INJURIES:
        return "injuries"
    return str(telling["attr"])


BREAKUP_WORDS = ("broke up", "split up", "separated")
"""How a user says they are single again (the declared aliases of the value ``single``)."""


def fact_clause(rng: random.Random, telling: Mapping[str, Any], who: Mapping[str, Any] | None, when: str,
                still: bool, partnered: bool = True) -> tuple[str, str]:
    """The sentences stating one telling, and the string of them that carries its value.

    Args:
        rng: the user's text generator.
        telling: ``{"subject", "attr", "value", "aspect", ...}`` (``aspect``: ``holds`` for what is so on the day
            it is said, ``began`` for dated news, ``long`` for what was so before the conversations began,
            ``plan`` for a plan; ``intro`` set when it names a person).
        who: the person the telling is about (None for the user).
        when: the date phrase of dated news (``when_phrase``), empty otherwise.
        still: whether the value still holds on the day it is said (a follow-on sentence in the present tense
            is added only then).
        partnered: whether ``who``, when a partner, is the user's partner on the day (a past partner's facts
            take a person's follow-ons).
    """
    clause, said_as = _clause(rng, telling, who, when)
    # A partner's own facts take the partner's follow-ons ("they plan far better than I do"), not a relative's.
    topic = ("partner" if who.get("relation") == "partner" and partnered else "person") if who is not None \
        else news_topic(telling)
    if telling["attr"] == "partner" and telling["value"] == "single":
        return clause, said_as  # a breakup: nothing said of the couple fits after it
    if still and rng.random() < 0.7:
        news = _FOLLOW_NEWS.get(topic, ()) if telling["aspect"] == "began" and who is None else ()
        bank = news if topic in _NEWS_ONLY and news else _FOLLOW_ON[topic] + news
        if topic == "person" and who is not None and who.get("relation") not in _FAMILY:
            bank = tuple(x for x in bank if x not in _FAMILY_ONLY)  # a colleague was not "close growing up"
        return f"{clause}. {pick(rng, bank)}", said_as
    return clause, said_as


def _clause(rng: random.Random, telling: Mapping[str, Any], who: Mapping[str, Any] | None,
            when: str) -> tuple[str, str]:
    attr, v, aspect = telling["attr"], str(telling["value"]), telling["aspect"]
    we = "we" if telling.get("with_partner") else "I"
    if who is not None and telling.get("intro"):
        rel, name = who["relation"], who["name"]
        bank = (f"my {rel} {name} is visiting soon", f"{name}, my {rel}, asked me the same thing",
                f"I was on the phone with my {rel} {name} for an hour", f"my {rel} {name} says hi",
                f"{name} (my {rel}) would laugh at this", f"I'm meeting my {rel} {name} for lunch",
                f"my {rel} {name} gave me the same advice", f"{name} - my {rel} - helped me last time",
                f"I'll ask my {rel} {name} too", f"my {rel}, {name}, is staying over this weekend",
                f"{name} is my {rel}, and we're alike in that way", f"I was at my {rel} {name}'s place last night")
        return pick(rng, bank), name
    if who is not None:
        name = who["name"]
        bank = {
            "city": ((f"{name} lives in {v}", f"{name} loves life in {v}", f"{name} is based in {v}")
                     if aspect != "began" else
                     (f"{name} moved to {v} {when}", f"{name} packed up and relocated to {v} {when}",
                      f"{name} found a place in {v} {when}")),
            "employer": ((f"{name} works at {v}", f"{name}'s office is at {v}", f"{name} is with {v}")
                         if aspect != "began" else
                         (f"{name} started a new job at {v} {when}", f"{name} jumped ship to {v} {when}",
                          f"{name} accepted an offer from {v} {when}")),
            "occupation": (f"{name} works as {_a(v)}", f"{name} is {_a(v)}", f"{name} is {_a(v)} by trade"),
        }[attr]
        return pick(rng, bank), v
    if attr == "city":
        bank = ((f"here in {v} the trams stop running early", f"I live in {v}", f"my flat in {v} is tiny",
                 f"the weather in {v} has been grim", f"everything in {v} shuts on Sundays")
                if aspect != "began" else
                (f"{we} got the keys to the new flat in {v} {when}", f"{we} moved to {v} {when}",
                 f"{we} relocated to {v} {when}", f"the removal van dropped us in {v} {when}"))
        return pick(rng, bank), v
    if attr == "employer":
        bank = ((f"things at {v} are hectic", f"my job at {v} is busy this month", f"I work at {v}",
                 f"work at {v} has been intense")
                if aspect != "began" else
                (f"my first day at {v} was {when}", f"I started at {v} {when}", f"I joined {v} {when}",
                 f"I handed my notice in and began at {v} {when}"))
        return pick(rng, bank), v
    if attr == "occupation":
        if aspect == "began":
            return pick(rng, (f"the new role as {_a(v)} started {when}", f"I moved into {_a(v)} position {when}",
                              f"I started working as {_a(v)} {when}")), v
        return pick(rng, (f"as {_a(v)} I'm used to long days", f"working as {_a(v)} teaches you patience",
                          f"my job as {_a(v)} keeps me busy", f"I'm {_a(v)}, so weekends matter")), v
    if attr == "partner":
        if v == "single":
            phrase = pick(rng, BREAKUP_WORDS)
            return pick(rng, (f"my partner and I {phrase} {when}, so it's quiet at home",
                              f"we {phrase} {when}; it was mutual")), phrase
        bank = ((f"my partner {v} is cooking tonight", f"{v}, my partner, thinks I overplan",
                 f"my other half {v} wants to come too")
                if aspect != "began" else
                (f"I started seeing someone {when}, {v}, and it's going well",
                 f"{v} and I got together {when}", f"I met {v} {when} and we're officially together"))
        return pick(rng, bank), v
    if attr == "diet":
        alias = pick(rng, DIET_ALIASES[v])
        if aspect == "began":
            # Said as a switch: a new diet replaces the old one ("I went gluten-free" read as on top of vegetarian).
            return pick(rng, (f"I switched to {alias} eating {when}", f"I swapped my old way of eating for {alias} {when}",
                              f"I changed my diet {when}: {alias} from now on, nothing else")), alias
        return pick(rng, (f"keep it {alias}, that's how I eat", f"remember it has to be {alias} for me",
                          f"I'm {alias}, so adjust anything that clashes", f"it needs to work for someone who is {alias}")), alias
    if attr == "cuisine":
        if aspect == "began":
            return pick(rng, (f"I discovered {v} food {when}, and it's my new favourite", f"{v} cooking became my favourite {when}")), v
        return pick(rng, (f"I could eat {v} food every week", f"our favourite place is {_a(v)} restaurant",
                          f"nothing beats {v} cooking for me", f"I keep craving {v} dishes")), v
    if attr == "music":
        if aspect == "began":
            return pick(rng, (f"I got hooked on {v} {when}", f"a friend got me into {v} {when} and I've played nothing else")), v
        return pick(rng, (f"I had {v} on the whole time", f"{v} is my go-to while working",
                          f"I put on some {v} to get through it")), v
    if attr == "pets":
        name, species = v.split(" the ")
        if aspect == "began":
            return pick(rng, (f"{we} adopted {_a(species)} {when}, called {name}", f"{name}, our new {species}, arrived {when}",
                              f"{we} brought home {_a(species)} named {name} {when}")), name
        return pick(rng, (f"{name}, the {species} we've had for years, is asleep on my feet",
                          f"our old {species} {name} needs a walk soon" if species == "dog" else
                          f"our old {species} {name} is due at the vet soon",
                          f"I had to stop {name}, my {species} of many years, chewing the cable" if species != "tortoise"
                          else f"{name}, my {species} of many years, is out in the garden")), name
    if attr == "habits":
        if aspect == "began":
            return pick(rng, (f"I took up {v} {when}", f"I started {v} {when} and I'm hooked",
                              f"my new thing since {when} is {v}" if not when.startswith("on ") else
                              f"I got into {v} {when}")), v
        # Values are nouns ("yoga") and gerunds ("learning Spanish"): every construction takes both.
        return pick(rng, (f"{v} has been a fixture of my week for years", f"{v} has been part of my routine for ages",
                          f"I've kept {v} up for years now")), v
    if attr == "trip_plans":
        return pick(rng, (f"{we} have a trip to {v} planned soon", f"{we} booked flights to {v} for the coming weeks",
                          f"if the weather holds, {v} in a few weeks will be amazing",
                          f"I'm already daydreaming about {v}, it's only weeks away")), v
    if attr == "trips":
        comp = telling.get("companion_name")
        with_ = f" with {comp}" if comp else ""
        return pick(rng, (f"I got back from my trip to {v}{with_} {when}", f"I flew home from {v}{with_} {when}",
                          f"the holiday in {v}{with_} ended {when}",
                          f"I came back {when} from {telling.get('nights', 5)} nights in {v}{with_}")), v
    if attr == "illnesses" and v in W.INJURIES:
        return pick(rng, (f"I was laid up with {v} {when}", f"I ended up with {v} {when}",
                          f"{v} put me out of action {when}")), v
    if attr == "illnesses":
        return pick(rng, (f"I was off sick with {v} {when}", f"I came down with {v} {when}",
                          f"{v} knocked me out {when}")), v
    if attr == "purchases":
        return pick(rng, (f"I bought {v} {when}", f"I treated myself to {v} {when}", f"{v} I ordered arrived {when}",
                          f"I splurged on {v} {when}")), v
    raise ValueError(f"no phrasing for attribute {attr!r}")


_OTHERS = ("colleague", "neighbour", "friend", "cousin", "flatmate", "old classmate")


def mirror(rng: random.Random, never: Mapping[str, Sequence[str]], said: date,
           names: Sequence[str]) -> tuple[str, dict[str, str]]:
    """Someone else's news, written by the very constructions the user's people's facts are written with.

    A turn about a colleague's move reads like a turn about a sister's, so no
    phrase of a fact's construction tells that a turn bears one of the user's
    facts. The value is one the user never holds; the claim's polarity is
    ``other``.

    Args:
        rng: the user's text generator.
        never: as for ``distractor``.
        said: the user's calendar day the turn is said on (its date phrase counts back from it).
        names: names this someone may have (none of the user's people's).
    """
    rel = pick(rng, _OTHERS)
    who = {"relation": rel, "name": f"my {rel} {pick(rng, names)}"}
    attr = pick(rng, ("city", "city", "employer", "employer", "occupation"))
    value = pick(rng, never[attr]) if attr in never else pick(rng, list(W.OCCUPATIONS))
    began = attr != "occupation" and rng.random() < 0.6
    # Counted back as the user's own news is: mostly from the last few days.
    when = when_phrase(date.fromordinal(said.toordinal() - min(40, int(rng.expovariate(1 / 4.0)))), said) if began else ""
    telling = {"attr": attr, "value": value, "aspect": "began" if began else "holds"}
    text, said_as = fact_clause(rng, telling, who, when, True)
    claim = {"subject": "someone", "attr": attr, "value": value, "polarity": "other",
             "aspect": "began" if began else "holds", "said_as": said_as}
    if began:
        claim.update(when_as=when, time=_dated(when, said).isoformat())
    return text, claim


_QUOTE_ATTRS = {"city": ("holds", "began"), "employer": ("holds", "began"), "occupation": ("holds", "began"),
                "diet": ("holds", "began"), "cuisine": ("holds", "began"), "music": ("holds", "began"),
                "habits": ("long", "began"), "trip_plans": ("plan",), "trips": ("began",), "illnesses": ("began",),
                "purchases": ("began",), "partner": ("holds", "began"), "pets": ("long", "began")}
_QUOTES = ('my friend {name} keeps saying "{c}"', '{name} texted me this morning: "{c}"', 'as {name} put it, "{c}"',
           'a colleague, {name}, announced "{c}" at lunch', 'my cousin {name} wrote in the family chat: "{c}"',
           'I overheard {someone} {place}: "{c}"', '{someone} {place} was telling everyone "{c}"', '{name} from my old job just messaged: "{c}"',
           'my flatmate {name} said it again today: "{c}"', 'funny, {name} said the exact words "{c}" yesterday',
           '"{c}" - that is word for word what {name} told me', '"{c}", {name} wrote to me today',
           '"{c}" is what {name} keeps posting', '"{c}" - {name} again, at dinner', '"{c}", says my friend {name}')


_SOMEONE = ("someone", "a woman", "a guy", "a student", "an old man", "a teenager", "somebody")
_PLACES = ("on the bus", "on the train", "in the lift", "at the bakery", "in the queue at the post office", "at the gym",
           "at the next table", "in the waiting room", "at the bus stop", "in the corridor at work")


def quote(rng: random.Random, never: Mapping[str, Sequence[str]], said: date, names: Sequence[str],
          shape: tuple[str, str, str, str] | None = None) -> tuple[str, dict[str, str]]:
    """Someone else's words, quoted: a sentence built by the very constructions the user's own facts are told with.

    Where ``mirror`` covers the constructions of the user's people's facts, this covers the user's own: "I could
    eat Thai food every week" occurs in the user's turns as often as a fact of theirs as in a friend's quoted
    words, so none of its words marks a turn that bears a fact. The value is one the user never holds; the
    claim's polarity is ``other``.

    Args:
        rng: the user's text generator.
        never: by attribute, values the user never holds (``distractor``'s, with every attribute of ``_QUOTE_ATTRS``).
        said: the user's calendar day the turn is said on.
        names: names the quoted person may have (none of the user's people's).
        shape: ``(attr, aspect, relation, value)`` of a telling of the user's to echo (``relation`` set for one
            of their people's facts, which the quote tells of the quoted person's relative); half the time the
            quoted person says the same value (someone else may live in the user's city too). None for any.
    """
    attr, aspect, rel, same = shape or ("", "", "", "")
    if attr not in _QUOTE_ATTRS and not rel:
        attr = pick(rng, [a for a in _QUOTE_ATTRS if never.get(a)])
        aspect = pick(rng, _QUOTE_ATTRS[attr])
    speaker, other = rng.sample(list(names), 2)
    if rel:
        # The quoted person's relative has a name that fits the relation, as the user's own people do.
        gendered = {"sister": W.FEMALE_NAMES, "mother": W.FEMALE_NAMES, "daughter": W.FEMALE_NAMES,
                    "brother": W.MALE_NAMES, "father": W.MALE_NAMES, "son": W.MALE_NAMES}.get(rel)
        fits = [n for n in names if n != speaker and (gendered is None or n in gendered or n in W.NEUTRAL_NAMES)]
        other = pick(rng, fits) if fits else other
    who = {"relation": rel, "name": other} if rel else None
    value = (same or other) if attr in ("name", "partner") else same if same and rng.random() < 0.6 else \
        pick(rng, never[attr]) if attr in never else pick(rng, list(W.OCCUPATIONS))
    when = when_phrase(date.fromordinal(said.toordinal() - min(40, int(rng.expovariate(1 / 4.0)))), said) \
        if aspect == "began" else ""
    telling = {"attr": attr, "value": value, "aspect": aspect, "nights": _n(rng, 3, 12), "intro": attr == "name"}
    clause, said_as = fact_clause(rng, telling, who, when, attr != "trips")
    words = clause.replace(". ", pick(rng, (" - ", ", and ", ", and also ", "; ", " and ", ", plus ")))
    text = pick(rng, _QUOTES).format(name=speaker, c=words[0].upper() + words[1:], someone=pick(rng, _SOMEONE),
                                     place=pick(rng, _PLACES))
    claim = {"subject": "someone", "attr": attr, "value": value, "polarity": "other", "aspect": aspect,
             "said_as": said_as}
    if aspect == "began":
        claim.update(when_as=when, time=_dated(when, said).isoformat())
    return text, claim


def _dated(when: str, said: date) -> date:
    if when == "today":
        return said
    if when == "yesterday":
        return date.fromordinal(said.toordinal() - 1)
    if when.endswith(" days ago"):
        return date.fromordinal(said.toordinal() - int(when.split()[0]))
    day, month = when.removeprefix("on ").split()
    got = date(said.year, _MONTH_NUMBER[month], int(day))
    return got if got <= said else date(said.year - 1, _MONTH_NUMBER[month], int(day))


_MONTH_NUMBER = {date(2000, m, 1).strftime("%B"): m for m in range(1, 13)}


def distractor(rng: random.Random, never: Mapping[str, Sequence[str]]) -> tuple[str, dict[str, str]]:
    """A hypothetical, a denial or someone else's news, with a value the user never holds, and its claim.

    Args:
        rng: the user's text generator.
        never: by attribute (``city``, ``employer``, ``trips``, ``music``, ``purchases``), values the user never
            holds in the whole span, so a denial or a wish never contradicts their life.

    Returns:
        The clause and its claim (``subject``, ``attr``, ``value``, ``polarity``, ``aspect``, ``said_as``).
    """
    attr = pick(rng, ("city", "city", "employer", "employer", "trips", "trips", "music", "music", "purchases", "diet", "diet"))
    v = pick(rng, never[attr])
    if attr == "diet":
        alias = pick(rng, DIET_ALIASES[v])
        text = pick(rng, (f"my {pick(rng, _OTHERS)} is {alias}, which makes group dinners tricky",
                          f"a friend went {alias} and keeps sending me recipes"))
        return text, {"subject": "someone", "attr": "diet", "value": v, "polarity": "other", "aspect": "holds",
                      "said_as": alias}
    bank: Mapping[str, tuple[tuple[str, str, str], ...]] = {
        "city": ((f"if I ever left, I'd probably pick {v}", "me", "hypothetical"),
                 (f"part of me wants to try living in {v} one day", "me", "hypothetical"),
                 (f"my old flatmate just found a place in {v}", "someone", "other"),
                 (f"a colleague of mine just moved to {v}", "someone", "other"),
                 (f"maybe one day we'll look at flats in {v}", "me", "hypothetical"),
                 (f"I've never lived in {v}, whatever my accent suggests", "me", "denies")),
        "employer": ((f"my neighbour got a job at {v}", "someone", "other"),
                     (f"a friend of mine has just been hired by {v}", "someone", "other"),
                     (f"I applied to {v} years ago and never heard back", "me", "denies"),
                     (f"I'd never work for {v}, to be honest", "me", "denies"),
                     (f"a recruiter from {v} keeps emailing me", "someone", "other")),
        "trips": ((f"someday I'd love to see {v}", "me", "hypothetical"),
                  (f"I haven't been to {v}, despite what people think", "me", "denies"),
                  (f"my friend is off to {v} next month", "someone", "other")),
        "music": ((f"I can't stand {v}", "me", "denies"), (f"a friend keeps sending me {v} playlists", "someone", "other")),
        "purchases": ((f"my cousin swears by {v}", "someone", "other"),
                      (f"I'm not getting {v}, whatever the ads say", "me", "denies")),
    }
    text, subject, polarity = pick(rng, bank[attr])
    return text, {"subject": subject, "attr": attr, "value": v, "polarity": polarity, "aspect": "holds", "said_as": v}


def _join(parts: Sequence[str], rng: random.Random | None = None, run_on: float = 0.0) -> str:
    """Clauses as sentences; with ``rng``, two statements run together a share ``run_on`` of the time ("..., and ...")."""
    out: list[str] = []
    for part in parts:
        for p in part.split(". "):
            p = p.strip()
            if out and rng is not None and out[-1].endswith(".") and p[-1] not in "?!" and rng.random() < run_on:
                first, _, rest = p.partition(" ")
                low = _low(first, bare=True)
                out[-1] = out[-1][:-1] + pick(rng, _COORDINATORS) + low + (" " + rest if rest else "") + "."
                continue
            out.append(p[0].upper() + p[1:] + ("" if p[-1] in ".?!" else "."))
    return " ".join(out)


_COORDINATORS = (", and ", " - ", "; ", ", and also ", ". Also, ", ", plus ", " and ")


_OPENERS = ("By the way, ", "Oh, and ", "Quick one: ", "", "", "", "Side note: ", "Anyway, ", "So, ", "Right, ")




def _opener(rng: random.Random) -> str:
    # Drawn the same way for every turn, with or without a fact, so no opener marks the turns that bear one.
    return pick(rng, _OPENERS) if rng.random() < 0.5 else ""


def user_turn(rng: random.Random, theme: str, d: Mapping[str, Any], fact: str | None, distract: str | None,
              task_share: float = 0.35) -> tuple[str, bool]:
    """One user turn: the task request or news (with the task, a share ``task_share`` of the time), maybe a distractor;
    and whether it makes the request (only then does the assistant answer it, with a title for books and films).

    ``fact`` is the news the turn is about: one of the user's facts, or someone else's written the same way
    (``mirror``), so that a turn built around news is no sign that the news is the user's.
    """
    asked = True
    if fact is None:
        parts = [_request(rng, theme, d), _context(rng, theme, d)]
        if rng.random() < 0.4:
            parts.reverse()  # the circumstances first, then the ask
    else:
        # A turn with news is mostly about the news; now and then it also carries the task.
        parts = [fact]
        asked = rng.random() < task_share
        if asked:
            parts.insert(rng.randrange(2), _request(rng, theme, d))
    if distract is not None:
        parts.insert(rng.randrange(len(parts) + 1), distract)
    opener = _opener(rng)
    if opener:
        first, _, rest = parts[0].partition(" ")
        # "So, can you..." but "So, I moved...", "So, Ana moved...": only a common opening word is lower-cased.
        parts[0] = opener + _low(first, bare=True) + (" " + rest if rest else "")
    return _join(parts, rng, 0.3), asked


def assistant_turn(rng: random.Random, theme: str, d: Mapping[str, Any], react: str = "",
                   after: str = "", asked: bool = True, titles: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """One assistant turn, and the title it recommends (reading and film themes) or None.

    Args:
        rng: the user's text generator.
        theme: the session's task theme.
        d: the session's details (``session_details``).
        react: what the assistant says first, in response to the user's news (``reaction``), or "".
        after: what it says last (a question back, ``news_prompt``, or a look back at an earlier session, ``recall``).
        asked: whether the user's turn made the request; a book or film is recommended only then.
        titles: title -> genre of what was recommended to this user so far: a title keeps the genre it was first
            recommended for (the caller records the title returned once the turn is kept).
    """
    title = None
    genre = d["genre"] if theme == "reading" else d.get("film_genre", "")
    titles = titles or {}
    pool = [t for t in (BOOKS if theme == "reading" else FILMS if theme == "film" else ())
            if titles.get(t[0] if theme == "reading" else t, genre) == genre]
    if theme in ("reading", "film") and (not asked or not pool):
        body = pick(rng, _NO_TITLE)
    elif theme == "reading":
        title, author = pick(rng, pool)
        body = pick(rng, (f"I recommend {title} by {author}: it is {d['genre']} with short chapters, good for evenings.",
                          f"I'd suggest {title} ({author}); readers who want {d['genre']} tend to love it.",
                          f"{title} by {author} fits: {d['genre']}, and it ends well.",
                          f"Try {title}, by {author}. If you want {d['genre']}, it is hard to beat.",
                          f"For {d['genre']}, my pick is {title} by {author}."))
    elif theme == "film":
        title = pick(rng, pool)
        body = pick(rng, (f"I'd recommend the film {title}; it is {d['film_genre']} and runs under two hours.",
                          f"{title} would suit {d['n']} of you: {d['film_genre']}, and nobody needs to have seen a prequel.",
                          f"How about {title}? It's {d['film_genre']}, and it holds up on a small screen.",
                          f"For {d['film_genre']}, {title} is the film I'd put on."))
    else:
        body = _task_answer(rng, theme, d)
        if rng.random() < 0.6:
            body = f"{body} {_closing(rng, d)}"
    lead = "" if react else pick(rng, _LEADS)
    if lead and rng.random() < 0.7:
        first, _, rest = body.partition(" ")
        body = f"{lead.rstrip('. !')}{pick(rng, (', ', ' - ', ': '))}{_low(first)} {rest}"
        lead = ""
    return " ".join(x for x in (react, lead + body, after) if x).strip(), title


_NO_TITLE = ("Whenever you want a pick, tell me what mood you're in.", "Happy to suggest something once you're settled.",
             "Say the word when you want a recommendation.", "There's no rush; we can pick something another day.",
             "Happy to line up a few options later.", "We can look for something together later on.",
             "Just ask when you're ready for a suggestion.", "I can suggest a few when you have a moment.")
"""What the assistant says in a reading or film session to a turn that asks for nothing: no title."""

_LEADS = ("", "", "", "", "", "", "Good question. ", "Sure. ", "Happy to help. ", "Of course. ", "Right. ", "Okay! ", "Gladly. ",
          "Let me think. ", "Absolutely. ", "Fair question. ", "No problem. ", "Sure thing. ", "Here's a thought. ",
          "Easy enough. ", "Happy to. ", "Alright. ", "Good idea. ", "Let's see. ",
          "Here's what I'd do. ", "That's doable. ", "Nice one. ", "Sounds fun. ", "Great question. ", "Hm, okay. ")
_REACTIONS: Mapping[str, tuple[str, ...]] = {
    # What the assistant says to news, by topic; value-free, so it asserts nothing.
    "city": ("What a change, congratulations on the move!", "A new city! I hope you're settling in.",
             "Moving is a lot of work; how's the new place?", "That's a big move.", "New streets to explore, how exciting."),
    "employer": ("Congratulations on the new job!", "A new job, that's great news.", "Well done on the new role!",
                 "How exciting, a fresh start at work.", "That's a big step; I hope the first weeks go smoothly."),
    "occupation": ("Congratulations on the new role!", "A change of career, that's brave.", "That sounds like a good move."),
    "partner": ("That's lovely news!", "I'm so glad it's going well.", "How nice to hear."),
    "single": ("I'm sorry to hear that.", "That sounds hard; I hope you're doing okay.", "Take care of yourself."),
    "diet": ("Noted, I'll keep that in mind for recipes.", "Good to know for food ideas.", "That's a big change in the kitchen."),
    "cuisine": ("Good taste!", "I can see why.", "That's a great choice for a night out."),
    "music": ("Good taste!", "Great for focus, I imagine.", "I can see the appeal."),
    "pets": ("A new pet! How lovely.", "Aww, congratulations on the new arrival.", "How are they settling in?"),
    "habits": ("That sounds like a great new habit.", "Good for you for starting that.", "How are you finding it?"),
    "trip_plans": ("Sounds like a wonderful trip to look forward to.", "How exciting, a trip coming up!",
                   "That should be a lovely break."),
    "trips": ("Welcome back! It sounds like a great trip.", "Glad you had a good time away.", "What a trip!"),
    "illnesses": ("I'm sorry you were ill; I hope you're fully better.", "Oh no, I hope you've recovered.",
                  "That sounds rough. Feeling better now?"),
    "injuries": ("I'm sorry you got hurt; I hope it's healing well.", "Oh no, I hope you've recovered.",
                 "That sounds painful. Better now?"),
    "purchases": ("Nice purchase!", "Enjoy it!", "Sounds like a treat."),
    # Said after a person's news or state alike ("Tomas loves life in Hamburg"): nothing here assumes a change.
    "person": ("Good for them!", "Sounds like they're doing well.", "Nice to hear how they're getting on.",
               "Glad to hear it.", "I hope it keeps going well for them.", "Good to hear they're well.",
               "Fingers crossed for them.", "That sounds nice for them.", "Lucky them.", "They sound busy!",
               "Nice that you keep up with them.", "Sounds like things suit them."),
}
_TEASERS = (
    # Said before news, the user's or someone else's; the news itself comes in the next turn.
    "guess what happened this week", "I have some news, actually", "something big happened", "I've got an update for you",
    "you'll never guess what happened", "there's news on my end", "remind me to tell you something after this",
    "wait till you hear this", "oh, and I have to tell you something", "a lot has changed since we last talked",
    "I have gossip", "so much going on lately", "let me tell you what happened", "big week, by the way",
)
_PROMPTS = ("What's the news?", "Oh? Do tell.", "I'm curious now, what happened?", "Go on, what is it?",
            "Now I want to hear the news!", "Tell me everything.", "What happened?", "Ooh, spill.", "I'm all ears.")
_REVEALS = ("So, ", "Okay: ", "Right, so ", "Well, ", "The news: ", "Here goes: ", "So here it is: ", "Okay so ",
            "Right: ", "Alright, ")
_RECALLS = ("How did {x} turn out, by the way?", "Did {x} work out in the end?", "Any luck with {x} since we last talked?",
            "Last time we looked at {x}; did it go well?", "By the way, how was {x} in the end?")


_FOLLOW_UPS: Mapping[str, tuple[str, ...]] = {
    "city": ("How's the commute?", "Found a favourite café yet?", "Is the flat all unpacked?", "Do you know the neighbours yet?"),
    "employer": ("How's the team?", "What's the first project?", "How's it going so far?", "Is the commute any better?"),
    "occupation": ("What's the hardest part so far?", "Is it what you expected?", "How are you finding it?"),
    "partner": ("How did you meet?", "Have your friends met them yet?"),
    "trips": ("What was the highlight?", "Did the weather hold?", "Would you go back?", "How was the food?"),
    "trip_plans": ("Have you booked somewhere to stay?", "What are you most looking forward to?"),
    "pets": ("How are they settling in?", "Have they chewed anything yet?"),
    "illnesses": ("Are you back to normal?", "Did the doctor say how long it lasts?"),
    "injuries": ("Are you back to normal?", "Are you moving more easily now?"),
    "person": ("Do you see them often?", "How are they otherwise?", "Are you in touch a lot?"),
}
_OH = ("", "", "", "Oh, ", "Oh wow, ", "Ah, ", "Well, ", "Wow. ", "Oh! ", "Ooh, ")


def reaction(rng: random.Random, topic: str) -> str:
    """What the assistant says first on hearing news about ``topic`` (an attribute, ``single`` or ``person``):
    an exclamation, maybe, a comment, and maybe a question back; value-free, so it asserts nothing."""
    said = pick(rng, _REACTIONS[topic])
    oh = pick(rng, _OH) if topic != "single" else ""
    said = oh + (said[0].lower() + said[1:] if oh.endswith(", ") and not said.startswith(("I ", "I'")) else said)
    if topic in _FOLLOW_UPS and rng.random() < 0.5:
        said = f"{said} {pick(rng, _FOLLOW_UPS[topic])}"
    return said


def teaser(rng: random.Random) -> str:
    """A clause that announces news to come, with none of it."""
    return pick(rng, _TEASERS)


def news_prompt(rng: random.Random) -> str:
    """The assistant asking to hear the news a teaser announced."""
    return pick(rng, _PROMPTS)


def reveal(rng: random.Random, text: str) -> str:
    """``text`` told as the news a teaser announced ("So, I moved...")."""
    for opener in _OPENERS:
        if opener and text.startswith(opener):
            text = text[len(opener):]
            text = text[0].upper() + text[1:]
            break
    first, _, rest = text.partition(" ")
    return pick(rng, _REVEALS) + _low(first, bare=True) + (" " + rest if rest else "")


def recall(rng: random.Random, theme: str, d: Mapping[str, Any]) -> str:
    """The assistant asking how an earlier session's task went (``d``: that session's details), or ""."""
    who = str(d["who"]).replace("my ", "your ")
    x = {"recipe": f"the {d['dish']}", "writing": f"the {d['doc']}", "code": f"that {d['code'][0]} script",
         "training": f"the {d['ex']}", "repair": str(d["repair"]), "language": f"your {d['lang']}",
         "gift": f"the present for {who}", "budget": f"the {d['cat']} budget", "planning": f"your plans for {d['day']}"}
    return pick(rng, _RECALLS).format(x=x[theme]) if theme in x else ""


# -- questions ---------------------------------------------------------------------


def question_text(rng: random.Random, spec: Mapping[str, Any], ctx: Mapping[str, Any]) -> str:
    """The wording of a question (never the evidence's wording).

    Args:
        rng: the scenario's generator.
        spec: ``{"kind", "subject", "attr", ...}`` as in ``meta["questions"]``.
        ctx: ``rel`` (the relative's relation word), ``cur`` (a value the question may name), ``date`` (as-of date text).
    """
    kind, attr = spec["kind"], spec.get("attr", "")
    rel, cur, date = ctx.get("rel", ""), ctx.get("cur", ""), ctx.get("date", "")
    label = {"city": "living", "employer": "working", "occupation": "doing for a living"}.get(attr, attr)
    banks: dict[tuple[str, str], tuple[str, ...]] = {
        ("current", "city"): ("Which city am I living in these days?", "Where's home for me at the moment?",
                              "Remind me which city I live in now?", "What city is my flat in now?"),
        ("current", "employer"): ("Which company am I working for at the moment?", "Where do I work these days?",
                                  "What's the name of the company I work at now?", "Who is my employer now?"),
        ("current", "occupation"): ("What do I do for a living?", "What's my job these days?", "What work do I do?"),
        ("current", "partner"): ("Who am I seeing at the moment?", "What's my partner called?", "Who is my partner?"),
        ("current", "music"): ("What sort of music am I into lately?", "Which music have I been listening to most?"),
        ("current", "name"): (f"What's my {rel}'s name?", f"Remind me what my {rel} is called?"),
        ("previous", "city"): (f"Where was I living before {cur}?", f"Which city did I leave to go to {cur}?"),
        ("previous", "employer"): (f"Which company did I work for before {cur}?", f"Where was my job before {cur}?"),
        ("previous", "occupation"): (f"What was my role before I became {_a(cur)}?",),
        ("previous", "music"): (f"Before {cur}, what music was I listening to?",),
        ("previous", "partner"): ("Who was I with before my current relationship?",),
        ("since", "city"): (f"How long have I been in {cur}?", f"How long ago did I relocate to {cur}?"),
        ("since", "employer"): (f"How long ago did I start at {cur}?", f"How long have I been working for {cur}?"),
        ("since", "trips"): (f"How long ago was my {cur} holiday?", f"How long is it since I came back from {cur}?"),
        ("since", "illnesses"): (f"How long ago was I laid up with {cur}?", f"How long is it since I had {cur}?"),
        ("since", "purchases"): (f"How long have I had {cur}?",),
        ("count", "trips"): ("How many trips have I taken, that you know of?", "How many holidays have I had so far?",
                             "How many places have I travelled to since we started talking?"),
        ("count", "pets"): ("How many pets live with me?", "How many pets have I got?"),
        ("count", "purchases"): ("How many big things have I bought?", "How many purchases have I told you about?"),
        ("count", "illnesses"): ("How many times have I been ill or injured since we started chatting?",
                                 "How often have I been off sick, in total?"),
        ("count", "habits"): ("How many hobbies and routines do I have going on?", "How many hobbies have I told you about?"),
        ("latest", "trips"): ("Where did I travel on my most recent trip?", "Where was my last holiday?"),
        ("latest", "purchases"): ("What's the last big thing I bought?", "What did I buy most recently?"),
        ("latest", "illnesses"): ("What was the last illness or injury I had?", "What laid me up most recently?"),
        ("latest", "pets"): ("What's the name of our newest pet?",),
        ("latest", "habits"): ("What's the most recent hobby I picked up?", "Which routine did I start most recently?"),
        ("preference", "diet"): ("Plan me a dinner menu for Saturday that fits my diet.",
                                 "What should I order at the work lunch, given what I eat?",
                                 "Suggest a week of lunches that respects my diet."),
        ("preference", "cuisine"): ("What kind of restaurant should I book for my birthday dinner?",
                                    "What food would cheer me up tonight, knowing my favourites?",
                                    "Pick a restaurant for a date night with the food I love."),
        ("hop", "city"): (f"Where does my {rel} live now?", f"Which city is my {rel} in these days?",
                          f"What city has my {rel} ended up in?"),
        ("hop", "employer"): (f"Where does my {rel} work?", f"Which company is my {rel} with now?",
                              f"Who employs my {rel} these days?"),
        ("hop", "occupation"): (f"What does my {rel} do for work?", f"What is my {rel}'s job?"),
        ("assistant", "book"): (f"What was the title of the book you recommended when I wanted {cur}?",
                                f"Which book did you recommend to me when I was after {cur}?"),
        ("assistant", "film"): (f"What was that film you recommended, the one that's {cur}?",
                                f"Which film did you recommend when I asked for {cur}?"),
        ("abstain", "car"): ("What colour is my car?", "Which car do I drive?"),
        ("abstain", "school"): ("Where did I go to university?", "What did I study at college?"),
        ("abstain", "allergy"): ("What am I allergic to?",),
        ("abstain", "salary"): ("How much do I earn?",),
        ("abstain", "relative"): (f"Where does my {rel} work?", f"What's my {rel}'s job?"),
        ("abstain", "anniversary"): ("When is my wedding anniversary?",),
    }
    if kind == "abstain" and (kind, attr) not in banks:
        # A topic the user asked to have forgotten is asked about as any question on it would be.
        return pick(rng, banks[("current", attr)] if ("current", attr) in banks else banks[("latest", attr)])
    if kind == "as_of":
        return pick(rng, (f"As of {date}, where was I {label}?", f"Back on {date}, where was I {label}?",
                          f"On {date}, what was my {attr}?")) if attr in ("city", "employer") else f"On {date}, what was my {attr}?"
    return pick(rng, banks[(kind, attr)])


def vocabulary() -> dict[str, list[str]]:
    """Every value a user's attributes can take, with the forms the text may use for it (the world's declared aliases)."""
    out: dict[str, list[str]] = {}
    employers = [e for s in W.SECTORS.values() for e in s]
    for v in (*W.CITIES, *employers, *W.OCCUPATIONS, *W.CUISINES, *W.MUSIC, *W.DESTINATIONS, *W.ILLNESSES,
              *W.PURCHASES, *W.HABITS):
        out[v] = [v]
    for diet, aliases in DIET_ALIASES.items():
        out[diet] = list(dict.fromkeys((diet, *aliases)))
    for name in W.PET_NAMES:
        for species in W.PET_SPECIES:
            out[f"{name} the {species}"] = [name]
    out["single"] = list(BREAKUP_WORDS)
    return out


FORGET_PHRASES: Mapping[str, tuple[str, ...]] = {
    # What a user calls a topic when they ask for it to be forgotten.
    "city": ("where I live", "my address and where I live", "which city I'm in"),
    "employer": ("where I work", "my workplace", "the company I work for"),
    "partner": ("my relationship", "who I'm seeing"),
    "illnesses": ("my health", "when I was ill"),
}


def forget_request(rng: random.Random, attr: str) -> tuple[str, str]:
    """A request, in plain words, to forget what the user said on a topic, and the phrase that names the topic."""
    phrase = pick(rng, FORGET_PHRASES[attr])
    text = pick(rng, (f"Please forget what I told you about {phrase}.",
                      f"Could you drop everything I've said about {phrase}? I'd rather you didn't keep it.",
                      f"I'd like you to forget anything I mentioned about {phrase}, please."))
    return text, phrase


_SLIPS: Mapping[str, tuple[str, ...]] = {
    # The assistant misremembering what the user told it: the wrong value in a passing remark.
    "city": ("How is life in {wrong} treating you, by the way?", "I hope the weather in {wrong} is kinder today.",
             "Is {wrong} still as busy as you said?"),
    "employer": ("Is it still hectic at {wrong}?", "How are things at {wrong} these days?",
                 "Hope {wrong} isn't working you too hard."),
    "name": ("Say hi to {wrong} for me!", "How is your {rel} {wrong} doing?", "Maybe your {rel} {wrong} has ideas too."),
}
_CORRECTIONS: Mapping[str, tuple[str, ...]] = {
    # The user setting it right, in plain words: the right value asserted, the wrong one denied.
    "city": ("I live in {right}, not {wrong}", "it's {right} - I've never lived in {wrong}", "I'm in {right}, not {wrong}",
             "{wrong}? Home is {right}", "{right}, remember? {wrong} was never home", "not {wrong}: {right} is where I live",
             "I've never even been to {wrong} - I'm in {right}", "my flat's in {right}, not {wrong}"),
    "employer": ("I work at {right}, not {wrong}", "{right} - I've never worked at {wrong}", "my job is at {right}, not {wrong}",
                 "{wrong} isn't my employer, {right} is", "it's {right} I work for, not {wrong}",
                 "I'm at {right}; {wrong} never hired me", "wrong company: {right}, not {wrong}"),
    "name": ("my {rel} is {right}, not {wrong}", "it's {right} - my {rel} isn't {wrong}", "{wrong}? It's {right}",
             "{right}, not {wrong}", "my {rel}'s name is {right}, not {wrong}",
             "{wrong} is someone else; my {rel} is {right}", "it's {right} for sure, my {rel}, not {wrong}"),
}
_SETTING_RIGHT = ("", "", "So, ", "Right, ", "Oh, and ", "Anyway, ", "Quick one: ", "By the way, ", "Side note: ")
"""The openers every user turn may have (``_OPENERS``): none marks a correction."""
_AFTERWARDS = ("", "", "", " Easy to mix up.", " Common mistake!", " All good.", " Anyway.", " You had me confused!")


def slip(rng: random.Random, attr: str, wrong: str, rel: str = "") -> str:
    """The assistant's remark with the wrong value of ``attr`` (``city``, ``employer`` or a person's ``name``)."""
    return pick(rng, _SLIPS[attr]).format(wrong=wrong, rel=rel)


def correction(rng: random.Random, attr: str, right: str, wrong: str, rel: str = "") -> str:
    """The user's correction: ``right`` asserted, ``wrong`` denied."""
    core = pick(rng, _CORRECTIONS[attr]).format(right=right, wrong=wrong, rel=rel)
    lead = pick(rng, _SETTING_RIGHT)
    if not lead:
        core = core[0].upper() + core[1:]
    end = "" if core[-1] in "?!" else "."
    return f"{lead}{core}{end}{pick(rng, _AFTERWARDS)}"


def forget_reply(rng: random.Random) -> str:
    """The assistant's answer to a forget request."""
    return pick(rng, ("Understood; I won't bring that up again.", "Of course. Consider it forgotten.",
                      "Done, I'll leave that out from now on."))


def _first_words() -> frozenset[str]:
    """The words a template of this module may start with, capitalised ("Can", "Side", "Think"): a sentence that
    starts with one of them may be run into the one before in lower case; a name or a place may not."""
    banks: list[Any] = [_FRAMES, _ASKS, _ASIDES, _CONTEXT, _FOLLOW_ON, _FOLLOW_NEWS, _TEASERS, _OPENERS, _LEADS, _STEPS, _ANSWER_INTROS,
                        _IFS, _ADVICE, _REACTIONS, _FOLLOW_UPS, _PROMPTS, _REVEALS, _RECALLS, _QUOTES, FORGET_PHRASES,
                        _CORRECTIONS]
    words = {"Can", "Could", "How", "Is", "What", "Help", "My", "Please", "Would", "Quiz", "Which", "The", "Here",
             "Our", "A", "An", "It", "Maybe", "If", "Someday", "Everything", "Things", "Work", "Since", "Keep",
             "Remember", "Nothing", "We", "Tell", "Try", "Budget", "Step", "Are", "Do", "Does", "Should", "Any",
             "Working", "As", "Feeding", "Setting", "Some", "Someone", "Let", "This", "That", "There", "Next", "Last"}

    def walk(x: Any) -> None:
        if isinstance(x, str):
            first = x.split(" ", 1)[0].strip(",:;.!?\"'")
            if first and first[0].isalpha() and first != "I" and not first.startswith("I'"):
                words.add(first[0].upper() + first[1:])
        elif isinstance(x, Mapping):
            for v in x.values():
                walk(v)
        elif isinstance(x, (tuple, list)):
            for v in x:
                walk(v)

    walk(banks)
    return frozenset(words)


_COMMON_STARTS = _first_words()
COMMON_STARTS = frozenset(w.lower() for w in _COMMON_STARTS)
"""Lower-cased, the words a sentence of this module may start with other than names and places."""
