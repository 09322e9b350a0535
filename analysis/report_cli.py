"""``memsim report RUN_DIR``: write report.html and report.md into a run folder."""

from __future__ import annotations

import argparse

from analysis.report import DEFAULT_FADING, DEFAULT_WINDOW, DEFAULT_WINDOW_DAYS, load_run, scored_probes, stats_rng, write_report
from analysis.stats import format_table, learning_summary

__all__ = ["report_arguments", "report_main"]


def report_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim report``."""
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (spec.json, probes.parquet, ...)")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="questions in the windowed curve (default %(default)s)")
    parser.add_argument(
        "--window-days", type=float, default=DEFAULT_WINDOW_DAYS, help="days in the time-windowed curve (default %(default)s)"
    )
    parser.add_argument("--fading", type=float, default=DEFAULT_FADING, help="fading factor in (0, 1] (default %(default)s)")
    parser.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples per interval (default %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="print only the report's path")


def report_main(args: argparse.Namespace) -> int:
    """Write the report, print the summary table and the report's path."""
    from sim.errors import UserError

    if args.window < 1:
        raise UserError(f"--window must be a positive number of questions, got {args.window}")
    if not 0 < args.fading <= 1:
        raise UserError(f"--fading must be in (0, 1], got {args.fading}")
    if args.n_boot < 1:
        raise UserError(f"--n-boot must be positive, got {args.n_boot}")
    path = write_report(
        args.run_dir, window=args.window, window_days=args.window_days, fading=args.fading, n_boot=args.n_boot
    )
    if not args.quiet:
        run = load_run(args.run_dir)
        if run.longitudinal:
            summary = learning_summary(
                scored_probes(run), metric=run.metric, control=run.control, rng=stats_rng(run), n_boot=args.n_boot
            )
            print(format_table(summary))
            print()
    print(f"report: {path}")
    return 0
