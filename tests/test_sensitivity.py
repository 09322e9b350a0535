"""Sensitivity grid: seed pooling, the one-knob-at-a-time points, the table and the plot."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from memsim.analysis.sensitivity import GridPoint, Knob, format_table, grid_frame, plot_grid, pool_seeds, sensitivity_grid
from memsim.analysis.stats import diff_in_diff
from memsim.memory.embed import HashEmbedder
from memsim.scenarios.config import config_from_mapping
from memsim.core.errors import UserError

METRIC = "recall_all@10"
"""The headline column of the hand-made rows."""


def _probes(n: int, gain: float) -> pl.DataFrame:
    """Two systems on ``n`` questions; ``sys`` gains ``gain`` on ``naive`` in the second half only."""
    q = np.arange(n)
    second = q >= n / 2
    base = (q % 3 == 0).astype(float)
    sys = np.where(second & (q % 3 == 1), 1.0 if gain else 0.0, base)
    rows = []
    for name, x in (("naive", base), ("sys", sys)):
        rows.append(pl.DataFrame({
            "system": [name] * n, "user_id": ["u01"] * n, "question_id": [f"q{i}" for i in q],
            "thread_id": [f"q{i}" for i in q], "q_index": q, METRIC: x,
        }))
    return pl.concat(rows)


def test_pool_seeds_keeps_seeds_apart_and_splits_each_in_its_middle() -> None:
    a, b = _probes(40, 1.0), _probes(100, 1.0)
    pooled = pool_seeds([a, b])
    assert pooled.height == a.height + b.height
    assert pooled["question_id"].n_unique() == 140  # same ids in two seeds stay two questions
    assert pooled.filter(pl.col("question_id").str.starts_with("s1:"))["q_index"].max() < 1_000_000
    rng = np.random.default_rng(0)
    whole = diff_in_diff(pooled, metric=METRIC, system="sys", control="naive", rng=rng, n_boot=200)
    # Each seed gains a third of its second half; pooled positions keep that exactly.
    assert whole.did == pytest.approx(1 / 3, abs=0.02)
    assert whole.ci[0] > 0
    flat = diff_in_diff(pool_seeds([_probes(40, 0.0), _probes(100, 0.0)]), metric=METRIC, system="sys",
                        control="naive", rng=rng, n_boot=200)
    assert flat.did == 0.0


def test_verdict_table_and_plot(tmp_path: Path) -> None:
    pts = [
        GridPoint("reask_rate", 0.0, False, 3, 300, -0.05, -0.09, -0.01, (-0.04, -0.06, -0.05), METRIC),
        GridPoint("reask_rate", 0.3, True, 3, 300, 0.01, -0.03, 0.05, (0.0, 0.02, 0.01), METRIC),
        GridPoint("change_rate", 2.0, False, 3, 300, 0.06, 0.02, 0.1, (0.05, 0.07, 0.06), METRIC),
    ]
    assert [p.verdict for p in pts] == ["hurts", "no effect", "helps"]
    table = format_table(pts)
    assert "0.3*" in table and "+6.0   [+2.0, +10.0]" in table and table.count("\n") == 5  # header, rule, 3 rows, legend
    assert f"DiD in points of {METRIC};" in table
    assert grid_frame(pts)["verdict"].to_list() == ["hurts", "no effect", "helps"]
    out = plot_grid(pts, tmp_path / "fig" / "s.png")
    assert out.stat().st_size > 5000 and out.read_bytes()[:4] == b"\x89PNG"


def _config(**scenario: object):
    return config_from_mapping({"scenario": {"name": "persona", "users": 2, "months": 1.5, **scenario}, "run": {"seed": 3}})


def test_unknown_knob_is_a_user_error() -> None:
    with pytest.raises(UserError, match="not a scenario setting.*valid:.*reask_rate"):
        sensitivity_grid(_config(), knobs=(Knob("reask", "scenario", (0.1,), "x"),), seeds=1)
    with pytest.raises(UserError, match="unknown table"):
        sensitivity_grid(_config(), knobs=(Knob("k", "engine", (1,), "x"),), seeds=1)
    with pytest.raises(UserError, match="is the control"):
        sensitivity_grid(_config(), system="naive", seeds=1)


@pytest.mark.slow
def test_small_grid_runs_each_point_and_is_deterministic() -> None:
    """Two knobs, two seeds: the base point is shared, every point pools both seeds, same seed same numbers."""
    knobs = (Knob("reask_rate", "scenario", (0.0,), "re-ask"), Knob("feedback_delay_hours", "run", (24.0,), "delay"))
    lines: list[str] = []
    kw = dict(system="control-static", knobs=knobs, seeds=2, embedder_factory=lambda: HashEmbedder(128), n_boot=200)
    pts = sensitivity_grid(_config(), progress=lines.append, **kw)
    assert [(p.knob, p.value, p.is_base) for p in pts] == [
        ("reask_rate", 0.0, False), ("reask_rate", 0.3, True),
        ("feedback_delay_hours", 1.0, True), ("feedback_delay_hours", 24.0, False),
    ]
    assert len(lines) == 3 * 2  # base simulated once for both knobs
    for p in pts:
        # control-static is naive under another name: exactly zero everywhere.
        assert p.seeds == 2 and p.questions > 20 and p.did == 0.0 and p.lo == 0.0 and p.hi == 0.0
        assert p.metric == METRIC
        assert not any(math.isnan(d) for d in p.seed_dids)
    again = sensitivity_grid(_config(), **kw)
    assert [(p.did, p.lo, p.hi) for p in again] == [(p.did, p.lo, p.hi) for p in pts]
