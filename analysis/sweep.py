"""Sweeps: scenarios x system sets x seeds, each cell one ordinary run folder, on a process pool or Dask.

A sweep spec (TOML, ``load_sweep``) names scenarios with parameter grids,
systems with argument grids and ablations, run settings with grids, seeds,
and the reader/judge settings. ``expand`` turns it into **cells**: one cell
is one scenario point x one system set x one seed, and one cell is one run
of ``memsim.analysis.pipeline.execute`` into its own run folder, so every cell can
be opened, reported and rerun like any run.

``run_sweep`` plays the cells that are not finished yet, with an executor:

- ``local``: a process pool (``concurrent.futures``, spawned workers);
- ``dask``: ``dask.distributed`` (imported only here), either an existing
  scheduler (``scheduler="tcp://host:8786"``, e.g. one started by
  dask-jobqueue on SLURM/PBS or on Kubernetes) or a ``LocalCluster`` bound to
  127.0.0.1 with no dashboard.

A cell folder is named by a hash of what defines it (its resolved run spec
and the embedder), so a restarted or extended sweep finds its finished cells
again. A killed cell is resumed by the recorder (its committed days are
kept); a cell that fails is recorded as failed with its error and the others
go on. Each cell writes ``cell.json``: its state, its error, the resolved
spec, the seed, the versions of the packages that shape its numbers and the
project's revision. ``index.parquet`` holds one row per cell and system with
the cell's state and headline figures; it is rewritten after every cell.

The run folders' ``metrics.json`` do not depend on the executor, the number
of workers or interruptions: a cell's numbers come from its seed alone.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import math
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memsim.sim.answer.options import AnswerOptions
from memsim.core.errors import UserError, short_value
from memsim.core.files import read_toml, write_atomic, write_text_atomic
from memsim.sim.spec import ScenarioEntry, SystemEntry

MAX_WORKERS = 1_024
"""Most worker processes a sweep starts: the bound ``--workers`` has (``memsim.analysis.cli.options.LIMITS``)."""

__all__ = [
    "MAX_WORKERS",
    "SweepSettings",
    "SystemGrid",
    "ScenarioGrid",
    "SweepSpec",
    "Cell",
    "CellRecord",
    "SweepResult",
    "EXECUTORS",
    "load_sweep",
    "sweep_from_mapping",
    "expand",
    "run_sweep",
    "run_cell",
    "read_records",
    "read_index",
    "estimate",
    "format_estimate",
    "Timings",
    "format_cells",
    "cell_probes",
    "is_sweep_dir",
    "package_versions",
    "project_revision",
    "config_sweep",
    "require_done",
    "headline",
    "index_frame",
]

EXECUTORS = ("local", "dask")
"""Executors of ``run_sweep``."""

SWEEP_FILE = "sweep.json"
INDEX_FILE = "index.parquet"
CELL_FILE = "cell.json"
CELLS = "cells"

# Packages whose versions shape a cell's numbers (recorded in every cell.json).
_PACKAGES = ("memsim", "numpy", "scipy", "polars", "simpy", "pydantic", "faiss-cpu", "sentence-transformers",
             "torch", "bm25s", "spacy", "llama-cpp-python", "dask", "distributed")


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


class SystemGrid(SystemEntry):
    """One ``[[systems]]`` entry: a registered system, its arguments and label, a grid over them, its ablations."""

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


def _where(source: str) -> str:
    return f" in {source}" if source else ""


def _model(model: type[BaseModel], data: Any, *, key: str, source: str) -> Any:
    """Validate one table; errors name the dotted key and the file."""
    if not isinstance(data, Mapping):
        raise UserError(f"bad sweep spec{_where(source)}: {key}: expected a table, got {type(data).__name__}")
    try:
        return model(**dict(data))
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            parts.append(f"{key}.{loc}: {err['msg'].removeprefix('Value error, ')}" if loc else f"{key}: {err['msg']}")
        raise UserError(f"bad sweep spec{_where(source)}: " + "; ".join(parts)) from None


def _grid(data: Any, *, key: str, source: str) -> dict[str, tuple[Any, ...]]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise UserError(f"bad sweep spec{_where(source)}: {key}: expected a table of lists")
    out = {}
    for k, v in data.items():
        if not isinstance(v, list) or not v:
            raise UserError(f"bad sweep spec{_where(source)}: {key}.{k}: expected a non-empty list of values, got {v!r}")
        out[str(k)] = tuple(v)
    return out


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and validate a sweep spec (TOML); errors name the file and the key."""
    p = Path(path)
    return sweep_from_mapping(read_toml(p, "sweep spec"), source=str(p))


def sweep_from_mapping(data: Mapping[str, Any], *, source: str = "") -> SweepSpec:
    """Validate a parsed sweep spec: tables ``sweep``, ``scenario``, ``systems``, ``run``, ``answer``.

    Every table, every scenario point (its arguments and values), every run
    setting and every system name is checked here, so a bad spec fails
    before any cell runs. A system's own arguments are checked when a cell
    builds it (that can load models); a bad one fails its cells, recorded.

    Raises:
        UserError: naming the file and the dotted key at fault.
    """
    from memsim.memory.registry import memory_target
    from memsim.sim.spec import RunSettings

    bad = f"bad sweep spec{_where(source)}"
    unknown = sorted(set(data) - {"sweep", "scenario", "systems", "run", "answer"})
    if unknown:
        raise UserError(f"{bad}: unknown table(s) {unknown}; expected sweep, scenario, systems, run, answer")
    settings = _model(SweepSettings, data.get("sweep", {}), key="sweep", source=source)

    raw_scen = data.get("scenario")
    if raw_scen is None:
        raise UserError(f"{bad}: scenario: missing (a [scenario] table with a 'name' key, or [[scenario]] tables)")
    scen_list = raw_scen if isinstance(raw_scen, list) else [raw_scen]
    scenarios = []
    for i, s in enumerate(scen_list):
        key = "scenario" if not isinstance(raw_scen, list) else f"scenario[{i}]"
        if not isinstance(s, Mapping) or "name" not in s:
            raise UserError(f"{bad}: {key}.name: missing (the registered scenario to run)")
        args = {k: v for k, v in s.items() if k not in ("name", "grid")}
        scenarios.append(ScenarioGrid(name=str(s["name"]), args=args, grid=_grid(s.get("grid"), key=f"{key}.grid", source=source)))

    raw_sys = data.get("systems")
    if not raw_sys or not isinstance(raw_sys, list):
        raise UserError(f"{bad}: systems: missing (a list of names, or [[systems]] tables with a 'name' key)")
    systems = []
    for i, s in enumerate(raw_sys):
        key = f"systems[{i}]"
        if isinstance(s, str):
            from memsim.memory.registry import parse_system

            try:
                ps = parse_system(s)
            except ValueError as exc:
                raise UserError(f"{bad}: {key}: {exc}") from None
            s = {"name": ps.name, "args": dict(ps.args)}
        entry = _model(SystemGrid, {**s, "grid": _grid(s.get("grid"), key=f"{key}.grid", source=source)} if isinstance(s, Mapping) else s,
                       key=key, source=source)
        try:
            memory_target(entry.name)  # a registered name, an entry point or package.module:Class
        except ValueError as exc:
            raise UserError(f"{bad}: {key}.name: {exc}") from None
        systems.append(entry)

    if not isinstance(data.get("run", {}), Mapping):
        raise UserError(f"{bad}: run: expected a table")
    raw_run = dict(data.get("run", {}))
    run_grid = _grid(raw_run.pop("grid", None), key="run.grid", source=source)
    if "systems" in raw_run:
        raise UserError(f"{bad}: run.systems: list the systems in the top-level 'systems' array instead")
    for k in run_grid:
        if k not in RunSettings.model_fields or k in ("seed", "systems"):
            valid = sorted(set(RunSettings.model_fields) - {"seed", "systems"})
            raise UserError(f"{bad}: run.grid.{k}: not a run setting; valid: {', '.join(valid)}")
    _model(RunSettings, raw_run, key="run", source=source)

    answer = data.get("answer")
    if answer is not None:
        answer = _answer_options(answer, bad, source)

    spec = SweepSpec(sweep=settings, scenarios=tuple(scenarios), systems=tuple(systems), run=raw_run,
                     run_grid=run_grid, answer=answer, source=source)
    expand(spec)  # builds every scenario point and run spec now: bad values fail here, naming their key
    return spec


def _answer_options(table: Any, bad: str, source: str) -> AnswerOptions | None:
    """The ``[answer]`` table as ``AnswerOptions`` (None when the reader is none); errors name the key."""
    if not isinstance(table, Mapping):
        raise UserError(f"{bad}: answer: expected a table")
    known = sorted(set(AnswerOptions.model_fields) - {"judge_checks"})
    for k in table:
        if k not in known:
            raise UserError(f"{bad}: answer.{k}: unknown option; valid: {', '.join(known)}")
    options = _model(AnswerOptions, table, key="answer", source=source)
    return options if options.enabled else None


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
        raise UserError(f"bad sweep spec{_where(spec.source)}: systems: listed twice: {', '.join(dupes)} (give a label)")
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


# --------------------------------------------------------------------------- one cell (runs on a worker)


@functools.lru_cache(maxsize=1)
def _package_versions() -> tuple[tuple[str, str], ...]:
    out = [("python", sys.version.split()[0])]
    for name in _PACKAGES:
        try:
            out.append((name, version(name)))
        except PackageNotFoundError:
            continue
    return tuple(out)


def package_versions() -> dict[str, str]:
    """Versions of the packages that shape a cell's numbers (absent ones left out), and Python's."""
    return dict(_package_versions())


@functools.lru_cache(maxsize=1)
def project_revision() -> str:
    """The project's git revision (``<sha>`` plus ``+dirty`` with uncommitted changes), or ``unknown``.

    Read once per process (a worker reports the code it imported).
    """
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha + ("+dirty" if dirty else "") if sha else "unknown"


def _embedder_factory(embedder: Mapping[str, Any]) -> Callable[[], Any] | None:
    if embedder.get("kind") == "hash":
        from memsim.memory.embed import HashEmbedder

        dim = int(embedder.get("dim", 256))
        return lambda: HashEmbedder(dim)
    return None  # the run's default: the packaged MiniLM with the shared on-disk cache


def _atomic_json(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def headline(metrics: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per system of a run's ``metrics.json``: accuracy (the headline metric) and the learning effect."""
    out = {}
    for name, s in (metrics.get("systems") or {}).items():
        if not isinstance(s, Mapping):
            continue
        overall = (s.get("overall") or {}).get("scores", {}).get(metrics.get("metric", ""), {})
        answers = {k: v for k, v in s.items() if k.startswith("answer_") and isinstance(v, (int, float))}
        out[name] = {
            "accuracy": s.get("mean", overall.get("mean")),
            "questions": s.get("questions"),
            "first": s.get("first"),
            "second": s.get("second"),
            "did_twin": s.get("did_twin"),
            "did_twin_lo": s.get("did_twin_lo"),
            "did_twin_hi": s.get("did_twin_hi"),
            "did_control": s.get("did_control"),
            "did_control_lo": s.get("did_control_lo"),
            "did_control_hi": s.get("did_control_hi"),
            "answer_accuracy": next(iter(answers.values()), None),
        }
    return out


def run_cell(task: Mapping[str, Any]) -> dict[str, Any]:
    """Play one cell into its run folder and write its ``cell.json``; never raises for a failing run.

    A cell folder that holds a cut-short run is resumed (``memsim.sim.recorder``).

    Returns:
        The cell record (as written to ``cell.json``).
    """
    out = Path(task["dir"])
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    c0 = time.process_time()
    record: dict[str, Any] = {
        "cell_id": task["cell_id"],
        "seed": task["seed"],
        "spec": task["spec"],
        "embedder": task["embedder"],
        "packages": package_versions(),
        "revision": project_revision(),
        "host": os.uname().nodename if hasattr(os, "uname") else "",
        "pid": os.getpid(),
        "started": started.isoformat(timespec="seconds"),
    }
    try:
        from memsim.analysis.pipeline import execute
        from memsim.memory.registry import Resources
        from memsim.core.streams import streams
        from memsim.sim.spec import RunSpec

        spec = RunSpec.model_validate(task["spec"])
        resources = Resources(rng=streams(spec.seed)["systems"], embedder_factory=_embedder_factory(task["embedder"]))
        outcome = execute(spec, out_dir=out, resources=resources)
        record.update(state="done", error=None, headline=headline(outcome.summary.metrics))
        made = resources.made_embedder
        if made is not None and hasattr(made, "stats"):
            # Hits: texts found in the embedding cache that other cells (or runs) had already embedded.
            record["embeddings"] = {"model": getattr(made, "model_id", None), **dataclasses.asdict(made.stats)}
    except Exception as exc:  # a failing cell is recorded; the sweep goes on
        record.update(state="failed", error=f"{type(exc).__name__}: {exc}",
                      traceback="".join(traceback.format_exception(exc))[-4000:], headline={})
    record["wall_seconds"] = round(time.perf_counter() - t0, 3)
    record["cpu_seconds"] = round(time.process_time() - c0, 3)
    record["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    _atomic_json(out / CELL_FILE, record)
    return record


# --------------------------------------------------------------------------- executors


def _local(tasks: Sequence[dict[str, Any]], workers: int) -> Iterator[dict[str, Any]]:
    """A process pool of spawned workers (no state inherited from this process)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = {pool.submit(run_cell, t): t for t in tasks}
        for fut in as_completed(futures):
            yield _result(fut, futures[fut])
    except BaseException:
        # Interrupted (Ctrl-C, an error here): queued cells are dropped and the cells in flight stopped;
        # their folders keep every committed day, and the next run resumes them.
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        raise
    pool.shutdown()


def _result(fut: Any, task: Mapping[str, Any]) -> dict[str, Any]:
    """A future's record; a worker that died (killed, out of memory) makes its cell a failed one."""
    try:
        return fut.result()
    except Exception as exc:
        record = {"cell_id": task["cell_id"], "seed": task["seed"], "spec": task["spec"], "embedder": task["embedder"],
                  "state": "failed", "error": f"worker lost: {type(exc).__name__}: {exc}", "headline": {},
                  "packages": package_versions(), "revision": project_revision()}
        path = Path(task["dir"])
        path.mkdir(parents=True, exist_ok=True)
        _atomic_json(path / CELL_FILE, record)
        return record


def _dask(tasks: Sequence[dict[str, Any]], workers: int, scheduler: str | None) -> Iterator[dict[str, Any]]:
    """``dask.distributed``: an existing scheduler, or a LocalCluster on 127.0.0.1 without a dashboard."""
    try:
        import logging

        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise UserError("--executor dask needs dask.distributed: pip install 'memsim[sweep]'") from None
    cluster = None
    try:
        if scheduler:
            client = Client(scheduler, timeout="30s")
        else:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   scheduler_port=0, dashboard_address=None, silence_logs=logging.ERROR)
            client = Client(cluster)
    except OSError as exc:
        raise UserError(f"cannot reach the Dask scheduler {scheduler or '(local cluster)'}: {exc}") from None
    try:
        futures = {}
        for t in tasks:
            fut = client.submit(run_cell, t, key=f"memsim-cell-{t['cell_id']}", pure=False)
            futures[fut] = t
        for fut in as_completed(list(futures)):
            yield _result(fut, futures[fut])
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# --------------------------------------------------------------------------- the sweep


@dataclass(frozen=True)
class CellRecord:
    """A cell and what became of it."""

    cell: Cell
    state: str
    """``done``, ``failed`` or ``pending``."""
    error: str | None = None
    wall_seconds: float | None = None
    headline: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepResult:
    """What a sweep holds after ``run_sweep``."""

    out_dir: Path
    records: tuple[CellRecord, ...]
    ran: int
    """Cells played by this call (the others were finished before)."""
    wall_seconds: float

    @property
    def counts(self) -> dict[str, int]:
        """Cells per state."""
        out = {"done": 0, "failed": 0, "pending": 0}
        for r in self.records:
            out[r.state] = out.get(r.state, 0) + 1
        return out


def is_sweep_dir(path: str | Path) -> bool:
    """Whether ``path`` is a sweep folder (it holds ``sweep.json``)."""
    return (Path(path) / SWEEP_FILE).is_file()


def read_records(out_dir: Path, cells: Sequence[Cell]) -> list[CellRecord]:
    """Each cell's state from its ``cell.json`` (``pending`` when there is none)."""
    out = []
    for c in cells:
        path = Path(out_dir) / CELLS / c.cell_id / CELL_FILE
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            out.append(CellRecord(c, "pending"))
            continue
        out.append(CellRecord(c, rec.get("state", "pending"), rec.get("error"), rec.get("wall_seconds"),
                              rec.get("headline") or {}))
    return out


_INDEX_FIGURES = ("accuracy", "questions", "first", "second", "did_twin", "did_twin_lo", "did_twin_hi",
                  "did_control", "did_control_lo", "did_control_hi", "answer_accuracy")


def index_frame(records: Sequence[CellRecord]) -> Any:
    """One row per cell and system: the cell, its point, seed, state, error and headline figures."""
    import polars as pl

    rows = []
    for r in records:
        c = r.cell
        for system in c.systems:
            h = r.headline.get(system, {})
            rows.append({
                "cell": c.cell_id, "index": c.index, "scenario": c.scenario,
                "point": json.dumps(c.point, sort_keys=True), "base": c.is_base,
                "system_set": ",".join(c.systems), "system": system, "seed": c.seed, "state": r.state,
                "error": r.error, "wall_seconds": r.wall_seconds, "metric": c.spec.get("metric"),
                **{k: (None if h.get(k) is None else float(h[k])) for k in _INDEX_FIGURES},
                "dir": f"{CELLS}/{c.cell_id}",
            })
    schema = {"cell": pl.Utf8, "index": pl.Int64, "scenario": pl.Utf8, "point": pl.Utf8, "base": pl.Boolean,
              "system_set": pl.Utf8, "system": pl.Utf8, "seed": pl.Int64, "state": pl.Utf8, "error": pl.Utf8,
              "wall_seconds": pl.Float64, "metric": pl.Utf8, **{k: pl.Float64 for k in _INDEX_FIGURES}, "dir": pl.Utf8}
    return pl.DataFrame(rows, schema=schema)


def _write_index(out_dir: Path, records: Sequence[CellRecord]) -> None:
    write_atomic(out_dir / INDEX_FILE, index_frame(records).write_parquet)


def read_index(out_dir: str | Path) -> Any:
    """A sweep's ``index.parquet``.

    Raises:
        UserError: not a sweep folder.
    """
    import polars as pl

    path = Path(out_dir) / INDEX_FILE
    if not path.is_file():
        raise UserError(f"{out_dir}: no {INDEX_FILE}; not a sweep folder (run memsim sweep SPEC.toml --out DIR)")
    return pl.read_parquet(path)


def run_sweep(
    spec: SweepSpec,
    out_dir: str | Path,
    *,
    executor: str = "local",
    workers: int | None = None,
    scheduler: str | None = None,
    retry_failed: bool = False,
    progress: Callable[[str], None] | None = None,
) -> SweepResult:
    """Play every unfinished cell of ``spec`` into ``out_dir`` and write the index.

    Args:
        spec: the sweep.
        out_dir: the sweep folder (``sweep.json``, ``index.parquet``, ``cells/<id>/``); cells finished
            there before are not played again.
        executor: ``local`` (process pool) or ``dask``.
        workers: processes (default: the number of cores); for an existing Dask scheduler, unused.
        scheduler: address of a running Dask scheduler (``dask`` only).
        retry_failed: also play cells recorded as failed.
        progress: called with one line per finished cell.

    Raises:
        UserError: an unknown executor, a bad worker count, Dask missing or unreachable.
    """
    if executor not in EXECUTORS:
        raise UserError(f"--executor: unknown executor {executor!r}; choose from {', '.join(EXECUTORS)}")
    if scheduler and executor != "dask":
        raise UserError("--scheduler needs --executor dask")
    workers = (os.cpu_count() or 1) if workers is None else workers
    if not 1 <= workers <= MAX_WORKERS:  # the bound --workers has, for library callers and configs too
        raise UserError(f"--workers must be between 1 and {MAX_WORKERS:,}, got {short_value(workers)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cells = expand(spec)
    from filelock import FileLock, Timeout

    # One sweep process per folder: a second would play the same pending cells. The OS drops the lock
    # of a killed process, so a restart after kill -9 is not refused.
    lock = FileLock(str(out / ".sweep.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise UserError(f"{out}: another memsim sweep is playing this folder; wait for it or choose another --out") from None
    try:
        return _run_locked(spec, out, cells, executor=executor, workers=workers, scheduler=scheduler,
                           retry_failed=retry_failed, progress=progress)
    finally:
        lock.release()


def _run_locked(
    spec: SweepSpec,
    out: Path,
    cells: list[Cell],
    *,
    executor: str,
    workers: int,
    scheduler: str | None,
    retry_failed: bool,
    progress: Callable[[str], None] | None,
) -> SweepResult:
    _atomic_json(out / SWEEP_FILE, spec.to_json())
    t0 = time.perf_counter()
    records = {r.cell.cell_id: r for r in read_records(out, cells)}
    todo = [c for c in cells if records[c.cell_id].state == "pending"
            or (retry_failed and records[c.cell_id].state == "failed")]
    say = progress or (lambda line: None)
    finished_before = len(cells) - len(todo)
    if finished_before:
        say(f"{finished_before} of {len(cells)} cells already finished in {out}; playing {len(todo)}")
    _write_index(out, [records[c.cell_id] for c in cells])
    if todo:
        tasks = [c.task(out) for c in todo]
        stream = _local(tasks, min(workers, len(tasks))) if executor == "local" else _dask(tasks, workers, scheduler)
        by_id = {c.cell_id: c for c in cells}
        done = 0
        for rec in stream:
            done += 1
            cell = by_id[rec["cell_id"]]
            records[cell.cell_id] = CellRecord(cell, rec["state"], rec.get("error"), rec.get("wall_seconds"),
                                               rec.get("headline") or {})
            _write_index(out, [records[c.cell_id] for c in cells])
            where = ", ".join(f"{k}={v}" for k, v in cell.point.items()) or "base"
            line = (f"[{done}/{len(todo)}] {rec['state']:<6} {cell.cell_id} {cell.scenario} ({where}) "
                    f"{' & '.join(cell.systems)} seed {cell.seed}")
            if rec.get("wall_seconds") is not None:
                line += f" {rec['wall_seconds']:.1f} s"
            if rec["state"] == "failed":
                line += f": {rec.get('error')}"
            say(line)
    final = tuple(records[c.cell_id] for c in cells)
    return SweepResult(out, final, len(todo), time.perf_counter() - t0)


def cell_probes(out_dir: str | Path, cell: Cell) -> Any:
    """The probe rows of a finished cell."""
    import polars as pl

    return pl.read_parquet(Path(out_dir) / CELLS / cell.cell_id / "probes.parquet")


# --------------------------------------------------------------------------- dry run


def _arms(spec: Mapping[str, Any], system: Mapping[str, Any]) -> int:
    """How many times a cell plays one system: itself, plus its twin (placebo, constant arms) when it uses feedback."""
    from memsim.memory.registry import learns_from_feedback
    from memsim.sim.spec import speaks_in_turns

    if spec.get("twins", True) and spec.get("feedback_from") != "none" and (
        speaks_in_turns(spec.get("feedback_from", "evidence")) or learns_from_feedback(system["name"], system["args"])
    ):
        return 2 + bool(spec.get("placebo")) + 2 * bool(spec.get("constant_arms"))
    return 1


def _played(cell: Cell) -> int:
    """Systems played in a cell, twins and placebos included."""
    return sum(_arms(cell.spec, s) for s in cell.spec["systems"])


def _system_key(system: Mapping[str, Any]) -> str:
    """A system of a cell spec as the timing table keys it (name and arguments)."""
    return json.dumps({"name": system["name"], "args": system.get("args") or {}}, sort_keys=True)


def _work(cell: Cell) -> tuple[dict[str, Any], list[Any], Any]:
    from memsim.analysis.pipeline import scenario_stream
    from memsim.sim.runner import episode_totals

    stream = scenario_stream(cell.spec["scenario"]["name"], cell.spec["scenario"]["args"], cell.seed)
    episodes = list(stream.episodes())
    totals = episode_totals(episodes)
    played = _played(cell)
    return {**totals, "played": played, "units": (totals["turns"] + totals["questions"]) * played}, episodes, stream


@dataclass(frozen=True, slots=True)
class Timings:
    """The measured rates a dry run's estimate is made of."""

    unit_s: Mapping[str, float]
    """Warm engine seconds per unit of work (a turn or a question, for one arm), per system (``_system_key``)."""
    text_s: float
    """Embedding seconds per text with the cache off (paid once per scenario point and seed)."""
    first_use_s: Mapping[str, float] = field(default_factory=dict)
    """Seconds a fresh process pays once before a system runs warm (imports, models loaded on first use)."""


def _timed_play(spec: Any, episodes: list[Any], stream: Any, budget_s: float) -> tuple[float, float]:
    """(seconds, fraction done) of playing ``spec`` with the hash embedder, stopped after ``budget_s``."""
    from memsim.memory.embed import HashEmbedder
    from memsim.memory.registry import Resources
    from memsim.core.streams import streams
    from memsim.sim.runner import iter_run

    resources = Resources(rng=streams(spec.seed)["systems"], embedder_factory=lambda: HashEmbedder(256))
    t0 = time.perf_counter()
    frac = 0.0
    for cp in iter_run(spec, episodes, start=stream.start, end=stream.end, resources=resources):
        frac = cp.done / cp.total if cp.total else 1.0
        if time.perf_counter() - t0 > budget_s:
            break
    return time.perf_counter() - t0, frac


def _warm_rate(spec: Any, episodes: list[Any], stream: Any, units: int, budget_s: float) -> tuple[float, float]:
    """(warm seconds per unit, first-use seconds) of one system alone.

    It is played twice: the first play pays what a process pays once (imports, models loaded on
    first use), the second is timed as the warm rate; the difference is the first-use cost.
    """
    cold_s, cold_frac = _timed_play(spec, episodes, stream, budget_s / 2)
    warm_s, warm_frac = _timed_play(spec, episodes, stream, budget_s / 2)
    if warm_frac <= 0 or not units:
        return math.nan, 0.0
    rate = warm_s / warm_frac / units
    return rate, max(0.0, cold_s - rate * units * cold_frac)


def _calibrate(cells: Sequence[Cell], sized: Sequence[tuple[dict[str, Any], list[Any], Any]],
               calibrate_s: float) -> Timings:
    """Each distinct system played alone (hash embedder) on the first cell that has it, then the embedder on 128 texts."""
    from memsim.memory.embed import Embedder, HashEmbedder
    from memsim.sim.runner import upfront_texts
    from memsim.sim.spec import RunSpec

    first: dict[str, int] = {}
    for i, c in enumerate(cells):
        for system in c.spec["systems"]:
            first.setdefault(_system_key(system), i)
    unit_s: dict[str, float] = {}
    first_use_s: dict[str, float] = {}
    for key, i in first.items():
        cell, (w, episodes, stream) = cells[i], sized[i]
        system = next(s for s in cell.spec["systems"] if _system_key(s) == key)
        alone = RunSpec.model_validate(cell.spec).model_copy(update={"answer": None})
        alone = alone.model_copy(update={"systems": tuple(s for s in alone.systems if _system_key(s.model_dump()) == key)})
        units = (w["turns"] + w["questions"]) * _arms(cell.spec, system)
        unit_s[key], first_use_s[key] = _warm_rate(alone, episodes, stream, units, calibrate_s / len(first))
    texts = upfront_texts(sized[0][1])
    sample = texts[:128]
    dim = cells[0].embedder.get("dim", 256)
    embedder = HashEmbedder(dim) if cells[0].embedder.get("kind") == "hash" else Embedder(use_cache=False)
    embedder.encode(sample[:2])  # loads the model outside the timing
    t1 = time.perf_counter()
    embedder.encode(sample)
    return Timings(unit_s=unit_s, text_s=(time.perf_counter() - t1) / max(1, len(sample)), first_use_s=first_use_s)


def estimate(
    spec: SweepSpec, cells: Sequence[Cell], *, calibrate_s: float = 10.0, timings: Timings | None = None
) -> list[dict[str, Any]]:
    """Per cell: its size and estimated wall time on one worker, LLM calls and tokens.

    Time is measured rates (``timings``, else calibrated now): per system,
    the engine's warm seconds per unit of work (turns + questions, per arm
    played: itself, its twin, its placebo), from playing it alone twice with
    the hash embedder on the first cell that has it (``calibrate_s`` split
    between the systems; the first play pays the process's first-use costs,
    the second is timed); and the embedder's seconds per text, from
    embedding up to 128 texts with the cache off. A cell's ``seconds`` is
    its systems' warm time; the embedding of its texts into a cold cache is
    ``embed_seconds``, charged once per scenario point and seed (to the
    first such cell: the others find the texts in the shared cache; a warm
    cache makes it pessimistic), so two cells with the same systems get the
    same ``seconds`` wherever they come. LLM calls: one reader call per
    question and system played, plus one per LLM judge; tokens: the
    reader's prompt (``k`` retrieved turns of the scenario's mean turn
    length, at 1.3 tokens a word, plus 150) per call. Estimates, not
    measurements.
    """
    from memsim.sim.runner import upfront_texts

    if not cells:
        return []
    sized = [_work(c) for c in cells]
    timings = timings or _calibrate(cells, sized, calibrate_s)
    texts = upfront_texts(sized[0][1])
    words = sum(len(t.split()) for t in texts) / max(1, len(texts))
    judges_llm = 0
    reader = spec.answer is not None
    if reader:
        from memsim.sim.answer.judges import LLM_JUDGES

        judges_llm = sum(1 for j in (spec.answer.judge or ()) if j in LLM_JUDGES)
    out = []
    embedded: set[str] = set()
    for c, (w, eps, _) in zip(cells, sized):
        group = json.dumps([c.spec["scenario"], c.seed], sort_keys=True)
        n_texts = len(upfront_texts(eps)) if group not in embedded else 0
        embedded.add(group)
        k = int(c.spec.get("k", 10))
        calls = w["questions"] * w["played"] * (1 + judges_llm) if reader else 0
        tokens = int(calls * (k * words * 1.3 + 150)) if reader else 0
        per_arm = w["turns"] + w["questions"]
        seconds = sum(timings.unit_s[_system_key(s)] * per_arm * _arms(c.spec, s) for s in c.spec["systems"])
        out.append({"cell": c.cell_id, "turns": w["turns"], "questions": w["questions"], "played": w["played"],
                    "seconds": seconds, "embed_seconds": timings.text_s * n_texts, "llm_calls": calls,
                    "tokens": tokens})
    if out:  # first-use costs are paid once per process: shown with the first cell, apart from its seconds
        out[0]["first_use_seconds"] = sum(timings.first_use_s.values())
    return out


def format_estimate(cells: Sequence[Cell], costs: Sequence[Mapping[str, Any]]) -> str:
    """The dry run's total line: warm CPU time of the cells, the cold embedding once, LLM calls and tokens."""
    warm = sum(c["seconds"] for c in costs)
    cold = sum(c.get("embed_seconds", 0.0) for c in costs)
    first = sum(c.get("first_use_seconds", 0.0) for c in costs)
    return (f"{len(cells)} cells; estimated {(warm + cold + first) / 60:.1f} CPU-minutes: {warm / 60:.1f} playing the "
            f"cells (warm rates per system), {cold / 60:.1f} embedding their texts once into a cold cache, "
            f"{first:.0f} s loading the systems once per worker process; "
            f"{sum(c['llm_calls'] for c in costs)} LLM calls, {sum(c['tokens'] for c in costs)} tokens")


def format_cells(cells: Sequence[Cell], costs: Sequence[Mapping[str, Any]] | None = None,
                 records: Sequence[CellRecord] | None = None) -> str:
    """The cells as a text table (with costs and states when given)."""
    lines = [f"{'#':>4} {'cell':<16} {'scenario':<12} {'point':<34} {'systems':<34} {'seed':>5}"
             + (f" {'turns':>6} {'quest':>6} {'est s':>7} {'LLM calls':>9} {'tokens':>9}" if costs else "")
             + (f" {'state':<7}" if records else "")]
    for i, c in enumerate(cells):
        point = ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in c.point.items()) or "base"
        line = f"{c.index:>4} {c.cell_id:<16} {c.scenario:<12} {point[:34]:<34} {' & '.join(c.systems)[:34]:<34} {c.seed:>5}"
        if costs:
            e = costs[i]
            line += f" {e['turns']:>6} {e['questions']:>6} {e['seconds']:>7.1f} {e['llm_calls']:>9} {e['tokens']:>9}"
        if records:
            line += f" {records[i].state:<7}"
        lines.append(line)
    return "\n".join(lines)


def config_sweep(
    config: Any,
    *,
    systems: Sequence[Any],
    seeds: int,
    embedder: str = "minilm",
    name: str = "sweep",
    scenario_grid: Mapping[str, Sequence[Any]] | None = None,
    run_grid: Mapping[str, Sequence[Any]] | None = None,
    design: str = "one-at-a-time",
    **run_overrides: Any,
) -> SweepSpec:
    """A sweep over a loaded run config: its scenario, ``systems`` in one cell, ``seeds`` seeds from its own.

    This is how ``memsim power`` and ``memsim sensitivity`` express their runs
    (every system in one cell, so that the DiD against the control is paired).

    Args:
        config: a loaded config (``memsim.scenarios.config.RunConfig``).
        systems: ``memsim.memory.registry.SystemSpec`` values, the control among them or not (it is added first).
        seeds: consecutive seeds from ``config.run.seed``.
        embedder: ``minilm`` or ``hash`` (256 dimensions).
        name: the sweep's name.
        scenario_grid: scenario knob -> values.
        run_grid: run setting -> values.
        design: ``one-at-a-time`` or ``factorial``.
        **run_overrides: run settings for every cell (``n_boot``...).

    Raises:
        UserError: a bad knob or value (named).
    """
    scen = dict(config.scenario)
    if scenario_grid:
        scen["grid"] = {k: list(v) for k, v in scenario_grid.items()}
    run = config.run.model_dump(mode="json", exclude={"systems", "workers", "scheduler"})
    run.update({k: v for k, v in run_overrides.items() if v is not None})
    if run_grid:
        run["grid"] = {k: list(v) for k, v in run_grid.items()}
    data = {
        "sweep": {"name": name, "seeds": seeds, "embedder": embedder, "design": design, "split": "together"},
        "scenario": scen,
        "systems": [{"name": s.name, "args": dict(s.args), "label": s.label} for s in systems],
        "run": run,
    }
    return sweep_from_mapping(data, source=config.source)


def require_done(result: SweepResult) -> None:
    """Raise when some cells of a sweep did not finish (the caller needs them all).

    Raises:
        UserError: naming the failed cells and their errors.
    """
    bad = [r for r in result.records if r.state != "done"]
    if bad:
        first = "; ".join(f"{r.cell.cell_id}: {r.error}" for r in bad[:3])
        raise UserError(f"{len(bad)} of {len(result.records)} cells did not finish ({first}); "
                        f"the finished ones are kept in {result.out_dir}: rerun the same command to resume")
