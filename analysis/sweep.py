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

This module plays a sweep (``run_sweep``) and re-exports the parts it is
made of: the spec and its cells (``memsim.analysis.sweep_plan``), reading a
spec (``memsim.analysis.sweep_parse``), playing one cell and the executors
(``memsim.analysis.sweep_worker``), the cells' records and the index
(``memsim.analysis.sweep_index``) and the dry run's estimate
(``memsim.analysis.sweep_estimate``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsim.analysis.sweep_estimate import Timings, estimate, format_estimate
from memsim.analysis.sweep_index import (
    CellRecord,
    SweepResult,
    format_cells,
    index_frame,
    read_index,
    read_records,
    write_index,
)
from memsim.analysis.sweep_parse import config_sweep, load_sweep, sweep_from_mapping
from memsim.analysis.sweep_plan import (
    CELLS,
    SWEEP_FILE,
    Cell,
    ScenarioGrid,
    SweepSettings,
    SweepSpec,
    SystemGrid,
    expand,
)
from memsim.analysis.sweep_worker import (
    headline,
    package_versions,
    play_dask,
    play_local,
    project_revision,
    run_cell,
    write_json,
)
from memsim.core.errors import UserError, short_value

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


# --------------------------------------------------------------------------- the sweep


def is_sweep_dir(path: str | Path) -> bool:
    """Whether ``path`` is a sweep folder (it holds ``sweep.json``)."""
    return (Path(path) / SWEEP_FILE).is_file()


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
    write_json(out / SWEEP_FILE, spec.to_json())
    t0 = time.perf_counter()
    records = {r.cell.cell_id: r for r in read_records(out, cells)}
    todo = [c for c in cells if records[c.cell_id].state == "pending"
            or (retry_failed and records[c.cell_id].state == "failed")]
    say = progress or (lambda line: None)
    finished_before = len(cells) - len(todo)
    if finished_before:
        say(f"{finished_before} of {len(cells)} cells already finished in {out}; playing {len(todo)}")
    write_index(out, [records[c.cell_id] for c in cells])
    if todo:
        tasks = [c.task(out) for c in todo]
        stream = (play_local(tasks, min(workers, len(tasks))) if executor == "local"
                  else play_dask(tasks, workers, scheduler))
        by_id = {c.cell_id: c for c in cells}
        done = 0
        for rec in stream:
            done += 1
            cell = by_id[rec["cell_id"]]
            records[cell.cell_id] = CellRecord(cell, rec["state"], rec.get("error"), rec.get("wall_seconds"),
                                               rec.get("headline") or {})
            write_index(out, [records[c.cell_id] for c in cells])
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
