"""The ``longmemeval_stream`` scenario: shared and per-instance users, dedupe, timing, official equivalence."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from memsim.analysis.pipeline import execute, make_spec
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources, SystemSpec
from memsim.scenarios.base import ScenarioStream
from memsim.scenarios.registry import build_scenario
from memsim.scenarios.longmemeval_stream import SHARED_USER
from memsim.core.errors import UserError
from memsim.sim.events import Question, Session
from memsim.static_benchmarks.longmemeval import (
    RETRIEVAL_KS,
    gold_turn_keys,
    load_instances,
    opaque_id,
    opaque_session_id,
    opaque_turn_key,
)

MINI = Path(__file__).parent / "fixtures" / "longmemeval_s_mini.json"


def stream_of(seed: int = 0, **args) -> ScenarioStream:
    return build_scenario("longmemeval_stream", {"data": str(MINI), **args}).generate(np.random.default_rng(seed))


def questions(stream: ScenarioStream) -> list[Question]:
    return [e for e in stream.events if isinstance(e, Question)]


def asked(stream: ScenarioStream) -> dict[str, Question]:
    """Questions by the file's question id (systems see only an opaque one)."""
    return {q.extra["question_id"]: q for q in questions(stream)}


def official(keys) -> set[str]:
    """Official turn keys as systems see them (on opaque session ids)."""
    return {opaque_turn_key(k) for k in keys}


def sessions(stream: ScenarioStream) -> list[Session]:
    return [e for e in stream.events if isinstance(e, Session)]


def edited_copy(tmp_path: Path, edit) -> Path:
    data = json.loads(MINI.read_text())
    edit(data)
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(data))
    return out


def test_missing_or_unnamed_file_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSIM_LONGMEMEVAL", raising=False)
    with pytest.raises(UserError, match="scenario.data"):
        build_scenario("longmemeval_stream", {})
    with pytest.raises(UserError, match=str(tmp_path / "x.json")):
        build_scenario("longmemeval_stream", {"data": str(tmp_path / "x.json")})


@pytest.mark.parametrize(("args", "needle"), [({"group": "team"}, "group"), ({"types": ["chit-chat"]}, "types")])
def test_bad_args_name_the_key(args: dict, needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        build_scenario("longmemeval_stream", {"data": str(MINI), **args})


def test_shared_mode_ingests_each_session_once_for_one_user() -> None:
    stream = stream_of()
    instances = {i.question_id: i for i in load_instances(MINI)}
    ids = [s.session_id for s in sessions(stream)]
    assert len(ids) == len(set(ids))
    by_id = asked(stream)
    # Abstention and single-session-assistant (no gold user turn) are left out and counted.
    assert set(by_id) == {"d0c1a7e2", "5a9c3f10", "7e3b9d21", "0c8e4f77", "9b2d6e05"}
    assert stream.meta["excluded"]["abstention"] == 1 and stream.meta["excluded"]["no_gold_turns"] == 1
    # Every session of every kept instance is in the stream, once, under its opaque id.
    want = {opaque_session_id(s.session_id) for qid in by_id for s in instances[qid].sessions}
    assert set(ids) == want
    assert stream.meta["shared_sessions_reused"] == sum(len(instances[q].sessions) for q in by_id) - len(want)
    assert stream.users == [SHARED_USER]
    for qid, q in by_id.items():
        assert set(q.evidence) == official(gold_turn_keys(instances[qid]))
        assert q.time == instances[qid].question_date
        assert q.kind == instances[qid].question_type
        assert q.question_id == opaque_id("q", qid) and q.topic == qid


@pytest.mark.parametrize("group", ["shared", "instance"])
def test_evidence_is_ingested_before_its_question(group: str) -> None:
    stream = stream_of(group=group)
    at = {(s.user_id, t.turn_id): s.time for s in sessions(stream) for t in s.turns}
    for q in questions(stream):
        assert q.evidence
        for t in q.evidence:
            assert at[(q.user_id, t)] < q.time


def test_instance_mode_gives_each_instance_its_own_haystack() -> None:
    stream = stream_of(group="instance")
    instances = {i.question_id: i for i in load_instances(MINI)}
    owner: dict[str, str] = {}
    for s in sessions(stream):
        for t in s.turns:
            assert t.user_id == s.user_id and t.turn_id.startswith(f"{s.user_id}/")
            assert owner.setdefault(t.turn_id, s.user_id) == s.user_id
    for qid, q in asked(stream).items():
        inst = instances[qid]
        assert q.user_id == opaque_id("u", qid)
        mine = {s.session_id for s in sessions(stream) if s.user_id == q.user_id}
        assert mine == {f"{q.user_id}/{opaque_session_id(s.session_id)}" for s in inst.sessions}
        assert set(q.evidence) == {f"{q.user_id}/{k}" for k in official(gold_turn_keys(inst))}


def test_abstention_questions_are_unscored_when_included() -> None:
    stream = stream_of(include_abstention=True)
    abs_q = [q for qid, q in asked(stream).items() if qid.endswith("_abs")]
    assert len(abs_q) == 1 and abs_q[0].evidence == ()
    assert not any("_abs" in q.question_id for q in questions(stream))


def test_types_and_limit_select_instances() -> None:
    stream = stream_of(types=["knowledge-update", "temporal-reasoning"])
    assert {q.kind for q in questions(stream)} == {"knowledge-update", "temporal-reasoning"}
    assert len(questions(stream_of(limit_instances=2))) == 2


def test_evidence_dated_after_its_question_moves_the_question(tmp_path: Path) -> None:
    def late(data: list) -> None:
        inst = next(d for d in data if d["question_id"] == "9b2d6e05")
        i = inst["haystack_session_ids"].index("answer_pref_1")
        inst["haystack_dates"][i] = "2023/06/02 (Fri) 09:00"

    stream = stream_of(data=str(edited_copy(tmp_path, late)), group="instance")
    q = asked(stream)["9b2d6e05"]
    ev = next(s for s in sessions(stream) if s.session_id == f"{q.user_id}/{opaque_session_id('answer_pref_1')}")
    assert q.time > ev.time
    assert stream.meta["moved_after_evidence"] == 1


def test_shared_session_takes_its_earliest_date_and_conflicting_copies_are_counted(tmp_path: Path) -> None:
    def edit(data: list) -> None:
        # 5a9c3f10 lists the pasta session earlier than the others do.
        inst = next(d for d in data if d["question_id"] == "5a9c3f10")
        inst["haystack_dates"][inst["haystack_session_ids"].index("sharegpt_pasta_0")] = "2023/05/01 (Mon) 10:15"
        # 7e3b9d21's copy of the tomato session says something else.
        other = next(d for d in data if d["question_id"] == "7e3b9d21")
        j = other["haystack_session_ids"].index("sharegpt_tomato_1")
        other["haystack_sessions"][j][0]["content"] = "A different first message."

    stream = stream_of(data=str(edited_copy(tmp_path, edit)))
    pasta = next(s for s in sessions(stream) if s.session_id == opaque_session_id("sharegpt_pasta_0"))
    assert pasta.time.day == 1 and all(t.created_at == pasta.time for t in pasta.turns)
    assert stream.meta["session_date_conflicts"] >= 1
    assert stream.meta["session_content_conflicts"] == 1
    tomato = next(s for s in sessions(stream) if s.session_id == opaque_session_id("sharegpt_tomato_1"))
    assert tomato.turns[0].text != "A different first message."


def test_stream_is_the_same_for_any_seed() -> None:
    assert stream_of(0).events == stream_of(99).events


def test_instance_mode_naive_matches_the_static_protocol(tmp_path: Path) -> None:
    """Per-instance users through the engine score as fresh systems per instance do (static longmemeval)."""
    emb = HashEmbedder(64)
    k = 10
    stream_spec = make_spec(
        "longitudinal", "longmemeval_stream", {"data": str(MINI), "group": "instance"}, [SystemSpec("naive")],
        k=k, ks=(1, 5, 10), n_boot=200,
    )
    stream = execute(stream_spec, out_dir=tmp_path / "stream", resources=Resources(embedder_factory=lambda: emb))
    static_spec = make_spec(
        "static", "longmemeval", {"data": str(MINI)}, [SystemSpec("naive")],
        k=k, ks=RETRIEVAL_KS, retrieve_k=50, scorers=("lme_turn",), metric=f"turn_recall_all@{k}", n_boot=200,
    )
    static = execute(static_spec, out_dir=None, resources=Resources(embedder_factory=lambda: emb))
    expected = {r["episode"]: r for r in static.result.probes.iter_rows(named=True)
                if not math.isnan(r[f"turn_recall_all@{k}"])}
    rows = {r["topic"]: r for r in stream.result.probes.iter_rows(named=True)}
    assert set(rows) == set(expected)
    for qid, want in expected.items():
        for cut in (1, 5, 10):
            for m in ("recall_all", "recall_any"):
                assert rows[qid][f"{m}@{cut}"] == want[f"turn_{m}@{cut}"], (qid, m, cut)
    assert stream.summary.metrics["isolation_failures"] == 0


def test_shipped_config_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    from memsim.scenarios.config import CONFIG_DIR, load_config

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    cfg = load_config(CONFIG_DIR / "longmemeval_stream.toml")
    assert cfg.scenario["name"] == "longmemeval_stream"
