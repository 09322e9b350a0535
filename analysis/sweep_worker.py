"""Playing a sweep's cells: one cell on a worker (``run_cell``) and the executors that hand cells to workers.

``run_cell`` plays one cell into its run folder and writes its
``cell.json`` (state, error, the resolved spec, the package versions and
the project's revision); it never raises for a failing run. The executors
yield each finished cell's record: ``play_local`` on a process pool of
spawned workers, ``play_dask`` on ``dask.distributed`` (imported only
there). Workers import ``run_cell`` by its module path. Re-exported by
``memsim.analysis.sweep``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from memsim.analysis.sweep_plan import CELL_FILE
from memsim.core.errors import UserError
from memsim.core.files import write_text_atomic

__all__ = ["package_versions", "project_revision", "headline", "run_cell", "write_json", "play_local", "play_dask"]

# Packages whose versions shape a cell's numbers (recorded in every cell.json).
_PACKAGES = ("memsim", "numpy", "scipy", "polars", "simpy", "pydantic", "faiss-cpu", "sentence-transformers",
             "torch", "bm25s", "spacy", "llama-cpp-python", "dask", "distributed")


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


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON (keys sorted), atomically."""
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
    write_json(out / CELL_FILE, record)
    return record


# --------------------------------------------------------------------------- executors


def play_local(tasks: Sequence[dict[str, Any]], workers: int) -> Iterator[dict[str, Any]]:
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
        write_json(path / CELL_FILE, record)
        return record


def play_dask(tasks: Sequence[dict[str, Any]], workers: int, scheduler: str | None) -> Iterator[dict[str, Any]]:
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
