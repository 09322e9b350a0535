"""The ``implicit`` feedback channel: what a simulated user says after an answer, and the rule that reads it.

A production assistant is never told whether its answer was right. It sees
what the user does next: ask again, say it is wrong, thank it, or move on.
This module plays that user. ``react`` draws the user's reaction to one
answer from what the user knows of it (``right``: the judge's verdict when a
reader ran, else the headline retrieval metric; the engine never hands that
bit to the system), and ``read_reaction`` is the documented rule that turns
the reaction's text, and nothing else, into the bit a system's ``feedback``
call gets. The engine ingests the reaction as a turn of the user's, with its
own opaque id, and calls ``feedback`` only when the rule reads a bit.

The user is noisy as real users are: after a wrong answer they often say
nothing, and now and then thank the assistant anyway; after a right one they
mostly move on, sometimes thank it, and now and then complain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = [
    "Behaviour",
    "Reaction",
    "COMPLAINTS",
    "THANKS",
    "REASK_PATTERNS",
    "behaviour",
    "react",
    "say",
    "read_reaction",
]

COMPLAINTS: tuple[str, ...] = (
    "No, that's not right.",
    "That's wrong.",
    "No, that isn't what I told you.",
    "Hmm, I don't think that's correct.",
)
"""What the user says when they say an answer is wrong."""

THANKS: tuple[str, ...] = ("Thanks!", "Great, thank you.", "Perfect, thanks.", "Got it, thanks.")
"""What the user says when they thank the assistant."""

REASK_PATTERNS: tuple[str, ...] = ("{q}", "Let me ask again: {q}", "I meant: {q}", "Sorry, once more: {q}")
"""Rewordings of a re-asked question when the scenario gives it no paraphrases (``{q}``: the question)."""

Kind = Literal["reask", "complain", "thank"]


@dataclass(frozen=True, slots=True)
class Behaviour:
    """How the simulated user reacts: probabilities of each reaction after a wrong and after a right answer."""

    silent_after_wrong: float = 0.3
    """A wrong answer gets no reaction (the ``P`` of ``implicit:P``)."""
    thank_after_wrong: float = 0.05
    """A wrong answer is thanked (the user did not notice): misleading."""
    reask_share: float = 0.5
    """Of the other reactions to a wrong answer, the share that re-ask (the rest say it is wrong)."""
    thank_after_right: float = 0.3
    """A right answer is thanked (otherwise the user moves on, saying nothing about it)."""
    complain_after_right: float = 0.05
    """A right answer is called wrong: misleading."""


@dataclass(frozen=True, slots=True)
class Reaction:
    """One reaction of the user to an answer."""

    kind: Kind
    """``reask``, ``complain`` or ``thank``."""
    text: str
    """What the user says (the system's only view of it)."""


def behaviour(channel: str) -> Behaviour:
    """The user behaviour of an ``implicit`` or ``implicit:P`` channel (P: the chance a wrong answer gets no reaction)."""
    _, _, p = channel.partition(":")
    return Behaviour(silent_after_wrong=float(p)) if p else Behaviour()


def _reword(question: str, paraphrases: tuple[str, ...], rng: np.random.Generator) -> str:
    if paraphrases:
        text = paraphrases[int(rng.integers(len(paraphrases)))]
    else:
        text = REASK_PATTERNS[int(rng.integers(len(REASK_PATTERNS)))].format(q=question.rstrip(" ?.") + "?")
    # A re-ask reads as a question whatever its source, which is what the rule looks for.
    return text if text.rstrip().endswith("?") else text.rstrip(" .") + "?"


def react(
    right: bool,
    question: str,
    rng: np.random.Generator,
    how: Behaviour,
    paraphrases: tuple[str, ...] = (),
) -> Reaction | None:
    """The user's reaction to an answer they know to be ``right`` or not; None: they say nothing about it.

    Args:
        right: what the user knows of the answer (never given to the system).
        question: the question as asked (a re-ask rewords it).
        rng: the run's named stream for this system's user reactions.
        how: the reaction probabilities.
        paraphrases: other phrasings of the question the scenario offers (drawn from for a re-ask).
    """
    u = rng.random()
    if right:
        if u < how.complain_after_right:
            kind: Kind | None = "complain"
        elif u < how.complain_after_right + how.thank_after_right:
            kind = "thank"
        else:
            kind = None
    elif u < how.silent_after_wrong:
        kind = None
    elif u < how.silent_after_wrong + how.thank_after_wrong:
        kind = "thank"
    else:
        kind = "reask" if rng.random() < how.reask_share else "complain"
    if kind is None:
        return None
    return say(kind, question, rng, paraphrases)


def say(kind: Kind, question: str, rng: np.random.Generator, paraphrases: tuple[str, ...] = ()) -> Reaction:
    """The words of a reaction of a given kind to ``question`` (a re-ask rewords it; the others draw from their list).

    Args:
        kind: ``reask``, ``complain`` or ``thank``.
        question: the question as asked.
        rng: the stream the words are drawn from.
        paraphrases: other phrasings of the question the scenario offers (drawn from for a re-ask).

    Raises:
        ValueError: an unknown kind.
    """
    if kind == "reask":
        return Reaction(kind, _reword(question, paraphrases, rng))
    if kind not in ("thank", "complain"):
        raise ValueError(f"unknown reaction kind {kind!r}; choose from reask, complain, thank")
    pool = THANKS if kind == "thank" else COMPLAINTS
    return Reaction(kind, pool[int(rng.integers(len(pool)))])


_NEGATIVE = re.compile(r"\b(no|not|wrong|incorrect|isn't|don't)\b", re.IGNORECASE)
_POSITIVE = re.compile(r"\b(thanks|thank|great|perfect|exactly)\b", re.IGNORECASE)


def read_reaction(text: str) -> bool | None:
    """The bit a system is told, read from what the user said alone: the channel's documented rule.

    A complaint (a negative word: no, not, wrong, incorrect, isn't, don't) or
    a re-ask (the turn is a question) reads as False; thanks (thanks, thank,
    great, perfect, exactly) as True; anything else as no bit (no
    ``feedback`` call). Negative words are checked first, so "No, thanks"
    reads as False.
    """
    if _NEGATIVE.search(text) or text.rstrip().endswith("?"):
        return False
    if _POSITIVE.search(text):
        return True
    return None
