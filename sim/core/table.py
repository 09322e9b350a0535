"""Plain-text tables for the terminal and for logs, laid out by rich.

The tables memsim prints go through ``text_table``: a header, a rule of
dashes under each column and one line per row, each column as wide as its
longest cell (a label of any length widens its own column and never shifts
the others), with no colour, no wrapping and no markup, so the text is the
same on a terminal, in a pipe and in a file.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

__all__ = ["text_table"]

# rich's box format, eight lines of four characters (top, head, head row, mid, row,
# foot row, foot, bottom): only the head row is drawn, a dash rule per column.
_RULE_UNDER_HEAD = "    \n    \n -  \n    \n    \n    \n    \n    \n"


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
    from rich.box import Box
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    n = len(head)
    align = "l" + "r" * (n - 1) if align is None else align
    if len(align) != n or set(align) - {"l", "r"}:
        raise ValueError(f"align must be {n} letters l or r, got {align!r}")
    cells = []
    for r, row in enumerate(rows):
        if len(row) != n:
            raise ValueError(f"row {r} has {len(row)} cells, the header {n}")
        cells.append(["" if c is None else str(c) for c in row])
    table = Table(box=Box(_RULE_UNDER_HEAD, ascii=True), show_edge=False, pad_edge=False, padding=(0, 1),
                  expand=False, safe_box=True)
    for title, side in zip(head, align):
        table.add_column(Text(str(title)), justify="left" if side == "l" else "right", no_wrap=True)
    for row in cells:
        table.add_row(*map(Text, row))
    # Wide enough for every cell, so that rich never wraps or shrinks a column.
    widths = [max([cell_len(str(h)), *(cell_len(row[i]) for row in cells)]) for i, h in enumerate(head)]
    out = io.StringIO()
    Console(file=out, width=sum(widths) + 3 * n + 4, color_system=None, no_color=True, highlight=False,
            markup=False, emoji=False, force_terminal=False, legacy_windows=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").split("\n"))
