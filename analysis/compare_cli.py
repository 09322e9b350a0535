"""``memsim compare RUN_DIR...``: one comparison page across run folders."""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.report import DEFAULT_FADING, DEFAULT_WINDOW, compare_runs

__all__ = ["compare_arguments", "compare_main"]


def compare_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim compare``."""
    parser.add_argument("run_dirs", metavar="RUN_DIR", nargs="+", help="run folders to compare (e.g. one per seed)")
    parser.add_argument("--out", type=Path, default=Path("runs/compare"), help="output folder (default %(default)s)")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="questions in the windowed curve (default %(default)s)")
    parser.add_argument("--fading", type=float, default=DEFAULT_FADING, help="fading factor in (0, 1] (default %(default)s)")
    parser.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples per interval (default %(default)s)")


def compare_main(args: argparse.Namespace) -> int:
    """Write compare.html and compare.md, print the Markdown summary and the page's path."""
    from sim.errors import UserError

    if args.window < 1:
        raise UserError(f"--window must be a positive number of questions, got {args.window}")
    if not 0 < args.fading <= 1:
        raise UserError(f"--fading must be in (0, 1], got {args.fading}")
    path = compare_runs(args.run_dirs, args.out, window=args.window, fading=args.fading, n_boot=args.n_boot)
    print((path.parent / "compare.md").read_text())
    print(f"comparison: {path}")
    return 0
