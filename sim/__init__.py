"""Engine, runner, recorder, scorers and run spec.

``sim.errors`` and ``sim.validate`` are the bottom layer every other package
may import. The other names are imported on first use, so that importing
``sim`` loads nothing heavy.
"""

from __future__ import annotations

from sim.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "sim.errors": ("UserError",),
        "sim.events": ("Turn", "Session", "Question", "Feedback", "Deletion", "Tick", "Episode",),
        "sim.spec": ("RunSpec",),
        "sim.runner": ("RunResult", "Checkpoint", "iter_run", "run",),
        "sim.scorers": ("Scorer", "register_scorer",),
    },
)
