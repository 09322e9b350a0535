"""Static runs on the engine (fresh systems per episode, questions after ingest), with a word-overlap fake."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memsim.analysis.summary import format_tables, summarise, summarise_folder, write_summary
from memsim.memory.base import MemoryStats, MemorySystem, Retrieved, Turn, render_turn
from memsim.memory.registry import Resources, register_memory, unregister_memory
from memsim.sim.events import Episode, Question, Session
from memsim.sim.runner import run
from memsim.sim.spec import RunSpec, ScenarioEntry, SystemEntry

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

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        q = _words(query)
        ranked = sorted((t for t in self.turns.get(user_id, []) if t.created_at <= now), key=lambda t: -len(q & _words(t.text)))
        return [Retrieved(t.turn_id, render_turn(t), float(len(q & _words(t.text))), t.created_at, (t.turn_id,)) for t in ranked[:k]]

    def feedback(
        self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime
    ) -> None:
        return None

    def maintain(self, *, now: datetime) -> None:
        self.calls.append(("maintain", "", now, None))

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        return None

    def stats(self) -> MemoryStats:
        return MemoryStats(items=sum(len(v) for v in self.turns.values()))


def _turn(user: str, n: int, text: str, at: datetime) -> Turn:
    return Turn(f"{user}:D{n}", user, "Ann", text, at, f"{user}:S", {"date_text": "8 May"})


MADE: list[OverlapMemory] = []


def make_overlap(*, resources: Resources, greedy: bool = False) -> OverlapMemory:
    """Registry factory of the fake; every system built is kept in ``MADE``."""
    MADE.append(Greedy() if greedy else OverlapMemory())
    return MADE[-1]


@pytest.fixture(autouse=True)
def _registered() -> Iterator[None]:
    register_memory("test-overlap", f"{__name__}:make_overlap", description="word-overlap fake")
    MADE.clear()
    try:
        yield
    finally:
        unregister_memory("test-overlap")


def _q(qid: str, user: str, text: str, gold: str, kind: str, evidence: tuple[str, ...], at: datetime, excluded=None):
    return Question(qid, user, at, text, gold, kind, evidence, excluded=excluded)


def _episodes() -> list[Episode]:
    t1 = T0
    t2 = T0 + timedelta(days=10)
    a_s1 = (_turn("a", 1, "I adopted a beagle puppy", t1), _turn("a", 2, "pottery class is fun", t1))
    a_s2 = (_turn("a", 3, "I ran the Boston marathon", t2), _turn("a", 4, "the weather was cold", t2))
    ask = t2 + timedelta(days=1)
    a_qs = (
        # Overlap ranks a:D1 first (beagle, puppy); the second gold turn a:D2 shares nothing.
        _q("a:q0", "a", "which puppy breed, a beagle?", "beagle", "single-hop", ("a:D1",), ask),
        _q("a:q1", "a", "beagle and pottery", "both", "multi-hop", ("a:D1", "a:D2"), ask),
        _q("a:q2", "a", "what was cold", "weather", "single-hop", ("a:D4", "a:D3"), ask),
        _q("a:q3", "a", "did Bob run a marathon", "", "adversarial", ("a:D3",), ask, excluded="adversarial"),
        _q("a:q4", "a", "would Ann like dogs", "yes", "open-domain", (), ask, excluded="no_usable_evidence"),
    )
    b_s1 = (_turn("b", 1, "I moved to Lisbon", t1),)
    b_qs = (_q("b:q0", "b", "Where did I move, Lisbon?", "Lisbon", "single-hop", ("b:D1",), t1 + timedelta(days=1)),)
    return [
        Episode("a", (Session("a:S1", "a", t1, a_s1), Session("a:S2", "a", t2, a_s2), *a_qs)),
        Episode("b", (Session("b:S1", "b", t1, b_s1), *b_qs)),
    ]


def _spec(k: int = 2, **args) -> RunSpec:
    return RunSpec(
        kind="static",
        scenario=ScenarioEntry(name="given"),
        systems=(SystemEntry(name="test-overlap", args=args, label="overlap"),),
        k=k,
        retrieve_k=50,
        scorers=("evidence",),
        control=None,
        n_boot=200,
    )


def _run(k: int = 2, out_dir: Path | None = None, **args):
    result = run(_spec(k, **args), _episodes(), out_dir=out_dir, resources=Resources())
    return result, list(MADE)


def _rows(result) -> dict[str, dict]:
    return {r["question_id"]: r for r in result.probes.iter_rows(named=True)}


def test_fake_satisfies_protocol() -> None:
    assert isinstance(OverlapMemory(), MemorySystem)


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
    # Maintenance runs once, after the last ingest and before the first question (consolidation acts).
    assert a.calls[2][0] == "maintain" and [c[0] for c in b.calls].count("maintain") == 1
    # Every scored question retrieves max(k, 50) at the question's time, after all ingests; the two
    # excluded ones are not retrieved, as nothing (no reader, no feedback) would read what came back.
    retrieves = [c for c in a.calls if c[0] == "retrieve"]
    assert len(retrieves) == 3 and a.calls[3:] == retrieves
    assert all(c[2] == T0 + timedelta(days=11) and c[3] == 50 for c in retrieves)
    assert _spec().ks == (1, 2, 5, 10, 30, 50)
    parts = result.info["parts"]
    assert [p["totals"]["turns"] for p in parts] == [4, 1]
    assert [p["stats"]["overlap"]["items"] for p in parts] == [4, 1]
    # no feedback in a static run, and no maintenance but that one
    assert not any(c[0] == "feedback" for m in made for c in m.calls)
    assert sum(c[0] == "maintain" for m in made for c in m.calls) == 2


def test_scores_match_hand_computed_values() -> None:
    result, _ = _run()
    by_id = _rows(result)
    q0 = by_id["a:q0"]
    assert q0["retrieved_ids"][0] == "a:D1" and q0["first_rank"] == 1
    assert q0["recall_any@1"] == 1.0 and q0["ndcg@1"] == 1.0
    # q1: gold {D1, D2}. Ranking: D1 (beagle), D2 (pottery), D3, D4.
    q1 = by_id["a:q1"]
    assert q1["retrieved_ids"][:2] == ["a:D1", "a:D2"]
    assert q1["recall_any@1"] == 1.0
    assert q1["recall_all@1"] == 0.0
    assert q1["recall_all@2"] == 1.0
    assert q1["ndcg@1"] == 1.0
    assert q1["ndcg@2"] == pytest.approx(1.0)
    # q2: gold {D4, D3}; "cold" puts D4 first, then D1, D2, D3 by arrival (no overlap).
    q2 = by_id["a:q2"]
    assert q2["retrieved_ids"] == ["a:D4", "a:D1", "a:D2", "a:D3"]
    assert q2["recall_all@2"] == 0.0 and q2["recall_all@5"] == 1.0
    ideal = 1 + 1 / math.log2(3)
    assert q2["ndcg@2"] == pytest.approx(1 / ideal)
    assert q2["ndcg@5"] == pytest.approx((1 + 1 / math.log2(5)) / ideal)
    # Excluded questions are recorded but unscored; with no reader they are not retrieved either.
    for qid in ("a:q3", "a:q4"):
        p = by_id[qid]
        assert p["retrieved_ids"] == [] and p["retrieve_ms"] is None and p["excluded"] is not None
        cols = [f"{m}@{k}" for m in ("recall_all", "recall_any", "ndcg") for k in _spec().ks]
        assert all(math.isnan(p[c]) for c in cols) and p["first_rank"] is None


def test_summary_per_kind_and_overall_with_episode_intervals() -> None:
    result, _ = _run()
    m = summarise(_spec(), result.probes, result.timeline, result.info).metrics
    overall = m["systems"]["overlap"]["overall"]
    assert (overall["questions"], overall["scored"], overall["episodes"]) == (6, 4, 2)
    assert overall["excluded"] == {"adversarial": 1, "no_usable_evidence": 1}
    scores = overall["scores"]
    # recall_all@1 of the scored: a:q0 1, a:q1 0 (D2 missing), a:q2 0 (D3 missing), b:q0 1.
    assert scores["recall_all@1"]["mean"] == pytest.approx(2 / 4)
    assert scores["recall_all@1"]["lo"] <= 0.5 <= scores["recall_all@1"]["hi"]
    # Every scored question has a gold turn first.
    assert scores["recall_any@1"]["mean"] == pytest.approx(1.0)
    assert scores["ndcg@2"]["mean"] == pytest.approx((1 + 1 + 1 / (1 + 1 / math.log2(3)) + 1) / 4)
    kinds = m["systems"]["overlap"]["per_kind"]
    single = kinds["single-hop"]
    assert (single["questions"], single["scored"]) == (3, 3)
    assert single["scores"]["recall_all@5"]["mean"] == pytest.approx(1.0)
    assert single["scores"]["recall_all@1"]["mean"] == pytest.approx(2 / 3)
    assert kinds["adversarial"]["scored"] == 0 and kinds["adversarial"]["scores"]["recall_all@1"]["mean"] is None
    table = format_tables(m, "overlap", kind_names={"multi-hop": "1 multi-hop", "single-hop": "4 single-hop"})
    assert table.index("1 multi-hop") < table.index("4 single-hop") < table.index("overall")
    assert "adversarial 1" in table and "2 episodes resampled" in table


def test_run_folder_metrics_recomputable_from_parquet(tmp_path: Path) -> None:
    result, _ = _run(k=5, out_dir=tmp_path / "run")
    write_summary(tmp_path / "run", summarise(_spec(5), result.probes, result.timeline, result.info))
    again = summarise_folder(tmp_path / "run")
    assert json.loads((tmp_path / "run" / "metrics.json").read_text()) == json.loads(json.dumps(again.metrics))
    assert again.metrics["systems"]["overlap"]["overall"]["scores"]["recall_all@5"]["mean"] == pytest.approx(1.0)


def test_same_input_same_rows() -> None:
    first = _run()[0].probes.drop("retrieve_ms", "embed_ms")
    second = _run()[0].probes.drop("retrieve_ms", "embed_ms")
    assert first.equals(second)


def test_system_returning_too_many_is_recorded_as_a_failure() -> None:
    result, _ = _run(k=1, greedy=True)
    # Held to the protocol's contract when called (memsim.memory.checks): the method, the count and k named.
    assert result.failures and "retrieve returned 51 results for k=50" in result.failures[0]["error"]
    assert result.probes.height == 0  # nothing from a system that broke its contract is scored


class Greedy(OverlapMemory):
    """Returns more memories than asked for."""

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        out = super().retrieve(query, user_id=user_id, now=now, k=k)
        return out + out[:1] * (k + 1 - len(out))
