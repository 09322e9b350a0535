"""The text of the ``life`` world: the functions that compose turns, and the phrase banks of the dialogue.

The truth (``memsim.scenarios.life_truth``) says what is told; the text
modules say how. A user turn is composed of clauses: a task request
(``memsim.scenarios.life_chat``: recipes, planning, writing, code, budgets,
training, gifts, repairs, languages, reading) with per-session details, at
most one fact of the user's life stated in one of many direct or indirect
ways (``memsim.scenarios.life_facts``), and now and then a distractor (a
hypothetical, a negation, or a passing remark about someone else with a
value of the same type). An assistant turn, composed here, answers the task
with concrete details and sometimes recommends a book or a film the user may
ask about later; it reacts to news, asks to hear it, and looks back at an
earlier session's task. Questions have their own wording, not the evidence's
(``memsim.scenarios.life_questions``). This module also holds the requests
to forget and the corrections of the assistant's slips, and re-exports the
public names of the other text modules, which the scenario reads from here.

Text is drawn from a ``random.Random`` that the scenario seeds from its
generator (one per user): a turn takes dozens of choices, and the standard
library's are many times cheaper than numpy's one at a time.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from memsim.scenarios.life_chat import ASIDES, ASKS, CONTEXT, FRAMES, THEMES, context, request, session_details
from memsim.scenarios.life_facts import (
    BREAKUP_WORDS,
    DIET_ALIASES,
    FOLLOW_NEWS,
    FOLLOW_ON,
    QUOTES,
    distractor,
    fact_clause,
    mirror,
    news_topic,
    quote,
    vocabulary,
    when_phrase,
)
from memsim.scenarios.life_questions import question_text
from memsim.scenarios.life_words import pick

__all__ = [
    "THEMES", "DIET_ALIASES", "BOOKS", "FILMS", "GREETINGS", "BREAKUP_WORDS", "pick", "greeting", "when_phrase",
    "fact_clause", "distractor", "mirror", "quote", "reaction", "teaser", "news_prompt", "reveal", "recall", "greetings_of", "greet", "slip", "correction", "session_details", "FORGET_PHRASES", "forget_request", "forget_reply", "user_turn", "assistant_turn", "question_text",
    "news_topic", "vocabulary", "COMMON_STARTS",
]


# -- greetings -----------------------------------------------------------------


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


# -- the assistant's answers ---------------------------------------------------


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


# -- turns ---------------------------------------------------------------------


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
        parts = [request(rng, theme, d), context(rng, theme, d)]
        if rng.random() < 0.4:
            parts.reverse()  # the circumstances first, then the ask
    else:
        # A turn with news is mostly about the news; now and then it also carries the task.
        parts = [fact]
        asked = rng.random() < task_share
        if asked:
            parts.insert(rng.randrange(2), request(rng, theme, d))
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


# -- the dialogue --------------------------------------------------------------


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


# -- forgetting and corrections ------------------------------------------------


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


# -- the words a sentence starts with ------------------------------------------


def _first_words() -> frozenset[str]:
    """The words a template of the text modules may start with, capitalised ("Can", "Side", "Think"): a sentence that
    starts with one of them may be run into the one before in lower case; a name or a place may not."""
    banks: list[Any] = [FRAMES, ASKS, ASIDES, CONTEXT, FOLLOW_ON, FOLLOW_NEWS, _TEASERS, _OPENERS, _LEADS, _STEPS, _ANSWER_INTROS,
                        _IFS, _ADVICE, _REACTIONS, _FOLLOW_UPS, _PROMPTS, _REVEALS, _RECALLS, QUOTES, FORGET_PHRASES,
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
"""Lower-cased, the words a sentence of the text modules may start with other than names and places."""
