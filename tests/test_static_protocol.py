"""The static retrieval protocol, with a deterministic word-overlap fake system."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest

from memory.base import MemoryStats, MemorySystem, Retrieved, Turn, render_turn
from sim.errors import UserError
from static_benchmarks.protocol import (
    StaticConversation,
    StaticQuestion,
    StaticSession,
    default_run_dir,
    format_tables,
    probes_frame,
    resolve_ks,
    run_static,
    summarise,
    write_run,
)

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
_WORD = re.compile(r"[a-z]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class OverlapMemory:
    """Ranks a user's turns by words shared with the query; ties by arrival order.

    Records every call so that tests can check what the protocol handed it.
    """

    def __init__(self) -> None:
        self.turns: dict[str, list[Turn]] = {}
        self.calls: list[tuple[str, str, datetime, object]] = []

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        self.calls.append(("ingest", user_id, now, tuple(t.turn_id for t in turns)))
        self.turns.setdefault(user_id, []).extend(turns)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        self.calls.append(("retrieve", user_id, now, k))
        q = _words(query)
        ranked = sorted(
            (t for t in self.turns.get(user_id, []) if t.created_at <= now),
            key=lambda t: -len(q & _words(t.text)),
        )
        return [
            Retrieved(t.turn_id, render_turn(t), float(len(q & _words(t.text))), t.created_at, (t.turn_id,))
            for t in ranked[:k]
        ]

    def feedback(
        self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime
    ) -> None:
        return None

    def maintain(self, *, now: datetime) -> None:
        return None

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        return None

    def stats(self) -> MemoryStats:
        return MemoryStats(items=sum(len(v) for v in self.turns.values()))


def _turn(user: str, n: int, text: str, at: datetime) -> Turn:
    return Turn(f"{user}:D{n}", user, "Ann", text, at, f"{user}:S", {"date_text": "8 May"})


def _conversations() -> list[StaticConversation]:
    t1 = T0
    t2 = T0 + timedelta(days=10)
    a_s1 = (_turn("a", 1, "I adopted a beagle puppy", t1), _turn("a", 2, "pottery class is fun", t1))
    a_s2 = (_turn("a", 3, "I ran the Boston marathon", t2), _turn("a", 4, "the weather was cold", t2))
    ask = t2 + timedelta(days=1)
    a_qs = (
        # Overlap ranks a:D1 first (beagle, puppy); the second gold turn a:D2 shares nothing.
        StaticQuestion("a:q0", "a", "which puppy breed, a beagle?", "beagle", "4", ("a:D1",), ask),
        StaticQuestion("a:q1", "a", "beagle and pottery", "both", "1", ("a:D1", "a:D2"), ask),
        StaticQuestion("a:q2", "a", "what was cold", "weather", "4", ("a:D4", "a:D3"), ask),
        StaticQuestion("a:q3", "a", "did Bob run a marathon", "yes", "5", ("a:D3",), ask, excluded="adversarial"),
        StaticQuestion("a:q4", "a", "would Ann like dogs", "yes", "3", (), ask, excluded="no_usable_evidence"),
    )
    b_s1 = (_turn("b", 1, "I moved to Lisbon", t1),)
    b_qs = (StaticQuestion("b:q0", "b", "Where did I move, Lisbon?", "Lisbon", "4", ("b:D1",), t1 + timedelta(days=1)),)
    return [
        StaticConversation("a", (StaticSession("a:S1", t1, a_s1), StaticSession("a:S2", t2, a_s2)), a_qs),
        StaticConversation("b", (StaticSession("b:S1", t1, b_s1),), b_qs),
    ]


def _run(k: int = 2):
    made: list[OverlapMemory] = []

    def make() -> MemorySystem:
        made.append(OverlapMemory())
        return made[-1]

    result = run_static(_conversations(), make, k=k, progress=False)
    return result, made


def test_fake_satisfies_protocol() -> None:
    assert isinstance(OverlapMemory(), MemorySystem)


def test_resolve_ks() -> None:
    assert resolve_ks(30) == (1, 5, 10, 30, 50)
    assert resolve_ks(7) == (1, 5, 7, 10, 30, 50)
    assert resolve_ks(100)[-1] == 100
    for bad in (0, -1):
        with pytest.raises(UserError, match="positive"):
            resolve_ks(bad)


def test_fresh_system_per_conversation_sessions_in_order() -> None:
    result, made = _run()
    assert len(made) == 2
    a, b = made
    # Each system saw only its own user, sessions in order at the session's time.
    assert a.calls[:2] == [
        ("ingest", "a", T0, ("a:D1", "a:D2")),
        ("ingest", "a", T0 + timedelta(days=10), ("a:D3", "a:D4")),
    ]
    assert set(a.turns) == {"a"} and set(b.turns) == {"b"}
    # Every question retrieves max(k, 50) at the question's time, after all ingests.
    retrieves = [c for c in a.calls if c[0] == "retrieve"]
    assert len(retrieves) == 5 and a.calls[2:] == retrieves
    assert all(c[2] == T0 + timedelta(days=11) and c[3] == 50 for c in retrieves)
    assert result.retrieve_k == 50 and result.ks == (1, 2, 5, 10, 30, 50)
    assert [c.turns for c in result.conversations] == [4, 1]
    assert [c.memory_items for c in result.conversations] == [4, 1]


def test_scores_match_hand_computed_values() -> None:
    result, _ = _run()
    by_id = {p.question.question_id: p for p in result.probes}
    q0 = by_id["a:q0"]
    assert q0.retrieved_ids[0] == "a:D1" and q0.first_evidence_rank == 1
    assert q0.scores["recall_any@1"] == 1.0 and q0.scores["ndcg@1"] == 1.0
    # q1: gold {D1, D2}. Ranking: D1 (beagle), D2 (pottery), D3, D4.
    q1 = by_id["a:q1"]
    assert q1.retrieved_ids[:2] == ("a:D1", "a:D2")
    assert q1.scores["recall_any@1"] == 1.0
    assert q1.scores["recall_all@1"] == 0.0
    assert q1.scores["recall_all@2"] == 1.0
    assert q1.scores["ndcg@1"] == 1.0
    assert q1.scores["ndcg@2"] == pytest.approx(1.0)
    # q2: gold {D4, D3}; "cold" puts D4 first, then D1, D2, D3 by arrival (no overlap).
    q2 = by_id["a:q2"]
    assert q2.retrieved_ids == ("a:D4", "a:D1", "a:D2", "a:D3")
    assert q2.scores["recall_all@2"] == 0.0 and q2.scores["recall_all@5"] == 1.0
    ideal = 1 + 1 / math.log2(3)
    assert q2.scores["ndcg@2"] == pytest.approx(1 / ideal)
    assert q2.scores["ndcg@5"] == pytest.approx((1 + 1 / math.log2(5)) / ideal)
    # Excluded questions are asked and recorded but unscored.
    for qid in ("a:q3", "a:q4"):
        p = by_id[qid]
        assert len(p.retrieved_ids) == 4
        assert all(math.isnan(v) for v in p.scores.values()) and p.first_evidence_rank is None
        assert set(p.scores) == {f"{m}@{k}" for m in ("recall_all", "recall_any", "ndcg") for k in result.ks}


def test_summarise_per_category_and_overall() -> None:
    result, _ = _run()
    labels = {"1": "multi-hop", "4": "single-hop", "5": "adversarial", "3": "open-domain"}
    frame = probes_frame(result, system="overlap", category_labels=labels)
    assert frame.height == 6
    m = summarise(frame)
    overall = m["overall"]
    assert (overall["questions"], overall["scored"]) == (6, 4)
    assert overall["excluded"] == {"adversarial": 1, "no_usable_evidence": 1}
    # recall_all@1 of the scored: a:q0 1, a:q1 0 (D2 missing), a:q2 0 (D3 missing), b:q0 1.
    assert overall["scores"]["recall_all@1"] == pytest.approx(2 / 4)
    # Every scored question has a gold turn first.
    assert overall["scores"]["recall_any@1"] == pytest.approx(1.0)
    assert overall["scores"]["ndcg@2"] == pytest.approx((1 + 1 + 1 / (1 + 1 / math.log2(3)) + 1) / 4)
    single = m["per_category"]["4"]
    assert single["label"] == "single-hop" and (single["questions"], single["scored"]) == (3, 3)
    assert single["scores"]["recall_all@5"] == pytest.approx(1.0)
    assert single["scores"]["recall_all@1"] == pytest.approx(2 / 3)
    adversarial = m["per_category"]["5"]
    assert adversarial["scored"] == 0 and adversarial["scores"]["recall_all@1"] is None
    assert list(m["per_category"]) == ["1", "3", "4", "5"]
    lat = m["retrieve_ms"]
    assert 0 <= lat["p50"] <= lat["p95"]
    table = format_tables(m, result.ks)
    assert "4 single-hop" in table and "overall" in table and "adversarial 1" in table


def test_run_folder_metrics_recomputable_from_parquet(tmp_path: Path) -> None:
    result, _ = _run(k=5)
    frame = probes_frame(result, system="overlap")
    metrics = {"k": 5, **summarise(frame), "load_summary": {"questions": 6}}
    spec = {"benchmark": "toy", "system": {"name": "overlap", "args": {}}, "k": 5}
    out = write_run(tmp_path / "run", spec, frame, metrics)
    back = pl.read_parquet(out / "probes.parquet")
    assert back.equals(frame)
    assert back["retrieved_sources"].to_list()[0][0] == ["a:D1"]
    written = json.loads((out / "metrics.json").read_text())
    again = summarise(back)
    for key in ("overall", "per_category", "retrieve_ms"):
        assert written[key] == json.loads(json.dumps(again[key]))
    assert json.loads((out / "spec.json").read_text()) == spec
    with pytest.raises(UserError, match="already holds a run"):
        write_run(out, spec, frame, metrics)


def test_same_input_same_rows() -> None:
    first = probes_frame(_run()[0], system="overlap").drop("retrieve_ms")
    second = probes_frame(_run()[0], system="overlap").drop("retrieve_ms")
    assert first.equals(second)


def test_default_run_dir_is_path_safe() -> None:
    at = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    path = default_run_dir("locomo", "naive[k=3,model=a/b]", now=at)
    assert path == Path("runs") / "static-locomo-naive_k_3_model_a_b-20240102-030405"


def test_system_returning_too_many_is_an_error() -> None:
    class Greedy(OverlapMemory):
        def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
            out = super().retrieve(query, user_id=user_id, now=now, k=k)
            return out + out[:1] * (k + 1)

    with pytest.raises(RuntimeError, match="returned"):
        run_static(_conversations(), Greedy, k=1, progress=False)
