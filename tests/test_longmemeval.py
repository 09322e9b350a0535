"""LongMemEval: loader and quirks, selection, official metrics, renamed ids, scorers, both protocols on the engine."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memsim.memory.base import MemoryStats, Retrieved, Turn, render_turn
from memsim.core.errors import UserError
from memsim.sim.events import Episode, Question, Session
from memsim.static_benchmarks import longmemeval as lme

FIXTURES = Path(__file__).parent / "fixtures"
MINI = FIXTURES / "longmemeval_s_mini.json"
WARN = FIXTURES / "longmemeval_warnings.json"


def _raw() -> list[dict[str, Any]]:
    return json.loads(MINI.read_text())


def _write(tmp_path: Path, data: Any, name: str = "data.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


_WORDS = re.compile(r"[a-z0-9]{5,}")


class LexicalMemory:
    """Test double: ranks stored turns by shared words of 5+ letters with the query (ties: oldest first)."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.ingest_calls: list[tuple[str, datetime, int]] = []

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        self.ingest_calls.append((user_id, now, len(turns)))
        self.turns.extend(turns)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        q = set(_WORDS.findall(query.lower()))
        scored = [
            (len(q & set(_WORDS.findall(t.text.lower()))), -i, t)
            for i, t in enumerate(self.turns)
            if t.user_id == user_id and t.created_at <= now
        ]
        scored.sort(key=lambda x: (x[0], x[1]), reverse=True)
        return [
            Retrieved(t.turn_id, render_turn(t), float(s), t.created_at, (t.turn_id,)) for s, _, t in scored[:k]
        ]

    def feedback(self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime) -> None:
        return None

    def maintain(self, *, now: datetime) -> None:
        return None

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        return None

    def stats(self) -> MemoryStats:
        return MemoryStats(items=len(self.turns))


# ---------------------------------------------------------------------------- loader


def test_fixture_loads_with_types_answers_and_date_order() -> None:
    warnings = lme.LoadWarnings()
    insts = lme.load_instances(MINI, warnings=warnings)
    raw = _raw()
    assert [i.question_id for i in insts] == [r["question_id"] for r in raw]
    assert warnings.total() == 0
    assert {i.question_type for i in insts} == set(lme.QUESTION_TYPES)
    by_id = {i.question_id: i for i in insts}
    # numeric answers become their decimal text
    assert by_id["5a9c3f10"].answer == "4" and by_id["7e3b9d21"].answer == "7"
    assert [i.question_id for i in insts if i.is_abstention] == ["d0c1a7e2_abs"]
    for inst, r in zip(insts, raw):
        dates = [s.date for s in inst.sessions]
        assert dates == sorted(dates)
        assert sorted(s.session_id for s in inst.sessions) == sorted(r["haystack_session_ids"])
        # the date text travels with its session, whatever the order
        by_sid = dict(zip(r["haystack_session_ids"], r["haystack_dates"]))
        assert all(s.date_text == by_sid[s.session_id] for s in inst.sessions)
    # the file order of the first instance is not its date order
    first = by_id["d0c1a7e2"]
    assert [s.session_id for s in first.sessions] != raw[0]["haystack_session_ids"]


def test_parse_date_and_bad_dates() -> None:
    d = lme.parse_lme_date("2023/05/30 (Tue) 23:40")
    assert (d.year, d.month, d.day, d.hour, d.minute) == (2023, 5, 30, 23, 40)
    assert d.utcoffset() is not None and d.utcoffset().total_seconds() == 0
    for bad in ("30/05/2023 23:40", "2023/13/01 (Mon) 10:00", "2023/05/30 (Tue)", ""):
        with pytest.raises(ValueError):
            lme.parse_lme_date(bad)


def test_gold_keys_count_every_turn_and_only_user_turns() -> None:
    by_id = {i.question_id: i for i in lme.load_instances(MINI)}
    # the has_answer user turn of answer_inst_2 is its second turn (an assistant greeting comes first)
    assert lme.gold_turn_keys(by_id["0c8e4f77"]) == {"answer_inst_1_1", "answer_inst_2_2"}
    assert lme.gold_session_ids(by_id["5a9c3f10"]) == {"answer_gym_1", "answer_gym_2"}
    # evidence on an assistant turn only: no official user-turn gold at either level
    assert lme.gold_turn_keys(by_id["a55157a1"]) == frozenset()
    assert lme.gold_session_ids(by_id["a55157a1"]) == frozenset()


def test_memory_turns_render_date_and_role() -> None:
    inst = {i.question_id: i for i in lme.load_instances(MINI)}["0c8e4f77"]
    user = lme.memory_turns(inst, user_only=True)
    every = lme.memory_turns(inst, user_only=False)
    assert all(t.speaker == "user" for s in user for t in s)
    assert sum(map(len, every)) == sum(len(s.turns) for s in inst.sessions)
    t = every[1][0]  # answer_inst_2 (second by date), first turn: the assistant greeting
    assert t.turn_id == "answer_inst_2_1" and t.speaker == "assistant"
    assert render_turn(t) == "2023/04/28 (Fri) 21:10 | assistant: Hello! How can I help you today?"
    sess = lme.memory_turns(inst, granularity="session")
    assert [s[0].turn_id for s in sess] == [s.session_id for s in inst.sessions]
    assert sess[1][0].text == "I started learning guitar last month and my fingertips hurt. Is that normal?"
    with pytest.raises(UserError, match="granularity"):
        lme.memory_turns(inst, granularity="word")


def test_iter_instances_streams_and_selects(tmp_path: Path) -> None:
    it = lme.iter_instances(MINI)
    assert next(it).question_id == "d0c1a7e2"  # a generator: nothing is read past what is asked
    picked = list(lme.iter_instances(MINI, indices={2, 5}))
    assert [i.question_id for i in picked] == ["5a9c3f10", "0c8e4f77"]
    assert [i.index for i in picked] == [2, 5]


def test_warnings_are_counted_not_raised() -> None:
    warnings = lme.LoadWarnings()
    insts = lme.load_instances(WARN, warnings=warnings)
    assert len(insts) == 2
    assert warnings.counts == {"answer_session_not_in_haystack": 1, "answer_session_without_has_answer": 1}
    assert warnings.examples["answer_session_without_has_answer"] == ["w5d6e7f8: answer_gym_2"]
    # the unmarked answer session is no gold, as in the official keys
    assert lme.gold_session_ids(insts[1]) == {"answer_gym_1"}


def test_session_after_question_is_a_warning(tmp_path: Path) -> None:
    data = _raw()[:1]
    data[0]["haystack_dates"][0] = "2023/06/02 (Fri) 09:00"
    warnings = lme.LoadWarnings()
    (inst,) = lme.load_instances(_write(tmp_path, data), warnings=warnings)
    assert warnings.counts["session_after_question"] == 1
    assert inst.latest > inst.question_date


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda d: d[2].pop("question_date"), r"instance 5a9c3f10: field question_date: missing"),
        (lambda d: d[3].pop("haystack_sessions"), r"instance 7e3b9d21: field haystack_sessions: missing"),
        (lambda d: d[0].__setitem__("question_type", "trivia"), r"d0c1a7e2: field question_type: unknown type 'trivia'; valid: single-session-user"),
        (lambda d: d[0]["haystack_dates"].__setitem__(1, "May 22, 2023"), r"d0c1a7e2: field haystack_dates\[1\]: cannot parse date 'May 22, 2023'"),
        (lambda d: d[0].__setitem__("question_date", "2023/02/30 (Thu) 10:00"), r"d0c1a7e2: field question_date: cannot parse"),
        (lambda d: d[0]["haystack_dates"].pop(), r"d0c1a7e2: field haystack_sessions: .* must have the same length"),
        (lambda d: d[0]["haystack_sessions"][1][0].__setitem__("role", "system"), r"haystack_sessions\[1\]\[0\].role: got 'system'; valid: user, assistant"),
        (lambda d: d[0]["haystack_sessions"][1][0].__setitem__("has_answer", "yes"), r"haystack_sessions\[1\]\[0\].has_answer"),
        (lambda d: d[0]["haystack_sessions"][1][1].pop("content"), r"haystack_sessions\[1\]\[1\].content: missing"),
        (lambda d: d[0].__setitem__("answer", None), r"d0c1a7e2: field answer: expected str or int or float"),
        (lambda d: d[1].pop("question_id"), r"instance #1: field question_id"),
    ],
)
def test_bad_instances_name_instance_and_field(tmp_path: Path, mutate: Any, pattern: str) -> None:
    data = _raw()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(UserError, match=pattern) as info:
        list(lme.iter_instances(path))
    assert str(path) in str(info.value)


def test_truncated_and_non_array_files(tmp_path: Path) -> None:
    text = MINI.read_text()
    cut = text.index('"question_id": "7e3b9d21"') + 40
    path = tmp_path / "cut.json"
    path.write_text(text[:cut])
    with pytest.raises(UserError, match=r"truncated or malformed JSON after 3 complete instances \(last: 5a9c3f10\)"):
        list(lme.iter_instances(path))
    with pytest.raises(UserError, match="truncated or malformed JSON after 3 complete instances"):
        lme.scan_instances(path)
    with pytest.raises(UserError, match="expected a JSON array"):
        list(lme.iter_instances(_write(tmp_path, {"question_id": "x"}, "obj.json")))
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(UserError, match="an empty file"):
        list(lme.iter_instances(empty))
    with pytest.raises(UserError, match="no such file"):
        list(lme.iter_instances(tmp_path / "absent.json"))


# ---------------------------------------------------------------------------- selection


def test_scan_matches_full_load() -> None:
    assert lme.scan_instances(MINI) == [(i.question_id, i.question_type) for i in lme.load_instances(MINI)]


def _index(counts: dict[str, int]) -> list[tuple[str, str]]:
    out = []
    for t, n in counts.items():
        out += [(f"{t}-{j}", t) for j in range(n)]
    return out


def test_stratified_sample_keeps_shares_and_seed() -> None:
    counts = dict(zip(lme.QUESTION_TYPES, (70, 56, 30, 133, 133, 78)))
    index = _index(counts)
    picked = lme.select_indices(index, sample=50, seed=3)
    assert len(picked) == 50 == len(set(picked)) and picked == sorted(picked)
    got = {t: sum(1 for i in picked if index[i][1] == t) for t in counts}
    for t, n in counts.items():
        assert abs(got[t] - 50 * n / len(index)) < 1.0
    assert lme.select_indices(index, sample=50, seed=3) == picked
    assert lme.select_indices(index, sample=50, seed=4) != picked
    only = lme.select_indices(index, types={"multi-session"}, sample=10, seed=0, limit=4)
    assert len(only) == 4 and all(index[i][1] == "multi-session" for i in only)
    assert lme.select_indices(index, limit=3) == [0, 1, 2]
    assert lme.select_indices(index, sample=10_000) == list(range(len(index)))
    with pytest.raises(UserError, match="unknown question type.*valid: single-session-user"):
        lme.select_indices(index, types={"trivia"})
    with pytest.raises(UserError, match="--sample must be positive"):
        lme.select_indices(index, sample=0)


def test_question_ids_select_a_named_subset_whole_or_not_at_all(tmp_path: Path) -> None:
    index = lme.scan_instances(MINI)
    ids = ["0c8e4f77", "d0c1a7e2", "7e3b9d21"]
    picked = lme.select_indices(index, ids=ids)
    assert [index[i][0] for i in picked] == ["d0c1a7e2", "7e3b9d21", "0c8e4f77"]  # file order
    assert lme.select_indices(index, ids=ids, types={"multi-session"}) == [i for i in picked if index[i][0] == "0c8e4f77"]
    with pytest.raises(UserError, match=r"1 of 2 ids are not in the file \(first: nosuch\)"):
        lme.select_indices(index, ids=["d0c1a7e2", "nosuch"])
    # the three file shapes: one id a line (comments skipped), a JSON list of ids, a JSON list of instances
    lines = tmp_path / "ids.txt"
    lines.write_text("# the subset\n0c8e4f77\n\nd0c1a7e2\n", encoding="utf-8")
    listed = tmp_path / "ids.json"
    listed.write_text(json.dumps(["0c8e4f77", "d0c1a7e2"]), encoding="utf-8")
    subset = tmp_path / "subset.json"
    subset.write_text(json.dumps([{"question_id": "0c8e4f77", "question": "?"}, {"question_id": "d0c1a7e2"}]), encoding="utf-8")
    for path in (lines, listed, subset):
        assert lme.read_question_ids(path) == ("0c8e4f77", "d0c1a7e2")
    bad = tmp_path / "bad.txt"
    for text, said in [("a\na\n", "'a' is listed twice"), ("# nothing\n", "lists no question id"),
                       ("a b\n", "line 1 holds more than one id"), ("[1]", "entry 0 is not a question id"),
                       ("[\"a\",", "malformed JSON at line 1")]:
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(UserError, match=re.escape(said)) as err:
            lme.read_question_ids(bad)
        assert str(bad) in str(err.value)


def test_static_run_on_question_ids_records_them_in_the_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memsim.analysis.cli import main

    ids = tmp_path / "subset.txt"
    ids.write_text("7e3b9d21\n5a9c3f10\n", encoding="utf-8")
    out = tmp_path / "r"
    # bm25 needs no embedding model, so the command runs in a second
    assert main(["static", "longmemeval", "--data", str(MINI), "--question-ids", str(ids), "--system", "bm25",
                 "--out", str(out), "--no-progress", "--n-boot", "100", "--no-report"]) == 0
    spec = json.loads((out / "spec.json").read_text())
    args = spec["scenario"]["args"]
    assert args["question_ids"] == ["7e3b9d21", "5a9c3f10"] and "sha256" in args["question_ids_file"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert sum(g["questions"] for g in metrics["systems"]["bm25"]["per_kind"].values()) == 2
    # the ids live in the spec, so a rerun needs no ids file
    ids.unlink()
    capsys.readouterr()
    assert main(["rerun", str(out), "--out", str(tmp_path / "again"), "--no-progress"]) == 0
    assert json.loads((tmp_path / "again" / "metrics.json").read_text())["systems"] == metrics["systems"]
    assert main(["static", "longmemeval", "--data", str(MINI), "--question-ids", str(ids), "--system", "bm25"]) == 2
    assert "--question-ids" in capsys.readouterr().err


# ---------------------------------------------------------------------------- official metrics


def _official_ndcg(rel: list[int], n_rel: int, k: int) -> float:
    # The published definition written out independently: ideal from n_rel ones.
    def dcg(r: list[int]) -> float:
        r = r[:k]
        return float(r[0] + sum(x / np.log2(i) for i, x in enumerate(r[1:], start=2))) if r else 0.0

    ideal = dcg([1] * n_rel)
    return dcg(rel) / ideal if ideal else 0.0


def test_score_ranking_by_hand() -> None:
    ranked = [("x",), ("g1",), ("y",), ("g2",), ("z",)]
    s = lme.score_ranking(ranked, {"g1", "g2"}, ks=(1, 3, 5))
    assert (s["recall_any@1"], s["recall_any@3"], s["recall_all@3"], s["recall_all@5"]) == (0.0, 1.0, 0.0, 1.0)
    # rank 2 weighs 1 and rank 4 weighs 1/log2(4) = 0.5; the ideal DCG of two hits is 1 + 1
    assert s["ndcg_any@3"] == pytest.approx(0.5)
    assert s["ndcg_any@5"] == pytest.approx(0.75)
    assert s["ndcg_any@1"] == 0.0


def test_score_ranking_matches_official_definition_on_random_rankings() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        keys = [f"t{i}" for i in range(n)]
        gold = {k for k in keys if rng.random() < 0.15} or {keys[0]}
        order = [keys[i] for i in rng.permutation(n)]
        s = lme.score_ranking([(k,) for k in order], gold)
        for k in lme.RETRIEVAL_KS:
            top = set(order[:k])
            assert s[f"recall_any@{k}"] == float(bool(top & gold))
            assert s[f"recall_all@{k}"] == float(gold <= top)
            rel = [1 if x in gold else 0 for x in order]
            assert s[f"ndcg_any@{k}"] == pytest.approx(_official_ndcg(rel, len(gold), k))


def test_turn2session_grows_cutoff_to_k_sessions() -> None:
    ranked = [("A",), ("A",), ("B",), ("A",), ("C",)]
    s = lme.score_turn2session(ranked, {"C"}, n_relevant=1, ks=(1, 2, 3))
    # @2 needs A, A, B (3 items) to see two sessions; @3 needs all five items
    assert s["recall_any@2"] == 0.0 and s["recall_any@3"] == 1.0
    assert s["ndcg_any@3"] == pytest.approx(1 / np.log2(5))
    s2 = lme.score_turn2session(ranked, {"A"}, n_relevant=3, ks=(1, 2))
    # relevance stays per item: A, A among the first three items (the third is B)
    assert s2["ndcg_any@2"] == pytest.approx((1 + 1) / (1 + 1 + 1 / np.log2(3)))


def test_empty_gold_is_unscored_or_official() -> None:
    s = lme.score_ranking([("a",)], set(), ks=(1, 5))
    assert all(math.isnan(v) for v in s.values())
    o = lme.score_ranking([("a",)], set(), ks=(1, 5), empty_gold="official")
    assert (o["recall_any@5"], o["recall_all@5"], o["ndcg_any@5"]) == (0.0, 1.0, 0.0)



# ---------------------------------------------------------------------------- episodes and renamed ids


def test_episode_renames_ids_and_keeps_official_keys() -> None:
    inst = {i.question_id: i for i in lme.load_instances(MINI)}["0c8e4f77"]
    ep = lme.instance_episode(inst)
    *sessions, q = ep.events
    assert ep.episode_id == "0c8e4f77" and isinstance(q, Question)
    # sessions in date order, each at its date, only user turns, opaque ids on the official key form
    assert [s.time for s in sessions] == [s.date for s in inst.sessions]
    assert [s.session_id for s in sessions] == [lme.opaque_session_id(s.session_id) for s in inst.sessions]
    assert all(t.speaker == "user" and t.session_id == s.session_id for s in sessions for t in s.turns)
    # answer_inst_2 (second by date) opens with an assistant greeting: its first user turn is turn 2
    assert re.fullmatch(r"s[0-9a-f]{16}_2", sessions[1].turns[0].turn_id)
    # the gold is the official one, renamed the same way
    assert set(q.evidence) == {lme.opaque_turn_key("answer_inst_1_1"), lme.opaque_turn_key("answer_inst_2_2")}
    assert lme.opaque_turn_key("answer_inst_2_2") == f"{lme.opaque_session_id('answer_inst_2')}_2"
    assert set(q.extra["gold_sessions"]) == {lme.opaque_session_id("answer_inst_1"), lme.opaque_session_id("answer_inst_2")}
    assert q.extra["question_id"] == "0c8e4f77" and q.topic == "0c8e4f77"
    assert q.extra["n_items"] == sum(len(s.turns) for s in sessions)
    assert q.extra["n_gold_items"] == sum(len(s.turns) for s in sessions if s.session_id in q.extra["gold_sessions"])
    assert q.time == inst.question_date and q.kind == "multi-session" and q.excluded is None
    assert q.question_id.startswith("q") and q.user_id.startswith("u") and "0c8e4f77" not in q.question_id
    # the same session has the same id in every instance
    other = lme.instance_episode({i.question_id: i for i in lme.load_instances(MINI)}["7e3b9d21"])
    tomato = lme.opaque_session_id("sharegpt_tomato_1")
    assert tomato in {s.session_id for s in sessions} & {e.session_id for e in other.events if isinstance(e, Session)}
    # session granularity: one item per session, evidence the gold sessions
    by_session = lme.instance_episode(inst, granularity="session")
    assert all(len(s.turns) == 1 and s.turns[0].turn_id == s.session_id for s in by_session.events[:-1])
    assert set(by_session.events[-1].evidence) == set(q.extra["gold_sessions"])


def test_abstention_episode_is_excluded_and_a_late_session_moves_the_question(tmp_path: Path) -> None:
    by_id = {i.question_id: i for i in lme.load_instances(MINI)}
    q = lme.instance_episode(by_id["d0c1a7e2_abs"], user_only=False).events[-1]
    assert q.excluded == "abstention" and q.evidence == () and q.extra["abstention"]
    data = _raw()[:1]
    data[0]["haystack_dates"][0] = "2023/06/02 (Fri) 09:00"
    (inst,) = lme.load_instances(_write(tmp_path, data))
    ep = lme.instance_episode(inst)
    # a session the file dates after its question is still ingested before the question, as officially
    assert ep.events[-1].time == inst.latest > inst.question_date
    assert ep.events[-1].extra["question_date"] == "2023/05/30 (Tue) 23:40"


class RecordingMemory(LexicalMemory):
    """A lexical store that keeps every id and question it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        self.seen += [user_id, *(x for t in turns for x in (t.turn_id, t.session_id, t.user_id))]
        super().ingest(turns, user_id=user_id, now=now)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        self.seen += [query, user_id]
        return super().retrieve(query, user_id=user_id, now=now, k=k)

    def feedback(self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime) -> None:
        self.seen += [question_id, user_id, *retrieved]


def _play(episodes: Sequence[Episode], system: RecordingMemory) -> int:
    """Play episodes through the engine against ``system``, feedback on; return the questions asked."""
    import simpy

    from memsim.sim.engine import EngineConfig, Harness, SystemUnderTest, start_processes
    from memsim.sim.recorder import Recorder
    from memsim.sim.scorers import build_scorer

    env = simpy.Environment()
    config = EngineConfig(
        start=min(ep.start for ep in episodes), k=5, ks=(5,), fetch_k=5, metric="recall_all@5",
        feedback_delay_s=60.0, feedback_from="evidence", maintenance_every_s=0.0,
    )
    harness = Harness(env=env, systems=[SystemUnderTest("rec", "rec", system)], recorder=Recorder(), config=config,
                      scorers=[build_scorer("evidence")])
    start_processes(env, harness, episodes)
    env.run()
    return harness.q_index


@pytest.mark.parametrize(
    ("scenario", "args"),
    [
        ("longmemeval", {"include_abstention": True, "user_only": False}),
        ("longmemeval", {"include_abstention": True, "granularity": "session"}),
        ("longmemeval_stream", {"include_abstention": True, "group": "shared"}),
        ("longmemeval_stream", {"include_abstention": True, "group": "instance"}),
    ],
)
def test_no_id_a_system_receives_reveals_gold(scenario: str, args: dict[str, Any]) -> None:
    from memsim.scenarios.registry import build_scenario

    stream = build_scenario(scenario, {"data": str(MINI), **args}).generate(np.random.default_rng(0))
    system = RecordingMemory()
    asked = _play(list(stream.episodes()), system)
    assert asked >= 6 and system.seen
    # the file names answer sessions answer_... and abstention questions ..._abs: neither may reach a system
    leaks = [x for x in system.seen if "answer_" in x or "_abs" in x]
    assert not leaks, leaks[:5]


# ---------------------------------------------------------------------------- scorers


def _question(evidence: Sequence[str] = (), **extra: Any) -> Question:
    return Question("q1", "u1", datetime(2023, 5, 30, tzinfo=timezone.utc), "?", "", "multi-session",
                    tuple(evidence), extra=extra)


def _got(*provenance: Sequence[str]) -> list[Retrieved]:
    at = datetime(2023, 5, 1, tzinfo=timezone.utc)
    return [Retrieved(f"m{i}", "text", 1.0, at, tuple(src)) for i, src in enumerate(provenance)]


def test_scorers_use_the_official_functions_and_leave_excluded_unscored() -> None:
    turn, session = lme.TurnScorer(), lme.SessionScorer()
    ks = (1, 3)
    assert turn.columns(ks) == ["turn_recall_any@1", "turn_recall_all@1", "turn_ndcg_any@1",
                                "turn_recall_any@3", "turn_recall_all@3", "turn_ndcg_any@3"]
    assert session.columns((5,)) == ["session_recall_any@5", "session_recall_all@5", "session_ndcg_any@5"]
    got = _got(["sA_1"], ["sB_1"], ["sA_3"], ["sC_1"])
    q = _question(["sB_1", "sC_1"], gold_sessions=("sB", "sC"), n_gold_items=2, n_items=4)
    t = turn.score(q, got, ks=ks)
    want = lme.score_ranking([m.source_turn_ids for m in got], {"sB_1", "sC_1"}, ks=ks)
    assert t == {f"turn_{name}": v for name, v in want.items()}
    s = session.score(q, got, ks=ks)
    want = lme.score_turn2session([("sA",), ("sB",), ("sA",), ("sC",)], {"sB", "sC"}, n_relevant=2, ks=ks)
    assert s == {f"session_{name}": v for name, v in want.items()}
    excluded = Question(**{**{f: getattr(q, f) for f in q.__slots__}, "excluded": "abstention"})
    assert all(math.isnan(v) for v in {**turn.score(excluded, got, ks=ks), **session.score(excluded, got, ks=ks)}.values())
    # a ranking of sessions is scored at session level only
    by_session = _question(["sB"], granularity="session", gold_sessions=("sB",))
    assert all(math.isnan(v) for v in turn.score(by_session, _got(["sB"]), ks=ks).values())
    assert session.score(by_session, _got(["sA"], ["sB"]), ks=ks)["session_recall_any@3"] == 1.0


def test_session_figures_a_truncated_list_cannot_decide_are_unscored() -> None:
    session = lme.SessionScorer()
    # five memories fetched of a store of 20: they cover sessions A and B only
    got = _got(["sA_1"], ["sA_2"], ["sB_1"], ["sA_3"], ["sB_2"])
    q = _question(["sB_1"], gold_sessions=("sB",), n_gold_items=2, n_items=20)
    s = session.score(q, got, ks=(1, 2, 5))
    assert s["session_recall_any@1"] == 0.0 and s["session_recall_any@2"] == 1.0
    # @5 needs five sessions: which memories come next decides it
    assert math.isnan(s["session_recall_any@5"]) and math.isnan(s["session_ndcg_any@5"])
    # the whole store came back (fewer than max(ks) memories): the ranking is complete
    whole = session.score(_question(["sB_1"], gold_sessions=("sB",), n_gold_items=2, n_items=20), got[:4], ks=(1, 5))
    assert whole["session_recall_any@5"] == 1.0


# ---------------------------------------------------------------------------- protocols through the engine


def _hash_resources() -> Any:
    from memsim.memory.embed import HashEmbedder
    from memsim.memory.registry import Resources

    return Resources(embedder_factory=lambda: HashEmbedder(dim=256))


def _spec(scenario_args: dict[str, Any], **settings: Any) -> Any:
    from memsim.analysis.pipeline import make_spec
    from memsim.memory.registry import SystemSpec

    base = {"k": 10, "ks": lme.RETRIEVAL_KS, "retrieve_k": 50, "scorers": ("lme_turn", "lme_session"),
            "metric": "turn_recall_all@10", "n_boot": 200}
    return make_spec("static", "longmemeval", {"data": str(MINI), **scenario_args}, [SystemSpec("naive")],
                     **{**base, **settings})


def test_retrieval_protocol_on_the_engine(tmp_path: Path) -> None:
    import polars as pl

    from memsim.analysis.pipeline import execute

    spec = _spec({})
    assert spec.scenario_meta["selection"] == {
        "instances": 6, "per_type": {t: 1 for t in lme.QUESTION_TYPES}, "abstention": 1,
        "abstention_included": False, "no_gold_user_turn": 1,
    }
    assert spec.scenario_meta["sha256"] and spec.scenario_meta["load_warnings"]["counts"] == {}
    outcome = execute(spec, out_dir=tmp_path / "run", resources=_hash_resources())
    rows = outcome.result.probes
    insts = [i for i in lme.load_instances(MINI) if not i.is_abstention]
    # one episode per instance (abstention left out), named by the file's question id
    assert rows["episode"].to_list() == [i.question_id for i in insts]
    assert rows["topic"].to_list() == [i.question_id for i in insts]
    # a fresh system per instance: the first session of each episode starts an empty store
    tl = outcome.result.timeline.filter(pl.col("event") == "session")
    firsts = tl.group_by("episode", maintain_order=True).first()
    assert firsts["items"].to_list() == firsts["turns"].to_list()
    for row, inst in zip(rows.iter_rows(named=True), insts):
        ranked = row["retrieved_sources"]
        n_user = sum(1 for s in inst.sessions for t in s.turns if t.role == "user")
        assert row["n_retrieved"] == n_user  # the whole store is ranked (fewer than 50 items)
        want = lme.score_ranking(ranked, {lme.opaque_turn_key(k) for k in lme.gold_turn_keys(inst)})
        for name, v in want.items():
            got = row[f"turn_{name}"]
            assert (math.isnan(v) and (got is None or math.isnan(got))) or got == pytest.approx(v), (inst.question_id, name)
    by_id = {r["episode"]: r for r in rows.iter_rows(named=True)}
    # the single-session-assistant question has no gold user turn: unscored, never zero
    assert math.isnan(by_id["a55157a1"]["turn_recall_any@5"]) and math.isnan(by_id["a55157a1"]["session_ndcg_any@50"])
    m = outcome.summary.metrics["systems"]["naive"]
    scored = [r["turn_ndcg_any@5"] for r in by_id.values() if not math.isnan(r["turn_ndcg_any@5"])]
    assert m["overall"]["scores"]["turn_ndcg_any@5"]["mean"] == pytest.approx(sum(scored) / len(scored))
    assert m["per_kind"]["knowledge-update"]["scores"]["turn_ndcg_any@5"]["mean"] == by_id["5a9c3f10"]["turn_ndcg_any@5"]
    assert m["per_kind"]["single-session-assistant"]["scores"]["turn_recall_any@1"]["mean"] is None
    assert outcome.summary.metrics["metric"] == "turn_recall_all@10"


def test_session_granularity_and_official_empty_gold(tmp_path: Path) -> None:
    from memsim.analysis.pipeline import execute

    spec = _spec({"granularity": "session", "empty_gold": "official"}, scorers=("lme_session",),
                 metric="session_recall_all@10")
    rows = {r["episode"]: r for r in execute(spec, out_dir=None, resources=_hash_resources()).result.probes.iter_rows(named=True)}
    by_id = {i.question_id: i for i in lme.load_instances(MINI)}
    for qid, row in rows.items():
        # one memory per session, each memory's provenance its session
        assert row["n_retrieved"] == len(by_id[qid].sessions)
        gold = {lme.opaque_session_id(s) for s in lme.gold_session_ids(by_id[qid])}
        want = lme.score_ranking(row["retrieved_sources"], gold, empty_gold="official")
        assert {n: row[f"session_{n}"] for n in want} == pytest.approx(want)
    # scored as the official script scores an empty gold list
    assert (rows["a55157a1"]["session_recall_any@5"], rows["a55157a1"]["session_recall_all@5"]) == (0.0, 1.0)


def test_selection_types_sample_limit() -> None:
    assert _spec({"types": ["knowledge-update", "multi-session"]}).scenario_meta["selection"]["per_type"] == {
        "multi-session": 1, "knowledge-update": 1}
    limited = _spec({"limit": 2}).scenario_meta["selection"]
    assert (limited["instances"], limited["abstention"]) == (1, 1)
    a = lme.select(MINI, sample=3, seed=1)
    assert a == lme.select(MINI, sample=3, seed=1) and len(a.indices) == 3
    assert lme.select(MINI, limit=2) == lme.Selection(None, 2)
    with pytest.raises(UserError, match=r"scenario.types: unknown question type\(s\) trivia; valid: single-session-user"):
        _spec({"types": ["trivia"]})


# ---------------------------------------------------------------------------- QA protocol


class FakeAnswers:
    """Test double of a reader + judge: answers with the gold when a retrieved memory states it."""

    score_columns = ["answer_llm_longmemeval"]

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls: list[str] = []
        self.fail_after = fail_after
        self.spent = 0.0

    def cost(self) -> dict[str, Any]:
        n = len(self.calls)
        return {"calls": 2 * n, "prompt_tokens": 120 * n, "completion_tokens": 7 * n, "cost_usd": self.spent}

    def answer_and_judge(
        self,
        question: str,
        question_date: datetime | str,
        memories: Sequence[Retrieved],
        gold: str,
        category: str,
        question_id: str,
    ) -> dict[str, Any]:
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise UserError("endpoint went away")
        self.calls.append(question)
        self.spent += 0.5
        found = any(gold.lower() in m.text.lower() for m in memories)
        verdict = math.nan if category == "single-session-preference" else float(found)  # a reply without a verdict
        return {"answer": gold if found else "I don't know", "answer_llm_longmemeval": verdict,
                "prompt_tokens": 100, "completion_tokens": 5}


def _qa_spec(**scenario_args: Any) -> Any:
    return _spec({"user_only": False, "include_abstention": True, **scenario_args}, k=3,
                 metric="answer_llm_longmemeval", answer={"reader": "cot", "judge": ["llm_longmemeval"]})


def test_qa_protocol_asks_every_instance_and_reports_task_averaged_and_abstention(tmp_path: Path) -> None:
    from memsim.analysis.pipeline import execute
    from memsim.analysis.summary import format_answer_accuracy

    fake = FakeAnswers()
    outcome = execute(_qa_spec(), out_dir=tmp_path / "qa", resources=_hash_resources(), answer=fake)
    insts = lme.load_instances(MINI)
    assert fake.calls == [i.question for i in insts]  # abstention instances are asked too
    rows = {r["episode"]: r for r in outcome.result.probes.iter_rows(named=True)}
    # QA ingests every turn, assistant turns included: the assistant's cacio e pepe is found
    assert rows["a55157a1"]["answer_llm_longmemeval"] == 1.0
    assert rows["d0c1a7e2_abs"]["excluded"] == "abstention" and math.isnan(rows["d0c1a7e2_abs"]["turn_recall_any@5"])
    assert all(r["n_retrieved"] == 50 or r["n_retrieved"] == sum(len(s.turns) for s in i.sessions)
               for r, i in zip(rows.values(), insts))
    verdicts = {qid: r["answer_llm_longmemeval"] for qid, r in rows.items()}
    m = outcome.summary.metrics["systems"]["naive"]
    judged = [v for v in verdicts.values() if not math.isnan(v)]
    assert m["overall"]["scores"]["answer_llm_longmemeval"]["mean"] == pytest.approx(sum(judged) / len(judged))
    type_means = []
    for t in lme.QUESTION_TYPES:
        vals = [verdicts[i.question_id] for i in insts if i.question_type == t and not math.isnan(verdicts[i.question_id])]
        if vals:
            type_means.append(sum(vals) / len(vals))
    text = format_answer_accuracy(outcome.summary.metrics, outcome.result.probes, "naive", column="answer_llm_longmemeval")
    assert f"overall {sum(judged) / len(judged):.3f} ({len(judged)} judged)" in text
    assert f"task-averaged {sum(type_means) / len(type_means):.3f} over {len(type_means)} kinds" in text
    abs_verdict = verdicts["d0c1a7e2_abs"]
    assert f"abstention {abs_verdict:.3f} (1 of 1 judged)" in text
    assert outcome.summary.metrics["llm"]["calls"] == 2 * len(insts)


def test_qa_resumes_without_repeating_finished_instances(tmp_path: Path) -> None:
    from memsim.analysis.pipeline import execute

    out = tmp_path / "qa"
    first = FakeAnswers(fail_after=3)
    with pytest.raises(UserError, match="endpoint went away"):
        execute(_qa_spec(), out_dir=out, resources=_hash_resources(), answer=first)
    assert len(first.calls) == 3 and not (out / "metrics.json").exists()
    second = FakeAnswers()
    execute(_qa_spec(), out_dir=out, resources=_hash_resources(), answer=second)
    questions = [i.question for i in lme.load_instances(MINI)]
    assert second.calls == questions[3:]  # the finished instances are not asked again
    whole = tmp_path / "whole"
    execute(_qa_spec(), out_dir=whole, resources=_hash_resources(), answer=FakeAnswers())
    resumed, fresh = json.loads((out / "metrics.json").read_text()), json.loads((whole / "metrics.json").read_text())
    resumed.pop("llm"), fresh.pop("llm")  # the meter counts this process's calls only
    assert resumed == fresh
    # a finished run resumed again asks nothing
    third = FakeAnswers()
    execute(_qa_spec(), out_dir=out, resources=_hash_resources(), answer=third)
    assert third.calls == []


# ---------------------------------------------------------------------------- command line


def test_cli_retrieval_prints_tables_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memsim.analysis.cli import main

    out = tmp_path / "run"
    argv = ["static", "longmemeval", "--data", str(MINI), "--system", "bm25", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "6 instances, 1 abstention left out, 1 without a gold user turn (unscored)" in text
    assert "turn_recall_all" in text and "session_ndcg_any" in text and "knowledge-update" in text
    assert "turn_recall_all@30" in text
    spec = json.loads((out / "spec.json").read_text())
    assert spec["kind"] == "static" and spec["metric"] == "turn_recall_all@30" and spec["retrieve_k"] == 50
    assert spec["scenario"]["args"]["user_only"] is True and spec["scorers"] == ["lme_turn", "lme_session"]
    before = (out / "metrics.json").read_text()
    assert main(argv) == 0  # the same command on a finished folder plays nothing and writes the same figures
    assert (out / "metrics.json").read_text() == before
    capsys.readouterr()
    assert main([*argv[:-3], "--granularity", "session", "--out", str(tmp_path / "s"), "--no-progress"]) == 0
    spec = json.loads((tmp_path / "s" / "spec.json").read_text())
    assert spec["scorers"] == ["lme_session"] and spec["metric"] == "session_recall_all@30"
    # another setting cannot resume into a folder
    assert main([*argv, "--limit", "2"]) == 2
    assert "holds a run of another spec" in capsys.readouterr().err


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memsim.analysis.cli import main

    assert main(["static", "longmemeval", "--data", str(tmp_path / "absent.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["static", "longmemeval", "--data", str(MINI), "--types", "trivia"]) == 2
    err = capsys.readouterr().err
    assert "unknown question type(s) trivia; valid: single-session-user" in err and err.count("\n") == 1
    assert main(["static", "longmemeval", "--data", str(MINI), "--system", "nosuch"]) == 2
    assert "unknown memory system 'nosuch'" in capsys.readouterr().err
    assert main(["static", "longmemeval", "--data", str(MINI), "--depth", "0"]) == 2
    assert "--depth must be a positive integer" in capsys.readouterr().err
    # evidence-scoring options mean nothing when answers are judged: an error, not silence
    assert main(["static", "longmemeval", "--data", str(MINI), "--reader", "short", "--empty-gold", "official",
                 "--out", str(tmp_path / "qa")]) == 2
    assert "--empty-gold applies to evidence scoring" in capsys.readouterr().err
    assert not (tmp_path / "qa").exists()


# ---------------------------------------------------------------------------- benchmark file, real parts


def test_generated_bench_file_follows_the_schema(tmp_path: Path) -> None:
    from memsim.analysis.bench_longmemeval import generate_file

    info = generate_file(tmp_path / "gen.json", size_gb=0.0004, sessions_per_instance=12, pool_sessions=40, seed=1)
    warnings = lme.LoadWarnings()
    insts = lme.load_instances(tmp_path / "gen.json", warnings=warnings)
    assert len(insts) == info["instances"] >= 2 and info["bytes"] >= 400_000
    assert warnings.total() == 0
    for inst in insts:
        assert len(inst.sessions) >= 13 and lme.gold_turn_keys(inst)
        assert all(s.date <= inst.question_date for s in inst.sessions)
    # pooled sessions recur across instances, as in the published files
    first = {s.session_id for s in insts[0].sessions}
    assert first & {s.session_id for s in insts[1].sessions}


def test_bench_runs_the_pipeline_on_a_generated_file(tmp_path: Path) -> None:
    from memsim.analysis.bench_longmemeval import _child, generate_file

    path = tmp_path / "gen.json"
    generate_file(path, size_gb=0.0004, sessions_per_instance=12, pool_sessions=40, seed=1)
    r = _child(str(path), "retrieval", "hash")
    assert r["instances"] == len(lme.load_instances(path)) and r["instances_per_s"] > 0 and r["peak_rss_mb"] > 0
    assert 0.0 <= r["turn_recall_any@5"] <= 1.0


@pytest.mark.slow
def test_cli_end_to_end_with_real_embedder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import polars as pl

    from memsim.analysis.cli import main

    out = tmp_path / "run"
    code = main(["static", "longmemeval", "--data", str(MINI), "--system", "naive", "--reader", "none",
                 "--out", str(out), "--no-progress"])
    assert code == 0
    assert "turn_recall_all@30" in capsys.readouterr().out
    rows = {r["episode"]: r for r in pl.read_parquet(out / "probes.parquet").to_dicts()}
    # MiniLM puts the stated degree first for "What degree did I graduate with?"
    assert rows["d0c1a7e2"]["turn_recall_all@1"] == 1.0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["systems"]["naive"]["overall"]["scores"]["turn_recall_any@50"]["mean"] == 1.0
