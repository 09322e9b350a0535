"""The demo's default size is large enough: its headline MDE is at most 3 points for every system that learns.

The demo (``scenarios/configs/demo.toml``, seed 0, the real MiniLM model)
plays every system whose ``feedback`` does something against its twin. The
MDE printed beside each headline (the second-half gain over the twin) is read
from the width of its user-level interval; at the default size it must be at
most 3 points, so that a learning effect of 3 points would be seen.
"""

from __future__ import annotations

import pytest

from memsim.analysis.pipeline import execute, spec_from_config
from memsim.memory.registry import learns_from_feedback
from memsim.scenarios.config import CONFIG_DIR, load_config


@pytest.mark.slow
def test_demo_headline_mde_is_at_most_three_points() -> None:
    from memsim.analysis.cli.run import demo_systems

    learners = [s for s in demo_systems() if learns_from_feedback(s.name, s.args)]
    assert {s.name for s in learners} >= {"neuroplastic", "neuroplastic-daily-decay"}
    config = load_config(CONFIG_DIR / "demo.toml")
    assert config.scenario["users"] >= 40
    spec = spec_from_config(config, systems=learners)
    outcome = execute(spec, out_dir=None)
    learning = outcome.summary.learning
    assert learning is not None
    for system in learners:
        entry = learning[system.name]
        assert entry["unit"] == "user"
        assert entry["gain_mde"] <= 0.03, (system.name, entry["gain_mde"])
