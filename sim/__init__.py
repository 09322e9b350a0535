"""Engine, runner, recorder, scorers and run spec.

``memsim.core`` is the bottom layer every other package may import. The
names below are imported on first use, so that importing ``memsim.sim``
loads nothing heavy.
"""

from __future__ import annotations

from memsim.core.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "memsim.core.errors": ("UserError",),
        "memsim.sim.events": ("Turn", "Session", "Question", "Feedback", "Deletion", "Tick", "Episode",),
        "memsim.sim.spec": ("RunSpec",),
        "memsim.sim.runner": ("RunResult", "Checkpoint", "iter_run", "run",),
        "memsim.sim.scorers": ("Scorer", "register_scorer",),
    },
)
