"""Reading a verdict from an LLM judge's reply, and the share of unreadable replies a run accepts.

Each reader takes a reply and returns 1.0 (correct), 0.0 (wrong) or None (no
readable verdict: scored wrong and counted); the rules are described in
``memsim.sim.answer.judges``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_VERDICT_CHARS",
    "UNREADABLE_LIMIT",
    "Verdict",
    "json_label_verdict",
    "longmemeval_verdict",
    "one_word_verdict",
    "too_many_unreadable",
    "yes_in_reply",
    "yes_no_verdict",
]

MAX_VERDICT_CHARS = 2000
"""A judge reply longer than this has no readable verdict: every judge prompt asks for a word or a tiny JSON object."""

UNREADABLE_LIMIT = 0.05
"""Share of a judge's answers (the questions it scores) with no readable verdict above which a run fails, unless allowed."""

_VERDICT_WORDS = {"CORRECT": 1.0, "WRONG": 0.0, "INCORRECT": 0.0}
_JSON_LABELS = {"CORRECT": 1.0, "WRONG": 0.0}
_WORDS = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_NEGATIONS = frozenset({"not", "isn't", "never", "hardly", "no", "nor"})


@dataclass(frozen=True, slots=True)
class Verdict:
    """One judgement: its score and whether the judge's reply held a readable verdict."""

    score: float
    """1.0/0.0, an F1 in [0, 1], or NaN (nothing to score against)."""
    readable: bool = True
    """False when an LLM judge's reply had no verdict that could be read (the score is then 0.0)."""


def _json_object(reply: str) -> dict[str, Any] | None:
    try:
        data = json.loads(reply)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def one_word_verdict(reply: str) -> float | None:
    """memsim's CORRECT/WRONG prompt: the reply's last word, or a JSON object's ``label``; None when neither.

    The last word decides because a judge that reasons first ends on its verdict
    ("... actually WRONG"); a last word of CORRECT right after a negation
    ("is not correct") is WRONG. Case does not matter. A reply ending on any other
    word ("CORRECT? No."), empty, or longer than ``MAX_VERDICT_CHARS`` has none.
    """
    if len(reply) > MAX_VERDICT_CHARS:
        return None
    data = _json_object(reply.strip())
    if data is not None:
        label = data.get("label")
        return _VERDICT_WORDS.get(label.strip().upper()) if isinstance(label, str) else None
    words = _WORDS.findall(reply)
    if not words:
        return None
    verdict = _VERDICT_WORDS.get(words[-1].upper())
    if verdict == 1.0 and len(words) >= 2 and words[-2].lower() in _NEGATIONS:
        return 0.0
    return verdict


def json_label_verdict(reply: str) -> float | None:
    """Mem0's JSON prompt, read as Mem0's code reads it: a JSON object whose ``label`` is ``CORRECT`` or ``WRONG``.

    Mem0's code raises on a reply that is not such an object; here it has no verdict (None).
    A label in another case ("correct") is not one of the two either: Mem0 compares it as written.
    """
    if len(reply) > MAX_VERDICT_CHARS:
        return None
    data = _json_object(reply)
    label = data.get("label") if data is not None else None
    return _JSON_LABELS.get(label.strip()) if isinstance(label, str) else None


def yes_in_reply(reply: str) -> float:
    """LongMemEval's rule: the verdict is yes when ``'yes'`` occurs anywhere in the lowercased reply."""
    return 1.0 if "yes" in reply.lower() else 0.0


def longmemeval_verdict(reply: str) -> float | None:
    """LongMemEval's own templates: ``yes_in_reply``, read only where the reply says yes or no as a word.

    The score is the published rule's; a reply with neither word, empty, or longer than
    ``MAX_VERDICT_CHARS`` has no verdict (None), so it is counted, not passed.
    """
    if len(reply) > MAX_VERDICT_CHARS:
        return None
    if not re.search(r"\b(?:yes|no)\b", reply, re.IGNORECASE):
        return None
    return yes_in_reply(reply)


def yes_no_verdict(reply: str) -> float | None:
    """memsim's yes/no paraphrase: the reply's last word, yes or no (any case); None otherwise."""
    if len(reply) > MAX_VERDICT_CHARS:
        return None
    words = _WORDS.findall(reply)
    last = words[-1].lower() if words else ""
    return {"yes": 1.0, "no": 0.0}.get(last)


def too_many_unreadable(metrics: Mapping[str, Any], *, limit: float = UNREADABLE_LIMIT) -> str:
    """Why a run's judges fail it: each judge and system whose unreadable share is above ``limit``; "" when none.

    Reads the ``unreadable`` and ``questions`` counts of ``metrics["systems"][system]["answers"]``.
    """
    bad = []
    for system, entry in (metrics.get("systems") or {}).items():
        for col, judge in (((entry or {}).get("answers") or {}).get("judges") or {}).items():
            n, unreadable = judge.get("questions", 0), judge.get("unreadable", 0)
            if n and unreadable / n > limit:
                bad.append(f"{col.removeprefix('answer_')} on {system}: {unreadable} of {n} "
                           f"({100 * unreadable / n:.1f}%)")
    if not bad:
        return ""
    return (f"judge replies without a readable verdict above {100 * limit:.0f}%: {'; '.join(bad)}; they are "
            "scored wrong in the figures; check the judge model and prompt, or pass --allow-unreadable-verdicts "
            "to accept the run")
