"""The many-user LongMemEval stream on the real oracle file (issue 38, item 1).

``scenarios/configs/longmemeval_users_quick.toml`` is the quick size of the shipped
``longmemeval_users.toml``; both keep every published date (``calendar = "published"``). Checked here on
real data: the calendar and the dates written in the text, question times, re-asks, user isolation, and
a whole run of the quick config.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from lme_data import longmemeval_oracle_path  # noqa: F401 - a fixture
from memsim.scenarios.config import load_config
from memsim.scenarios.registry import build_scenario
from memsim.sim.events import Question, Session
from memsim.static_benchmarks import longmemeval as lme

CONFIGS = Path(__file__).resolve().parents[1] / "scenarios" / "configs"
_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|December")
_MONTH_DAY = re.compile(rf"\b(?:{_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?\b")


def _stream(path: Path, seed: int = 0, **args):
    base = {"data": str(path), "group": "users", "calendar": "published", "users": 12, "instances_per_user": 4,
            "reask_rate": 0.3}
    return build_scenario("longmemeval_stream", {**base, **args}).generate(np.random.default_rng(seed))


@pytest.fixture(scope="module")
def oracle(longmemeval_oracle_path: Path) -> dict[str, lme.Instance]:
    return {i.question_id: i for i in lme.load_instances(longmemeval_oracle_path)}


def test_the_published_calendar_keeps_every_date_so_the_text_agrees(longmemeval_oracle_path: Path,
                                                                    oracle: dict[str, lme.Instance]) -> None:
    stream = _stream(longmemeval_oracle_path, users=50, instances_per_user=8)
    assert stream.meta["users"] == 50 and stream.meta["calendar"] == "published"
    sessions = [e for e in stream.events if isinstance(e, Session)]
    questions = [e for e in stream.events if isinstance(e, Question) and e.reask_of is None]
    assert len(questions) == 400
    dates = {}  # the file's (date, date text) of every session of every instance a user holds
    for q in questions:
        for s in oracle[q.topic].sessions:
            dates[(q.user_id, lme.opaque_session_id(s.session_id))] = (s.date, s.date_text)
    dated_in_text = 0
    for session in sessions:
        user, _, sid = session.session_id.partition("/")
        when, text = dates[(user, sid.partition("~")[0])]
        assert session.time == when  # unshifted: the session is where the file dates it
        for turn in session.turns:
            assert turn.created_at == when and turn.metadata["date_text"] == text
            dated_in_text += bool(_MONTH_DAY.search(turn.text))
    assert dated_in_text > 50  # dates written in the text ("March 3rd"), true of this calendar as published
    moved = 0
    for q in questions:
        inst = oracle[q.topic]
        assert q.extra["question_date"] == inst.question_date_text
        if q.time != inst.question_date:
            # The file dates an evidence session after its question: asked a minute after that session.
            assert q.time > inst.question_date
            assert q.time - timedelta(minutes=1) in {s.date for s in inst.sessions if s.is_answer}
            moved += 1
    assert moved == stream.meta["moved_after_evidence"] < len(questions) // 4


def test_the_shifted_calendar_moves_the_sessions_but_not_the_text(longmemeval_oracle_path: Path,
                                                                  oracle: dict[str, lme.Instance]) -> None:
    stream = _stream(longmemeval_oracle_path, calendar="shifted")
    moved = [e for e in stream.events if isinstance(e, Session)
             and e.time != e.turns[0].created_at - timedelta(0)]
    assert not moved  # turns carry their session's (shifted) time
    questions = [e for e in stream.events if isinstance(e, Question) and e.reask_of is None]
    shifted = sum(q.time.date() != oracle[q.topic].latest.date() for q in questions)
    assert shifted > 0  # so the published calendar is what keeps "March 3rd" true


def test_question_times_reasks_and_isolation_on_real_data(longmemeval_oracle_path: Path) -> None:
    stream = _stream(longmemeval_oracle_path)
    sessions = [e for e in stream.events if isinstance(e, Session)]
    questions = [e for e in stream.events if isinstance(e, Question)]
    turns = {t.turn_id: t for s in sessions for t in s.turns}
    firsts = {q.question_id: q for q in questions if q.reask_of is None}
    assert len(firsts) == 48 and Counter(q.user_id for q in firsts.values()) == {u: 4 for u in stream.users}
    reasks = [q for q in questions if q.reask_of is not None]
    assert stream.meta["reasks"] == len(reasks) > 0
    for r in reasks:
        first = firsts[r.reask_of]
        assert timedelta(days=1) <= r.time - first.time <= timedelta(days=14)
        assert (r.user_id, r.gold, r.evidence, r.topic) == (first.user_id, first.gold, first.evidence, first.topic)
    for q in questions:
        assert q.evidence
        for ev in q.evidence:
            turn = turns[ev]
            # Evidence is the user's own, said before the question.
            assert turn.user_id == q.user_id and turn.created_at < q.time
    # Isolation: every session and turn belongs to the user its id names, and no two users share a turn id.
    for s in sessions:
        assert s.session_id.startswith(f"{s.user_id}/")
        assert all(t.user_id == s.user_id and t.turn_id.startswith(f"{s.user_id}/") for t in s.turns)
    assert len(turns) == sum(len(s.turns) for s in sessions)
    # The same seed gives the same stream; another seed other re-asks.
    assert _stream(longmemeval_oracle_path).events == stream.events
    assert _stream(longmemeval_oracle_path, seed=1).events != stream.events


@pytest.mark.slow
def test_the_quick_config_runs_on_the_oracle_file(longmemeval_oracle_path: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from memsim.analysis.pipeline import execute, spec_from_config
    from memsim.memory.embed import HashEmbedder
    from memsim.memory.registry import Resources, parse_system

    # The config names the oracle file by its dataset name: found in the data folder or ../shared.
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_ORACLE", str(longmemeval_oracle_path))
    config = load_config(CONFIGS / "longmemeval_users_quick.toml")
    spec = spec_from_config(config, systems=(parse_system("naive"), parse_system("neuroplastic")))
    resources = Resources(rng=np.random.default_rng(0), embedder_factory=lambda: HashEmbedder(256))
    outcome = execute(spec, out_dir=tmp_path / "run", resources=resources)
    rows = outcome.result.probes
    assert rows["user_id"].n_unique() == 12
    m = outcome.summary.metrics
    assert m["isolation_failures"] == 0
    assert set(m["systems"]) >= {"naive", "neuroplastic"}
    assert m["systems"]["naive"]["questions"] == rows.filter(rows["system"] == "naive").height > 48


def test_the_shipped_config_makes_52_users(longmemeval_oracle_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Made for the S file; the oracle file has the same 500 questions, so it deals the same users.
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL", str(longmemeval_oracle_path))
    config = load_config(CONFIGS / "longmemeval_users.toml")
    args = {k: v for k, v in config.scenario.items() if k != "name"}
    assert args["group"] == "users" and args["calendar"] == "published"
    stream = build_scenario("longmemeval_stream", args).generate(np.random.default_rng(0))
    assert stream.meta["users"] == len(stream.users) == 52 >= 50
    firsts = [e for e in stream.events if isinstance(e, Question) and e.reask_of is None]
    assert Counter(q.user_id for q in firsts) == {u: 8 for u in stream.users}
