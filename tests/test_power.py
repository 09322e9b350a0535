"""Power by simulation, minimum detectable effect, and A/A calibration of the DiD interval."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memsim.analysis.power import (
    PowerPoint,
    aa_coverage,
    calibrate_p_end,
    mde_from_interval,
    minimum_detectable_effect,
    power_curve,
)
from memsim.analysis.pipeline import execute, make_spec
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources, SystemSpec
from memsim.sim.core.errors import UserError

METRIC = "recall_all@10"
"""The headline column of those runs (k = 10)."""


@pytest.fixture(scope="module")
def naive_runs(tmp_path_factory: pytest.TempPathFactory) -> list:
    """Naive alone on six seeds of a small persona scenario (probe rows only).

    Six, not three: the mean measured effect over three seeds of three users depended on the draw
    (0.166 and 0.210 for an injected 0.15 under two stream layouts); six average that out.
    """
    out = []
    for seed in range(6):
        spec = make_spec("longitudinal", "persona", {"users": 3, "months": 3}, (SystemSpec("naive"),), seed=seed, n_boot=200)
        assert spec.metric == METRIC
        outcome = execute(spec, out_dir=tmp_path_factory.mktemp(f"pw{seed}"), embedder_factory=lambda: HashEmbedder(256))
        out.append(outcome.result.probes)
    return out


def test_mde_from_interval() -> None:
    assert mde_from_interval(-0.1, 0.1) == pytest.approx(2.8016 * 0.1 / 1.96, rel=1e-3)
    assert math.isnan(mde_from_interval(math.nan, 0.1))


def test_minimum_detectable_effect_interpolates() -> None:
    pts = [PowerPoint(0.0, 0.05, 10, 0.0), PowerPoint(0.02, 0.6, 10, 0.02), PowerPoint(0.04, 1.0, 10, 0.04)]
    assert minimum_detectable_effect(pts) == pytest.approx(0.02 + 0.2 / 0.4 * 0.02)
    assert minimum_detectable_effect(pts[:2]) is None


def test_calibrated_injection_reads_as_its_size(naive_runs) -> None:
    """Injected effects are measured at about their size on average, and bigger ones are found more often."""
    pts = power_curve(naive_runs, system="naive", control="naive", effects=(0.0, 0.03, 0.15), k=10, span_days=90,
                      metric=METRIC, rng=np.random.default_rng(0), n_boot=300)
    assert pts[0].power == 0.0 and pts[0].mean_did == 0.0
    assert pts[2].seeds == 6 and pts[2].mean_did == pytest.approx(0.15, abs=0.06)
    assert pts[2].power >= pts[1].power
    assert calibrate_p_end(naive_runs[0].filter(naive_runs[0]["system"] == "naive"), 5.0, k=10, span_days=90,
                           metric=METRIC) is None


def test_aa_interval_covers_zero_about_95_percent(naive_runs) -> None:
    """Two exchangeable static arms: the interval must cover 0 in about 95% of 200 replicates.

    With 200 replicates a true 95% gives 0.92..0.98 (3 standard errors) and a
    true 80% would give at most 0.89, so the check tells the two apart.
    """
    cov, n = aa_coverage(naive_runs, system="naive", k=10, metric=METRIC, replicates=200, rng=np.random.default_rng(5),
                         n_boot=400)
    assert n == 200
    assert 0.92 <= cov <= 0.99, cov


def test_missing_metric_column_is_a_user_error(naive_runs) -> None:
    """Rows without the named metric (e.g. a run scored on another cut-off) are refused, naming the column."""
    with pytest.raises(UserError, match="'recall_all@7'"):
        power_curve(naive_runs, system="naive", control="naive", effects=(0.05,), k=7, span_days=90,
                    metric="recall_all@7", rng=np.random.default_rng(0), n_boot=100)


@pytest.fixture(scope="module")
def learner_runs(tmp_path_factory: pytest.TempPathFactory) -> list:
    """control-learner (and its twin) on two seeds of a 30-user persona scenario (user-level intervals)."""
    out = []
    for seed in range(2):
        spec = make_spec("longitudinal", "persona", {"users": 30, "months": 2}, (SystemSpec("control-learner"),),
                         seed=seed, n_boot=200)
        outcome = execute(spec, out_dir=None,
                          resources=Resources(rng=np.random.default_rng(seed), embedder_factory=lambda: HashEmbedder(256)))
        out.append(outcome.result.probes)
    return out


def test_gain_power_uses_the_system_under_test_as_base(learner_runs) -> None:
    """The effect goes into the system's own rows; the learner's real gain over its twin is not counted."""
    from memsim.analysis.power import gain_power_curve

    pts = gain_power_curve(learner_runs, system="control-learner", effects=(0.0, 0.1), k=10, span_days=60,
                           metric=METRIC, rng=np.random.default_rng(0), n_boot=300)
    assert pts[0].mean_did == 0.0 and pts[0].power == 0.0
    assert pts[1].seeds == 2 and pts[1].mean_did == pytest.approx(0.1, abs=0.04)
    assert pts[1].power == 1.0
    with pytest.raises(UserError, match="no rows of 'naive'"):
        gain_power_curve(learner_runs, system="naive", effects=(0.05,), k=10, span_days=60, metric=METRIC,
                         rng=np.random.default_rng(0))
