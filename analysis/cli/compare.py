"""``memsim compare RUN_DIR...`` or ``memsim compare SWEEP_DIR``: one comparison page (figures from metrics.json).

Given run folders, one page across them (``memsim.analysis.report.compare_runs``).
Given one sweep folder (``memsim sweep``), its cells aggregated over seeds,
systems ranked on the learning effect and on the headline metric, and a plot per knob
(``memsim.analysis.sweep_compare.compare_sweep``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from memsim.analysis.cli.options import int_in, nonempty_path

__all__ = ["compare_arguments", "compare_main", "default_compare_dir"]

# The report's own defaults (analysis.report.DEFAULT_*), repeated here so that the parser does not import polars.
_WINDOW = 50
_FADING = 0.98


def compare_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim compare``."""
    parser.add_argument("run_dirs", metavar="RUN_DIR", nargs="+",
                        help="run folders to compare (e.g. one per seed), or one sweep folder")
    parser.add_argument("--out", type=nonempty_path, default=None,
                        help="output folder (default: compare/ beside the run folders, in their common parent; "
                        "for a sweep, SWEEP_DIR/compare)")
    parser.add_argument("--window", type=int_in("window"), default=_WINDOW, help="questions in the windowed curve (default %(default)s)")
    parser.add_argument("--fading", type=float, default=_FADING, help="fading factor in (0, 1] (default %(default)s)")


def default_compare_dir(run_dirs: Sequence[str | Path]) -> Path:
    """``compare/`` in the run folders' common parent: beside the runs, never in whatever folder the shell is in."""
    import os

    parents = [str(Path(d).resolve().parent) for d in run_dirs]
    return Path(os.path.commonpath(parents)) / "compare"


def compare_main(args: argparse.Namespace) -> int:
    """Write compare.html and compare.md, print the Markdown summary and the page's path."""
    from memsim.analysis.sweep import is_sweep_dir
    from memsim.core.errors import UserError
    from memsim.core.table import console_width, fit_markdown

    if len(args.run_dirs) == 1 and is_sweep_dir(args.run_dirs[0]):
        from memsim.analysis.sweep_compare import compare_sweep

        md = compare_sweep(args.run_dirs[0], args.out)
        print(fit_markdown(md.read_text(encoding="utf-8"), console_width(), where=str(md)))
        print(f"comparison: {md.parent / 'compare.html'}")
        return 0
    if any(is_sweep_dir(d) for d in args.run_dirs):
        raise UserError("compare: give one sweep folder alone, or run folders (a sweep's cells are under SWEEP_DIR/cells/)")
    from memsim.analysis.report import compare_runs

    if args.window < 1:
        raise UserError(f"--window must be a positive number of questions, got {args.window}")
    if not 0 < args.fading <= 1:
        raise UserError(f"--fading must be in (0, 1], got {args.fading}")
    from memsim.analysis.distinct import distinct_runs

    # The same run in two folders is one observation: pooled twice it would give n = 2 and a zero-width interval.
    distinct = distinct_runs(args.run_dirs)
    for note in distinct.notes():
        print(f"compare: {note}")
    path = compare_runs(list(distinct.kept), args.out or default_compare_dir(distinct.kept), window=args.window,
                        fading=args.fading)
    md = path.parent / "compare.md"
    print(fit_markdown(md.read_text(encoding="utf-8"), console_width(), where=str(md)))
    print(f"comparison: {path}")
    return 0
