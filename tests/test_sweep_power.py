"""``memsim power`` and ``memsim sensitivity`` as sweeps: the same numbers as the in-process runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from memsim.analysis.power import power_curve, power_sweep, run_seeds, seed_runs_from_sweep
from memsim.analysis.sensitivity import Knob, grid_from_sweep, sensitivity_grid, sensitivity_sweep
from memsim.analysis.sweep import run_sweep
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import SystemSpec
from memsim.scenarios.config import config_from_mapping

# Columns that measure wall time differ between two runs of one seed; every other column is the seed's.
_TIMED = ("retrieve_ms", "embed_ms")


def _config(**scenario: object):
    return config_from_mapping({"scenario": {"name": "persona", "users": 2, "months": 1.5, **scenario}, "run": {"seed": 3}})


@pytest.mark.slow
def test_power_sweep_holds_the_rows_of_run_seeds(tmp_path: Path) -> None:
    config = _config()
    systems = [SystemSpec("naive"), SystemSpec("control-learner")]
    spec = power_sweep(config, systems=systems, seeds=3, embedder="hash")
    first = run_sweep(spec, tmp_path / "pw", workers=2)
    assert [r.cell.seed for r in first.records] == [3, 4, 5] and first.ran == 3
    again = run_sweep(spec, tmp_path / "pw", workers=2)  # resumed: nothing left to play
    assert again.ran == 0
    swept = seed_runs_from_sweep(again)
    direct = run_seeds(config, systems=systems, seeds=3, embedder_factory=lambda: HashEmbedder(256), n_boot=100)
    assert swept.seeds == direct.seeds == (3, 4, 5)
    assert (swept.k, swept.metric, swept.span_days) == (direct.k, direct.metric, direct.span_days)
    for a, b in zip(swept.probes, direct.probes):
        assert a.drop(_TIMED).equals(b.drop(_TIMED))
    kw = dict(system="control-learner", control="naive", effects=(0.0, 0.05), k=swept.k, span_days=swept.span_days,
              metric=swept.metric, n_boot=200)
    assert power_curve(list(swept.probes), rng=np.random.default_rng(0), **kw) == \
        power_curve(list(direct.probes), rng=np.random.default_rng(0), **kw)


@pytest.mark.slow
def test_sensitivity_sweep_gives_the_grid_of_the_in_process_runs(tmp_path: Path) -> None:
    knobs = (Knob("reask_rate", "scenario", (0.0,), "re-ask"), Knob("feedback_delay_hours", "run", (24.0,), "delay"))
    config = _config()
    spec = sensitivity_sweep(config, system="control-learner", knobs=knobs, seeds=2, embedder="hash")
    result = run_sweep(spec, tmp_path / "sens", workers=2)
    # The base point once, then one point per moved knob; two seeds each; control and system in every cell.
    assert len(result.records) == 3 * 2
    assert {json.dumps(r.cell.point) for r in result.records} == {
        "{}", '{"scenario.reask_rate": 0.0}', '{"run.feedback_delay_hours": 24.0}'}
    assert all(r.cell.systems == ("naive", "control-learner") for r in result.records)
    swept = grid_from_sweep(result, config, system="control-learner", knobs=knobs, n_boot=200)
    direct = sensitivity_grid(config, system="control-learner", knobs=knobs, seeds=2,
                              embedder_factory=lambda: HashEmbedder(256), n_boot=200)
    assert swept == direct
    assert any(p.did != 0.0 for p in swept)  # a learner moves: the comparison is not between zeros
    index = pl.read_parquet(tmp_path / "sens" / "index.parquet")
    assert index.height == 6 * 2 and set(index["state"]) == {"done"}
