"""The persona scenario: determinism, causality of evidence, real supersession, config errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memsim.scenarios.registry import build_scenario
from memsim.scenarios.persona import PersonaConfig, PersonaScenario
from memsim.scenarios.config import load_config
from memsim.core.errors import UserError
from memsim.sim.events import Deletion, Question, Session


def _stream(seed: int = 0, **args):
    return build_scenario("persona", {"users": 3, "months": 4, **args}).generate(np.random.default_rng(seed))


@pytest.fixture(scope="module")
def stream():
    return _stream(0, deletion_rate=0.5)


def _turns(stream):
    return {t.turn_id: t for e in stream.events if isinstance(e, Session) for t in e.turns}


def test_same_seed_same_stream_and_other_seed_differs():
    a, b, c = _stream(7), _stream(7), _stream(8)
    assert a.events == b.events
    assert a.events != c.events
    assert [e.text for e in a.events if isinstance(e, Question)] != [e.text for e in c.events if isinstance(e, Question)]


def test_events_are_time_ordered_and_totals_match(stream):
    times = [e.time for e in stream.events]
    assert times == sorted(times)
    totals = stream.totals()
    assert totals["users"] == 3
    assert totals["questions"] == sum(isinstance(e, Question) for e in stream.events)
    assert totals["questions"] > 50
    assert all(t.tzinfo is not None for t in times)


def test_every_question_evidence_precedes_it_and_belongs_to_its_user(stream):
    turns = _turns(stream)
    for q in (e for e in stream.events if isinstance(e, Question)):
        assert q.evidence, q
        for tid in q.evidence:
            assert turns[tid].created_at < q.time, (q.question_id, tid)
            assert turns[tid].user_id == q.user_id


def test_gold_value_is_stated_in_evidence_for_value_questions(stream):
    turns = _turns(stream)
    for q in (e for e in stream.events if isinstance(e, Question)):
        if q.kind in ("current", "preference", "assistant"):
            # the gold value appears in the (single) evidence turn's text
            assert q.gold in turns[q.evidence[-1]].text, q
        if q.kind == "count":
            assert q.gold == str(len(q.evidence))
        if q.kind == "previous":
            assert q.gold in turns[q.evidence[0]].text


def test_superseded_turns_really_were_superseded(stream):
    turns = _turns(stream)
    n = 0
    for q in (e for e in stream.events if isinstance(e, Question)):
        for tid in q.superseded:
            old, cur = turns[tid], turns[q.evidence[-1]]
            assert old.created_at <= cur.created_at and tid != cur.turn_id
            assert q.gold not in old.text  # the old turn states another value
            assert old.created_at < q.time
            n += 1
    assert n > 0, "the scenario should contain changed facts that are asked about"


def test_question_kinds_and_reasks_present(stream):
    qs = [e for e in stream.events if isinstance(e, Question)]
    kinds = {q.kind for q in qs}
    assert {"current", "previous", "count", "preference"} <= kinds
    ids = {q.question_id for q in qs}
    reasks = [q for q in qs if q.reask_of is not None]
    assert reasks and all(q.reask_of in ids for q in reasks)
    speakers = {t.speaker for t in _turns(stream).values()}
    assert speakers == {"user", "assistant"}


def test_no_question_asks_about_deleted_turns(stream):
    deleted: dict[str, list[tuple]] = {}
    dels = [e for e in stream.events if isinstance(e, Deletion)]
    assert dels, "deletion_rate=0.5 over 4 months should produce deletions"
    for d in dels:
        deleted.setdefault(d.user_id, []).append((d.time, set(d.turn_ids)))
    for q in (e for e in stream.events if isinstance(e, Question)):
        for when, ids in deleted.get(q.user_id, []):
            if when <= q.time:
                assert not ids.intersection(q.evidence), q


def test_topic_popularity_skew_concentrates_questions():
    def top_share(skew: float) -> float:
        s = _stream(3, topic_skew=skew, reask_rate=0.0, months=6)
        topics = [e.topic for e in s.events if isinstance(e, Question)]
        counts = np.unique(topics, return_counts=True)[1]
        return counts.max() / counts.sum()

    assert top_share(2.5) > top_share(0.0)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"months": 0}, "scenario.months"),
        ({"deletion_rate": -1}, "scenario.deletion_rate"),
        ({"colour": "red"}, "scenario.colour"),
        ({"slots": ["home_city", "shoe_size"]}, "shoe_size"),
    ],
)
def test_bad_scenario_args_name_the_key(args, needle):
    with pytest.raises(UserError, match=needle):
        PersonaScenario.from_args(args, source="x.toml")


def test_config_file_errors_name_file_and_key(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[scenario]\nname = "persona"\nmonths = 0\n')
    with pytest.raises(UserError, match=r"bad\.toml.*months"):
        load_config(bad)
    bad.write_text('[scenario]\nname = "persona"\n[run]\nspeed = 3\n')
    with pytest.raises(UserError, match=r"run\.speed"):
        load_config(bad)
    bad.write_text('[scenario]\nname = "nowhere"\n')
    with pytest.raises(UserError, match="unknown scenario 'nowhere'.*persona"):
        load_config(bad)
    bad.write_text("[scenario\n")
    with pytest.raises(UserError, match="not valid TOML"):
        load_config(bad)
    with pytest.raises(UserError, match="not found"):
        load_config(tmp_path / "missing.toml")


def _shipped_configs() -> list[Path]:
    from memsim.scenarios.config import CONFIG_DIR

    return sorted(CONFIG_DIR.glob("*.toml"))


@pytest.mark.parametrize("path", _shipped_configs(), ids=lambda p: p.name)
def test_shipped_configs_load(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memsim.core.files import tomllib

    if path.name.startswith("sweep_"):  # sweep specs (analysis.sweep), not run configs
        from memsim.analysis.sweep import load_sweep

        assert load_sweep(path).scenarios
        return
    scenario = tomllib.loads(path.read_text(encoding="utf-8"))["scenario"]
    if scenario["name"] in ("locomo", "locomo_stream") and not scenario.get("data"):
        # The config reads the real file from $MEMSIM_LOCOMO or ../shared: skip without it (fail under CI=true).
        from conftest import require_locomo

        monkeypatch.setenv("MEMSIM_LOCOMO", str(require_locomo()))
    if scenario["name"] == "longmemeval_stream" and not scenario.get("data"):
        # The config reads the S file from $MEMSIM_LONGMEMEVAL or the data folder; loading the config only needs a
        # file of the same schema: the real oracle file (skip without it, fail under CI=true).
        from lme_data import require_oracle

        monkeypatch.setenv("MEMSIM_LONGMEMEVAL", str(require_oracle()))
    cfg = load_config(path)
    assert cfg.scenario["name"] == scenario["name"]


def test_defaults_are_json_ready():
    import json

    json.dumps(PersonaScenario(PersonaConfig()).spec_args())
