"""``memsim demo``: the README's main job (persona scenario, every registered system, offline)."""

from __future__ import annotations

from sim.run_cli import add_demo_arguments as add_arguments
from sim.run_cli import demo_main as main

__all__ = ["add_arguments", "main"]
