"""``memsim board RUN_OR_SWEEP_DIR... --out DIR``: one page ranking the systems of many runs (``memsim.analysis.board``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from memsim.analysis.cli.options import nonempty_path

__all__ = ["board_arguments", "board_main"]


def board_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim board``."""
    parser.add_argument("dirs", metavar="RUN_OR_SWEEP_DIR", nargs="+", type=Path,
                        help="run folders and sweep folders (a sweep's finished cells are its runs)")
    parser.add_argument("--out", type=nonempty_path, default=Path("runs/board"), help="output folder (default %(default)s)")


def board_main(args: argparse.Namespace) -> int:
    """Write board.html, board.md and board.json; print the Markdown and the page's path."""
    from memsim.analysis.board import write_board
    from memsim.core.table import console_width, fit_markdown

    page = write_board(args.dirs, args.out)
    md = page.parent / "board.md"
    print(fit_markdown(md.read_text(encoding="utf-8"), console_width(), where=str(md)))
    print(f"board: {page}")
    return 0
