"""The registries of scenarios and of static protocols, and their registrations.

A scenario is registered as ``"module:Class"`` and built as
``Class.from_args(args)``. A static protocol (a benchmark played with fresh
systems per episode, questions after the haystack) is one ``StaticProtocol``:
its loader, options model and published settings; registering it registers
its loader as the scenario of the same name, and ``memsim static NAME``
derives its flags from it. No scenario module imports this one, so the
lazy targets below close no circle.

The built-in protocols are declared where their loaders are, in a ``PROTOCOLS``
table of each module of ``memsim.scenarios`` named ``static`` or ``static_*``;
this module registers every one of them when imported (no list to edit here).
A package declares its own in its module and names it in a ``memsim.benchmarks``
entry point.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from typing import Any

from memsim.scenarios.base import Scenario, StaticProtocol
from memsim.core.errors import UserError
from memsim.core.registry import Registry, caller_origin
from memsim.core.validate import validate_args
from memsim.sim.scorers import register_scorer

__all__ = [
    "StaticProtocol", "register_scenario", "scenario_names", "scenario_description", "build_scenario", "check_scenario_args",
    "register_protocol", "unregister_protocol", "protocol_names", "static_protocol", "load_protocols",
]

SCENARIOS = Registry("scenario", group="memsim.scenarios")
"""Scenario classes by name (``"module:Class"``); a package adds its own through ``memsim.scenarios`` entry points."""


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


def builtin_protocols() -> Iterator[StaticProtocol]:
    """The ``PROTOCOLS`` of memsim's static benchmarks: each module of ``memsim.scenarios`` named ``static`` or ``static_*``."""
    package = importlib.import_module("memsim.scenarios")
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name == "static" or info.name.startswith("static_"):
            yield from importlib.import_module(f"{package.__name__}.{info.name}").PROTOCOLS


def load_protocols() -> list[StaticProtocol]:
    """Every protocol, those installed packages add imported too (so their modules' registrations, data ones included, run)."""
    return [static_protocol(name) for name in protocol_names()]


register_scenario("persona", "memsim.scenarios.persona:PersonaScenario", description="synthetic users whose facts change over months")
register_scenario("life", "memsim.scenarios.life:LifeScenario", description="synthetic users from a network of attributes, living through dated events over months of task chat")
register_scenario("locomo_stream", "memsim.scenarios.locomo_stream:LocomoStreamScenario", description="LoCoMo conversations on their real calendar, questions interleaved")
register_scenario("longmemeval_stream", "memsim.scenarios.longmemeval_stream:LongMemEvalStreamScenario", description="LongMemEval haystack sessions on their dates, questions at their question dates")
register_scenario("world", "memsim.scenarios.world_file:WorldScenario", description="a hashed world file (memsim scenario render) replayed offline")
# The official LongMemEval scorers; the longmemeval_stream scenario scores with them too.
register_scorer("lme_turn", "memsim.static_benchmarks.longmemeval:TurnScorer", description="LongMemEval's official turn-level recall_any/recall_all/nDCG_any (keys <session>_<turn>)")
register_scorer("lme_session", "memsim.static_benchmarks.longmemeval:SessionScorer", description="LongMemEval's official session-level figures of a turn ranking (turn2session)")
for _protocol in builtin_protocols():
    register_protocol(_protocol)
