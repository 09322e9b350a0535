"""The discrete-event engine and everything a run needs."""

from __future__ import annotations

from sim.errors import UserError
from sim.events import Deletion, Event, Feedback, Question, Session, Tick, Turn
from sim.runner import Checkpoint, RunResult, RunSpec, iter_run, run

__all__ = [
    "UserError",
    "Turn",
    "Session",
    "Question",
    "Feedback",
    "Deletion",
    "Tick",
    "Event",
    "RunSpec",
    "RunResult",
    "Checkpoint",
    "iter_run",
    "run",
]
