"""What a scenario is, and what a static protocol's options make of a run.

A scenario is cheap to construct (it only validates its arguments) and heavy
in ``generate``, which returns the whole time-ordered event stream for a
random source. Same generator state, same stream. The registries are in
``memsim.scenarios.registry``, which no scenario module imports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict

from memsim.core.registry import load_target
from memsim.core.validate import validate_args
from memsim.sim.events import Deletion, Episode, Event, Question, Session, episodes_by_user
from memsim.sim.spec import DEFAULT_KS

__all__ = ["Scenario", "ScenarioStream", "StaticRun", "StaticOptions", "StaticProtocol", "FileScenario"]


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


@dataclass(frozen=True, slots=True)
class StaticRun:
    """What one ``memsim static NAME`` command asks for: its scenario arguments and run settings.

    Filled from the protocol's declaration and the common options, then
    adjusted by the protocol's options (``StaticOptions.plan``).

    Attributes:
        scenario_args: arguments of the protocol's scenario (``data`` when given).
        systems: the systems under test (``memsim.memory.registry.SystemSpec``).
        k: headline cut-off, the memories a reader sees; ks: the cut-offs scored.
        depth: memories fetched per question (the run fetches at least ``k`` and ``max(ks)``).
        scorers: registered scorers; metric: the headline column (``{k}`` stands for ``k``).
        seed: the run's seed; answer: reader and judge options (None: retrieval only).
        judges: the judges of answers (those named, else the protocol's).
        kind_names: how the tables name each kind of question (default: as recorded).
    """

    scenario_args: dict[str, Any]
    systems: tuple[Any, ...]
    k: int
    ks: tuple[int, ...]
    depth: int
    scorers: tuple[str, ...]
    metric: str
    seed: int
    answer: Mapping[str, Any] | None
    judges: tuple[str, ...]
    kind_names: Mapping[str, str] = field(default_factory=dict)

    def settings(self) -> dict[str, Any]:
        """The run settings of the spec (``make_spec`` keywords): every cut-off scored on one list."""
        return {"k": self.k, "ks": self.ks, "retrieve_k": max(self.depth, self.k, *self.ks),
                "scorers": self.scorers, "metric": self.metric.format(k=self.k), "seed": self.seed}


class StaticOptions(BaseModel):
    """Options of a static protocol: ``memsim static NAME`` has one flag per field, its description the help.

    By default every field is an argument of the protocol's scenario; a
    protocol whose options mean more overrides ``plan``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    def plan(self, run: StaticRun) -> StaticRun:
        """The run these options make of ``run``."""
        return replace(run, scenario_args={**self.model_dump(mode="json"), **run.scenario_args})


@dataclass(frozen=True, slots=True)
class StaticProtocol:
    """A static benchmark: its loader, its options and the settings it is published with.

    Attributes:
        name: command (``memsim static NAME``), scenario and run-folder name.
        title: how the command names the benchmark above its tables.
        scenario: ``"module:Class"``, the loader of the file into episodes: a scenario whose
            ``spec_args`` name the ``data`` read and whose ``meta`` holds its ``sha256`` (and ``load_lines``).
        options: ``"module:Model"``, a ``StaticOptions`` model: one flag per field, its description the help.
        description: one line for ``memsim list`` and ``memsim static --help``.
        data: help of ``--data``: what it names, where the file is found when it is not given.
        k: headline cut-off (memories the reader sees) when ``-k`` is not given.
        ks: cut-offs scored; depth: memories fetched per question (a run fetches ``max(depth, k, max(ks))``).
        scorers: registered scorers; metric: the headline column (``{k}`` stands for the run's cut-off).
        judges: judges of answers when ``--judge`` is not given.
        checks_judges: its ``--data`` file is a LoCoMo file, from which the judges' check set draws items.
    """

    name: str
    title: str
    scenario: str
    options: str
    description: str
    data: str = "the benchmark file"
    k: int = 30
    ks: tuple[int, ...] = DEFAULT_KS
    depth: int = max(DEFAULT_KS)
    scorers: tuple[str, ...] = ("evidence",)
    metric: str = "recall_all@{k}"
    judges: tuple[str, ...] = ("contains",)
    checks_judges: bool = False

    def options_model(self) -> type[StaticOptions]:
        """The options model (imported on first use)."""
        return load_target(self.options)  # type: ignore[no-any-return]

    def plan(self, options: Mapping[str, Any], *, systems: Sequence[Any], data: str | None = None,
             k: int | None = None, seed: int = 0, answer: Any = None) -> StaticRun:
        """What ``options`` (the options model's fields; absent ones default) make of a run of this protocol.

        ``data`` None: the scenario finds the file; ``k`` None: the protocol's; ``answer`` None: retrieval only.
        A bad option value or combination raises ``UserError``.
        """
        chosen = validate_args(self.options_model(), options, what="option", source="")
        judges = tuple((answer.judge if answer is not None else None) or self.judges)
        return chosen.plan(StaticRun(  # type: ignore[attr-defined]
            scenario_args={} if data is None else {"data": str(data)}, systems=tuple(systems),
            k=self.k if k is None else k, ks=self.ks, depth=self.depth, scorers=self.scorers, metric=self.metric,
            seed=seed, answer=answer, judges=judges,
        ))


class FileScenario:
    """Mixin of the scenarios that read one data file: built from a config table, ``data`` resolved in the spec.

    A subclass names its pydantic config model (``config_model``, with a
    ``path()`` method) and takes ``(config, *, source)``.
    """

    config_model: ClassVar[type[BaseModel]]
    config: Any

    @classmethod
    def from_args(cls, args: Mapping[str, Any], *, source: str = "") -> Any:
        """Build from a config table; bad keys or values, or a missing file, raise ``UserError``."""
        return cls(validate_args(cls.config_model, args, what="scenario", source=source), source=source)  # type: ignore[call-arg]

    def spec_args(self) -> dict[str, Any]:
        """Resolved arguments, JSON-ready (``data`` as the path actually read)."""
        out = self.config.model_dump(mode="json")
        out["data"] = str(self.config.path())
        return out
