"""``longmemeval_stream`` with ``group = "users"``: many users made of the published instances.

The fixture is written here in the published schema (``longmemeval_s``
fields, dates as ``2023/05/30 (Tue) 23:40``, ``has_answer`` on turns): ten
instances, each with its own answer session and fillers drawn from one
shared pool, as the S file draws them from ShareGPT and UltraChat.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from memsim.analysis.profile import profile
from memsim.scenarios.registry import build_scenario
from memsim.core.errors import UserError
from memsim.sim.events import Question, Session

FILLERS = [
    [{"role": "user", "content": f"Filler question number {i} about cooking rice?"},
     {"role": "assistant", "content": f"Filler answer {i}: rinse it first."}]
    for i in range(6)
]
_FMT = "%Y/%m/%d (%a) %H:%M"


def _instance(i: int) -> dict:
    asked = datetime(2023, 3 + i % 4, 10 + i, 20, 0, tzinfo=timezone.utc)
    answer = [{"role": "user", "content": f"My cat number {i} is called Pixel{i}.", "has_answer": True},
              {"role": "assistant", "content": "What a lovely name.", "has_answer": False}]
    fill = [i % 6, (i + 1) % 6]
    dates = [asked - timedelta(days=9, hours=3), asked - timedelta(days=5), asked - timedelta(days=2, hours=1)]
    return {
        "question_id": f"q{i:02d}", "question_type": "single-session-user",
        "question": f"What is the name of cat number {i}?", "answer": f"Pixel{i}",
        "question_date": asked.strftime(_FMT),
        "haystack_session_ids": [f"sharegpt_fill_{fill[0]}", f"answer_cat_{i}", f"ultrachat_fill_{fill[1]}"],
        "haystack_dates": [d.strftime(_FMT) for d in dates],
        "haystack_sessions": [FILLERS[fill[0]], answer, FILLERS[fill[1]]],
        "answer_session_ids": [f"answer_cat_{i}"],
    }


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "longmemeval_s_grouping.json"
    path.write_text(json.dumps([_instance(i) for i in range(10)]), encoding="utf-8")
    return path


def _stream(data: Path, seed: int = 0, **args):
    scen = build_scenario("longmemeval_stream", {"data": str(data), "group": "users", **args})
    return scen.generate(np.random.default_rng(seed))


def test_users_of_several_instances_on_one_calendar(data: Path) -> None:
    stream = _stream(data, instances_per_user=3, spacing_days=7.0)
    assert stream.meta["users"] == 3 and stream.meta["excluded"]["ungrouped"] == 1
    questions = [e for e in stream.events if isinstance(e, Question)]
    sessions = [e for e in stream.events if isinstance(e, Session)]
    turns = {t.turn_id: t for s in sessions for t in s.turns}
    assert len(stream.users) == 3
    by_user: dict[str, list[Question]] = {}
    for q in questions:
        by_user.setdefault(q.user_id, []).append(q)
    assert sorted(len(v) for v in by_user.values()) == [3, 3, 3]
    # Dealt round robin in file order: user 0 has instances 0, 3, 6.
    assert [q.topic for q in by_user[questions[0].user_id]] in (["q00", "q03", "q06"], ["q01", "q04", "q07"],
                                                                ["q02", "q05", "q08"])
    for qs in by_user.values():
        gaps = [(b.time - a.time) for a, b in zip(qs, qs[1:])]
        assert all(timedelta(days=6) <= g <= timedelta(days=8) for g in gaps)  # whole-day shifts of a 7-day spacing
        for q in qs:
            (ev,) = q.evidence
            t = turns[ev]
            assert t.user_id == q.user_id and t.text.startswith("My cat number") and q.gold in t.text
            assert t.created_at < q.time
            # The haystack keeps its shape: its answer session 5 days before the question, as written.
            assert q.time - t.created_at == timedelta(days=5)
            assert q.extra["question_date"] == q.time.strftime(_FMT)
    for t in turns.values():
        assert t.metadata["date_text"] == t.created_at.strftime(_FMT)
        assert t.turn_id.startswith(t.user_id + "/") and t.speaker == "user"  # user turns only, per-user ids
    # A filler that two of a user's instances list is ingested once for that user.
    per_user = [[s.session_id for s in sessions if s.user_id == u] for u in stream.users]
    assert all(len(ids) == len(set(ids)) for ids in per_user)
    assert stream.meta["shared_sessions_reused"] > 0
    assert sum(len(ids) for ids in per_user) == 9 * 3 - stream.meta["shared_sessions_reused"]


def test_reasks_days_later_verbatim_or_reworded(data: Path) -> None:
    stream = _stream(data, instances_per_user=2, reask_rate=1.0, paraphrase_rate=0.0, reask_min_days=2, reask_max_days=3)
    questions = {q.question_id: q for q in stream.events if isinstance(q, Question)}
    reasks = [q for q in questions.values() if q.reask_of]
    assert len(reasks) == stream.meta["reasks"] == 10  # five users of two questions, each asked again
    for r in reasks:
        first = questions[r.reask_of]
        assert r.text == first.text and (r.gold, r.evidence, r.user_id) == (first.gold, first.evidence, first.user_id)
        assert timedelta(days=2) <= r.time - first.time <= timedelta(days=3)
    worded = _stream(data, instances_per_user=2, reask_rate=1.0, paraphrase_rate=1.0)
    assert all(q.text != worded_first.text for q in worded.events if isinstance(q, Question) and q.reask_of
               for worded_first in [next(f for f in worded.events if isinstance(f, Question) and f.question_id == q.reask_of)])
    # Same seed, same stream; the re-asks are what the seed draws.
    assert _stream(data, 3, reask_rate=0.5).events == _stream(data, 3, reask_rate=0.5).events
    assert _stream(data, instances_per_user=2).events == _stream(data, 9, instances_per_user=2).events


def test_users_cap_and_bad_sizes(data: Path) -> None:
    assert _stream(data, users=2, instances_per_user=3).meta["excluded"]["ungrouped"] == 4
    with pytest.raises(UserError, match="scenario.users = 4: .* 10 usable instances, enough for 3 users"):
        _stream(data, users=4, instances_per_user=3)
    with pytest.raises(UserError, match="instances_per_user = 11"):
        _stream(data, instances_per_user=11)
    with pytest.raises(UserError, match="reask_rate need group = \"users\""):
        build_scenario("longmemeval_stream", {"data": str(data), "reask_rate": 0.2})


def test_profile_counts_users_and_questions(data: Path, hash_embedder) -> None:
    from memsim.memory.naive import NaiveMemory
    from memsim.memory.resources import Resources

    stream = _stream(data, instances_per_user=3)
    figures = profile(stream, k=5, system=lambda: NaiveMemory(resources=Resources(), embedder=hash_embedder))
    assert figures["users"] == 3 and figures["scored_questions"] == 9
    assert figures["evidence_per_question"] == {"1": 9} and figures["share_changed_fact"] == 0.0
    # Store at question time: the user's turns so far (3 instances x 3 sessions x 1 user turn, fillers shared).
    assert 1 <= figures["store_at_question"]["p10"] <= figures["store_at_question"]["p90"] <= 9
