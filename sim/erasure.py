"""Deletion everywhere a copy lives: audit a system after ``forget`` and purge memsim's own copies.

After a deletion request the engine looks for what is left of the deleted
turns, place by place:

- ``provenance``: a memory derived only from deleted turns still comes back;
- ``merged``: a memory derived from deleted and other turns (merged,
  consolidated, summarised) still comes back;
- ``text``: a memory whose text holds a deleted turn's text comes back
  without naming that turn in its provenance (a copy that lost its source);
- any place a system lists through the optional read-only
  ``held_texts(user_id) -> Mapping[place, Sequence[str]]`` (``lexical`` for
  a lexical index, ``memories``, ``summaries`` ...): a held text that holds a
  deleted turn's text;
- ``embedding_cache``: memsim's persistent embedding cache still returns a
  vector for the turn's text or its rendered memory text;
- ``llm_cache``: memsim's LLM response cache holds an entry whose reply (or
  the prompt noted with it, ``memory.kvcache.KVCache.put(note=)``) contains
  the text.

The first three come from ``probe`` (read-only retrieval with each deleted
turn's text as the query); ``held_texts`` is read-only too, so an audit never
changes the system it audits. memsim's caches are its own: ``purge_caches``
removes the entries. Texts shorter than ``MIN_TEXT`` characters are not
searched for as copies (they would match everywhere).

A copy is found on the text, whatever the provenance says: a text holds a
deleted turn's text when, casefolded and with punctuation and spacing
ignored, it contains it whole, or shares a run of ``SHARED_WORDS``
consecutive words with it (a copy re-punctuated, cut or wrapped in a
summary). Every place counts as a leak (``leak_count``); what memsim writes
itself can be cleaned the same way (``redact_copies``), and a retrieval is
checked with ``text_leaks``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memsim.memory.base import MemorySystem, Retrieved, Turn, render_turn

__all__ = [
    "MIN_TEXT", "SHARED_WORDS", "REDACTED_COPY", "classify", "audit_system", "audit_caches", "purge_caches",
    "cache_texts", "leak_count", "text_leaks", "holds_copy", "redact_copies", "CopyFinder",
]

MIN_TEXT = 12
"""Shortest deleted text searched for as a copy (characters, after normalising)."""
SHARED_WORDS = 8
"""Consecutive words a text must share with a deleted text to count as a copy of it (when it does not hold it whole)."""
REDACTED_COPY = "[redacted: holds the text of a deleted turn]"
"""What ``redact_copies`` puts in place of a text that holds a deleted turn's text."""


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


class _Needle:
    """A deleted text as searched for: its words joined, and its runs of ``SHARED_WORDS`` words."""

    __slots__ = ("joined", "grams")

    def __init__(self, text: str) -> None:
        words = _words(text)
        self.joined = " " + " ".join(words) + " "
        n = SHARED_WORDS
        self.grams = {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)} if len(words) >= n else set()


def _holds(text: str, needles: Sequence[_Needle]) -> bool:
    words = _words(text)
    joined = " " + " ".join(words) + " "
    if any(n.joined in joined for n in needles):
        return True
    n = SHARED_WORDS
    if len(words) < n:
        return False
    grams = {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}
    return any(not grams.isdisjoint(needle.grams) for needle in needles if needle.grams)


def _needles(texts: Iterable[str]) -> list[_Needle]:
    return [_Needle(t) for t in texts if len(_norm(t)) >= MIN_TEXT and _words(t)]


def holds_copy(text: str, deleted: Sequence[str]) -> bool:
    """Whether ``text`` holds any of the ``deleted`` texts: whole (punctuation, case and spacing aside) or a run
    of ``SHARED_WORDS`` consecutive words; deleted texts shorter than ``MIN_TEXT`` characters are not searched."""
    needles = _needles(deleted)
    return bool(needles) and _holds(text, needles)


def text_leaks(got: Sequence[Retrieved], deleted: Sequence[str]) -> int:
    """Retrieved memories whose text holds a deleted text, whatever their provenance names."""
    needles = _needles(deleted)
    return sum(1 for m in got if needles and _holds(m.text, needles)) if needles else 0


def redact_copies(texts: Sequence[str | None], deleted: Sequence[str]) -> tuple[list[str | None], int]:
    """``texts`` with each one that holds a deleted text replaced by ``REDACTED_COPY``; and how many were."""
    needles = _needles(deleted)
    if not needles:
        return list(texts), 0
    out: list[str | None] = []
    changed = 0
    for t in texts:
        if t is not None and t != REDACTED_COPY and _holds(t, needles):
            out.append(REDACTED_COPY)
            changed += 1
        else:
            out.append(t)
    return out, changed


class CopyFinder:
    """``holds_copy`` against a growing set of deleted texts, built once and not per call.

    A deleted text of ``SHARED_WORDS`` words or more held whole shares its
    first run of words with the text, so one set of every deleted text's runs
    answers for all of them; only shorter ones are searched for whole. The
    answers are those of ``holds_copy`` on the texts added so far.

    ``said`` are texts their owner still has (the user's turns that were not
    deleted): what a deleted text shares with them is not searched for, so a
    sentence the user said again in a turn they kept is no copy; the rest of
    the deleted text still is.
    """

    def __init__(self, texts: Iterable[str] = (), *, said: Iterable[str] = ()) -> None:
        self._grams: set[str] = set()
        self._short: list[str] = []
        self._memo: dict[str, bool] = {}
        self._said_grams: set[str] = set()
        self._said: list[str] = []
        for text in said:
            words = _words(text)
            self._said.append(" " + " ".join(words) + " ")
            n = SHARED_WORDS
            self._said_grams.update(" ".join(words[i:i + n]) for i in range(len(words) - n + 1))
        self.add(texts)

    def __bool__(self) -> bool:
        return bool(self._grams or self._short)

    def said_again(self, texts: Iterable[str]) -> None:
        """The owner said ``texts`` in turns they keep, after the deletion: what they share is theirs again.

        A run of words a later kept turn repeats (a phrase the user uses often)
        is no longer searched for, and a short deleted text that a later turn
        holds whole is dropped; the rest of each deleted text still is a copy.
        """
        changed = False
        n = SHARED_WORDS
        for text in texts:
            words = _words(text)
            joined = " " + " ".join(words) + " "
            grams = {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}
            self._said.append(joined)
            self._said_grams |= grams
            if grams and not self._grams.isdisjoint(grams):
                self._grams -= grams
                changed = True
            short = [s for s in self._short if s not in joined]
            if len(short) != len(self._short):
                self._short = short
                changed = True
        if changed:
            self._memo.clear()

    def add(self, texts: Iterable[str]) -> None:
        """Search for ``texts`` too (those shorter than ``MIN_TEXT`` characters are not searched)."""
        for needle in _needles(texts):
            if needle.grams:
                self._grams |= needle.grams - self._said_grams
            elif not any(needle.joined in s for s in self._said):
                self._short.append(needle.joined)
        self._memo.clear()

    def holds(self, text: str) -> bool:
        """Whether ``text`` holds any text added so far (``holds_copy``'s test)."""
        got = self._memo.get(text)
        if got is None:
            words = _words(text)
            joined = " " + " ".join(words) + " "
            n = SHARED_WORDS
            got = any(s in joined for s in self._short) or (
                len(words) >= n and not self._grams.isdisjoint(" ".join(words[i:i + n]) for i in range(len(words) - n + 1))
            )
            if len(self._memo) >= 100_000:  # retrieved texts repeat; the memo is bounded all the same
                self._memo.clear()
            self._memo[text] = got
        return got


def leak_count(places: Mapping[str, int]) -> int:
    """Every copy an audit found, in every place: a copy found on its text leaks whatever its provenance says."""
    return sum(int(n) for n in places.values())


def classify(got: Sequence[Retrieved], gone: set[str], texts: Sequence[str],
             finder: CopyFinder | None = None) -> dict[str, int]:
    """Count the results that are copies of deleted turns, by place (``provenance``, ``merged``, ``text``).

    ``finder`` (the deleted texts, less what their owner said again in kept turns) replaces ``texts``
    for the text search when given.
    """
    needles = _needles(texts) if finder is None else []
    out = {"provenance": 0, "merged": 0, "text": 0}
    for m in got:
        sources = set(m.source_turn_ids)
        if sources & gone:
            out["merged" if sources - gone else "provenance"] += 1
        elif finder.holds(m.text) if finder is not None else (needles and _holds(m.text, needles)):
            out["text"] += 1
    return out


def audit_system(
    system: MemorySystem, deleted: Mapping[str, str], *, user_id: str, now: Any, k: int, said: Sequence[str] = ()
) -> dict[str, int]:
    """Copies of the ``deleted`` turns (id -> text) a system still holds for ``user_id``, by place.

    Read-only: ``probe`` with each turn's text, then ``held_texts`` when the system has it.
    ``said``: the user's kept turns' texts; what a deleted text shares with them is no copy (``CopyFinder``).
    """
    gone = set(deleted)
    texts = list(deleted.values())
    finder = CopyFinder(texts, said=said)
    out = {"provenance": 0, "merged": 0, "text": 0}
    for text in texts:
        for place, n in classify(system.probe(text, user_id=user_id, now=now, k=k), gone, texts, finder).items():
            out[place] += n
    held = getattr(system, "held_texts", None)
    if callable(held):
        for place, items in held(user_id).items():
            out[place] = out.get(place, 0) + sum(1 for t in items if finder.holds(t))
    return out


def cache_texts(turns: Iterable[Turn]) -> list[str]:
    """The texts memsim may have cached for turns: each turn's text and its rendered memory text."""
    out: dict[str, None] = {}
    for t in turns:
        out[t.text] = None
        out[render_turn(t)] = None
    return list(out)


def audit_caches(texts: Sequence[str], *, embedding_cache: Any = None, llm_caches: Sequence[Any] = (),
                 entity_caches: Sequence[Any] = ()) -> dict[str, int]:
    """Entries of memsim's caches that still hold ``texts``: ``embedding_cache`` (exact text keys), ``llm_cache``,
    ``entity_cache`` (the gates' recognisers: distinct texts whose entities are held)."""
    out: dict[str, int] = {}
    if embedding_cache is not None:
        found, _ = embedding_cache.get_many([embedding_cache.key(t) for t in texts])
        out["embedding_cache"] = len(found)
    if entity_caches:
        distinct = list(dict.fromkeys(texts))
        out["entity_cache"] = sum(len(distinct) - len(rec.missing(distinct)) for rec in entity_caches)
    if llm_caches:
        needles = [t for t in texts if len(t.strip()) >= MIN_TEXT]
        out["llm_cache"] = sum(len(c.store.find_containing(needles)) for c in llm_caches)
    return out


def purge_caches(texts: Sequence[str], *, embedding_cache: Any = None, llm_caches: Sequence[Any] = (),
                 entity_caches: Sequence[Any] = ()) -> dict[str, int]:
    """Delete memsim's cached copies of ``texts``; entries removed per cache."""
    out: dict[str, int] = {}
    if embedding_cache is not None:
        out["embedding_cache"] = embedding_cache.store.purge([embedding_cache.key(t) for t in texts])
    if entity_caches:
        out["entity_cache"] = sum(rec.purge(list(dict.fromkeys(texts)), now=True) for rec in entity_caches)
    if llm_caches:
        needles = [t for t in texts if len(t.strip()) >= MIN_TEXT]
        out["llm_cache"] = sum(c.store.purge_containing(needles) for c in llm_caches)
    return out
