"""Deletion everywhere a copy lives: a deliberately leaky system is caught in each place; memsim's caches are purged;
as-of questions are scored against the value current on their date."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import simpy

from memsim.analysis.erasure import erasure_table, format_erasure
from memsim.memory.base import MemoryStats, Retrieved, Turn, render_turn
from memsim.memory.embed import EmbeddingCache, HashEmbedder
from memsim.memory.kvcache import KVCache
from memsim.scenarios.base import ScenarioStream
from memsim.scenarios.registry import build_scenario
from memsim.sim.answer.cache import CachedLLM
from memsim.sim.answer.llm import ScriptedLLM
from memsim.sim.engine import EngineConfig, Harness, SystemUnderTest, start_processes
from memsim.sim.erasure import audit_system, classify
from memsim.sim.events import Deletion, Question, Session, sort_events
from memsim.sim.recorder import Recorder
from memsim.sim.scorers import build_scorer
from tests.conftest import T0

SECRET = "I was diagnosed with asthma at the clinic on Harbour Street"
OTHER = "My favourite food these days is ramen with extra egg"


class LeakyMemory:
    """Kept in tests, never registered: a store that leaks what it is told to forget in the places named.

    ``provenance``: forget is ignored. ``merged``: a memory merged from two turns survives when one is forgotten.
    ``text``: a summary copy without provenance survives. ``lexical``: the lexical index keeps the text.
    """

    def __init__(self, leaks: Collection[str] = ()) -> None:
        self.leaks = set(leaks)
        self.memories: dict[str, list[Retrieved]] = {}
        self.lexical: dict[str, list[str]] = {}

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        mems = self.memories.setdefault(user_id, [])
        for t in turns:
            mems.append(Retrieved(t.turn_id, t.text, 1.0, t.created_at, (t.turn_id,)))
            self.lexical.setdefault(user_id, []).append(t.text)
        if len(turns) >= 2:
            # Consolidation: one memory merged from the session's first two turns, and a summary copy.
            a, b = turns[0], turns[1]
            mems.append(Retrieved(f"merged:{a.turn_id}", f"{a.text}; {b.text}", 1.0, b.created_at, (a.turn_id, b.turn_id)))
            mems.append(Retrieved(f"summary:{a.turn_id}", f"Summary: {a.text}", 1.0, b.created_at, (a.turn_id,)))

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        words = set(re.findall(r"\w+", query.lower()))
        mems = [m for m in self.memories.get(user_id, []) if m.created_at <= now]
        mems.sort(key=lambda m: -len(words & set(re.findall(r"\w+", m.text.lower()))))
        return mems[:k]

    probe = retrieve

    def feedback(self, *a: object, **kw: object) -> None:
        pass

    def maintain(self, *, now: datetime) -> None:
        pass

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        gone = set(turn_ids)
        if "provenance" in self.leaks:
            return
        kept = []
        for m in self.memories.get(user_id, []):
            src = set(m.source_turn_ids)
            if not src & gone:
                kept.append(m)
            elif "merged" in self.leaks and src - gone:
                kept.append(m)  # the merged memory is not forgotten with its parts
            elif "text" in self.leaks and m.memory_id.startswith("summary:"):
                kept.append(Retrieved(m.memory_id, m.text, m.score, m.created_at, ()))  # provenance dropped, text kept
        self.memories[user_id] = kept
        if "lexical" not in self.leaks:
            texts = {m.text for m in kept}
            self.lexical[user_id] = [t for t in self.lexical.get(user_id, []) if t in texts]

    def held_texts(self, user_id: str) -> dict[str, list[str]]:
        """Read-only: the texts held per place."""
        return {"lexical": list(self.lexical.get(user_id, []))}

    def stats(self) -> MemoryStats:
        return MemoryStats(items=sum(len(v) for v in self.memories.values()))


def _stream() -> ScenarioStream:
    t1, t2 = T0 + timedelta(hours=1), T0 + timedelta(days=1)
    turns = (
        Turn("u1:t1", "u1", "user", SECRET, t1, "s1"),
        Turn("u1:t2", "u1", "user", OTHER, t1, "s1"),
    )
    other_user = (Turn("u2:t1", "u2", "user", OTHER, t1, "s2"), Turn("u2:t2", "u2", "user", "I like long walks by the sea", t1, "s2"))
    events = [
        Session("s1", "u1", t1, turns),
        Session("s2", "u2", t1, other_user),
        Deletion("d1", "u1", t2, ("u1:t1",), topic="health_event"),
        Question("q1", "u1", t2 + timedelta(hours=2), "what about asthma at the clinic?", "", "current", ("u1:t2",)),
    ]
    return ScenarioStream(start=T0, end=t2 + timedelta(days=1), events=tuple(sort_events(events)))


def _play(systems: dict[str, object], caches: dict[str, object] | None = None) -> tuple[Harness, pl.DataFrame, pl.DataFrame]:
    stream = _stream()
    env, rec = simpy.Environment(), Recorder()
    cfg = EngineConfig(start=stream.start, k=5, ks=(5,), fetch_k=5, metric="recall_all@5", feedback_from="none")
    suts = [SystemUnderTest(label, label, s) for label, s in systems.items()]
    harness = Harness(env=env, systems=suts, recorder=rec, config=cfg, scorers=[build_scorer("evidence")], caches=caches)
    start_processes(env, harness, stream.episodes())
    env.run(until=(stream.end - stream.start).total_seconds())
    rec.commit("all")
    probes, timeline, _ = rec.finish({})
    return harness, probes, timeline


@pytest.mark.parametrize("place", ["provenance", "merged", "text", "lexical"])
def test_leaky_system_is_caught_in_each_place(place: str):
    _, probes, timeline = _play({"clean": LeakyMemory(), "leaky": LeakyMemory({place})})
    forgets = {r["system"]: r for r in timeline.filter(pl.col("event") == "forget").iter_rows(named=True)}
    column = {"provenance": "leaked", "merged": "leaked_merged", "text": "leaked_text", "lexical": "leaked_lexical"}[place]
    assert forgets["leaky"][column] > 0
    for col in ("leaked", "leaked_merged", "leaked_text", "leaked_lexical"):
        assert forgets["clean"][col] == 0
    # The other places stay clean for a system that leaks in only one (a leak is named where it is).
    others = {c for c in ("leaked_merged", "leaked_text", "leaked_lexical") if c != column}
    if place != "provenance":  # ignoring forget leaks everywhere at once
        assert all(forgets["leaky"][c] == 0 for c in others)
    table = erasure_table(probes, timeline, {})
    assert table["systems"]["clean"]["questions_retrieving_deleted"] == 0
    if place in ("provenance", "merged"):
        # The later question still retrieves a memory derived from the deleted turn: erasure never completes.
        assert table["systems"]["leaky"]["questions_retrieving_deleted"] == 1
        assert table["systems"]["leaky"]["days_to_full_erasure"] > 0
    assert "leaks by place" in format_erasure(table)


def test_audit_is_read_only_and_classifies_copies():
    system = LeakyMemory({"text"})
    turns = (Turn("u1:t1", "u1", "user", SECRET, T0, "s"), Turn("u1:t2", "u1", "user", OTHER, T0, "s"))
    system.ingest(turns, user_id="u1", now=T0)
    system.forget(["u1:t1"], user_id="u1", now=T0)
    before = [list(v) for v in system.memories.values()]
    assert audit_system(system, {"u1:t1": SECRET}, user_id="u1", now=T0, k=10) == {"provenance": 0, "merged": 0, "text": 1, "lexical": 0}
    assert [list(v) for v in system.memories.values()] == before
    got = [Retrieved("m", "x", 1.0, T0, ("a", "b")), Retrieved("n", "y", 1.0, T0, ("a",))]
    assert classify(got, {"a"}, []) == {"provenance": 1, "merged": 1, "text": 0}


def test_after_deletion_neither_cache_returns_the_deleted_text(tmp_path: Path):
    emb = HashEmbedder(16)
    cache = EmbeddingCache(tmp_path / "emb.sqlite", model_id="hash", dim=16)
    texts = [SECRET, OTHER, render_turn(Turn("u1:t1", "u1", "user", SECRET, T0 + timedelta(hours=1), "s1"))]
    cache.put_many((cache.key(t), emb.encode_one(t)) for t in texts)
    # An LLM reply that quotes the deleted text, and one whose prompt (noted with it) holds it.
    llm = CachedLLM(ScriptedLLM(lambda msgs: "You said: " + msgs[-1]["content"]), cache_dir=tmp_path)
    quoting = [{"role": "user", "content": SECRET}]
    llm.chat(quoting, max_tokens=50)
    llm.store.put(b"prompt-only", b'{"text": "yes"}', note=f"Memories: {SECRET}\nQuestion: anything?")
    llm.chat([{"role": "user", "content": OTHER}], max_tokens=50)
    harness, _, _ = _play({"clean": LeakyMemory()}, caches={"embedding_cache": cache, "llm_caches": [llm]})
    [entry] = harness.erasures
    assert entry["held_before"] == {"embedding_cache": 2, "llm_cache": 2}
    assert entry["held_after"] == {"embedding_cache": 0, "llm_cache": 0}
    assert cache.get_many([cache.key(SECRET), cache.key(texts[2])])[0] == {}
    assert len(cache.get_many([cache.key(OTHER)])[0]) == 1  # another turn's copy stays
    assert llm.store.get(b"prompt-only") is None
    hits = llm.hits
    llm.chat(quoting, max_tokens=50)  # asked again: not served from the cache
    assert llm.hits == hits
    assert llm.chat([{"role": "user", "content": OTHER}], max_tokens=50).cached


def test_kvcache_purge_containing_reads_values_and_notes(tmp_path: Path):
    store = KVCache(tmp_path / "kv.sqlite")
    store.put(b"a", b"reply about the harbour clinic")
    store.put(b"b", b"nothing here", note="prompt: harbour clinic")
    store.put(b"c", b"unrelated")
    assert sorted(store.find_containing(["harbour clinic"])) == [b"a", b"b"]
    assert store.purge_containing(["harbour clinic"]) == 2
    assert len(store) == 1 and store.get(b"c") == b"unrelated"


def _as_of_date(text: str) -> datetime:
    m = re.search(r"(\d{1,2} [A-Z][a-z]+ \d{4})", text)
    assert m, text
    return datetime.strptime(m.group(1), "%d %B %Y")


def test_as_of_questions_are_scored_against_the_value_current_on_that_date():
    stream = build_scenario("persona", {"users": 12, "months": 6, "change_rate": 3.0, "as_of": True}).generate(
        np.random.default_rng(0)
    )
    histories = stream.meta["histories"]
    asked = [e for e in stream.events if isinstance(e, Question) and e.kind == "as_of"]
    assert len(asked) >= 10
    for q in asked:
        day = _as_of_date(q.text).date()
        told = sorted(
            ((v, tid, datetime.fromisoformat(at)) for v, tid, at in histories[q.user_id][q.topic] if at),
            key=lambda e: e[2],
        )
        current = [e for e in told if e[2].date() <= day][-1]
        assert q.gold == current[0] and q.evidence == (current[1],)
        newer = [e for e in told if e[2].date() > day]
        assert newer and q.superseded == (newer[0][1],)
        assert q.time.date() > day


def test_as_of_is_off_by_default():
    stream = build_scenario("persona", {"users": 12, "months": 6, "change_rate": 3.0}).generate(np.random.default_rng(0))
    assert not [e for e in stream.events if isinstance(e, Question) and e.kind == "as_of"]
    spec_args = build_scenario("persona", {"users": 2}).spec_args()
    assert "as_of" not in spec_args and "busy_hours" not in spec_args


def test_llm_cache_notes_each_prompt_so_a_reply_that_does_not_quote_it_is_still_found(tmp_path: Path):
    llm = CachedLLM(ScriptedLLM(lambda msgs: "Lisbon"), cache_dir=tmp_path)
    asked = [{"role": "system", "content": "Answer from the memories."},
             {"role": "user", "content": f"Memories: {SECRET}\nQuestion: where?"}]
    llm.chat(asked, max_tokens=10)
    llm.chat([{"role": "user", "content": OTHER}], max_tokens=10)
    assert len(llm.store.find_containing([SECRET])) == 1
    assert llm.store.purge_containing([SECRET]) == 1
    hits = llm.hits
    llm.chat(asked, max_tokens=10)
    assert llm.hits == hits  # the prompt that held the deleted text is no longer answered from the cache
