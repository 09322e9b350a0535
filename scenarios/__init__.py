"""Generators of timed event streams, and ready configs in ``scenarios/configs``."""

from __future__ import annotations

from memsim.scenarios.base import Scenario, ScenarioStream, build_scenario, register_scenario, scenario_names

__all__ = ["Scenario", "ScenarioStream", "build_scenario", "register_scenario", "scenario_names"]
