"""``memsim compare RUN_DIR...``: one comparison page across run folders (figures from their metrics.json)."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["compare_arguments", "compare_main"]

# The report's own defaults (analysis.report.DEFAULT_*), repeated here so that the parser does not import polars.
_WINDOW = 50
_FADING = 0.98


def compare_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim compare``."""
    parser.add_argument("run_dirs", metavar="RUN_DIR", nargs="+", help="run folders to compare (e.g. one per seed)")
    parser.add_argument("--out", type=Path, default=Path("runs/compare"), help="output folder (default %(default)s)")
    parser.add_argument("--window", type=int, default=_WINDOW, help="questions in the windowed curve (default %(default)s)")
    parser.add_argument("--fading", type=float, default=_FADING, help="fading factor in (0, 1] (default %(default)s)")


def compare_main(args: argparse.Namespace) -> int:
    """Write compare.html and compare.md, print the Markdown summary and the page's path."""
    from analysis.report import compare_runs
    from sim.errors import UserError

    if args.window < 1:
        raise UserError(f"--window must be a positive number of questions, got {args.window}")
    if not 0 < args.fading <= 1:
        raise UserError(f"--fading must be in (0, 1], got {args.fading}")
    path = compare_runs(args.run_dirs, args.out, window=args.window, fading=args.fading)
    print((path.parent / "compare.md").read_text(encoding="utf-8"))
    print(f"comparison: {path}")
    return 0
