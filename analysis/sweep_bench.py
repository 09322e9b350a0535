"""``memsim bench sweep``: cells per minute of a sweep with 1 and 2 workers, and Dask's overhead per cell.

One sweep (the persona scenario, three systems, a few seeds, the hash
embedder so that the figure is the simulator's and not the model's) is
played from scratch into fresh folders: on the local pool with 1 worker,
with 2 workers, then on a Dask LocalCluster with 2 workers. Wall times
include starting the workers (and, for Dask, the cluster), as a user waits
for them. Printed: cells per minute, the parallel efficiency at 2 workers
(cells per minute at 2 / twice those at 1), Dask's extra wall time per cell
against the local pool at the same worker count, the mean wall and CPU
time of a cell inside its worker (CPU time that stays flat while wall time
grows means the cores were busy with other work), the time to start a 2-worker LocalCluster (and the
overhead per cell without it), the machine's cores and load average before
and after.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["bench_sweep"]


def bench_sweep(*, users: int = 4, months: float = 2.0, seeds: int = 4, dask: bool = True, repeat: int = 2) -> dict[str, Any]:
    """Play the same sweep with 1 and 2 local workers (and 2 Dask workers); the figures as a dict.

    The runs are interleaved ``repeat`` times and each keeps its best wall
    time, so that load from other processes on a shared machine weighs less.
    """
    from memsim.analysis.sweep import run_sweep, sweep_from_mapping

    spec = sweep_from_mapping({
        "systems": ["naive", "neuroplastic", "control-learner"],
        "sweep": {"name": "bench", "seeds": seeds, "embedder": "hash", "split": "each"},
        "scenario": {"name": "persona", "users": users, "months": months},
        "run": {"seed": 0, "n_boot": 200},
    })
    figures: dict[str, Any] = {"cells": 0, "cores": os.cpu_count(), "load_before": [round(x, 2) for x in os.getloadavg()]}
    runs = [("local", 1), ("local", 2)] + ([("dask", 2)] if dask else [])
    tmp = Path(tempfile.mkdtemp(prefix="memsim-bench-sweep-"))
    walls: dict[str, float] = {}
    all_walls: dict[str, list[float]] = {}
    try:
        for rnd in range(max(1, repeat)):
            for executor, workers in runs:
                out = tmp / f"{executor}-{workers}-{rnd}"
                t0 = time.perf_counter()
                result = run_sweep(spec, out, executor=executor, workers=workers)
                wall = time.perf_counter() - t0
                n = len(result.records)
                if result.counts["done"] != n:
                    raise RuntimeError(f"bench sweep: {result.counts} on {executor} x {workers}")
                key = f"{executor}_{workers}"
                all_walls.setdefault(key, []).append(round(wall, 2))
                if wall < walls.get(key, float("inf")):
                    walls[key] = wall
                    cpu = [json.loads((out / "cells" / r.cell.cell_id / "cell.json").read_text()).get("cpu_seconds", 0.0)
                           for r in result.records]
                    figures["cells"] = n
                    figures[f"{key}_wall_s"] = round(wall, 2)
                    figures[f"{key}_cells_per_min"] = round(60.0 * n / wall, 1)
                    figures[f"{key}_mean_cell_s"] = round(sum(r.wall_seconds or 0.0 for r in result.records) / n, 3)
                    figures[f"{key}_mean_cell_cpu_s"] = round(sum(cpu) / n, 3)
                shutil.rmtree(out, ignore_errors=True)
        for key, values in all_walls.items():
            figures[f"{key}_all_walls_s"] = values
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n = figures["cells"]
    if dask:
        import logging

        from dask.distributed import Client, LocalCluster

        t0 = time.perf_counter()
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", scheduler_port=0,
                          dashboard_address=None, silence_logs=logging.ERROR) as cluster, Client(cluster):
            figures["dask_cluster_start_s"] = round(time.perf_counter() - t0, 2)
    figures["parallel_efficiency_2"] = round(walls["local_1"] / (2 * walls["local_2"]), 3)
    if "dask_2" in walls:
        figures["dask_overhead_per_cell_s"] = round((walls["dask_2"] - walls["local_2"]) / n, 3)
        figures["dask_overhead_per_cell_after_start_s"] = round(
            (walls["dask_2"] - figures["dask_cluster_start_s"] - walls["local_2"]) / n, 3)
    figures["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return figures
