"""The claim record: what one turn's text says, kept in a synthetic world's private record.

A world that writes its own text logs, for every turn it writes, the claims
that text makes: who the claim is about, which attribute, which value, the
date it refers to, in what aspect and with what polarity. The log is
``stream.meta["claims"]``: a mapping from every turn id the world wrote
(user and assistant turns alike, small talk included, an empty list where a
turn claims nothing) to its claims as JSON objects. Systems never see it; the
independent checker (``memsim.scenarios.world_check``) re-derives every
question's gold from it, and text figures read which turns bear facts from it
(``fact_bearing``).

Beside it, ``stream.meta["vocabulary"]`` maps each value a user's attributes
can take to the forms the text may use for it (the value itself and its
declared aliases), so that a value written into a turn without a logged claim
is found.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["ASPECTS", "POLARITIES", "Claim", "claim_from_json", "claims_of", "fact_bearing"]

POLARITIES = ("asserts", "denies", "hypothetical", "other", "forgets", "mistaken")
"""``asserts``: the speaker states it as so; ``denies``: states it is not so; ``hypothetical``: a wish, plan
that fell through or an if; ``other``: someone else's fact with a value of the same type (a colleague's move);
``forgets``: the user asks, in plain words, that what they said of ``attr`` be forgotten (``value`` empty,
``said_as`` the words that name the topic); ``mistaken``: the assistant says it of the user or their people,
wrongly (the user's next turn corrects it)."""

ASPECTS = ("holds", "began", "long", "plan")
"""``holds``: the value holds on ``time`` (the day it was said); ``began``: the value began on ``time``
(news with its date in the text); ``long``: the value held since before the conversations began
(``time`` is the world's first day); ``plan``: something planned, not done."""


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim a turn's text makes."""

    subject: str
    """Whom it is about: ``me`` (the user), a person id of the user's world, ``assistant``, or ``someone``."""
    attr: str
    """The attribute (``city``, ``employer``, ``trips``, ``name``, ``book``, ...)."""
    value: str
    """The value, as the world names it."""
    time: str
    """The date the claim refers to (ISO ``YYYY-MM-DD``, the user's calendar)."""
    aspect: str
    """One of ``ASPECTS``."""
    polarity: str
    """One of ``POLARITIES``."""
    said_as: str
    """The string of the turn's text that carries the value (the value or a declared alias)."""
    when_as: str = ""
    """For ``began`` claims: the string of the text that dates it (``yesterday``, ``4 days ago``, ``on 3 March``)."""
    relation: str = ""
    """For ``name`` claims: the person's relation to the user (``sister``, ``partner``, ...)."""
    genre: str = ""
    """For the assistant's recommendations: what the user asked for (``a page-turner``)."""

    def to_json(self) -> dict[str, str]:
        """The claim as a JSON object (empty optional fields left out)."""
        out = {"subject": self.subject, "attr": self.attr, "value": self.value, "time": self.time,
               "aspect": self.aspect, "polarity": self.polarity, "said_as": self.said_as}
        for key, value in (("when_as", self.when_as), ("relation", self.relation), ("genre", self.genre)):
            if value:
                out[key] = value
        return out


_REQUIRED = frozenset(("subject", "attr", "value", "time", "aspect", "polarity", "said_as"))
_KNOWN = frozenset(f.name for f in fields(Claim))


def claim_from_json(obj: Mapping[str, Any], *, where: str) -> Claim:
    """A claim from its JSON object.

    Args:
        obj: the object as ``Claim.to_json`` wrote it.
        where: what names it in an error (``"claims of turn t0a1b..."``).

    Raises:
        ValueError: a missing or unknown field, a value of the wrong type, an unknown aspect or polarity
            (one line naming ``where`` and the field).
    """
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: a claim must be an object, got {type(obj).__name__}")
    for key in obj:
        if key not in _KNOWN:
            raise ValueError(f"{where}: unknown claim field {key!r}")
    for key in _REQUIRED:
        if key not in obj:
            raise ValueError(f"{where}: claim field {key!r} is missing")
    for key, value in obj.items():
        if not isinstance(value, str):
            raise ValueError(f"{where}: claim field {key!r} must be a string, got {type(value).__name__}")
    if obj["aspect"] not in ASPECTS:
        raise ValueError(f"{where}: claim field 'aspect' is {obj['aspect']!r}, not one of {', '.join(ASPECTS)}")
    if obj["polarity"] not in POLARITIES:
        raise ValueError(f"{where}: claim field 'polarity' is {obj['polarity']!r}, not one of {', '.join(POLARITIES)}")
    return Claim(**{k: str(v) for k, v in obj.items()})


def claims_of(meta: Mapping[str, Any]) -> dict[str, list[Claim]]:
    """Every turn's claims from a stream's ``meta`` (``meta["claims"]``), parsed and validated.

    Raises:
        ValueError: the stream logs no claims, or a claim is malformed (one line naming the turn and field).
    """
    log = meta.get("claims")
    if not isinstance(log, Mapping):
        raise ValueError("the stream logs no claims (meta['claims'] is missing)")
    out: dict[str, list[Claim]] = {}
    for tid, items in log.items():
        if not isinstance(items, Sequence) or isinstance(items, str):
            raise ValueError(f"claims of turn {tid}: must be a list")
        out[str(tid)] = [claim_from_json(c, where=f"claims of turn {tid}") for c in items]
    return out


def fact_bearing(meta: Mapping[str, Any]) -> set[str]:
    """Turn ids whose text asserts a fact of its user's life (the user's or a person's in it).

    The turns a benchmark asks about: distractors (denials, hypotheticals,
    other people's news) and the assistant's recommendations are not counted.
    """
    return {tid for tid, items in meta.get("claims", {}).items()
            if any(c["polarity"] == "asserts" and c["subject"] not in ("assistant", "someone") for c in items)}
