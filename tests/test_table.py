"""Terminal tables: rich lays them out; labels of any length widen only their own column."""

from __future__ import annotations

import pytest

from memsim.core.table import text_table


def _lines(text: str) -> list[str]:
    return text.split("\n")


def test_head_rule_rows_and_alignment() -> None:
    lines = _lines(text_table(["system", "items", "MB"], [["naive", 12, "0.50"], ["neuroplastic", 3456, "12.25"]]))
    assert len(lines) == 4
    head, rule, first, second = lines
    assert head.startswith("system") and set(rule) == {"-", " "}
    # The first column is left-aligned, the others right-aligned: the numbers end where their header ends.
    assert first.startswith("naive ") and second.startswith("neuroplastic ")
    for line in (first, second):
        assert len(line) == len(head)
    assert head.index("items") + len("items") == first.index("12") + 2 == second.index("3456") + 4


def test_a_long_label_widens_its_column_and_shifts_no_other() -> None:
    label = "http[url=http://127.0.0.1:8000/a/rather/long/path,label=mine]"
    short = _lines(text_table(["system", "p95 ms"], [["naive", "1.25"]]))
    long = _lines(text_table(["system", "p95 ms"], [["naive", "1.25"], [label, "2.50"]]))
    assert long[3].startswith(label)  # brackets print verbatim, never as markup
    assert long[2].endswith("1.25") and long[3].endswith("2.50") and len(long[2]) == len(long[3]) == len(long[0])
    assert len(long[0]) > len(short[0])


def test_empty_cells_unicode_and_no_trailing_spaces() -> None:
    text = text_table(["judge", "acc%", "mark"], [["f1", None, ""], ["llm_locomo", "91.3", "reliable"], ["—", "1", "日本"]],
                      align="lrl")
    assert all(line == line.rstrip() for line in _lines(text))
    assert "[" not in text and "\x1b" not in text  # no colour codes, whatever the terminal
    rows = _lines(text)[2:]
    assert rows[0].split() == ["f1"] and rows[1].split() == ["llm_locomo", "91.3", "reliable"]


def test_no_rows_prints_the_header() -> None:
    assert _lines(text_table(["a", "b"], []))[0].split() == ["a", "b"]


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="row 1 has 1 cells"):
        text_table(["a", "b"], [["x", "y"], ["z"]])
    with pytest.raises(ValueError, match="align"):
        text_table(["a", "b"], [], align="lx")
