"""Text-diversity figures of a stream, for the life world's bounds (issue 35, item 3).

- ``prefix_share``: the share of turns (user and assistant apart) whose first
  six words, lower-cased, are one of the 20 most frequent such prefixes.
- ``skeleton_ratio``: distinct sentence skeletons per sentence, a skeleton
  being the sentence with every run of digits and every capitalised word
  masked.
- ``cue_precision``: over user turns, the best precision with which one
  word n-gram (n = 1 to 3, lower-cased) picks out the fact-bearing turns,
  among n-grams found in at least ``min_turns`` turns: of the turns that
  contain it, the share that bear a fact.

These are the figures of ``memsim scenario stats`` as the issue defines them,
written here so the life world's tests do not depend on the profile module.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence

__all__ = ["prefix_share", "skeleton_ratio", "cue_precision", "diversity"]

_WORD = re.compile(r"[A-Za-z0-9'-]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def prefix_share(texts: Sequence[str], *, words: int = 6, top: int = 20) -> float:
    """Share of ``texts`` that start with one of the ``top`` most frequent ``words``-word prefixes."""
    if not texts:
        return float("nan")
    prefixes = Counter(" ".join(t.lower().split()[:words]) for t in texts)
    return sum(n for _, n in prefixes.most_common(top)) / len(texts)


def _skeleton(sentence: str) -> str:
    masked = re.sub(r"\d+", "0", sentence)
    return " ".join("X" if w[:1].isupper() else w for w in masked.split())


def skeleton_ratio(texts: Sequence[str]) -> float:
    """Distinct sentence skeletons per sentence (digits and capitalised words masked)."""
    sentences = [s for t in texts for s in _SENTENCE.split(t.strip()) if s]
    return len({_skeleton(s) for s in sentences}) / len(sentences) if sentences else float("nan")


def cue_precision(texts: Sequence[str], bearing: Sequence[bool], *, n_max: int = 3,
                  min_turns: int = 30) -> tuple[float, str]:
    """The best precision of one n-gram for the fact-bearing turns, and that n-gram."""
    has: Counter[str] = Counter()
    hits: Counter[str] = Counter()
    for text, fact in zip(texts, bearing):
        words = [w.lower() for w in _WORD.findall(text)]
        grams = {" ".join(words[i:i + n]) for n in range(1, n_max + 1) for i in range(len(words) - n + 1)}
        has.update(grams)
        if fact:
            hits.update(grams)
    best, cue = 0.0, ""
    for gram, n in has.items():
        if n >= min_turns and hits[gram] / n > best:
            best, cue = hits[gram] / n, gram
    return best, cue


def diversity(turns: Sequence[object], fact_turns: Collection[str]) -> dict[str, object]:
    """The three figures for a stream's turns (objects with ``speaker``, ``text``, ``turn_id``)."""
    user = [t for t in turns if t.speaker == "user"]  # type: ignore[attr-defined]
    assistant = [t for t in turns if t.speaker != "user"]  # type: ignore[attr-defined]
    texts = [t.text for t in turns]  # type: ignore[attr-defined]
    precision, cue = cue_precision([t.text for t in user], [t.turn_id in fact_turns for t in user])  # type: ignore[attr-defined]
    return {"prefix_share_user": prefix_share([t.text for t in user]),  # type: ignore[attr-defined]
            "prefix_share_assistant": prefix_share([t.text for t in assistant]),  # type: ignore[attr-defined]
            "skeleton_ratio": skeleton_ratio(texts), "cue_precision": precision, "cue": cue}
