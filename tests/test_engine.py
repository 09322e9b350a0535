"""The engine: ordering of scoring and feedback, what systems may see, failures, determinism."""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from helpers import replay

from memsim.memory.base import MemoryStats, Retrieved, Turn
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources, SystemSpec
from memsim.analysis.pipeline import execute, make_spec
from memsim.analysis.summary import summarise_folder
from memsim.scenarios.base import ScenarioStream
from memsim.scenarios.registry import build_scenario
from memsim.sim.events import Deletion, Question, Session, sort_events

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class SpySystem:
    """Keeps every turn; retrieves newest first; logs every call with the simulated time."""

    def __init__(self, log: list, fail_on: str | None = None) -> None:
        self.log = log
        self.turns: dict[str, list[Turn]] = {}
        self.fail_on = fail_on

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        self.log.append(("ingest", now, user_id, tuple(t.turn_id for t in turns)))
        self.turns.setdefault(user_id, []).extend(turns)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        self.log.append(("retrieve", now, user_id, query))
        if self.fail_on == "retrieve" and len([x for x in self.log if x[0] == "retrieve"]) > 2:
            raise RuntimeError("index corrupted")
        mine = [t for t in self.turns.get(user_id, []) if t.created_at <= now]
        mine.sort(key=lambda t: t.created_at, reverse=True)
        return [Retrieved(t.turn_id, t.text, 1.0, t.created_at, (t.turn_id,)) for t in mine[:k]]

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        self.log.append(("probe", now, user_id, query))
        mine = [t for t in self.turns.get(user_id, []) if t.created_at <= now]
        mine.sort(key=lambda t: t.created_at, reverse=True)
        return [Retrieved(t.turn_id, t.text, 1.0, t.created_at, (t.turn_id,)) for t in mine[:k]]

    def feedback(self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime) -> None:
        self.log.append(("feedback", now, user_id, question_id, tuple(retrieved), correct))

    def maintain(self, *, now: datetime) -> None:
        self.log.append(("maintain", now))

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        self.log.append(("forget", now, user_id, tuple(turn_ids)))
        gone = set(turn_ids)
        self.turns[user_id] = [t for t in self.turns.get(user_id, []) if t.turn_id not in gone]

    def stats(self) -> MemoryStats:
        return MemoryStats(items=sum(len(v) for v in self.turns.values()))


def _turn(uid: str, sid: str, i: int, text: str, when: datetime) -> Turn:
    return Turn(f"{sid}-t{i}", uid, "user", text, when, sid)


def _tiny_stream() -> ScenarioStream:
    s1 = T0 + timedelta(hours=1)
    s2 = T0 + timedelta(days=2)
    events = [
        Session("a-s1", "a", s1, (_turn("a", "a-s1", 1, "I live in Oslo.", s1), _turn("a", "a-s1", 2, "I love jazz.", s1))),
        Session("b-s1", "b", s1, (_turn("b", "b-s1", 1, "I live in Lyon.", s1),)),
        Question("a-q1", "a", T0 + timedelta(days=1), "Where do I live?", "Oslo", "current", ("a-s1-t1",), topic="home_city"),
        Session("a-s2", "a", s2, (_turn("a", "a-s2", 1, "I moved to Rome.", s2),)),
        Question("a-q2", "a", T0 + timedelta(days=3), "Where do I live now?", "Rome", "current", ("a-s2-t1",), ("a-s1-t1",), "home_city"),
        Deletion("a-d1", "a", T0 + timedelta(days=4), ("a-s2-t1",), "home_city"),
        Question("b-q1", "b", T0 + timedelta(days=5), "Where do I live?", "Lyon", "current", ("b-s1-t1",), topic="home_city"),
    ]
    return ScenarioStream(start=T0, end=T0 + timedelta(days=6), events=tuple(sort_events(events)))


def _replay(stream: ScenarioStream, systems, delay_s: float = 7200.0, every_s: float = 86400.0):
    return replay(stream, dict(systems), delay_s=delay_s, every_s=every_s)


def test_feedback_after_scoring_and_after_delay():
    log: list = []
    rec = _replay(_tiny_stream(), [("spy", SpySystem(log))], delay_s=7200.0)
    probes = rec.probes
    asked = {r["question_id"]: r["time"] for r in probes.iter_rows(named=True)}
    fb = [x for x in log if x[0] == "feedback"]
    assert {x[3] for x in fb} == set(asked)
    for _, when, _, qid, _, _ in fb:
        assert when - asked[qid] == timedelta(hours=2)
        # the retrieve for this question happened before its feedback
        i_ret = next(i for i, x in enumerate(log) if x[0] == "retrieve" and x[1] == asked[qid])
        i_fb = next(i for i, x in enumerate(log) if x[0] == "feedback" and x[3] == qid)
        assert i_ret < i_fb
    # correct = evidence score: q1 is answered by the only session, q2 by the newest turn
    assert all(x[5] for x in fb if x[3] in ("a-q1", "a-q2"))


def test_systems_never_receive_gold_fields():
    log: list = []
    stream = _tiny_stream()
    _replay(stream, [("spy", SpySystem(log))])
    questions = {e.text for e in stream.events if isinstance(e, Question)}
    # the deletion probe queries with the forgotten turns' own text
    text = {t.turn_id: t.text for e in stream.events if isinstance(e, Session) for t in e.turns}
    probes = {text[t] for e in stream.events if isinstance(e, Deletion) for t in e.turn_ids}
    golds = {e.question_id: e for e in stream.events if isinstance(e, Question)}
    for entry in log:
        if entry[0] == "retrieve":
            assert entry[3] in questions  # the question text, nothing else
        if entry[0] == "probe":
            assert entry[3] in probes  # a deletion probe reads with the forgotten turn's own text
        if entry[0] == "feedback":
            q = golds[entry[3]]
            # only question id, retrieved memory ids and a bool; never gold, evidence or superseded
            assert isinstance(entry[5], bool)
            flat = json.dumps([str(x) for x in entry])
            assert q.gold not in flat


def test_deletion_is_probed_and_leaks_are_counted():
    class Leaky(SpySystem):
        def forget(self, turn_ids, *, user_id, now):  # ignores the request
            self.log.append(("forget", now, user_id, tuple(turn_ids)))

    log1: list = []
    log2: list = []
    rec = _replay(
        _tiny_stream(),
        [("good", SpySystem(log1)), ("leaky", Leaky(log2))],
    )
    tl = rec.timeline.filter(pl.col("event") == "forget")
    leaked = dict(zip(tl["system"].to_list(), tl["leaked"].to_list()))
    assert leaked == {"good": 0, "leaky": 1}


def test_isolation_failure_recorded():
    class Promiscuous(SpySystem):
        def retrieve(self, query, *, user_id, now, k):
            every = [t for ts in self.turns.values() for t in ts if t.created_at <= now]
            return [Retrieved(t.turn_id, t.text, 1.0, t.created_at, (t.turn_id,)) for t in every[:k]]

    rec = _replay(_tiny_stream(), [("bad", Promiscuous([]))])
    assert rec.probes["isolation_failures"].sum() > 0
    rec = _replay(_tiny_stream(), [("spy", SpySystem([]))])
    assert rec.probes["isolation_failures"].sum() == 0


def test_failing_system_is_recorded_and_others_continue():
    rec = _replay(
        _tiny_stream(),
        [
            ("ok", SpySystem([])),
            ("broken", SpySystem([], fail_on="retrieve")),
        ],
    )
    probes = rec.probes
    counts = dict(zip(*np.unique(probes["system"].to_numpy(), return_counts=True)))
    assert counts["ok"] == 3
    assert counts["broken"] == 2  # the rows before the failure are kept
    assert rec.failures and rec.failures[0]["system"] == "broken"
    assert "index corrupted" in rec.failures[0]["error"]


def test_maintenance_runs_on_schedule():
    log: list = []
    _replay(_tiny_stream(), [("spy", SpySystem(log))], every_s=86400.0)
    ticks = [x[1] for x in log if x[0] == "maintain"]
    assert ticks[:3] == [T0 + timedelta(days=d) for d in (1, 2, 3)]


def test_stale_above_current_scored():
    rec = _replay(_tiny_stream(), [("spy", SpySystem([]))])
    row = rec.probes.filter(pl.col("question_id") == "a-q2").row(0, named=True)
    assert row["stale_above_current"] == 0.0  # newest-first: the current value outranks Oslo
    assert row["first_rank"] == 1
    q1 = rec.probes.filter(pl.col("question_id") == "a-q1").row(0, named=True)
    assert math.isnan(q1["stale_above_current"])


def _spec(seed: int, systems=("naive",)):
    return make_spec(
        "longitudinal", "persona", {"users": 2, "months": 2}, [SystemSpec(s) for s in systems], seed=seed, n_boot=200
    )


def _fake_resources() -> Resources:
    return Resources(embedder_factory=lambda: HashEmbedder())


def test_same_seed_gives_identical_rows(tmp_path: Path):
    a = execute(_spec(3), out_dir=tmp_path / "a", resources=_fake_resources())
    b = execute(_spec(3), out_dir=tmp_path / "b", resources=_fake_resources())
    cols = [c for c in a.result.probes.columns if not c.endswith("_ms")]  # wall-clock timings differ
    assert a.result.probes.select(cols).equals(b.result.probes.select(cols))
    # metrics.json holds no wall-clock figure: the same run gives the same bytes
    assert (tmp_path / "a" / "metrics.json").read_bytes() == (tmp_path / "b" / "metrics.json").read_bytes()
    c = execute(_spec(4), out_dir=tmp_path / "c", resources=_fake_resources())
    assert a.result.probes["question"].to_list() != c.result.probes["question"].to_list()


def test_run_folder_is_complete_and_metrics_recomputable(tmp_path: Path):
    execute(_spec(5), out_dir=tmp_path / "r", resources=_fake_resources())
    for name in ("spec.json", "probes.parquet", "timeline.parquet", "run.json", "metrics.json", "perf.json"):
        assert (tmp_path / "r" / name).is_file()
    assert not (tmp_path / "r" / "parts").exists()  # joined and removed once the run is complete
    spec = json.loads((tmp_path / "r" / "spec.json").read_text())
    assert spec["scenario"]["name"] == "persona" and spec["systems"][0]["name"] == "naive"
    assert spec["metric"] == "recall_all@10"
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    probes = pl.read_parquet(tmp_path / "r" / "probes.parquet")
    again = summarise_folder(tmp_path / "r")
    for key in ("first", "second", "mean"):
        assert again.metrics["systems"]["naive"][key] == pytest.approx(metrics["systems"]["naive"][key])
    assert again.metrics == metrics
    assert metrics["totals"]["questions"] == probes.height


def test_unknown_system_is_a_clear_error(tmp_path: Path):
    from memsim.memory.registry import UnknownSystemError, parse_system

    with pytest.raises(UnknownSystemError, match="known systems: .*naive"):
        parse_system("nosuch")


def test_stream_users_are_processed_concurrently(tmp_path: Path):
    stream = build_scenario("persona", {"users": 4, "months": 1}).generate(np.random.default_rng(0))
    rec = _replay(stream, [("spy", SpySystem([]))])
    probes = rec.probes
    assert probes["user_id"].n_unique() == 4
    assert probes["time"].is_sorted()
    assert probes["isolation_failures"].sum() == 0


def test_endpoint_failure_stops_the_run_and_keeps_rows(tmp_path: Path):
    """A reader whose endpoint is gone stops the run with its error; rows before it are written."""
    from memsim.core.errors import UserError

    calls = {"n": 0}

    class FlakyAnswers:
        judges = ()

        def answer_and_judge(self, question, question_date, memories, gold, category, question_id):
            calls["n"] += 1
            if calls["n"] > 5:
                raise UserError("endpoint http://127.0.0.1:9/v1 unreachable after 3 retries")
            return {"answer": "x", "answer_contains": 0.0}

        def describe(self):
            return {"reader": "flaky"}

        @property
        def score_columns(self):
            return ["answer_contains"]

    with pytest.raises(UserError, match="unreachable"):
        execute(_spec(1), out_dir=tmp_path / "r", resources=_fake_resources(), answer=FlakyAnswers())
    probes = pl.read_parquet(tmp_path / "r" / "probes.parquet")
    assert probes.height == 6  # five answered, plus the one that failed, marked
    assert probes["error"].null_count() == 5 and "unreachable" in probes["error"].drop_nulls()[0]
    assert json.loads((tmp_path / "r" / "run.json").read_text())["complete"] is False
    assert (tmp_path / "r" / "parts").is_dir()  # kept: rerunning the command resumes


def test_ndcg_gives_no_gain_to_a_second_copy_of_the_same_evidence():
    from memsim.sim.scorers import evidence_scores

    dup = evidence_scores([("a",), ("a",)], {"a", "b"}, ks=(2,))
    assert dup["recall_all@2"] == 0.0
    assert dup["ndcg@2"] == pytest.approx(1.0 / (1.0 + 1.0 / math.log2(3)))
    both = evidence_scores([("a",), ("b",)], {"a", "b"}, ks=(2,))
    assert both["recall_all@2"] == 1.0 and both["ndcg@2"] == pytest.approx(1.0)
    merged = evidence_scores([("a", "b"), ("c",)], {"a", "b"}, ks=(2,))
    assert merged["ndcg@2"] == 1.0


def test_cut_offs_above_the_memories_fetched_are_not_reported():
    from memsim.sim.spec import RunSpec, ScenarioEntry, SystemEntry

    spec = RunSpec(scenario=ScenarioEntry(name="persona"), systems=(SystemEntry(name="naive"),), k=10)
    assert spec.ks == (1, 5, 10)
    wide = RunSpec(scenario=ScenarioEntry(name="persona"), systems=(SystemEntry(name="naive"),), k=10, retrieve_k=50)
    assert wide.ks == (1, 5, 10, 30, 50)
    with pytest.raises(ValueError, match="recall_all@30 is not scored"):
        RunSpec(scenario=ScenarioEntry(name="persona"), systems=(SystemEntry(name="naive"),), k=10, metric="recall_all@30")


def test_recorder_keeps_nested_provenance_exactly() -> None:
    """Provenance lists (memories x source turns) survive the recorder's fast path and its fallbacks."""
    from memsim.sim.recorder import PROBE_SCHEMA
    from memsim.sim.row_frames import rows_frame as _frame

    cases = [
        [["t1"], ["t2", "t3"]],
        [],
        [[], ["t4"]],  # an empty provenance takes the slow path
        [["a\x1fb"]],  # so does a turn id holding the separator
    ]
    for sources in cases:
        rows = [{"system": "s", "retrieved_sources": [["t9"]]}, {"system": "s", "retrieved_sources": sources}]
        frame = _frame(rows, PROBE_SCHEMA)
        assert frame["retrieved_sources"].to_list() == [[["t9"]], sources]
    frame = _frame([{"system": "s", "retrieved_sources": None}], PROBE_SCHEMA)
    assert frame["retrieved_sources"].to_list() == [None]
