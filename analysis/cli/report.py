"""``memsim report RUN_DIR``: write report.html and report.md into a run folder (longitudinal or static)."""

from __future__ import annotations

import argparse

from memsim.analysis.cli.options import int_in

__all__ = ["report_arguments", "report_main"]

# The report's own defaults (analysis.report.DEFAULT_*), repeated here so that the parser does not import polars.
_WINDOW = 50
_WINDOW_DAYS = 30.0
_FADING = 0.98


def report_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim report``."""
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (spec.json, probes.parquet, metrics.json, ...)")
    parser.add_argument("--window", type=int_in("window"), default=_WINDOW, help="questions in the windowed curve (default %(default)s)")
    parser.add_argument(
        "--window-days", type=float, default=_WINDOW_DAYS, help="days in the time-windowed curve (default %(default)s)"
    )
    parser.add_argument("--fading", type=float, default=_FADING, help="fading factor in (0, 1] (default %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="print only the report's path")


def report_main(args: argparse.Namespace) -> int:
    """Write the report, print the run's headline tables and the report's path."""
    from memsim.analysis.report import load_run, summary_text, write_report
    from memsim.core.errors import UserError

    if args.window < 1:
        raise UserError(f"--window must be a positive number of questions, got {args.window}")
    if not 0 < args.fading <= 1:
        raise UserError(f"--fading must be in (0, 1], got {args.fading}")
    run = load_run(args.run_dir)
    path = write_report(run, window=args.window, window_days=args.window_days, fading=args.fading)
    if not args.quiet:
        print(summary_text(run))
        print()
    print(f"report: {path}")
    return 0
