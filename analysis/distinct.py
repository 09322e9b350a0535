"""Which run folders hold the same run: one system, one spec, one seed, wherever its folder is.

Two folders made from the same spec (scenario and its resolved arguments,
seed, settings, answer options) hold the same numbers for every system they
share: the same run copied or replayed is one observation, not two. The
board shows it once and ``memsim compare`` counts it once (a copy pooled
with its original would give n = 2 and an interval of width zero).

A system's identity is the spec without its list of systems and without
the memsim version that wrote it, plus the system's registered name and
arguments (its label is only how tables name it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsim.core.errors import UserError

__all__ = ["system_identity", "Distinct", "distinct_runs"]


def system_identity(spec: Any, label: str) -> str:
    """A short hash naming one system's run: the spec (less its systems and memsim version) and the system.

    Args:
        spec: a ``RunSpec``.
        label: the system's display label in that spec; an arm (twin, placebo)
            not listed in the spec keeps its label as its identity's last part.
    """
    data = spec.to_json()
    data.pop("systems", None)
    data.pop("memsim_version", None)
    entry = next((s for s in spec.systems if s.display == label), None)
    who = {"name": entry.name, "args": entry.args} if entry is not None else {"arm": label}
    blob = json.dumps({"spec": data, "system": who}, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Distinct:
    """Run folders with copies of a run left out (``distinct_runs``)."""

    kept: tuple[Path, ...]
    """The folders to count, in the order given."""
    same_as: dict[Path, Path]
    """Each folder left out -> the kept folder that holds the same run."""

    def notes(self) -> list[str]:
        """One line per folder left out, saying which folder holds the same run."""
        return [f"{dup} is the same run as {orig} (same spec, seed and systems): counted once"
                for dup, orig in self.same_as.items()]


def distinct_runs(paths: Sequence[str | Path]) -> Distinct:
    """The run folders with every copy of an earlier one left out.

    A folder whose systems all repeat those of earlier folders (same spec and
    seed) is left out. A folder that repeats only some of its systems is
    refused: counting it would count those systems twice, and leaving it out
    would drop the others.

    Raises:
        UserError: a folder without a readable ``spec.json``, or one that repeats part of another.
    """
    from memsim.sim.spec import read_spec

    seen: dict[str, Path] = {}
    kept: list[Path] = []
    same_as: dict[Path, Path] = {}
    for p in map(Path, paths):
        spec = read_spec(p)
        ids = {s.display: system_identity(spec, s.display) for s in spec.systems}
        repeated = {label: seen[i] for label, i in ids.items() if i in seen}
        if repeated and len(repeated) == len(ids):
            same_as[p] = next(iter(repeated.values()))
            continue
        if repeated:
            named = ", ".join(f"{label} (also in {where})" for label, where in repeated.items())
            raise UserError(f"{p}: repeats the run of {named} with the same spec and seed; it would be counted "
                            "twice: leave one of the folders out, or rerun with another seed")
        kept.append(p)
        for i in ids.values():
            seen[i] = p
    return Distinct(tuple(kept), same_as)
