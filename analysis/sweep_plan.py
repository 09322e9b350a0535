"""What a sweep is and the cells it expands to: the validated spec and ``expand``.

``SweepSpec`` (with its tables ``SweepSettings``, ``ScenarioGrid`` and
``SystemGrid``) is a validated sweep; ``expand`` turns it into **cells**,
one scenario point x one system set x one seed each, every cell named by a
hash of its resolved run spec and embedder. The file and folder names of a
sweep folder live here too. Re-exported by ``memsim.analysis.sweep``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memsim.sim.answer.options import AnswerOptions
from memsim.core.errors import UserError
from memsim.sim.spec import ScenarioEntry

__all__ = ["MAX_SEEDS", "SweepSettings", "SystemGrid", "ScenarioGrid", "SweepSpec", "Cell", "expand", "in_source",
           "SWEEP_FILE", "INDEX_FILE", "CELL_FILE", "CELLS"]

# A sweep folder: its spec, its index, and one run folder per cell under cells/ (each with its cell.json).
SWEEP_FILE = "sweep.json"
INDEX_FILE = "index.parquet"
CELL_FILE = "cell.json"
CELLS = "cells"


# --------------------------------------------------------------------------- the spec


MAX_SEEDS = 1_000
"""Seeds a sweep may run (as ``--seeds`` on the command line): each is a whole run per cell."""


class SweepSettings(BaseModel):
    """The ``[sweep]`` table: seeds, embedder, how grids combine and how systems are grouped into cells."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("sweep", description="name shown in tables and plots")
    seeds: int | tuple[int, ...] = Field(3, description="N (seeds run.seed .. run.seed+N-1) or a list of seeds")
    embedder: Literal["minilm", "hash"] = Field("minilm", description="minilm (packaged model) or hash (fast bag of words)")
    hash_dim: int = Field(256, ge=8, description="vector length of the hash embedder")
    design: Literal["factorial", "one-at-a-time"] = Field(
        "factorial", description="factorial: every combination of the grids; one-at-a-time: one knob moves, the rest at base"
    )
    split: Literal["each", "together"] = Field(
        "each", description="each: one cell per system (the control beside it); together: all systems in one cell"
    )

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: int | tuple[int, ...]) -> int | tuple[int, ...]:
        if isinstance(v, int):
            if not 1 <= v <= MAX_SEEDS:
                raise ValueError(f"needs 1 to {MAX_SEEDS:,} seeds, got {v:,}")
        else:
            if not v or any(s < 0 for s in v) or len(set(v)) != len(v):
                raise ValueError(f"a list of distinct non-negative seeds, got {list(v)[:10]}")
            if len(v) > MAX_SEEDS:
                raise ValueError(f"at most {MAX_SEEDS:,} seeds, got {len(v):,}")
        return v


class SystemGrid(BaseModel):
    """One ``[[systems]]`` entry: a registered system, its arguments and label, a grid over them, its ablations."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    label: str = ""
    grid: dict[str, tuple[Any, ...]] = Field(default_factory=dict, description="argument -> values (one system per combination)")
    ablations: bool = Field(False, description="also every registered '<name>-no-*' ablation of this system")


class ScenarioGrid(ScenarioEntry):
    """One ``[scenario]`` (or ``[[scenario]]``) entry: name, base arguments and a grid."""

    grid: dict[str, tuple[Any, ...]] = Field(default_factory=dict)


class SweepSpec(BaseModel):
    """A validated sweep: what ``expand`` turns into cells."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sweep: SweepSettings = Field(default_factory=SweepSettings)
    scenarios: tuple[ScenarioGrid, ...]
    systems: tuple[SystemGrid, ...]
    run: dict[str, Any] = Field(default_factory=dict)
    """``[run]`` settings (``memsim.sim.spec.RunSettings`` minus seed)."""
    run_grid: dict[str, tuple[Any, ...]] = Field(default_factory=dict)
    answer: AnswerOptions | None = None
    """Reader and judge options (None: retrieval only)."""
    source: str = ""

    def seed_list(self) -> tuple[int, ...]:
        """The seeds, in order."""
        s = self.sweep.seeds
        base = int(self.run.get("seed", 0))
        return tuple(range(base, base + s)) if isinstance(s, int) else tuple(s)

    def to_json(self) -> dict[str, Any]:
        """As JSON data (``sweep.json``)."""
        return self.model_dump(mode="json")


def in_source(source: str) -> str:
    """`` in <source>`` for an error about a spec read from ``source``; empty when it has none."""
    return f" in {source}" if source else ""


# --------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class Cell:
    """One run of a sweep: a scenario point, a system set and a seed."""

    cell_id: str
    """Hash of what defines the cell (its run spec and embedder): the folder name under ``cells/``."""
    index: int
    """Position in the sweep's order."""
    scenario: str
    point: dict[str, Any]
    """The knobs of this point (``scenario.reask_rate``, ``run.feedback_delay_hours``) and their values."""
    is_base: bool
    """Whether every knob is at its base value."""
    systems: tuple[str, ...]
    """Labels of the systems played in the cell (the control first)."""
    seed: int
    spec: dict[str, Any]
    """The resolved ``RunSpec`` as JSON."""
    embedder: dict[str, Any]
    """``{"kind": "hash", "dim": 256}`` or ``{"kind": "minilm"}``."""

    def task(self, out_dir: Path) -> dict[str, Any]:
        """What a worker needs to play the cell (plain data, picklable)."""
        return {"cell_id": self.cell_id, "dir": str(out_dir / CELLS / self.cell_id), "spec": self.spec,
                "embedder": self.embedder, "seed": self.seed}


def _system_variants(entry: SystemGrid) -> list[Any]:
    from memsim.memory.registry import SystemSpec, memory_names, memory_role

    out = []
    keys = list(entry.grid)
    for values in itertools.product(*(entry.grid[k] for k in keys)) if keys else [()]:
        args = {**entry.args, **dict(zip(keys, values))}
        label = entry.label if entry.label and not keys else ""
        if entry.label and keys:
            label = entry.label + "[" + ",".join(f"{k}={v}" for k, v in zip(keys, values)) + "]"
        out.append(SystemSpec(entry.name, args, label))
    if entry.ablations:
        # The registry says what is an ablation; the name says which system, and which
        # ablations switch one mechanism off (``-decay-only`` is an ablation of another kind).
        mine = [n for n in memory_names() if memory_role(n) == "ablation" and n.startswith(entry.name + "-no-")]
        out.extend(SystemSpec(n, dict(entry.args)) for n in mine)
    return out


def _points(spec: SweepSpec, scen: ScenarioGrid) -> list[tuple[dict[str, Any], bool]]:
    """(knob -> value, is_base) of every point of one scenario entry."""
    knobs = [(f"scenario.{k}", v) for k, v in scen.grid.items()] + [(f"run.{k}", v) for k, v in spec.run_grid.items()]
    if not knobs:
        return [({}, True)]
    if spec.sweep.design == "factorial":
        names = [k for k, _ in knobs]
        return [(dict(zip(names, combo)), False) for combo in itertools.product(*(v for _, v in knobs))]
    # One at a time: the base point once, then each knob's other values with the rest at base.
    from memsim.analysis.pipeline import scenario_for

    resolved = scenario_for(scen.name, scen.args, source=spec.source).spec_args()
    from memsim.sim.spec import RunSettings

    run_base = RunSettings(**spec.run).model_dump()
    base = {}
    for k, _ in knobs:
        table, name = k.split(".", 1)
        base[k] = (resolved if table == "scenario" else run_base).get(name)
    points = [({}, True)]
    for k, values in knobs:
        for v in values:
            if v != base[k] and not (isinstance(v, (int, float)) and isinstance(base[k], (int, float)) and float(v) == float(base[k])):
                points.append(({k: v}, False))
    return points


def _cell_id(spec_json: Mapping[str, Any], embedder: Mapping[str, Any]) -> str:
    blob = json.dumps({"spec": spec_json, "embedder": embedder}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def expand(spec: SweepSpec) -> list[Cell]:
    """The cells of a sweep, in order: scenario entry, point, system set, seed.

    Raises:
        UserError: a point whose scenario arguments or run settings are invalid (named by key).
    """
    from memsim.analysis.pipeline import make_spec

    embedder = {"kind": "hash", "dim": spec.sweep.hash_dim} if spec.sweep.embedder == "hash" else {"kind": "minilm"}
    from memsim.memory.registry import SystemSpec

    variants = [v for entry in spec.systems for v in _system_variants(entry)]
    control = spec.run.get("control", "naive")
    labels = [v.display for v in variants]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise UserError(f"bad sweep spec{in_source(spec.source)}: systems: listed twice: {', '.join(dupes)} (give a label)")
    ctl = next((v for v in variants if v.display == control), None) or (SystemSpec(control) if control else None)
    if spec.sweep.split == "together":
        sets = [[*([ctl] if ctl is not None and ctl.display not in labels else []), *variants]]
    else:
        sets = [[v] if ctl is None or v.display == control else [ctl, v] for v in variants]
    cells: list[Cell] = []
    seen: set[str] = set()
    for si, scen in enumerate(spec.scenarios):
        key = "scenario" if len(spec.scenarios) == 1 else f"scenario[{si}]"
        for point, is_base in _points(spec, scen):
            scen_args = dict(scen.args)
            run_values = {k: v for k, v in spec.run.items() if k != "seed"}
            for k, v in point.items():
                table, name = k.split(".", 1)
                (scen_args if table == "scenario" else run_values)[name] = v
            for systems in sets:
                for seed in spec.seed_list():
                    try:
                        rs = make_spec("longitudinal", scen.name, scen_args, systems, source=spec.source,
                                       answer=spec.answer, seed=seed, **run_values)
                    except UserError as exc:
                        where = ", ".join(f"{k} = {v!r}" for k, v in point.items()) or "base point"
                        raise UserError(f"{exc} [{key}, {where}]") from None
                    sj = rs.to_json()
                    cid = _cell_id(sj, embedder)
                    if cid in seen:
                        continue
                    seen.add(cid)
                    cells.append(Cell(cid, len(cells), scen.name, point, is_base,
                                      tuple(s.display for s in rs.systems), seed, sj, embedder))
    return cells
