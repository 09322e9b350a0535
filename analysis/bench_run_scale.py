"""``memsim bench run-scale``: user-months simulated per second and peak memory against users and workers.

Each run is a fresh process (``_SCALE_CHILD``) on a warm embedding cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memsim.analysis.bench_load import cpu_model, format_load, load_report, machine_load
from memsim.core.table import text_table

__all__ = ["bench_scale", "format_scale"]

_SCALE_CHILD = """
import json, resource, sys, time, functools, tempfile
from pathlib import Path
from memsim.analysis.pipeline import execute, make_spec
from memsim.memory.embed import Embedder
from memsim.memory.registry import SystemSpec
users, months, workers, scheduler, systems, cache = json.loads(sys.argv[1])
spec = make_spec("longitudinal", "life", {"users": users, "months": months}, [SystemSpec(s) for s in systems],
                 seed=0, n_boot=200)
out = Path(tempfile.mkdtemp(prefix="memsim-bench-scale-")) / "run"
t0 = time.perf_counter()
outcome = execute(spec, out_dir=out, embedder_factory=functools.partial(Embedder, cache_dir=cache), workers=workers,
                  scheduler=scheduler)
wall = time.perf_counter() - t0
info = outcome.result.info
timing = info["units"]["timing"]
print(json.dumps({"wall_s": wall, "run_s": outcome.result.wall_seconds, "units": len(timing),
                  "unit_s": sum(t["seconds"] for t in timing.values()),
                  "worker_peak_mb": max((t.get("peak_rss_mb") or 0.0) for t in timing.values()),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "turns": info["totals"]["turns"], "questions": info["totals"]["questions"],
                  "embedded": (info.get("embedding") or {}).get("embedded", 0),
                  "entities_recognised": (info.get("entities") or {}).get("recognised", 0),
                  "workers": info["units"]["workers"]}))
import shutil
shutil.rmtree(out.parent, ignore_errors=True)
"""


def bench_scale(
    *, users: Sequence[int] = (30, 300, 3000), months: float = 1.0, workers: Sequence[str] = ("1", "2", "local:2"),
    systems: Sequence[str] = ("naive", "neuroplastic"), cache: str | None = None, warm_up: bool = True,
) -> dict[str, Any]:
    """User-months simulated per second and peak memory against users and workers, each run in a fresh process.

    The life world of ``users`` users over ``months`` months against ``systems`` (with their twins,
    placebos and constant arms), MiniLM on a warm cache: each world is played once by an untimed
    warm-up run of every system first (embeddings and the gated arms' entities cached), so that the
    figures measure the play (``embedded`` and ``entities_recognised`` say what a timed run still
    computed). ``workers``: ``N`` (processes), ``0`` (in the run's process) or ``local:N`` (a
    Dask LocalCluster of N). ``cache``: an embedding cache folder to use and keep (a world of
    thousands of users takes most of an hour to embed on two cores: embed it once, then time the
    rows in later invocations); None: a fresh temporary one, removed after.
    ``warm_up`` False: no warm-up run (only with a ``cache`` an earlier invocation warmed for these
    users, months and systems).
    """
    if not warm_up and cache is None:
        raise ValueError("a run without a warm-up needs a cache an earlier invocation warmed (cache=DIR)")
    rows = []
    keep = cache is not None
    cache = str(Path(cache).expanduser()) if keep else tempfile.mkdtemp(prefix="memsim-bench-scale-cache-")
    before = machine_load()
    for n in users:
        # Every system, so that every cache a timed run reads is warm: the embeddings, and the entities the
        # gated arms recognise up front (a first timed row would otherwise pay spaCy over every turn).
        warm = json.dumps([int(n), float(months), os.cpu_count() or 1, None, list(systems), cache])
        proc = subprocess.run([sys.executable, "-c", _SCALE_CHILD, warm], capture_output=True, text=True) if warm_up \
            else None
        if proc is not None and proc.returncode != 0:
            raise RuntimeError(f"bench scale ({n} users, warm-up) failed: {proc.stderr[-2000:]}")
        for w in workers:
            scheduler, _, count = w.rpartition(":")
            args = json.dumps([int(n), float(months), int(count), scheduler or None, list(systems), cache])
            proc = subprocess.run([sys.executable, "-c", _SCALE_CHILD, args], capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"bench scale ({n} users, workers {w}) failed: {proc.stderr[-2000:]}")
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            # The play (the runner's wall: building, embedding, the units, joining the rows), not start-up and statistics.
            got.update(users=n, months=months, workers_asked=w,
                       user_months_per_s=round(n * months / got["run_s"], 2))
            rows.append(got)
    if not keep:
        import shutil

        shutil.rmtree(cache, ignore_errors=True)
    return {"rows": rows, "systems": list(systems), "load": load_report(before, machine_load()), "cpu": cpu_model(),
            "cores": os.cpu_count()}


def format_scale(figures: Mapping[str, Any]) -> str:
    """The scale bench as a table."""
    rows = [[str(r["users"]), r["workers_asked"], f"{r['turns']:,}", str(r["units"]), f"{r['run_s']:.1f}",
             f"{r['wall_s']:.1f}", f"{r['user_months_per_s']:.2f}", f"{r['peak_mb']:.0f}",
             f"{r['worker_peak_mb']:.0f}" if r["worker_peak_mb"] else "-",
             f"{r.get('embedded', 0):,} / {r.get('entities_recognised', 0):,}"]
            for r in figures["rows"]]
    head = ["users", "workers", "turns", "units", "play s", "wall s", "user-months/s (play)", "run peak MB",
            "worker peak MB", "still embedded / entities recognised"]
    return "\n".join([text_table(head, rows), f"systems: {', '.join(figures['systems'])} (and their arms); "
                      "MiniLM, warm cache; play: the runner's wall (build, embed, units, rows); wall: the whole "
                      "process, statistics included",
                      format_load(figures["load"])])
