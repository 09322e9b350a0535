"""The facts of a life in the ``life`` world's text: how a user tells their news, and someone else's.

``fact_clause`` states one of the user's facts (or one of their people's) in
one of many direct or indirect ways, with a follow-on sentence while the
value holds; ``mirror`` and ``quote`` tell someone else's news by the very
same constructions, and ``distractor`` a hypothetical, a denial or a passing
remark with a value the user never holds. Each returns the strings of which
at least one appears in the text (the value, or the alias the clause used),
so that a rewritten turn can be checked to still carry its fact.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from memsim.scenarios import life_truth as W
from memsim.scenarios.life_words import a_or_an, pick

__all__ = [
    "DIET_ALIASES", "BREAKUP_WORDS", "FOLLOW_ON", "FOLLOW_NEWS", "SMALL_TALK", "QUOTES", "when_phrase", "news_topic",
    "fact_clause", "mirror", "quote", "distractor", "vocabulary",
]


DIET_ALIASES: Mapping[str, tuple[str, ...]] = {
    # Each alias reads as an adjective ("I'm meat-free", "keep it plant-based").
    "vegetarian": ("vegetarian", "meat-free"),
    "vegan": ("vegan", "plant-based"),
    "pescatarian": ("pescatarian",),
    "gluten-free": ("gluten-free", "wheat-free"),
    "dairy-free": ("dairy-free", "lactose-free"),
    "omnivore": ("omnivore",),
}


FOLLOW_NEWS: Mapping[str, tuple[str, ...]] = {
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

SMALL_TALK = ("city", "employer", "occupation", "diet", "cuisine", "music", "person")
"""Topics of a follow-on sentence that is true of every user at any time, so it is also said as small talk."""


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


FOLLOW_ON: Mapping[str, tuple[str, ...]] = {
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
        news = FOLLOW_NEWS.get(topic, ()) if telling["aspect"] == "began" and who is None else ()
        bank = news if topic in _NEWS_ONLY and news else FOLLOW_ON[topic] + news
        if topic == "person" and who is not None and who.get("relation") not in _FAMILY:
            bank = tuple(x for x in bank if x not in _FAMILY_ONLY)  # a colleague was not "close growing up"
        return f"{clause}. {pick(rng, bank)}", said_as
    return clause, said_as


def _clause(rng: random.Random, telling: Mapping[str, Any], who: Mapping[str, Any] | None,
            when: str) -> tuple[str, str]:
    attr, v, aspect = telling["attr"], str(telling["value"]), telling["aspect"]
    if who is not None and telling.get("intro"):
        return _introduction(rng, who)
    if who is not None:
        return _persons_fact(rng, who, attr, v, aspect, when)
    we = "we" if telling.get("with_partner") else "I"
    for attrs, own in _OWN_CLAUSES:
        if attr in attrs:
            return own(rng, telling, attr, v, aspect, when, we)
    raise ValueError(f"no phrasing for attribute {attr!r}")


def _introduction(rng: random.Random, who: Mapping[str, Any]) -> tuple[str, str]:
    """A clause that introduces one of the user's people by name and relation."""
    rel, name = who["relation"], who["name"]
    bank = (f"my {rel} {name} is visiting soon", f"{name}, my {rel}, asked me the same thing",
            f"I was on the phone with my {rel} {name} for an hour", f"my {rel} {name} says hi",
            f"{name} (my {rel}) would laugh at this", f"I'm meeting my {rel} {name} for lunch",
            f"my {rel} {name} gave me the same advice", f"{name} - my {rel} - helped me last time",
            f"I'll ask my {rel} {name} too", f"my {rel}, {name}, is staying over this weekend",
            f"{name} is my {rel}, and we're alike in that way", f"I was at my {rel} {name}'s place last night")
    return pick(rng, bank), name


def _persons_fact(rng: random.Random, who: Mapping[str, Any], attr: str, v: str, aspect: str,
                  when: str) -> tuple[str, str]:
    """A fact of one of the user's people (or of someone else): their city, employer or occupation."""
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
        "occupation": (f"{name} works as {a_or_an(v)}", f"{name} is {a_or_an(v)}", f"{name} is {a_or_an(v)} by trade"),
    }[attr]
    return pick(rng, bank), v


def _home_and_work(rng: random.Random, telling: Mapping[str, Any], attr: str, v: str, aspect: str, when: str,
                   we: str) -> tuple[str, str]:
    """The user's city, employer or occupation."""
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
    if aspect == "began":
        return pick(rng, (f"the new role as {a_or_an(v)} started {when}", f"I moved into {a_or_an(v)} position {when}",
                          f"I started working as {a_or_an(v)} {when}")), v
    return pick(rng, (f"as {a_or_an(v)} I'm used to long days", f"working as {a_or_an(v)} teaches you patience",
                      f"my job as {a_or_an(v)} keeps me busy", f"I'm {a_or_an(v)}, so weekends matter")), v


def _partner(rng: random.Random, telling: Mapping[str, Any], attr: str, v: str, aspect: str, when: str,
             we: str) -> tuple[str, str]:
    """The user's partner, or their breakup."""
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


def _tastes(rng: random.Random, telling: Mapping[str, Any], attr: str, v: str, aspect: str, when: str,
            we: str) -> tuple[str, str]:
    """The user's diet, favourite cuisine or music."""
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
        return pick(rng, (f"I could eat {v} food every week", f"our favourite place is {a_or_an(v)} restaurant",
                          f"nothing beats {v} cooking for me", f"I keep craving {v} dishes")), v
    if aspect == "began":
        return pick(rng, (f"I got hooked on {v} {when}", f"a friend got me into {v} {when} and I've played nothing else")), v
    return pick(rng, (f"I had {v} on the whole time", f"{v} is my go-to while working",
                      f"I put on some {v} to get through it")), v


def _pets_and_habits(rng: random.Random, telling: Mapping[str, Any], attr: str, v: str, aspect: str, when: str,
                     we: str) -> tuple[str, str]:
    """The user's pets and hobbies: new ones as news, old ones as part of the furniture."""
    if attr == "pets":
        name, species = v.split(" the ")
        if aspect == "began":
            return pick(rng, (f"{we} adopted {a_or_an(species)} {when}, called {name}", f"{name}, our new {species}, arrived {when}",
                              f"{we} brought home {a_or_an(species)} named {name} {when}")), name
        return pick(rng, (f"{name}, the {species} we've had for years, is asleep on my feet",
                          f"our old {species} {name} needs a walk soon" if species == "dog" else
                          f"our old {species} {name} is due at the vet soon",
                          f"I had to stop {name}, my {species} of many years, chewing the cable" if species != "tortoise"
                          else f"{name}, my {species} of many years, is out in the garden")), name
    if aspect == "began":
        return pick(rng, (f"I took up {v} {when}", f"I started {v} {when} and I'm hooked",
                          f"my new thing since {when} is {v}" if not when.startswith("on ") else
                          f"I got into {v} {when}")), v
    # Values are nouns ("yoga") and gerunds ("learning Spanish"): every construction takes both.
    return pick(rng, (f"{v} has been a fixture of my week for years", f"{v} has been part of my routine for ages",
                      f"I've kept {v} up for years now")), v


def _events(rng: random.Random, telling: Mapping[str, Any], attr: str, v: str, aspect: str, when: str,
            we: str) -> tuple[str, str]:
    """The user's dated events: a trip planned or taken, an illness or injury, a purchase."""
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
    return pick(rng, (f"I bought {v} {when}", f"I treated myself to {v} {when}", f"{v} I ordered arrived {when}",
                      f"I splurged on {v} {when}")), v


_OWN_CLAUSES = ((("city", "employer", "occupation"), _home_and_work), (("partner",), _partner),
                (("diet", "cuisine", "music"), _tastes), (("pets", "habits"), _pets_and_habits),
                (("trip_plans", "trips", "illnesses", "purchases"), _events))
"""The user's own facts, by attribute: which step words them."""


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
QUOTES = ('my friend {name} keeps saying "{c}"', '{name} texted me this morning: "{c}"', 'as {name} put it, "{c}"',
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
    telling = {"attr": attr, "value": value, "aspect": aspect, "nights": rng.randint(3, 12), "intro": attr == "name"}
    clause, said_as = fact_clause(rng, telling, who, when, attr != "trips")
    words = clause.replace(". ", pick(rng, (" - ", ", and ", ", and also ", "; ", " and ", ", plus ")))
    text = pick(rng, QUOTES).format(name=speaker, c=words[0].upper() + words[1:], someone=pick(rng, _SOMEONE),
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
