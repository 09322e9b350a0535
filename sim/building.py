"""The arms of a run, built: each system of a spec, its twins and placebos, held to the protocol's contract.

``build_systems`` builds every arm of a spec in order from the ``systems``
stream; ``build_arms`` rebuilds some of them alone from the rng states their
builds began with (a unit played apart, ``memsim.sim.units``), so they draw
what they drew among all the run's arms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


from memsim.core.errors import UserError
from memsim.memory.guard import GuardedSystem, SystemCallFailed
from memsim.memory.registry import Resources, build_memory, learns_from_feedback
from memsim.sim.engine import SystemUnderTest
from memsim.sim.inline_guard import InlineGuardedSystem, inline_possible
from memsim.sim.spec import RunSpec, speaks_in_turns

__all__ = ["arms_of", "Arm", "build_systems", "build_arms", "failed_arms", "arm_reports"]


def _twins(spec: RunSpec, name: str, args: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label suffix, feedback mode) of the twins a system gets in a longitudinal run."""
    if spec.fresh_per_episode or not spec.twins or spec.feedback_from == "none":
        return []
    # Under the correction and implicit channels every system can change through use (it ingests the user's turns).
    if not speaks_in_turns(spec.feedback_from) and not learns_from_feedback(name, args):
        return []
    arms = [("~twin", "withheld")]
    if spec.placebo:
        arms.append(("~placebo", "shuffled"))
    if spec.constant_arms:
        arms += [("~false", "false"), ("~true", "true")]
    return arms


def _system(spec: RunSpec, name: str, args: Mapping[str, Any], resources: Resources, label: str) -> Any:
    """One system built for the run: an in-process one held to the protocol's contract (``GuardedSystem``).

    An in-process system is built and called on a thread of its own, each call
    within ``spec.call_deadline_s``; whatever it raises (``sys.exit`` and
    ``GeneratorExit`` included) or returns against the protocol marks it failed
    with one line naming it, the call and the error. An HTTP system has its own
    deadline and checks (``memsim.memory.http``) and is called directly.

    Raises:
        UserError: the arguments are bad, or the constructor raised or hung (naming the system).
    """
    if name == "http":
        return build_memory(name, args, resources=resources)
    # On the main thread the deadline is a timer and calls stay on this thread (a thread hop per call costs
    # about a tenth of a millisecond, seconds over a run); elsewhere each system gets a thread of its own.
    guard = InlineGuardedSystem if inline_possible() else GuardedSystem
    try:
        return guard.build(lambda: build_memory(name, args, resources=resources), label=label,
                           deadline_s=spec.call_deadline_s)
    except SystemCallFailed as exc:
        # Bad arguments, an unknown name, a constructor that raised or hung: the user's to fix, one line.
        raise UserError(f"cannot build system {label!r}: {str(exc).removeprefix(f'system {label}: ')}") from None


def build_systems(spec: RunSpec, resources: Resources, rngs: list[Any] | None = None) -> list[SystemUnderTest]:
    """The spec's systems in order, then their twins (each built from the rng state its system saw).

    ``rngs``, when given, gets the rng state each system's build began with, so that any arm can be
    rebuilt alone with the same draws (``build_arms``).
    """
    suts: list[SystemUnderTest] = []
    twins: list[SystemUnderTest] = []
    for s in spec.systems:
        before = resources.fork()
        if rngs is not None:
            rngs.append(before.rng)
        try:
            suts.append(SystemUnderTest(s.name, s.display, _system(spec, s.name, s.args, resources, s.display)))
            for suffix, mode in _twins(spec, s.name, s.args):
                twin = _system(spec, s.name, s.args, before.fork(), s.display + suffix)
                twins.append(SystemUnderTest(s.name, s.display + suffix, twin, feedback=mode, twin_of=s.display))
        except (ValueError, ImportError) as exc:
            raise UserError(f"cannot build system {s.display!r}: {exc}") from None
    return suts + twins


@dataclass(frozen=True, slots=True)
class Arm:
    """Where an arm comes from: its label, its system's place in the spec, its feedback mode and twin suffix."""

    label: str
    system: int
    """Index of its system in ``spec.systems``."""
    feedback: str = "given"
    suffix: str = ""
    """The twin suffix (``~twin``, ``~placebo``, ...); empty for the system itself."""


def arms_of(spec: RunSpec) -> list[Arm]:
    """The spec's arms in ``build_systems``'s order: the systems, then each system's twins."""
    own = [Arm(s.display, i) for i, s in enumerate(spec.systems)]
    twins = [Arm(s.display + suffix, i, mode, suffix)
             for i, s in enumerate(spec.systems) for suffix, mode in _twins(spec, s.name, s.args)]
    return own + twins


def build_arms(spec: RunSpec, resources: Resources, rngs: Sequence[Any], labels: Sequence[str]) -> list[SystemUnderTest]:
    """The arms ``labels``, each built alone from the rng state its build began with in ``build_systems`` (same draws)."""
    by_label = {a.label: a for a in arms_of(spec)}
    out = []
    for label in labels:
        arm = by_label[label]
        s = spec.systems[arm.system]
        system = _system(spec, s.name, s.args, resources.at(rngs[arm.system]), label)
        out.append(SystemUnderTest(s.name, label, system, feedback=arm.feedback,
                                   twin_of=s.display if arm.suffix else None))
    return out


def failed_arms(suts: Sequence[SystemUnderTest]) -> list[str]:
    """Labels of the systems that have failed (their rows of the part are left out, and a rerun adds them)."""
    return [s.label for s in suts if s.failed is not None]


def arm_reports(suts: Sequence[SystemUnderTest]) -> dict[str, Any]:
    return {s.label: s.system.report() for s in suts if callable(getattr(s.system, "report", None))}
