"""The arguments of ``PublishedNeuroplasticMemory``: what each may be, and the write gate they build."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memsim.memory.gated import SurpriseMemory
from memsim.core.errors import UserError

if TYPE_CHECKING:
    from memsim.memory.resources import Resources

__all__ = ["GATES", "check_args", "build_gate"]

GATES: tuple[str, ...] = ("multisignal", "surprise", "none")
"""Write gates neuroplastic can sit on (``none``: every turn is stored)."""


_FLAGS = ("ltp", "strengthen", "associations", "inhibition", "consolidation", "abstractions")
_COUNTS = (
    "decay_every", "link_after", "expand_top", "revision_neighbors", "merge_neighbors",
    "candidate_factor", "abstraction_min_size", "abstraction_neighbors",
)
_REALS = (
    "ltp_boost", "weight_cap", "decay", "weight_floor", "link_bonus", "revision_threshold",
    "inhibition_step", "inhibition_cap", "past_cue_relief", "merge_threshold",
    "unretrieved_decay", "abstraction_threshold", "abstraction_weight", "inhibition_fixed",
)


def check_args(args: Mapping[str, Any]) -> None:
    """Check ``PublishedNeuroplasticMemory``'s arguments (its ``locals()``), in order: the first wrong one is a ``UserError``."""
    name = "neuroplastic"
    for key in _FLAGS:
        if not isinstance(args[key], bool):
            raise UserError(f"{name}: {key} must be true or false, got {args[key]!r}")
    for key in _COUNTS:
        value = args[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError(f"{name}: {key} must be a positive integer, got {value!r}")
    # inhibition_fixed is None for the stepped revision, and then not checked.
    reals = {key: args[key] for key in _REALS if key != "inhibition_fixed" or args[key] is not None}
    for key, value in reals.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise UserError(f"{name}: {key} must be a number, got {value!r}")
    for key in ("decay", "unretrieved_decay", "weight_floor"):
        if not 0.0 < reals[key] <= 1.0:
            raise UserError(f"{name}: {key} must be in (0, 1], got {reals[key]!r}")
    for key in ("inhibition_step", "inhibition_cap", "past_cue_relief", "inhibition_fixed"):
        if key in reals and not 0.0 <= reals[key] <= 1.0:
            raise UserError(f"{name}: {key} must be in [0, 1], got {reals[key]!r}")
    ltp_boost, weight_cap, link_bonus = reals["ltp_boost"], reals["weight_cap"], reals["link_bonus"]
    if ltp_boost < 0.0 or weight_cap < 1.0 or link_bonus < 0.0:
        raise UserError(
            f"{name}: need ltp_boost >= 0, weight_cap >= 1 and link_bonus >= 0, "
            f"got {ltp_boost!r}, {weight_cap!r}, {link_bonus!r}"
        )
    gate, gate_args = args["gate"], args["gate_args"]
    if gate not in GATES:
        raise UserError(f"{name}: gate must be one of {', '.join(GATES)}, got {gate!r}")
    if gate == "none" and gate_args:
        raise UserError(f"{name}: gate_args given but gate is 'none'")


def build_gate(resources: Resources, gate: str, gate_args: Mapping[str, Any] | None) -> SurpriseMemory:
    """The write gate ``gate`` with ``gate_args``, built through the registry."""
    try:
        built = resources.build(gate, gate_args)
    except ValueError as exc:
        raise UserError(f"neuroplastic: bad gate_args for gate {gate!r}: {exc}") from None
    assert isinstance(built, SurpriseMemory)
    return built
