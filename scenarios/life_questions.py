"""The questions of the ``life`` world: their wording, never the evidence's."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from memsim.scenarios.life_words import a_or_an, pick

__all__ = ["question_text"]


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
        ("previous", "occupation"): (f"What was my role before I became {a_or_an(cur)}?",),
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
