"""Design-based power and MDE of the learning contrasts; power of the DiD vs the control; A/A calibration."""

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
from memsim.analysis.load import read_run
from memsim.analysis.pipeline import execute, make_spec
from memsim.analysis.power import contrast_power
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import SystemSpec, parse_system
from memsim.core.errors import UserError

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
def learner_run(tmp_path_factory: pytest.TempPathFactory):
    """neuroplastic and a neuroplastic that ignores feedback, each with its four arms, 30 users (user-level units)."""
    systems = (SystemSpec("neuroplastic"), parse_system("neuroplastic:ltp=false,associations=false"))
    spec = make_spec("longitudinal", "persona", {"users": 30, "months": 2}, systems, seed=0, n_boot=200)
    assert spec.placebo  # played by default
    out = tmp_path_factory.mktemp("learner")
    outcome = execute(spec, out_dir=out, embedder_factory=lambda: HashEmbedder(256))
    return out, outcome


IGNORER = "neuroplastic[associations=false,ltp=false]"


@pytest.mark.slow
def test_power_at_zero_varies_as_the_run_does(learner_run) -> None:
    """Effect 0 rejects in 2-10% of replicates (not 0: the synthetic null is redrawn), and power rises with the effect."""
    _, outcome = learner_run
    probes = outcome.result.probes
    for system, reference in (("neuroplastic", "neuroplastic~placebo"), ("neuroplastic~placebo", "neuroplastic~twin"),
                              (IGNORER, f"{IGNORER}~twin")):
        cp = contrast_power(probes, metric=METRIC, system=system, reference=reference, seed=0, effects=(0.0, 0.05, 0.2))
        assert cp.units == 30
        assert 0.02 <= cp.power[0] <= 0.10, (system, cp.power)
        assert cp.power[0] < cp.power[1] <= cp.power[2] and cp.power[2] >= 0.8


def test_power_mde_is_the_runs_printed_mde(learner_run) -> None:
    """``contrast_power``'s MDE equals the design-based MDE in metrics.json, for every contrast and both halves."""
    out, _ = learner_run
    run = read_run(out)
    systems = run.metrics["systems"]
    checked = 0
    for owner in ("neuroplastic", IGNORER):
        for key, c in systems[owner]["contrasts"].items():
            for half, field in ((0, "first"), (1, "second")):
                # The headline's reference is chosen per half; the others have one reference.
                reference = c.get(f"{field}_reference", c["reference"])
                cp = contrast_power(run.probes, metric=METRIC, system=c["system"], reference=reference,
                                    seed=run.spec.seed, effects=(0.0,), half=half, unit=run.metrics["inference_unit"]["unit"])
                assert (cp.mde, cp.mde_gain, cp.mde_loss) == (c[f"{field}_mde"], c[f"{field}_mde_gain"],
                                                              c[f"{field}_mde_loss"]), (owner, key, half)
                checked += 1
    assert checked == 24  # six contrasts (the headline and five pairs of arms), two halves, two systems
    entry = systems["neuroplastic"]
    assert entry["gain_mde"] == entry["contrasts"]["effect_of_use"]["second_mde"]


def test_a_learner_that_ignores_feedback_gets_the_designs_mde(learner_run) -> None:
    """Identical to its twin and placebo, it still gets an MDE > 0, of the order of neuroplastic's on the same run."""
    out, _ = learner_run
    systems = read_run(out).metrics["systems"]
    ignorer, learner = systems[IGNORER]["contrasts"], systems["neuroplastic"]["contrasts"]
    for key in ("learning_from_feedback", "system_vs_placebo", "effect_of_feedback_calls", "effect_of_use",
                "system_vs_always_false", "system_vs_always_true"):
        assert ignorer[key]["second"] == 0.0 and ignorer[key]["second_p"] == 1.0  # nothing happened
        mde, ref = ignorer[key]["second_mde"], learner[key]["second_mde"]
        assert mde is not None and mde > 0.005, (key, mde)
        assert 0.5 <= mde / ref <= 2.0, (key, mde, ref)


def test_power_cli_on_a_run_folder(learner_run, capsys) -> None:
    """``memsim power RUN_DIR`` prints the curve and the MDE the run printed."""
    from memsim.analysis.cli import main

    out, _ = learner_run
    assert main(["power", str(out), "--system", "neuroplastic"]) == 0
    text = capsys.readouterr().out
    mde = read_run(out).metrics["systems"]["neuroplastic"]["contrasts"]["learning_from_feedback"]["second_mde"]
    assert f"minimum detectable effect at 80% power: {100 * mde:.1f} points (metrics.json: {100 * mde:.1f})" in text
    assert main(["power", str(out), "--system", "naive"]) == 2  # a one-line error, exit 2
    assert "--system 'naive' has no twin in the run" in capsys.readouterr().err
