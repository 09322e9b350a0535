"""The ``locomo_stream`` scenario: timing policies, exclusions, re-asks, determinism, static equivalence."""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from memsim.analysis.pipeline import execute, make_spec
from memsim.memory.registry import Resources, SystemSpec
from memsim.scenarios.base import ScenarioStream
from memsim.scenarios.registry import build_scenario
from memsim.scenarios.locomo_stream import PARAPHRASES, paraphrase
from memsim.scenarios.config import CONFIG_DIR, load_config
from memsim.core.errors import UserError
from memsim.sim.events import Question, Session
from memsim.static_benchmarks.locomo import QUESTION_DELAY, load_locomo, locomo_episodes

REPO = Path(__file__).resolve().parents[1]
QUIRKS = REPO / "tests" / "fixtures" / "locomo_quirks.json"


def stream_of(seed: int = 0, **args) -> ScenarioStream:
    return build_scenario("locomo_stream", args).generate(np.random.default_rng(seed))


def questions(stream: ScenarioStream) -> list[Question]:
    return [e for e in stream.events if isinstance(e, Question)]


def session_time_of_turns(stream: ScenarioStream) -> dict[str, object]:
    return {t.turn_id: e.time for e in stream.events if isinstance(e, Session) for t in e.turns}


# --- small fixture: fast ------------------------------------------------------------------------


def test_missing_file_is_a_user_error_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(UserError, match=str(missing)):
        build_scenario("locomo_stream", {"data": str(missing)})


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"question_time": "soon"}, "question_time"),
        ({"reask_rate": 2}, "reask_rate"),
        ({"min_delay_hours": 50, "max_delay_hours": 48}, "min_delay_hours"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_args_name_the_key(args: dict, needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        build_scenario("locomo_stream", {"data": str(QUIRKS), **args})


def test_unknown_conversation_lists_the_valid_ones() -> None:
    with pytest.raises(UserError, match="conv-a, conv-b"):
        stream_of(data=str(QUIRKS), conversations=["conv-z"])


def test_sessions_and_turns_are_the_static_protocols() -> None:
    stream = stream_of(data=str(QUIRKS))
    static = locomo_episodes(load_locomo(QUIRKS))
    want = {s.session_id: (s.time, s.turns) for c in static for s in c.events if isinstance(s, Session)}
    got = {e.session_id: (e.time, e.turns) for e in stream.events if isinstance(e, Session)}
    assert got == want
    dates = {s.number: s.date_text for s in load_locomo(QUIRKS).conversations[0].sessions}
    first = next(e for e in stream.events if isinstance(e, Session) and e.session_id == "conv-a:S2")
    assert all(t.metadata["date_text"] == dates[2] for t in first.turns)
    assert all(t.user_id == "conv-a" for t in first.turns)


def test_adversarial_and_unusable_questions_are_excluded_and_counted() -> None:
    stream = stream_of(data=str(QUIRKS))
    ids = {q.question_id for q in questions(stream)}
    assert ids == {"conv-a:q0", "conv-a:q1", "conv-a:q2", "conv-a:q6", "conv-b:q0"}
    assert stream.meta["excluded"] == {"adversarial": 2, "no_usable_evidence": 2, "not_sampled": 0}
    with_adv = stream_of(data=str(QUIRKS), include_adversarial=True)
    adv = [q for q in questions(with_adv) if q.kind == "adversarial"]
    assert {q.question_id for q in adv} == {"conv-a:q3", "conv-b:q1"}
    assert with_adv.meta["excluded"]["adversarial"] == 0
    kinds = {q.question_id: q.kind for q in questions(stream)}
    assert kinds["conv-a:q1"] == "temporal" and kinds["conv-a:q2"] == "multi-hop"


def test_judges_get_the_file_category_code_and_the_trap_answer_is_not_gold() -> None:
    """The stream hands the LoCoMo F1 judge the code ("1".."5") as the static path does."""
    from helpers import replay

    from memsim.memory.embed import HashEmbedder
    from memsim.memory.naive import NaiveMemory
    from memsim.sim.answer.judges import locomo_f1

    stream = stream_of(data=str(QUIRKS), include_adversarial=True)
    seen: dict[str, object] = {}

    def answer(question, when, memories, gold, category, question_id):
        seen[question_id] = category
        reply = "That is not mentioned in the conversation." if category == "5" else str(gold)
        return {"answer": reply, "answer_f1_locomo": locomo_f1(reply, gold, category),
                "answer_trap": locomo_f1(str(gold), gold, category)}

    naive = NaiveMemory(resources=Resources(embedder_factory=lambda: HashEmbedder(64)))
    out = replay(stream, {"naive": naive}, k=5, answer=answer)
    assert seen["conv-a:q2"] == "1" and seen["conv-a:q1"] == "2"
    assert seen["conv-a:q3"] == "5" and seen["conv-b:q1"] == "5"
    rows = {r["question_id"]: r for r in out.probes.iter_rows(named=True)}
    # an abstention on an adversarial question is right; repeating the trap answer is wrong
    assert rows["conv-a:q3"]["answer_f1_locomo"] == 1.0 and rows["conv-a:q3"]["answer_trap"] == 0.0
    # the label would have meant plain F1, which scores a multi-hop answer differently
    assert locomo_f1("Rome and Paris, Oslo", "Paris, Rome", "1") != locomo_f1("Rome and Paris, Oslo", "Paris, Rome", "multi-hop")


@pytest.mark.parametrize("policy", ["after_evidence", "uniform"])
def test_questions_never_precede_their_evidence_on_the_fixture(policy: str) -> None:
    for seed in range(5):
        stream = stream_of(seed, data=str(QUIRKS), question_time=policy, reask_rate=0.5)
        at = session_time_of_turns(stream)
        for q in questions(stream):
            assert q.time > max(at[t] for t in q.evidence), q


def test_end_policy_asks_a_day_after_the_last_session() -> None:
    stream = stream_of(data=str(QUIRKS), question_time="end")
    last = {"conv-a": load_locomo(QUIRKS).conversations[0].last_time, "conv-b": load_locomo(QUIRKS).conversations[1].last_time}
    for q in questions(stream):
        assert q.time == last[q.user_id] + QUESTION_DELAY


def test_reasks_come_later_with_the_same_gold_and_a_faithful_text() -> None:
    stream = stream_of(3, data=str(QUIRKS), reask_rate=1.0, paraphrase_rate=0.5)
    qs = {q.question_id: q for q in questions(stream)}
    reasks = [q for q in qs.values() if q.reask_of is not None]
    assert len(reasks) == 5
    for r in reasks:
        orig = qs[r.reask_of]
        assert r.question_id == f"{orig.question_id}:r1"
        assert timedelta(days=1) <= r.time - orig.time <= timedelta(days=30)
        assert (r.gold, r.evidence, r.kind, r.topic) == (orig.gold, orig.evidence, orig.kind, orig.question_id)
        assert r.text == orig.text or r.text in {paraphrase(orig.text, t) for t in PARAPHRASES}


def test_paraphrase_lowers_only_question_words() -> None:
    assert paraphrase("When did Caroline move?", "Can you remind me, {lq}") == "Can you remind me, when did Caroline move?"
    assert paraphrase("Caroline's dog is called what?", "Can you remind me, {lq}").endswith("Caroline's dog is called what?")


# --- the real file ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(locomo_path: Path) -> Path:
    return locomo_path


def test_real_counts_and_determinism(real: Path) -> None:
    a = stream_of(7, data=str(real), reask_rate=0.2)
    b = stream_of(7, data=str(real), reask_rate=0.2)
    c = stream_of(8, data=str(real), reask_rate=0.2)
    assert a.events == b.events
    assert [q.time for q in questions(a)] != [q.time for q in questions(c)]
    firsts = [q for q in questions(a) if q.reask_of is None]
    dataset = load_locomo(real)
    answerable = sum(1 for q in dataset.questions if q.category != 5 and q.evidence)
    assert len(firsts) == answerable
    assert a.meta["excluded"]["adversarial"] == dataset.summary.questions_per_category[5]
    assert a.totals()["users"] == 10
    # Re-asks: about the asked share.
    share = (len(questions(a)) - len(firsts)) / len(firsts)
    assert 0.15 < share < 0.25


@pytest.mark.parametrize("policy", ["after_evidence", "uniform"])
def test_real_questions_never_precede_their_evidence(real: Path, policy: str) -> None:
    stream = stream_of(1, data=str(real), question_time=policy, reask_rate=0.3)
    at = session_time_of_turns(stream)
    sessions_by_user: dict[str, list] = {}
    for e in stream.events:
        if isinstance(e, Session):
            sessions_by_user.setdefault(e.user_id, []).append(e.time)
    for q in questions(stream):
        last_evidence = max(at[t] for t in q.evidence)
        assert q.time > last_evidence
        if policy == "after_evidence" and q.reask_of is None:
            later = [t for t in sessions_by_user[q.user_id] if t > last_evidence]
            assert q.time - last_evidence <= timedelta(hours=48)
            if later:
                assert q.time < min(later), "after_evidence asks before the next session"


def test_question_fraction_thins_the_stream(real: Path) -> None:
    full = questions(stream_of(2, data=str(real), limit_conversations=2))
    half = stream_of(2, data=str(real), limit_conversations=2, question_fraction=0.5)
    n = len(questions(half))
    assert 0.35 * len(full) < n < 0.65 * len(full)
    assert half.meta["excluded"]["not_sampled"] == len(full) - n
    assert {q.question_id for q in questions(half)} <= {q.question_id for q in full}


def test_shipped_config_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSIM_LOCOMO", str(QUIRKS))  # the config is checked, not the data
    cfg = load_config(CONFIG_DIR / "locomo_stream.toml")
    assert cfg.scenario["name"] == "locomo_stream"


@pytest.mark.slow
def test_end_policy_through_the_engine_reproduces_the_static_protocol(real: Path, minilm, tmp_path: Path) -> None:
    """The key correctness check: the naive control scores exactly as the static protocol."""
    k = 10
    resources = Resources(embedder_factory=lambda: minilm)
    args = {"data": str(real), "limit_conversations": 2, "question_time": "end"}
    spec = make_spec("longitudinal", "locomo_stream", args, [SystemSpec("naive")], k=k, n_boot=200)
    stream = execute(spec, out_dir=tmp_path / "stream", resources=resources)
    static_spec = make_spec(
        "static", "locomo", {"data": str(real), "limit_conversations": 2}, [SystemSpec("naive")],
        k=k, retrieve_k=50, scorers=("evidence",), control=None, n_boot=200,
    )
    static = execute(static_spec, out_dir=tmp_path / "static", resources=resources)
    expected = {r["question_id"]: r for r in static.result.probes.iter_rows(named=True) if r["excluded"] is None}

    rows = {r["question_id"]: r for r in stream.result.probes.iter_rows(named=True)}
    assert set(rows) == set(expected)
    compared = 0
    for qid, probe in expected.items():
        row = rows[qid]
        assert row["retrieved_ids"] == probe["retrieved_ids"][:k], qid
        for name in (f"{m}@{c}" for m in ("recall_all", "recall_any", "ndcg") for c in (1, 5, 10)):
            assert row[name] == probe[name] or (math.isnan(row[name]) and math.isnan(probe[name])), (qid, name)
            compared += 1
    assert compared > 0
    static_mean = static.summary.metrics["systems"]["naive"]["overall"]["scores"][f"recall_all@{k}"]["mean"]
    assert stream.summary.metrics["systems"]["naive"]["mean"] == pytest.approx(static_mean, abs=1e-12)
    assert stream.summary.metrics["isolation_failures"] == 0
    assert set(stream.summary.metrics["systems"]["naive"]["per_user"]) == {"conv-26", "conv-30"}
