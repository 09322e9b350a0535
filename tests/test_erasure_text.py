"""Deletion checked on text: a copy of a deleted turn is found whatever its provenance says.

A system that forgets a turn but keeps its text (re-punctuated, cut, or
wrapped in a summary) in a memory that names no source is counted as leaking,
and memsim's own texts holding such a copy are redacted by matching the text.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from memsim.memory.base import MemoryStats, Retrieved, Turn
from memsim.sim.erasure import (
    REDACTED_COPY,
    SHARED_WORDS,
    audit_system,
    holds_copy,
    leak_count,
    redact_copies,
    text_leaks,
)
from tests.conftest import T0

SECRET = "I was diagnosed with asthma at the clinic on Harbour Street last spring"
OTHER = "My favourite food these days is ramen with extra egg"


class Hider:
    """Forgets by provenance, but first copies each forgotten text into a note that names no source."""

    def __init__(self, copy: str) -> None:
        self.copy = copy  # "summary": the text wrapped and re-punctuated; "cut": a run of words from it; "none"
        self.memories: list[Retrieved] = []

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        self.memories += [Retrieved(t.turn_id, t.text, 1.0, t.created_at, (t.turn_id,)) for t in turns]

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        return self.memories[:k]

    probe = retrieve

    def feedback(self, *a: object, **kw: object) -> None:
        pass

    def maintain(self, *, now: datetime) -> None:
        pass

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        gone = [m for m in self.memories if set(m.source_turn_ids) & set(turn_ids)]
        self.memories = [m for m in self.memories if m not in gone]
        for m in gone:
            words = m.text.split()
            text = {"summary": f"NOTE -- {m.text.upper().replace(' ', '  ')}!!", "cut": " ".join(words[2:2 + SHARED_WORDS]),
                    "none": "The user talked about their health."}[self.copy]
            self.memories.append(Retrieved(f"note:{m.memory_id}", text, 1.0, now, ()))

    def stats(self) -> MemoryStats:
        return MemoryStats(items=len(self.memories))


def _forgotten(copy: str) -> Hider:
    system = Hider(copy)
    system.ingest([Turn("t1", "u1", "user", SECRET, T0, "s"), Turn("t2", "u1", "user", OTHER, T0, "s")], user_id="u1", now=T0)
    system.forget(["t1"], user_id="u1", now=T0)
    return system


def test_a_copy_without_provenance_is_a_leak() -> None:
    for copy in ("summary", "cut"):
        places = audit_system(_forgotten(copy), {"t1": SECRET}, user_id="u1", now=T0, k=10)
        assert places["provenance"] == places["merged"] == 0  # provenance alone would call it clean
        assert places["text"] == 1 and leak_count(places) == 1, (copy, places)


def test_a_system_that_keeps_no_copy_is_clean() -> None:
    places = audit_system(_forgotten("none"), {"t1": SECRET}, user_id="u1", now=T0, k=10)
    assert leak_count(places) == 0


def test_text_leaks_counts_retrieved_copies_whatever_their_sources() -> None:
    got = _forgotten("summary").retrieve("q", user_id="u1", now=T0, k=10)
    assert text_leaks(got, [SECRET]) == 1
    assert text_leaks(got, [OTHER]) == 1  # OTHER is held whole, under its own provenance
    assert text_leaks(got, ["short"]) == 0  # under MIN_TEXT: never searched (it would match everywhere)


def test_shared_words_below_the_run_length_are_not_a_copy() -> None:
    few = " ".join(SECRET.split()[: SHARED_WORDS - 1])
    assert not holds_copy(f"{few} and something else entirely", [SECRET])
    assert holds_copy(" ".join(SECRET.split()[1: 1 + SHARED_WORDS]), [SECRET])


def test_redact_copies_replaces_only_texts_holding_deleted_text() -> None:
    texts = [f"Summary: {SECRET.lower()}.", OTHER, None, "unrelated"]
    out, changed = redact_copies(texts, [SECRET])
    assert out == [REDACTED_COPY, OTHER, None, "unrelated"] and changed == 1
    assert SECRET.lower() not in " ".join(t for t in out if t).lower()
