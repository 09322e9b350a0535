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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memsim.memory.base import MemorySystem, Retrieved, Turn, render_turn

__all__ = ["MIN_TEXT", "classify", "audit_system", "audit_caches", "purge_caches", "cache_texts"]

MIN_TEXT = 12
"""Shortest deleted text searched for as a copy (characters, after normalising)."""


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def _holds(text: str, needles: Sequence[str]) -> bool:
    t = _norm(text)
    return any(n in t for n in needles)


def _needles(texts: Iterable[str]) -> list[str]:
    return [n for n in (_norm(t) for t in texts) if len(n) >= MIN_TEXT]


def classify(got: Sequence[Retrieved], gone: set[str], texts: Sequence[str]) -> dict[str, int]:
    """Count the results that are copies of deleted turns, by place (``provenance``, ``merged``, ``text``)."""
    needles = _needles(texts)
    out = {"provenance": 0, "merged": 0, "text": 0}
    for m in got:
        sources = set(m.source_turn_ids)
        if sources & gone:
            out["merged" if sources - gone else "provenance"] += 1
        elif needles and _holds(m.text, needles):
            out["text"] += 1
    return out


def audit_system(
    system: MemorySystem, deleted: Mapping[str, str], *, user_id: str, now: Any, k: int
) -> dict[str, int]:
    """Copies of the ``deleted`` turns (id -> text) a system still holds for ``user_id``, by place.

    Read-only: ``probe`` with each turn's text, then ``held_texts`` when the system has it.
    """
    gone = set(deleted)
    texts = list(deleted.values())
    out = {"provenance": 0, "merged": 0, "text": 0}
    for text in texts:
        for place, n in classify(system.probe(text, user_id=user_id, now=now, k=k), gone, texts).items():
            out[place] += n
    held = getattr(system, "held_texts", None)
    if callable(held):
        needles = _needles(texts)
        for place, items in held(user_id).items():
            out[place] = out.get(place, 0) + sum(1 for t in items if needles and _holds(t, needles))
    return out


def cache_texts(turns: Iterable[Turn]) -> list[str]:
    """The texts memsim may have cached for turns: each turn's text and its rendered memory text."""
    out: dict[str, None] = {}
    for t in turns:
        out[t.text] = None
        out[render_turn(t)] = None
    return list(out)


def audit_caches(texts: Sequence[str], *, embedding_cache: Any = None, llm_caches: Sequence[Any] = ()) -> dict[str, int]:
    """Entries of memsim's caches that still hold ``texts``: ``embedding_cache`` (exact text keys), ``llm_cache``."""
    out: dict[str, int] = {}
    if embedding_cache is not None:
        found, _ = embedding_cache.get_many([embedding_cache.key(t) for t in texts])
        out["embedding_cache"] = len(found)
    if llm_caches:
        needles = [t for t in texts if len(t.strip()) >= MIN_TEXT]
        out["llm_cache"] = sum(len(c.store.find_containing(needles)) for c in llm_caches)
    return out


def purge_caches(texts: Sequence[str], *, embedding_cache: Any = None, llm_caches: Sequence[Any] = ()) -> dict[str, int]:
    """Delete memsim's cached copies of ``texts``; entries removed per cache."""
    out: dict[str, int] = {}
    if embedding_cache is not None:
        out["embedding_cache"] = embedding_cache.store.purge([embedding_cache.key(t) for t in texts])
    if llm_caches:
        needles = [t for t in texts if len(t.strip()) >= MIN_TEXT]
        out["llm_cache"] = sum(c.store.purge_containing(needles) for c in llm_caches)
    return out
