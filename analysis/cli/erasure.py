"""``memsim erasure``: what deletions left behind in a run folder (``memsim.analysis.erasure``)."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["erasure_arguments", "erasure_main"]


def erasure_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim erasure``."""
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a finished run folder")


def erasure_main(args: argparse.Namespace) -> int:
    """Print the erasure table of a run folder."""
    from memsim.analysis.erasure import erasure_table, format_erasure
    from memsim.analysis.load import read_run

    run = read_run(args.run_dir, require=("timeline.parquet", "run.json"))
    print(format_erasure(erasure_table(run.probes, run.timeline, run.info)))
    return 0
