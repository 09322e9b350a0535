"""Engine, runner, recorder, scorers and run spec.

``sim.errors`` and ``sim.validate`` are the bottom layer every other package
may import. The other names are imported on first use, so that importing
``sim`` loads nothing heavy.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "UserError": "sim.errors",
    "Turn": "sim.events",
    "Session": "sim.events",
    "Question": "sim.events",
    "Feedback": "sim.events",
    "Deletion": "sim.events",
    "Tick": "sim.events",
    "Episode": "sim.events",
    "RunSpec": "sim.spec",
    "RunResult": "sim.runner",
    "Checkpoint": "sim.runner",
    "iter_run": "sim.runner",
    "run": "sim.runner",
    "Scorer": "sim.scorers",
    "register_scorer": "sim.scorers",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'sim' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)
