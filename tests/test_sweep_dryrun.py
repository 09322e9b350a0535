"""``sweep --dry-run``: per-system warm rates, the cold embedding charged once and shown apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsim.analysis.sweep import Timings, estimate, expand, format_estimate, load_sweep
from tests.test_sweep import TINY, _write

NAIVE = json.dumps({"name": "naive", "args": {}}, sort_keys=True)
NEURO = json.dumps({"name": "neuroplastic", "args": {}}, sort_keys=True)


@pytest.fixture
def two_by_two(tmp_path: Path):
    """naive alone, then naive + neuroplastic, two seeds each: the naive-only cells come first."""
    text = TINY.replace("seeds = 5", "seeds = 2").replace('"neuroplastic", "control-learner"', '"neuroplastic"')
    spec = load_sweep(_write(tmp_path, text))
    return spec, expand(spec)


def test_a_synthetic_timing_table_gives_each_cell_its_systems_warm_time(two_by_two) -> None:
    """Naive-only cells were estimated at 80 s and naive + neuroplastic at 14 s: the first cells carried the cold cache."""
    spec, cells = two_by_two
    timings = Timings(unit_s={NAIVE: 0.001, NEURO: 0.004}, text_s=0.01, first_use_s={NAIVE: 0.0, NEURO: 6.0})
    costs = estimate(spec, cells, timings=timings)
    assert [c["played"] for c in costs] == [1, 1, 6, 6]  # naive; naive + neuroplastic, its twin, placebo and constant arms
    for c in costs:
        per_arm = c["turns"] + c["questions"]
        want = per_arm * 0.001 + (per_arm * 0.004 * 5 if c["played"] == 6 else 0)
        assert c["seconds"] == pytest.approx(want)
    naive_only, with_neuro = costs[:2], costs[2:]
    assert all(a["seconds"] < b["seconds"] for a, b in zip(naive_only, with_neuro))
    # Embedding is paid once per scenario point and seed, by the first cell of each, and kept apart.
    assert [c["embed_seconds"] > 0 for c in costs] == [True, True, False, False]
    total = format_estimate(cells, costs)
    warm = sum(c["seconds"] for c in costs) / 60
    cold = sum(c["embed_seconds"] for c in costs) / 60
    assert f"estimated {warm + cold + 0.1:.1f} CPU-minutes: {warm:.1f} playing the cells" in total
    assert f"{cold:.1f} embedding their texts once into a cold cache" in total
    assert costs[0]["first_use_seconds"] == 6.0 and "6 s loading the systems once per worker process" in total


def test_calibration_measures_every_system_alone(two_by_two) -> None:
    spec, cells = two_by_two
    costs = estimate(spec, cells, calibrate_s=1.0)
    assert all(c["seconds"] > 0 for c in costs)
    # Same systems, same warm estimate, whatever the cell's place in the order.
    assert costs[0]["seconds"] == pytest.approx(costs[1]["seconds"], rel=0.5)
    assert costs[2]["seconds"] > costs[0]["seconds"]
