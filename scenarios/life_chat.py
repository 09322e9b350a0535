"""The task chat of the ``life`` world: what a user asks for help with, and in what circumstances.

A session is about one task (a recipe, a letter, a script, a budget, ...);
``session_details`` draws the details its chat is written with, ``request``
words the ask (a verb phrase in one of many frames, or one of the theme's
own questions) and ``context`` a second sentence: the circumstances, an
aside, or small talk with the words news is told with. The assistant's
answers are composed in ``memsim.scenarios.life_text``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from memsim.scenarios.life_facts import FOLLOW_ON, SMALL_TALK
from memsim.scenarios.life_words import a_or_an, pick

__all__ = ["THEMES", "ASKS", "FRAMES", "CONTEXT", "ASIDES", "request", "context", "session_details"]


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


def _n(rng: random.Random, lo: int, hi: int) -> int:
    return rng.randint(lo, hi)


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
                    f"I need {a_or_an(doc)} for {who}, warm but not gushing, under {d['words']} words.",
                    f"Can you suggest an opening line for {a_or_an(doc)}? It's going to {who}.",
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


ASKS: Mapping[str, tuple[str, ...]] = {
    # What the user wants done, as a verb phrase; ``request`` wraps it in one of many frames.
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
FRAMES = (
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


def request(rng: random.Random, theme: str, d: Mapping[str, Any]) -> str:
    """A task request: a verb phrase in one of many frames, or one of the theme's own questions."""
    if rng.random() < 0.45:
        return _task_request(rng, theme, d)
    fields = {**d, "ing": d["ingredient"]}
    if theme == "code":
        fields.update(lang=d["code"][0], task=d["code"][1])
    return pick(rng, FRAMES).format(a=pick(rng, ASKS[theme]).format(**fields))


CONTEXT: Mapping[str, tuple[str, ...]] = {
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


ASIDES = (
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


def context(rng: random.Random, theme: str, d: Mapping[str, Any]) -> str:
    """A second sentence for a task request: the circumstances of the task, an aside, or small talk."""
    r = rng.random()
    if r < 0.12:
        # The sentences said after a fact are said without one too: none of them marks a turn that bears a fact.
        return pick(rng, FOLLOW_ON[pick(rng, SMALL_TALK)])
    if r < 0.35:
        return pick(rng, ASIDES).format(**d)
    return pick(rng, CONTEXT[theme]).format(**d)


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
    return {**out, "a_doc": a_or_an(out["doc"]), "a_tool": a_or_an(out["tool"])}
