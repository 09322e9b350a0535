"""Generators of timed event streams, and ready configs in ``scenarios/configs``.

The registries of scenarios and static protocols are in ``memsim.scenarios.registry``.
"""

from __future__ import annotations

from memsim.scenarios.base import Scenario, ScenarioStream, StaticOptions, StaticRun

__all__ = ["Scenario", "ScenarioStream", "StaticOptions", "StaticRun"]
