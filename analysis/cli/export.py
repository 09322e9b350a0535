"""``memsim export RUN_DIR --jsonl``: a run's per-question rows, one JSON object a line.

One line per question per system (twins and placebos included, as the rows
hold them): the question, its gold answer and evidence ids, what was
retrieved, the reader's answer where there is one, and every score. For
analysis outside memsim, as other harnesses' per-sample logs are.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from memsim.analysis.cli.options import nonempty_path

__all__ = ["export_arguments", "export_main"]


def export_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim export``."""
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder")
    parser.add_argument("--jsonl", action="store_true", required=True,
                        help="per-question rows as JSON Lines (the one format so far)")
    parser.add_argument("--out", type=nonempty_path, default=None, help="output file (default RUN_DIR/questions.jsonl; - for stdout)")


def export_main(args: argparse.Namespace) -> int:
    """Write the rows and say where, with how many."""
    from memsim.analysis.load import read_run

    run = read_run(args.run_dir)
    rows = run.probes.sort([c for c in ("system", "episode", "q_index") if c in run.probes.columns])
    if str(args.out) == "-":
        sys.stdout.write(rows.write_ndjson())
        return 0
    out = args.out or args.run_dir / "questions.jsonl"
    rows.write_ndjson(out)
    print(f"wrote {rows.height} rows ({rows['system'].n_unique()} systems) to {out}")
    return 0
