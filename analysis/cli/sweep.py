"""``memsim sweep SPEC.toml --out DIR``: scenarios x systems x seeds, one run folder per cell, resumable.

``--dry-run`` lists the cells with their estimated cost; ``--executor local``
(a process pool, ``--workers N``) or ``--executor dask`` (``--scheduler
ADDRESS``, or a local cluster on 127.0.0.1). Rerunning the same command
plays only the unfinished cells.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from memsim.analysis.cli.options import float_in, int_in, nonempty_path

__all__ = ["sweep_arguments", "sweep_main", "add_executor_arguments"]


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """``--executor``, ``--workers``, ``--scheduler`` (shared by sweep, power and sensitivity)."""
    g = parser.add_argument_group("execution")
    g.add_argument("--executor", choices=("local", "dask"), default="local",
                   help="local: a process pool; dask: dask.distributed (pip install 'memsim[sweep]')")
    g.add_argument("--workers", type=int_in("workers"), default=None,
                   help=f"worker processes (default: the number of cores, here {os.cpu_count()})")
    g.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="a running Dask scheduler (tcp://host:8786); default: a local cluster on 127.0.0.1")


def sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim sweep``."""
    parser.add_argument("spec", type=Path, metavar="SPEC.toml", help="sweep spec, e.g. scenarios/configs/sweep_persona.toml")
    parser.add_argument("--out", type=nonempty_path, default=None,
                        help="sweep folder (default runs/sweep-<name>); finished cells there are not played again")
    parser.add_argument("--dry-run", action="store_true", help="list the cells and their estimated cost; run nothing")
    parser.add_argument("--calibrate-s", type=float_in("seconds"), default=10.0,
                        help="wall seconds of the calibration run behind --dry-run's time estimate (default 10)")
    parser.add_argument("--retry-failed", action="store_true", help="also play cells recorded as failed")
    add_executor_arguments(parser)


def sweep_main(args: argparse.Namespace) -> int:
    """Expand the spec; list it (``--dry-run``) or play it and print the states."""
    from memsim.analysis.sweep import estimate, expand, format_cells, format_estimate, load_sweep, run_sweep
    from memsim.core.errors import UserError

    spec = load_sweep(args.spec)
    cells = expand(spec)
    out = args.out or Path("runs") / f"sweep-{spec.sweep.name}"
    if args.dry_run:
        costs = estimate(spec, cells, calibrate_s=args.calibrate_s)
        print(format_cells(cells, costs))
        print(format_estimate(cells, costs))
        return 0
    if args.workers is not None and args.workers < 1:
        raise UserError(f"--workers must be at least 1, got {args.workers}")
    print(f"memsim sweep: {len(cells)} cells ({args.spec}) into {out}, executor {args.executor}"
          + (f" at {args.scheduler}" if args.scheduler else f", {args.workers or os.cpu_count()} workers"), flush=True)
    result = run_sweep(spec, out, executor=args.executor, workers=args.workers, scheduler=args.scheduler,
                       retry_failed=args.retry_failed, progress=lambda line: print(line, flush=True))
    c = result.counts
    print(f"{c['done']} done, {c['failed']} failed, {c['pending']} pending; played {result.ran} cells in "
          f"{result.wall_seconds:.1f} s; index: {out / 'index.parquet'}")
    print(f"compare: memsim compare {out}")
    return 1 if c["failed"] else 0
