"""LongMemEval loader, official retrieval metrics, retrieval and QA protocols."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory.base import MemoryStats, Retrieved, Turn, render_turn
from sim.errors import UserError
from static_benchmarks import longmemeval as lme

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


# ---------------------------------------------------------------------------- retrieval protocol


def test_retrieval_protocol_with_lexical_system() -> None:
    made: list[LexicalMemory] = []

    def make() -> LexicalMemory:
        made.append(LexicalMemory())
        return made[-1]

    run = lme.run_retrieval(lme.iter_instances(MINI), make, progress=False)
    insts = [i for i in lme.load_instances(MINI) if not i.is_abstention]
    assert run.abstention_skipped == 1
    assert [r["question_id"] for r in run.rows] == [i.question_id for i in insts]
    assert len(made) == len(insts)  # a fresh system per instance
    for system, inst in zip(made, insts):
        # only user turns go in, session by session, in date order, each at its session's date
        assert all(t.speaker == "user" for t in system.turns)
        assert [c[1] for c in system.ingest_calls] == sorted(c[1] for c in system.ingest_calls)
        assert len(system.turns) == sum(1 for s in inst.sessions for t in s.turns if t.role == "user")
    rows = {r["question_id"]: r for r in run.rows}
    # "degree ... graduate" shares words with the answer turn only
    assert rows["d0c1a7e2"]["first_gold_rank"] == 1
    assert rows["d0c1a7e2"]["turn.recall_all@1"] == 1.0
    assert rows["d0c1a7e2"]["session.recall_any@1"] == 1.0
    # evidence only in an assistant turn: unscored at both levels
    assert math.isnan(rows["a55157a1"]["turn.recall_any@50"])
    assert math.isnan(rows["a55157a1"]["session.ndcg_any@5"])
    # the ranking covers the whole store, so @50 sees every gold turn
    for r in run.rows:
        if r["gold_turns"]:
            assert r["turn.recall_all@50"] == 1.0 and r["session.recall_all@50"] == 1.0
        assert r["retrieved"] == r["items"]


def test_unique_texts_count_shared_sessions_once() -> None:
    run = lme.run_retrieval(lme.iter_instances(MINI), LexicalMemory, progress=False)
    texts = [
        render_turn(t)
        for inst in lme.load_instances(MINI)
        if not inst.is_abstention
        for turns in lme.memory_turns(inst)
        for t in turns
    ]
    assert run.texts_ingested == len(texts)
    assert run.unique_texts == len(set(texts)) < len(texts)


def test_session_granularity_scores_sessions_only() -> None:
    run = lme.run_retrieval(lme.iter_instances(MINI), LexicalMemory, granularity="session", progress=False)
    rows = {r["question_id"]: r for r in run.rows}
    assert not any(c.startswith("turn.") for c in rows["d0c1a7e2"])
    assert rows["d0c1a7e2"]["session.recall_any@1"] == 1.0
    assert rows["5a9c3f10"]["items"] == 4


def test_summary_means_per_type_and_overall() -> None:
    run = lme.run_retrieval(lme.iter_instances(MINI), LexicalMemory, progress=False)
    frame = lme.retrieval_frame(run, system="lexical")
    metrics = lme.summarise_retrieval(frame)
    col = "turn.ndcg_any@5"
    scored = [r[col] for r in run.rows if not math.isnan(r[col])]
    assert metrics["overall"]["turn"]["scored"] == len(scored) == 5
    assert metrics["overall"]["turn"]["scores"]["ndcg_any@5"] == pytest.approx(sum(scored) / len(scored))
    ku = [r[col] for r in run.rows if r["question_type"] == "knowledge-update"]
    assert metrics["per_type"]["knowledge-update"]["turn"]["scores"]["ndcg_any@5"] == pytest.approx(ku[0])
    # a type with nothing scored reports null, never zero
    assert metrics["per_type"]["single-session-assistant"]["turn"]["scores"]["recall_any@1"] is None
    table = lme.format_retrieval_table(metrics)
    assert "turn level" in table and "session level" in table and "nDCG@50" in table


def test_naive_with_hash_embedder_is_deterministic() -> None:
    from memory.embed import HashEmbedder
    from memory.registry import Resources, build_memory

    def once() -> lme.RetrievalRun:
        resources = Resources(embedder_factory=lambda: HashEmbedder(dim=256))
        return lme.run_retrieval(
            lme.iter_instances(MINI), lambda: build_memory("naive", resources=resources), progress=False
        )

    a, b = once(), once()
    assert [r["retrieved_sources"] for r in a.rows] == [r["retrieved_sources"] for r in b.rows]
    for r in a.rows:
        for name, v in r.items():
            if "@" in name and not math.isnan(v):
                assert 0.0 <= v <= 1.0


# ---------------------------------------------------------------------------- QA protocol


class FakeAnswers:
    """Test double of a reader + judge: answers with the gold when a retrieved memory states it."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls: list[str] = []
        self.fail_after = fail_after
        self.dates: list[datetime | str] = []
        self.spent = 0.0

    def cost(self) -> dict[str, Any]:
        # cumulative, like sim.answer.Meter.summary(): the protocol stores per-instance differences
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
        self.calls.append(question_id)
        self.dates.append(question_date)
        self.spent += 0.5
        found = any(gold.lower() in m.text.lower() for m in memories)
        if question_id.endswith("_abs"):
            verdict = 1.0
        elif category == "single-session-preference":
            verdict = math.nan  # a judge reply without a verdict
        else:
            verdict = float(found)
        return {"answer": gold if found else "I don't know", "answer_llm_longmemeval": verdict,
                "reader_prompt_tokens": 100, "reader_completion_tokens": 5, "cost_usd": 0.25}


def test_qa_protocol_end_to_end(tmp_path: Path) -> None:
    made: list[LexicalMemory] = []

    def make() -> LexicalMemory:
        made.append(LexicalMemory())
        return made[-1]

    fake = FakeAnswers()
    run = lme.run_qa(lme.iter_instances(MINI), make, fake, run_dir=tmp_path, k=3, progress=False)
    insts = lme.load_instances(MINI)
    assert fake.calls == [i.question_id for i in insts]  # abstention instances are asked too
    assert fake.dates == [i.question_date_text for i in insts]
    # QA ingests every turn, assistant turns included
    assert any(t.speaker == "assistant" for t in made[0].turns)
    assert len(made[0].turns) == sum(len(s.turns) for s in insts[0].sessions)
    rows = {r["question_id"]: r for r in run.rows}
    assert all(len(r["retrieved_ids"]) <= 3 for r in run.rows)
    # the assistant's cacio e pepe turn is evidence the QA retrieval can find
    assert rows["a55157a1"]["evidence_any@3"] == 1.0
    assert rows["a55157a1"]["answer_llm_longmemeval"] == 1.0
    assert rows["d0c1a7e2_abs"]["evidence_any@3"] is None  # abstention: no evidence to find
    metrics = lme.summarise_qa(run.rows)
    verdicts = {qid: r["answer_llm_longmemeval"] for qid, r in rows.items()}
    judged = [v for v in verdicts.values() if v is not None]
    assert metrics["overall"]["n"] == 7 and metrics["overall"]["judged"] == 6
    assert metrics["overall"]["accuracy"] == pytest.approx(sum(judged) / len(judged))
    type_means = []
    for t in lme.QUESTION_TYPES:
        vals = [verdicts[i.question_id] for i in insts if i.question_type == t and verdicts[i.question_id] is not None]
        if vals:
            type_means.append(sum(vals) / len(vals))
            assert metrics["per_type"][t]["accuracy"] == pytest.approx(type_means[-1])
    assert metrics["task_averaged_accuracy"] == pytest.approx(sum(type_means) / len(type_means))
    assert metrics["per_type"]["single-session-preference"]["accuracy"] is None
    assert metrics["abstention"] == {"n": 1, "judged": 1, "accuracy": 1.0}
    assert metrics["totals"] == {
        "reader_prompt_tokens": 700, "reader_completion_tokens": 35, "cost_usd": pytest.approx(1.75),
        "llm_calls": 14, "llm_prompt_tokens": 840, "llm_completion_tokens": 49, "llm_cost_usd": pytest.approx(3.5),
    }
    table = lme.format_qa_table(metrics)
    assert "task-averaged" in table and "abstention" in table and "cost_usd 1.7500" in table


def test_qa_resumes_without_repeating_finished_instances(tmp_path: Path) -> None:
    first = FakeAnswers(fail_after=3)
    with pytest.raises(UserError, match="endpoint went away"):
        lme.run_qa(lme.iter_instances(MINI), LexicalMemory, first, run_dir=tmp_path, k=5, progress=False)
    saved, dropped = lme.read_qa_rows(tmp_path / lme.QA_ROWS)
    assert [r["question_id"] for r in saved] == first.calls and not dropped
    # a crash in the middle of writing the next row leaves half a line
    with (tmp_path / lme.QA_ROWS).open("a") as f:
        f.write('{"question_id": "7e3b9d21", "answ')
    second = FakeAnswers()
    run = lme.run_qa(lme.iter_instances(MINI), LexicalMemory, second, run_dir=tmp_path, k=5, progress=False)
    ids = [i.question_id for i in lme.load_instances(MINI)]
    assert second.calls == ids[3:]
    assert run.resumed == 3 and run.dropped_partial_line
    assert sorted(r["question_id"] for r in run.rows) == sorted(ids)
    # spending survives the resume: each row carries its own
    assert lme.summarise_qa(run.rows)["totals"]["llm_cost_usd"] == pytest.approx(0.5 * len(ids))
    lines = (tmp_path / lme.QA_ROWS).read_text().splitlines()
    assert len(lines) == len(ids) == len({json.loads(x)["question_id"] for x in lines})
    # a finished run resumed again asks nothing
    third = FakeAnswers()
    lme.run_qa(lme.iter_instances(MINI), LexicalMemory, third, run_dir=tmp_path, k=5, progress=False)
    assert third.calls == []


def test_qa_rows_file_with_a_bad_complete_line(tmp_path: Path) -> None:
    (tmp_path / lme.QA_ROWS).write_text('{"question_id": "a"}\nnot json\n')
    with pytest.raises(UserError, match=r"qa_rows.jsonl: line 2: not JSON"):
        lme.read_qa_rows(tmp_path / lme.QA_ROWS)


# ---------------------------------------------------------------------------- command line


def _args(*extra: str) -> Any:
    from analysis.cli import build_parser

    return build_parser().parse_args(["static", "longmemeval", *extra])


def _hash_resources() -> Any:
    from memory.embed import HashEmbedder
    from memory.registry import Resources

    return Resources(embedder_factory=lambda: HashEmbedder(dim=256))


def test_cli_retrieval_writes_run_and_prints_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import polars as pl

    from static_benchmarks import longmemeval_cli

    out = tmp_path / "run"
    args = _args("--data", str(MINI), "--system", "naive", "--reader", "none", "--out", str(out), "--no-progress")
    assert longmemeval_cli.main(args, resources=_hash_resources()) == 0
    text = capsys.readouterr().out
    assert "turn level" in text and "session level" in text and "1 abstention skipped" in text
    assert re.search(r"texts: 31 ingested, 16 unique; embedder hash-bow-256", text)
    frame = pl.read_parquet(out / "probes.parquet")
    metrics = json.loads((out / "metrics.json").read_text())
    spec = json.loads((out / "spec.json").read_text())
    assert frame.height == 6 and spec["granularity"] == "turn" and spec["system"]["name"] == "naive"
    # the tables can be recomputed from the parquet file alone
    again = lme.summarise_retrieval(frame)
    assert again["overall"] == metrics["overall"]
    assert metrics["texts"] == {"ingested": 31, "unique": 16}
    with pytest.raises(UserError, match="already holds a run"):
        longmemeval_cli.main(args, resources=_hash_resources())


def test_cli_selection_types_sample_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from static_benchmarks import longmemeval_cli

    args = _args("--data", str(MINI), "--types", "knowledge-update,multi-session", "--out", str(tmp_path / "a"), "--no-progress")
    longmemeval_cli.main(args, resources=_hash_resources())
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert sorted(metrics["per_type"]) == ["knowledge-update", "multi-session"]
    args = _args("--data", str(MINI), "--limit", "2", "--out", str(tmp_path / "b"), "--no-progress")
    longmemeval_cli.main(args, resources=_hash_resources())
    metrics = json.loads((tmp_path / "b" / "metrics.json").read_text())
    assert metrics["instances"] == 2 and metrics["abstention_skipped"] == 1
    sel = longmemeval_cli.select(MINI, types=None, sample=3, seed=1, limit=None)
    assert sel.indices == longmemeval_cli.select(MINI, types=None, sample=3, seed=1, limit=None).indices
    assert sel.total == 3


def _scripted_answers() -> Any:
    from sim.answer import AnswerSetup
    from sim.answer import make_judge
    from sim.answer import Meter, MeteredLLM, ScriptedLLM
    from sim.answer import Reader

    meter = Meter()
    reader_llm = ScriptedLLM("The memories say so.\nFINAL ANSWER: Business Administration")

    def judge_reply(messages: Sequence[dict[str, str]]) -> str:
        prompt = " ".join(m["content"] for m in messages)
        return "yes" if prompt.count("Business Administration") >= 2 else "no"

    judge_llm = ScriptedLLM(judge_reply)
    reader = Reader(MeteredLLM(reader_llm, meter, role="reader"), "cot")
    judges = [make_judge("llm_longmemeval", MeteredLLM(judge_llm, meter, role="judge")), make_judge("contains")]
    return AnswerSetup(reader, judges, meter), reader_llm


def test_cli_qa_with_reader_and_rubric_judge_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from static_benchmarks import longmemeval_cli

    out = tmp_path / "qa"
    base = ("--data", str(MINI), "--system", "naive", "--reader", "cot", "--judge", "llm_longmemeval",
            "--out", str(out), "--no-progress")
    answers, reader_llm = _scripted_answers()
    assert longmemeval_cli.main(_args(*base, "--limit", "4"), resources=_hash_resources(), answers=answers) == 0
    assert len(reader_llm.calls) == 4
    # the reader is told the question date
    assert "2023/05/30 (Tue) 23:40" in " ".join(m["content"] for m in reader_llm.calls[0]["messages"])
    # a different setting cannot resume into this folder
    with pytest.raises(UserError, match="resuming needs the same settings, but selection differs"):
        longmemeval_cli.main(_args(*base), resources=_hash_resources(), answers=_scripted_answers()[0])
    capsys.readouterr()
    # the same settings resume: nothing is asked again
    answers, reader_llm = _scripted_answers()
    longmemeval_cli.main(_args(*base, "--limit", "4"), resources=_hash_resources(), answers=answers)
    assert reader_llm.calls == []
    text = capsys.readouterr().out
    assert "4 instances (4 resumed)" in text and "task-averaged" in text
    metrics = json.loads((out / "metrics.json").read_text())
    # the scripted judge says yes where the gold names the degree: d0c1a7e2 and its abstention twin
    assert metrics["per_type"]["single-session-user"]["accuracy"] == 1.0
    assert metrics["abstention"] == {"n": 1, "judged": 1, "accuracy": 1.0}
    assert metrics["overall"]["accuracy"] == pytest.approx(2 / 4)
    assert metrics["task_averaged_accuracy"] == pytest.approx((1.0 + 0.0 + 0.0) / 3)
    assert metrics["totals"]["llm_calls"] == 8  # a reader and a judge call per instance


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from analysis.cli import main

    assert main(["static", "longmemeval", "--data", str(tmp_path / "absent.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["static", "longmemeval", "--data", str(MINI), "--types", "trivia"]) == 2
    err = capsys.readouterr().err
    assert "unknown question type(s) trivia; valid: single-session-user" in err and err.count("\n") == 1
    assert main(["static", "longmemeval", "--data", str(MINI), "--system", "nosuch"]) == 2
    assert "unknown memory system 'nosuch'" in capsys.readouterr().err


# ---------------------------------------------------------------------------- benchmark file, real parts


def test_generated_bench_file_follows_the_schema(tmp_path: Path) -> None:
    from static_benchmarks.bench_longmemeval import generate_file

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


@pytest.mark.slow
def test_cli_end_to_end_with_real_embedder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from analysis.cli import main

    out = tmp_path / "run"
    code = main(["static", "longmemeval", "--data", str(MINI), "--system", "naive", "--reader", "none",
                 "--out", str(out), "--no-progress"])
    assert code == 0
    text = capsys.readouterr().out
    assert "turn level" in text and "embedder all-MiniLM-L6-v2" in text
    metrics = json.loads((out / "metrics.json").read_text())
    # MiniLM puts the stated degree first for "What degree did I graduate with?"
    frame_rows = {r["question_id"]: r for r in __import__("polars").read_parquet(out / "probes.parquet").to_dicts()}
    assert frame_rows["d0c1a7e2"]["first_gold_rank"] == 1
    assert metrics["overall"]["turn"]["scores"]["recall_any@50"] == 1.0
    assert metrics["embedder"]["unique_texts"] <= metrics["texts"]["unique"] + 6  # texts + 6 questions
