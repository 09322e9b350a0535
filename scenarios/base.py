"""What a scenario is, and the registry of scenarios.

A scenario is cheap to construct (it only validates its arguments) and heavy
in ``generate``, which returns the whole time-ordered event stream for a
random source. Same generator state, same stream.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import numpy as np

from memsim.sim.core.errors import UserError
from memsim.sim.events import Deletion, Episode, Event, Question, Session, episodes_by_user

__all__ = [
    "Scenario",
    "ScenarioStream",
    "register_scenario",
    "scenario_names",
    "scenario_description",
    "build_scenario",
]


@dataclass(frozen=True, slots=True)
class ScenarioStream:
    """A generated scenario: its events in time order, or its episodes streamed from a file.

    A longitudinal scenario gives ``events`` (its episodes are its users); a
    static benchmark gives ``streamed`` episodes, read one at a time.
    """

    start: datetime | None
    """Simulated time zero (None for streamed episodes: each has its own clock)."""
    end: datetime | None
    """Time after the last event."""
    events: tuple[Event, ...] = ()
    """All events, time-ordered (``memsim.sim.events.sort_events``)."""
    meta: Mapping[str, Any] = field(default_factory=dict)
    """Scenario-specific facts worth recording (e.g. per-user fact histories)."""
    streamed: Iterable[Episode] | None = None
    """Episodes of a static benchmark, in file order (may be a generator)."""

    def episodes(self) -> Iterable[Episode]:
        """What the engine plays: the streamed episodes, else one episode per user."""
        return self.streamed if self.streamed is not None else episodes_by_user(self.events)

    @property
    def users(self) -> list[str]:
        """User ids in order of first appearance."""
        seen: dict[str, None] = {}
        for e in self.events:
            uid = getattr(e, "user_id", None)
            if uid is not None:
                seen.setdefault(uid, None)
        return list(seen)

    def totals(self) -> dict[str, Any]:
        """Users, sessions, turns, questions, deletions and simulated span."""
        sessions = [e for e in self.events if isinstance(e, Session)]
        return {
            "users": len(self.users),
            "sessions": len(sessions),
            "turns": sum(len(s.turns) for s in sessions),
            "questions": sum(isinstance(e, Question) for e in self.events),
            "deletions": sum(isinstance(e, Deletion) for e in self.events),
            "span_days": round((self.end - self.start).total_seconds() / 86400, 2),
        }


@runtime_checkable
class Scenario(Protocol):
    """A generator of timed event streams."""

    name: str

    def generate(self, rng: np.random.Generator) -> ScenarioStream:
        """Build the full event stream from ``rng``."""
        ...

    def spec_args(self) -> dict[str, Any]:
        """The resolved, JSON-serialisable arguments (defaults filled in)."""
        ...


_SCENARIOS: dict[str, tuple[str, str]] = {}


def register_scenario(name: str, target: str, *, description: str) -> None:
    """Register a scenario class (``"module:Class"``, built as ``Class(**args)``)."""
    if name in _SCENARIOS:
        raise ValueError(f"scenario {name!r} is already registered")
    _SCENARIOS[name] = (target, description)


def scenario_description(name: str) -> str:
    """One line of help for a registered scenario."""
    return _SCENARIOS[name][1]


def scenario_names() -> list[str]:
    """Registered scenario names, sorted."""
    return sorted(_SCENARIOS)


def build_scenario(name: str, args: Mapping[str, Any] | None = None, *, source: str = "") -> Scenario:
    """Build scenario ``name`` with ``args``; errors name the source file and key."""
    where = f" in {source}" if source else ""
    if name not in _SCENARIOS:
        raise UserError(f"unknown scenario {name!r}{where}; known scenarios: {', '.join(scenario_names())}")
    target, _ = _SCENARIOS[name]
    module_name, attr = target.split(":", 1)
    cls = getattr(importlib.import_module(module_name), attr)
    return cls.from_args(dict(args or {}), source=source)


register_scenario("persona", "memsim.scenarios.persona:PersonaScenario", description="synthetic users whose facts change over months")
register_scenario("locomo_stream", "memsim.scenarios.locomo_stream:LocomoStreamScenario", description="LoCoMo conversations on their real calendar, questions interleaved")
register_scenario("locomo", "memsim.scenarios.static:LocomoBenchmark", description="static LoCoMo: each conversation ingested into fresh systems, then its questions")
register_scenario("longmemeval", "memsim.scenarios.static:LongMemEvalBenchmark", description="static LongMemEval: each instance's haystack ingested into fresh systems, then its question")
register_scenario("longmemeval_stream", "memsim.scenarios.longmemeval_stream:LongMemEvalStreamScenario", description="LongMemEval haystack sessions on their dates, questions at their question dates")
