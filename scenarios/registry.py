"""The registries of scenarios and of static protocols, and their registrations.

A scenario is registered as ``"module:Class"`` and built as
``Class.from_args(args)``. A static protocol (a benchmark played with fresh
systems per episode, questions after the haystack) is one ``StaticProtocol``:
its loader, options model and published settings; registering it registers
its loader as the scenario of the same name, and ``memsim static NAME``
derives its flags from it. No scenario module imports this one, so the
lazy targets below close no circle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memsim.scenarios.base import Scenario, StaticOptions, StaticRun
from memsim.core.errors import UserError
from memsim.core.registry import Registry, caller_origin, load_target
from memsim.core.validate import validate_args
from memsim.sim.scorers import register_scorer
from memsim.sim.spec import DEFAULT_KS
from memsim.static_benchmarks.longmemeval import RETRIEVAL_KS

__all__ = [
    "StaticProtocol", "register_scenario", "scenario_names", "scenario_description", "build_scenario", "check_scenario_args",
    "register_protocol", "unregister_protocol", "protocol_names", "static_protocol",
]

SCENARIOS = Registry("scenario", group="memsim.scenarios")
"""Scenario classes by name (``"module:Class"``); a package adds its own through ``memsim.scenarios`` entry points."""


def _load(target: str) -> Any:
    return load_target(target)


def register_scenario(name: str, target: str, *, description: str) -> None:
    """Register a scenario class (``"module:Class"``, built as ``Class.from_args(args)``); a duplicate is an error."""
    if not isinstance(target, str) or ":" not in target:
        raise ValueError(f"target {target!r} must look like 'module:Class'")
    SCENARIOS.register(name, target, description=description, origin=caller_origin(1))


def scenario_description(name: str) -> str:
    """One line of help for a scenario."""
    return SCENARIOS.description(name)


def scenario_names() -> list[str]:
    """Scenario names, sorted (those installed packages add last)."""
    return SCENARIOS.names()


def build_scenario(name: str, args: Mapping[str, Any] | None = None, *, source: str = "") -> Scenario:
    """Build scenario ``name`` with ``args``; errors name the source file and key."""
    return SCENARIOS.load(name, where=source).from_args(dict(args or {}), source=source)  # type: ignore[no-any-return]


def check_scenario_args(name: str, args: Mapping[str, Any] | None = None, *, source: str = "") -> None:
    """Check ``args`` against scenario ``name``'s config model, building nothing.

    A config file is checked when it is loaded; the scenario itself is built once, when its run is
    resolved (``memsim.analysis.pipeline.scenario_for``), where a data file is looked for.

    Raises:
        UserError: an unknown scenario or a bad key or value (naming ``source``).
    """
    model = getattr(SCENARIOS.load(name, where=source), "config_model", None)
    if model is not None:  # a scenario without a config model checks its arguments when built
        validate_args(model, dict(args or {}), what="scenario", source=source)


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
        return _load(self.options)  # type: ignore[no-any-return]

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


BENCHMARKS = Registry("static benchmark", group="memsim.benchmarks")
"""Static protocols by name (a ``StaticProtocol``, or ``"module:attr"`` naming one); a package adds its own through
``memsim.benchmarks`` entry points, its loader then registered as the scenario of the same name when first used."""


def register_protocol(protocol: StaticProtocol) -> None:
    """Register a static protocol and its loader as the scenario of the same name; a duplicate is an error."""
    # Only what is registered here blocks a name (reading the entry points at import time would cost every command).
    if BENCHMARKS.registered_entry(protocol.name) or SCENARIOS.registered_entry(protocol.name):
        raise ValueError(f"static protocol {protocol.name!r} is already registered (as a protocol or a scenario)")
    origin = caller_origin(1)
    SCENARIOS.register(protocol.name, protocol.scenario, description=protocol.description, origin=origin)
    BENCHMARKS.register(protocol.name, protocol, description=protocol.description, origin=origin)


def unregister_protocol(name: str) -> None:
    """Remove a registered protocol and its scenario (a test undoes its registration with it)."""
    static_protocol(name)
    BENCHMARKS.unregister(name)
    SCENARIOS.unregister(name)


def protocol_names() -> list[str]:
    """Static protocols, sorted (those installed packages add last)."""
    return BENCHMARKS.names()


def static_protocol(name: str) -> StaticProtocol:
    """The protocol ``name``; an unknown name lists the known ones.

    A protocol an installed package adds through the entry points is imported here, and its loader
    registered as the scenario of the same name.
    """
    got = BENCHMARKS.load(name)
    if not isinstance(got, StaticProtocol):
        raise UserError(f"static benchmark {name!r}: {BENCHMARKS.entry(name).target!r} is not a StaticProtocol")
    if BENCHMARKS.registered_entry(name) is None:
        origin = BENCHMARKS.entry(name).origin
        BENCHMARKS.register(name, got, description=got.description, origin=origin)
        if SCENARIOS.registered_entry(name) is None:
            SCENARIOS.register(name, got.scenario, description=got.description, origin=origin)
    return got


register_scenario("persona", "memsim.scenarios.persona:PersonaScenario", description="synthetic users whose facts change over months")
register_scenario("life", "memsim.scenarios.life:LifeScenario", description="synthetic users from a network of attributes, living through dated events over months of task chat")
register_scenario("locomo_stream", "memsim.scenarios.locomo_stream:LocomoStreamScenario", description="LoCoMo conversations on their real calendar, questions interleaved")
register_scenario("longmemeval_stream", "memsim.scenarios.longmemeval_stream:LongMemEvalStreamScenario", description="LongMemEval haystack sessions on their dates, questions at their question dates")
register_scenario("world", "memsim.scenarios.world_file:WorldScenario", description="a hashed world file (memsim scenario render) replayed offline")
register_protocol(StaticProtocol(
    name="locomo", title="LoCoMo",
    scenario="memsim.scenarios.static:LocomoBenchmark", options="memsim.scenarios.static:LocomoOptions",
    description="static LoCoMo: each conversation ingested into fresh systems, then its questions",
    data="locomo10.json, a path or a `memsim data` name (default: $MEMSIM_LOCOMO, the fetched copy, ../shared/data/locomo/)",
    judges=("contains", "f1_locomo"), checks_judges=True,
))
# The official LongMemEval scorers; the longmemeval_stream scenario scores with them too.
register_scorer("lme_turn", "memsim.static_benchmarks.longmemeval:TurnScorer", description="LongMemEval's official turn-level recall_any/recall_all/nDCG_any (keys <session>_<turn>)")
register_scorer("lme_session", "memsim.static_benchmarks.longmemeval:SessionScorer", description="LongMemEval's official session-level figures of a turn ranking (turn2session)")
register_protocol(StaticProtocol(
    name="longmemeval", title="LongMemEval",
    scenario="memsim.scenarios.static:LongMemEvalBenchmark", options="memsim.scenarios.static:LongMemEvalOptions",
    description="static LongMemEval: each instance's haystack ingested into fresh systems, then its question",
    data="longmemeval_s.json, _m, _oracle or a *_cleaned.json release, a path or a `memsim data` name "
    "(default: $MEMSIM_LONGMEMEVAL, the fetched S file; streamed)",
    ks=RETRIEVAL_KS, scorers=("lme_turn", "lme_session"), metric="turn_recall_all@{k}", judges=("contains", "f1_mem0"),
))
