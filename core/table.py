"""Plain-text tables for the terminal and for logs, laid out by rich.

The tables memsim prints go through ``text_table``: a header, a rule of
dashes under each column and one line per row, each column as wide as its
longest cell (a label of any length widens its own column and never shifts
the others), with no colour, no wrapping and no markup, so the text is the
same on a terminal, in a pipe and in a file.

A table too wide for the terminal folds (``fit_table``): rich measures the
terminal (``console_width``), and a table wider than it keeps only the
columns its caller names as its compact view (for the learning table:
system, contrast, the 2nd-half figure with its interval, p, MDE), with a
one-line note saying how to see the rest (``memsim --wide``, or the run's
``report.md``, which always holds every column). Output that is not a
terminal (a pipe, a file) is never folded unless ``$COLUMNS`` sets a width.
"""

from __future__ import annotations

import io
import os
import re
import sys
import textwrap
from collections.abc import Collection, Sequence
from typing import Any, TextIO

__all__ = ["text_table", "table_width", "console_width", "fit_table", "fit_markdown", "WIDE_ENV"]

WIDE_ENV = "MEMSIM_WIDE"
"""Set (``memsim --wide``) to print every table whole, whatever the terminal's width."""

# rich's box format, eight lines of four characters (top, head, head row, mid, row,
# foot row, foot, bottom): only the head row is drawn, a dash rule per column.
_RULE_UNDER_HEAD = "    \n    \n -  \n    \n    \n    \n    \n    \n"


def _cells(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[list[str]]:
    n = len(head)
    cells = []
    for r, row in enumerate(rows):
        if len(row) != n:
            raise ValueError(f"row {r} has {len(row)} cells, the header {n}")
        cells.append(["" if c is None else str(c) for c in row])
    return cells


def table_width(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> int:
    """Characters of the widest line ``text_table`` prints for these rows (terminal cells: wide glyphs count 2)."""
    from rich.cells import cell_len

    cells = _cells(head, rows)
    widths = [max([cell_len(str(h)), *(cell_len(row[i]) for row in cells)]) for i, h in enumerate(head)]
    return sum(widths) + 3 * (len(head) - 1)  # a padding space each side of every inner edge, and its rule


def console_width(file: TextIO | None = None) -> int | None:
    """The width tables must fit, as rich measures it; None when they need not fit (``memsim --wide``, not a terminal).

    ``$COLUMNS`` is honoured first (a width set for a pipe or a test); a
    terminal gives its own width; anything else (a pipe, a file) gets None,
    so logs keep every column.
    """
    if os.environ.get(WIDE_ENV):
        return None
    columns = os.environ.get("COLUMNS", "")
    if columns.strip().isdigit() and int(columns) > 0:
        return int(columns)
    out = sys.stdout if file is None else file
    if not (hasattr(out, "isatty") and out.isatty()):
        return None
    from rich.console import Console

    return Console(file=out).width


def fit_table(
    head: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    compact: Sequence[int],
    width: int | None,
    align: str | None = None,
    wrap: Sequence[int] = (0,),
    what: str = "table",
    where: str = "report.md",
) -> str:
    """``text_table``, or its compact view when the whole table is wider than ``width``.

    The compact view keeps the columns ``compact`` names (indexes into
    ``head``, in that order) and ends with one line saying so and where the
    full table is. When even the compact view is wider than ``width``, the
    text of the columns named in ``wrap`` (labels, names) wraps onto further
    lines of its own cell, at spaces where it can and inside a word where it
    must; figures never wrap. No line is longer than ``width`` then, unless
    the figures alone are.

    Args:
        head: column titles.
        rows: the cells, as for ``text_table``.
        compact: the columns of the compact view (indexes into ``head``).
        width: the width to fit (``console_width()``); None prints the whole table.
        align: one letter per column of ``head`` (``l`` or ``r``), as for ``text_table``.
        wrap: the columns (indexes into ``head``) whose text may wrap in the compact view.
        what: the table's name in the note (``"contrasts"``).
        where: the file that holds the whole table, named in the note.

    Raises:
        ValueError: a row or ``align`` does not match the header, or a ``compact`` index is out of range.
    """
    n = len(head)
    if not compact or any(not 0 <= i < n for i in compact):
        raise ValueError(f"compact must name columns 0..{n - 1}, got {list(compact)}")
    if width is None or table_width(head, rows) <= width:
        return text_table(head, rows, align=align)
    full_align = "l" + "r" * (n - 1) if align is None else align
    if len(full_align) != n or set(full_align) - {"l", "r"}:
        raise ValueError(f"align must be {n} letters l or r, got {full_align!r}")
    sub_head = [head[i] for i in compact]
    cells = _cells(sub_head, [[row[i] for i in compact] for row in rows])
    sub_align = "".join(full_align[i] for i in compact)
    # The note is wrapped too: on a narrow terminal it must not be the one line that wraps.
    said = (f"({what}: {len(compact)} of {n} columns; all with memsim --wide, and in {where})" if len(compact) < n
            else f"({what}: wrapped to fit {width} columns; memsim --wide prints one line per row)")
    note = "\n".join(textwrap.wrap(said, width=max(width, 20)))
    if table_width(sub_head, cells) <= width:
        return _render(sub_head, cells, sub_align) + "\n" + note
    wrapping = {j for j, i in enumerate(compact) if i in set(wrap)}
    return _render(sub_head, cells, sub_align, width=width, wrap=wrapping) + "\n" + note


def fit_markdown(text: str, width: int | None, *, where: str) -> str:
    """A Markdown page (``compare.md``, ``board.md``) for a terminal of ``width`` columns.

    Each table keeps as many of its leading columns as fit (``fit_table``, the note naming ``where``, the file
    with every column); other lines longer than ``width`` fold at spaces. ``width`` None returns ``text`` as is.
    """
    if width is None:
        return text
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].startswith("|"):
            out += textwrap.wrap(lines[i], width, subsequent_indent="  ", break_on_hyphens=False) or [""]
            i += 1
            continue
        block = []
        while i < len(lines) and lines[i].startswith("|"):
            block.append([c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", lines[i].strip())[1:-1]])
            i += 1
        head, rows = block[0], [r for r in block[1:] if not all(set(c) <= set("-: ") for c in r)]
        rows = [r + [""] * (len(head) - len(r)) if len(r) < len(head) else r[:len(head)] for r in rows]
        keep = next((k for k in range(len(head), 0, -1) if table_width(head[:k], [r[:k] for r in rows]) <= width), 1)
        out += fit_table(head, rows, compact=range(max(keep, 1)), width=width, align="l" * len(head),
                         wrap=(0,), what="table", where=where).split("\n")
    return "\n".join(out)


def text_table(head: Sequence[str], rows: Sequence[Sequence[Any]], *, align: str | None = None) -> str:
    """The rows under ``head`` as aligned text, lines without trailing spaces.

    Args:
        head: column titles.
        rows: one sequence of cells per row, as long as ``head``; ``None``
            prints as an empty cell, anything else as ``str(cell)``, verbatim
            (brackets are not markup).
        align: one letter per column, ``l`` (left) or ``r`` (right); default:
            the first column left, the others right.

    Raises:
        ValueError: a row or ``align`` does not match the header's length.
    """
    n = len(head)
    align = "l" + "r" * (n - 1) if align is None else align
    if len(align) != n or set(align) - {"l", "r"}:
        raise ValueError(f"align must be {n} letters l or r, got {align!r}")
    cells = _cells(head, rows)
    return _render(head, cells, align)


def _render(head: Sequence[str], cells: Sequence[Sequence[str]], align: str, *, width: int | None = None,
            wrap: Collection[int] = ()) -> str:
    """Lay the cells out with rich; with ``width``, the columns in ``wrap`` wrap to make the table fit it."""
    from rich.box import Box
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    n = len(head)
    table = Table(box=Box(_RULE_UNDER_HEAD, ascii=True), show_edge=False, pad_edge=False, padding=(0, 1),
                  expand=False, safe_box=True)
    for i, (title, side) in enumerate(zip(head, align)):
        table.add_column(Text(str(title)), justify="left" if side == "l" else "right", no_wrap=i not in wrap,
                         overflow="fold")
    for row in cells:
        table.add_row(*map(Text, row))
    if width is None:
        # Wide enough for every cell, so that rich never wraps or shrinks a column.
        widths = [max([cell_len(str(h)), *(cell_len(row[i]) for row in cells)]) for i, h in enumerate(head)]
        width = sum(widths) + 3 * n + 4
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, no_color=True, highlight=False,
            markup=False, emoji=False, force_terminal=False, legacy_windows=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").split("\n"))
