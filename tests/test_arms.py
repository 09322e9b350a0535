"""The arms of a learning system: a dose-matched placebo, constant-bit arms, the told column, passes and resume."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from memsim.analysis.pipeline import execute, make_spec
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources, SystemSpec
from memsim.sim.engine import EngineConfig, placebo_doses, week_of
from tests.test_pipeline import _kill_after_parts

LEARNER = "control-learner"
ARMS = ("", "~twin", "~placebo", "~false", "~true")


def _hash() -> Resources:
    return Resources(embedder_factory=lambda: HashEmbedder(64))


def _spec(**kw):
    return make_spec("longitudinal", "persona", {"users": 4, "months": 2}, [SystemSpec("naive"), SystemSpec(LEARNER)],
                     seed=3, n_boot=100, **kw)


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("arms")
    return out, execute(_spec(), out_dir=out, resources=_hash())


def _dose(rows: pl.DataFrame, label: str, start) -> pl.DataFrame:
    """Per user and week: calls (a bit told) and True bits of one arm."""
    mine = rows.filter(pl.col("system") == label).with_columns(
        pl.col("time").map_elements(lambda t: week_of(t, start), return_dtype=pl.Int64).alias("week"))
    return (mine.group_by("user_id", "week")
            .agg(pl.col("told").is_not_null().sum().alias("calls"), pl.col("told").fill_null(False).sum().alias("true"))
            .sort("user_id", "week"))


def test_the_placebo_gets_its_systems_calls_and_true_bits_per_user_and_week(played) -> None:
    out, outcome = played
    rows = outcome.result.probes
    info = json.loads((out / "run.json").read_text())
    start = datetime.fromisoformat(info["start"])  # weeks are counted from the run's start, which run.json names
    system, placebo = _dose(rows, LEARNER, start), _dose(rows, f"{LEARNER}~placebo", start)
    assert system.height >= 8 and system["calls"].sum() > 50
    assert system.equals(placebo)
    # Both kinds of bit occur, and the placebo's are not its system's in the same order (a permutation, not a copy).
    assert 0 < system["true"].sum() < system["calls"].sum()
    key = ["user_id", "question_id"]
    pair = (rows.filter(pl.col("system") == LEARNER).select(*key, pl.col("told").alias("s"))
            .join(rows.filter(pl.col("system") == f"{LEARNER}~placebo").select(*key, pl.col("told").alias("p")), on=key))
    assert pair.filter(pl.col("s") != pl.col("p")).height > 0
    # The placebo's bit does not follow its own answer: it is told True on misses and False on hits.
    mine = rows.filter(pl.col("system") == f"{LEARNER}~placebo")
    hit = mine["recall_all@10"] == 1.0
    assert mine.filter(hit & (pl.col("told") == False)).height > 0  # noqa: E712
    assert mine.filter(~hit & (pl.col("told") == True)).height > 0  # noqa: E712
    assert info["placebo_beyond_dose"] == {}


def test_the_constant_arms_are_told_one_bit_on_the_systems_questions_and_the_twin_none(played) -> None:
    out, outcome = played
    rows = outcome.result.probes
    told = {arm: rows.filter(pl.col("system") == LEARNER + arm)["told"] for arm in ARMS}
    assert told["~false"].drop_nulls().unique().to_list() == [False]
    assert told["~true"].drop_nulls().unique().to_list() == [True]
    assert told["~twin"].null_count() == told["~twin"].len()
    # The same questions get a call in every told arm (the unscored ones get none).
    calls = {arm: told[arm].is_not_null().to_list() for arm in ("", "~false", "~true", "~placebo")}
    assert len({tuple(v) for v in calls.values()}) == 1 and sum(calls[""]) > 0
    # A system is told its channel's verdict (here the oracle bit: the headline metric is 1), scored questions only.
    for label in ("naive", LEARNER):
        mine = rows.filter((pl.col("system") == label) & pl.col("recall_all@10").is_not_nan())
        assert mine["told"].to_list() == (mine["recall_all@10"] == 1.0).to_list()
    arms = json.loads((out / "run.json").read_text())["arms"]
    assert {label: a["arm"] for label, a in arms.items() if a["system"] == LEARNER} == {
        LEARNER: "system", f"{LEARNER}~twin": "twin", f"{LEARNER}~placebo": "placebo",
        f"{LEARNER}~false": "always_false", f"{LEARNER}~true": "always_true"}


def test_the_same_seed_gives_identical_rows(played) -> None:
    _, outcome = played
    again = execute(_spec(), out_dir=None, resources=_hash())
    cols = [c for c in outcome.result.probes.columns if not c.endswith("_ms")]
    assert again.result.probes.select(cols).equals(outcome.result.probes.select(cols))


def test_constant_arms_and_placebo_can_be_turned_off() -> None:
    outcome = execute(_spec(constant_arms=False, placebo=False), out_dir=None, resources=_hash())
    assert set(outcome.result.info["arms"]) == {"naive", LEARNER, f"{LEARNER}~twin"}


def test_rows_come_in_pass_then_arm_order_and_a_resumed_placebo_unit_gives_identical_rows(played, tmp_path: Path) -> None:
    """Killed once the first pass's units are committed, the rerun plays only the placebo and ends the same."""
    whole, outcome = played
    spec = _spec()
    units = outcome.result.info["units"]["count"]
    placebos = sum(1 for s in set(outcome.result.probes["system"].to_list()) if s.endswith("~placebo"))
    assert placebos == 1 and units > 2
    out = tmp_path / "killed"
    _kill_after_parts(spec.to_json(), out, parts=units - placebos)  # every first-pass unit, before the placebo's
    assert not (out / "parts" / "a1-0000.json").exists()
    resumed = execute(spec, out_dir=out, resources=_hash())
    assert resumed.result.info["units"]["played"] == placebos
    assert (out / "metrics.json").read_bytes() == (whole / "metrics.json").read_bytes()
    cols = [c for c in outcome.result.probes.columns if not c.endswith("_ms")]
    assert resumed.result.probes.select(cols).equals(outcome.result.probes.select(cols))
    keys = [p["key"] for p in resumed.result.info["parts"]]
    assert keys == sorted(keys) and keys[0] == "a0-0000" and keys[-1] == "a1-0000"
    labels = outcome.result.probes["system"].to_list()
    assert labels.index(f"{LEARNER}~placebo") > max(i for i, s in enumerate(labels) if s != f"{LEARNER}~placebo")


def test_doses_are_permuted_within_a_user_and_week_by_the_runs_seed() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows = [{"system": "s", "user_id": u, "time": t0 + timedelta(days=d, hours=i), "told": bool(i % 3 == 0),
             "recall_all@10": 1.0, "error": None}
            for u in ("a", "b") for d in (0, 8) for i in range(12)]
    config = EngineConfig(start=t0, seed=0)
    doses = placebo_doses(rows, {"s"}, config)
    assert set(doses) == {("s", u, w) for u in ("a", "b") for w in (0, 1)}
    for (_, user, week), got in doses.items():
        mine = [(r["told"], None) for r in rows if r["user_id"] == user and week_of(r["time"], t0) == week]
        assert sorted(got, key=str) == sorted(mine, key=str)
    assert any(got != [(r["told"], None) for r in rows if r["user_id"] == u and week_of(r["time"], t0) == w]
               for (_, u, w), got in doses.items())
    assert placebo_doses(rows, {"s"}, config) == doses  # the same seed, the same permutation
    assert placebo_doses(rows, {"s"}, EngineConfig(start=t0, seed=1)) != doses
    # An unscored row is no decision: it is left out of the dose.
    unscored = [{**rows[0], "recall_all@10": float("nan")}, *rows[1:]]
    assert sum(len(v) for v in placebo_doses(unscored, {"s"}, config).values()) == len(rows) - 1


@pytest.mark.parametrize("channel", ["implicit:0.3", "noisy:0.3"])
def test_the_placebo_is_dose_matched_under_the_implicit_and_noisy_channels(channel: str) -> None:
    """Under implicit the dose is the system's reactions (thanks, complaints, re-asks, silence), permuted."""
    from memsim.scenarios.registry import build_scenario
    from tests.helpers import replay
    from tests.test_feedback import Spy

    stream = build_scenario("persona", {"users": 3, "months": 1}).generate(np.random.default_rng(1))
    system, placebo = Spy(), Spy()
    rows = replay(stream, {"s": system, "s~placebo": placebo}, k=2, feedback_from=channel,
                  modes={"s~placebo": "shuffled"}).probes
    counts = {}
    for label, spy in (("s", system), ("s~placebo", placebo)):
        mine = rows.filter(pl.col("system") == label).with_columns(
            pl.col("time").map_elements(lambda t: week_of(t, stream.start), return_dtype=pl.Int64).alias("week"))
        counts[label] = (mine.group_by("user_id", "week").agg(
            pl.col("told").is_not_null().sum().alias("calls"), pl.col("told").fill_null(False).sum().alias("true"))
            .sort("user_id", "week"))
        # The told column is what the system's feedback() got, call for call.
        assert sorted(c for _, c in spy.bits) == sorted(mine["told"].drop_nulls().to_list())
    assert counts["s"].equals(counts["s~placebo"]) and counts["s"]["calls"].sum() > 10
    assert 0 < counts["s"]["true"].sum() < counts["s"]["calls"].sum()
