"""The learning tables fit the terminal: folded to their compact view when too wide, whole otherwise."""

from __future__ import annotations

import pytest
from test_headline import _frame, _table

from memsim.analysis.learning import format_learning


@pytest.fixture(scope="module")
def table() -> dict:
    # A long label, as a plugin's may be, and the five arms of a learner.
    rates = {"s": (0.6, 0.8), "s~twin": (0.6, 0.6), "s~placebo": (0.55, 0.55), "s~false": (0.6, 0.62),
             "s~true": (0.58, 0.6)}
    return _table(_frame(rates, users=30, per_user=10))


@pytest.mark.parametrize("width", [80, 100])
def test_no_line_is_wider_than_the_terminal(table: dict, width: int) -> None:
    text = format_learning(table, metric="m", control=None, width=width)
    assert max(len(line) for line in text.split("\n")) <= width
    # the compact view keeps the headline's 2nd half, its p and MDE, and says where the rest is
    assert "2nd half" in text and "MDE" in text and "--wide" in text
    assert "learning from feedback" in text


def test_a_wide_terminal_or_a_pipe_gets_every_column_and_footnote(table: dict) -> None:
    whole = format_learning(table, metric="m", control=None, width=None)
    assert "1st half" in whole and "DiD 2nd - 1st" in whole and "conservative" in whole
    wide = format_learning(table, metric="m", control=None, width=400)
    # Wide enough for the tables: the same tables and every footnote, each footnote folded to the width.
    assert all(len(line) <= 400 for line in wide.split("\n"))
    assert wide.split()== whole.split() and wide.split("\n\n")[:2] == whole.split("\n\n")[:2]
    narrow = format_learning(table, metric="m", control=None, width=100)
    assert "1st half, m (pp)" not in narrow and "DiD 2nd - 1st" not in narrow
