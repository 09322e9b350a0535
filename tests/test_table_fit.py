"""Terminal tables that fit: the compact view of a table wider than the terminal, at 80, 100 and 200 columns."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from memsim.core.table import WIDE_ENV, console_width, fit_table, table_width, text_table

LONG = "http[url=http://127.0.0.1:8000/a/rather/long/path/to/a/server,label=mine]"


def _contrast(first: float, second: float) -> dict[str, float]:
    return {"first": first, "first_lo": first - 0.05, "first_hi": first + 0.05, "first_p": 0.2, "first_mde": 0.041,
            "second": second, "second_lo": second - 0.04, "second_hi": second + 0.06, "second_p": 0.0004,
            "second_mde": 0.038, "did": second - first, "did_lo": -0.1, "did_hi": 0.2, "did_p": 0.03,
            "stale": {"second": -0.01, "second_lo": -0.03, "second_hi": 0.01}}


def _learning_table(labels: list[str]) -> tuple[list[str], list[list[str]]]:
    """The learning table's contrast rows as ``memsim.analysis.learning`` prints them (11 columns, ~190+ wide)."""
    from memsim.analysis.learning import CONTRASTS, contrast_headers, contrast_rows

    table = {label: {"contrasts": {key: _contrast(0.01 * i, 0.02 * i) for i, (key, _) in enumerate(CONTRASTS, 1)}}
             for label in labels}
    return contrast_headers("recall_all@10"), contrast_rows(table)


# The compact view of the learning table: system, contrast, 2nd-half figure [interval], p, MDE.
COMPACT = (0, 1, 5, 6, 7)


@pytest.mark.parametrize("width", [80, 100, 200])
def test_a_table_wider_than_the_terminal_folds_to_its_compact_view(width: int) -> None:
    head, rows = _learning_table(["neuroplastic", "control-learner"])
    full = text_table(head, rows, align="l" * len(head))
    assert table_width(head, rows) == max(len(line) for line in full.split("\n")) > 200
    text = fit_table(head, rows, compact=COMPACT, width=width, align="l" * len(head), wrap=(0, 1), what="contrasts")
    lines = text.split("\n")
    assert all(len(line) <= width for line in lines), [len(line) for line in lines]
    # The compact columns, in order, and nothing of the others (the 1st half, the DiD, stale>cur).
    assert lines[0].split("  ")[0].strip() == "system" and "2nd half, recall_all@10 (pp)" in lines[0]
    assert "1st half" not in lines[0] and "DiD" not in lines[0] and "stale" not in lines[0]
    # One line per row starts with its system and carries its 2nd-half figure with interval, p and MDE;
    # a contrast's name may go on over the next lines of its cell, its figures never.
    starts = [line for line in lines[2:] if line.startswith(("neuroplastic", "control-learner"))]
    assert len(starts) == len(rows)
    for line, row in zip(starts, rows):
        assert line.startswith(row[0]) and row[5] in line and row[6] in line and line.rstrip().endswith(row[7])
    note = " ".join(lines[-2:]) if not lines[-1].startswith("(") else lines[-1]
    assert "(contrasts: 5 of 11 columns; all with memsim --wide, and in report.md)" in note


@pytest.mark.parametrize("width", [80, 100, 200])
def test_a_table_that_fits_is_printed_whole(width: int) -> None:
    head, rows = ["system", "items", "MB"], [["naive", 12, "0.50"], ["neuroplastic", 3456, "12.25"]]
    assert fit_table(head, rows, compact=(0, 1), width=width) == text_table(head, rows)
    assert fit_table(head, rows, compact=(0, 1), width=None) == text_table(head, rows)


@pytest.mark.parametrize("width", [80, 100])
def test_a_label_longer_than_the_room_wraps_inside_its_own_cell(width: int) -> None:
    head, rows = _learning_table([LONG, "naive"])
    lines = fit_table(head, rows, compact=COMPACT, width=width, align="l" * len(head), wrap=(0, 1)).split("\n")
    assert all(len(line) <= width for line in lines), [len(line) for line in lines]
    # Every character of the label is printed, in order, over the lines of its own cell: nothing is cut.
    room = lines[1].index(" ")  # the first column's rule
    first_row = []
    for line in lines[2:]:
        if line.startswith("naive"):
            break
        if first_row and line.startswith("http"):
            break  # the next row of the same system
        first_row.append(line[:room].strip())
    assert "".join(first_row) == LONG


def test_bad_compact_columns_are_refused() -> None:
    with pytest.raises(ValueError, match="compact must name columns 0..1"):
        fit_table(["a", "b"], [["x", "y"]], compact=(0, 2), width=10)


def test_console_width_reads_columns_the_wide_switch_and_pipes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WIDE_ENV, raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    assert console_width() == 100
    monkeypatch.setenv(WIDE_ENV, "1")
    assert console_width() is None  # memsim --wide: every column, whatever the terminal
    monkeypatch.delenv(WIDE_ENV)
    monkeypatch.delenv("COLUMNS")
    assert console_width(io.StringIO()) is None  # a pipe or a file keeps every column


def test_the_wide_switch_sets_the_environment_for_the_command_only(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``--wide`` reaches every table of the command (and its child processes) and is put back after it."""
    import os

    import memsim.analysis.cli as cli

    seen: dict[str, str | None] = {}
    real = cli._load

    def spy(target):
        name, run = real(target)

        def wrapped(args):
            seen["wide"] = os.environ.get(WIDE_ENV)
            return run(args)

        return name, wrapped

    monkeypatch.setattr(cli, "_load", spy)
    monkeypatch.delenv(WIDE_ENV, raising=False)
    assert cli.main(["--wide", "list", "scorers"]) == 0
    assert seen["wide"] == "1" and os.environ.get(WIDE_ENV) is None
    monkeypatch.setenv(WIDE_ENV, "1")  # set by the user: kept
    assert cli.main(["list", "scorers"]) == 0
    assert os.environ.get(WIDE_ENV) == "1"


def test_the_run_summary_systems_table_fits_100_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from memsim.analysis.cli import main

    label = "a-system-label-long-enough-to-push-the-table-past-one-hundred-columns-on-its-own-x"
    config = tmp_path / "tiny.toml"
    config.write_text('[scenario]\nname = "persona"\nusers = 2\nmonths = 1\n\n[run]\nseed = 0\nk = 5\nn_boot = 100\n',
                      encoding="utf-8")
    monkeypatch.delenv(WIDE_ENV, raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["run", str(config), "--system", "naive", "--system", f"control-static:label={label}",
                 "--out", str(tmp_path / "run"), "--no-report", "--no-progress"]) == 0
    lines = capsys.readouterr().out.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("system") and "stale>cur %" in line)
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("("))
    table = lines[start:end]
    assert all(len(line) <= 100 for line in table), [len(line) for line in table]
    assert "".join(line.split(" ")[0] for line in table[3:]) == label  # the label, wrapped, whole
    assert lines[end] == "(systems: wrapped to fit 100 columns; memsim --wide prints one line per row)"


@pytest.mark.parametrize("columns", [80, 100, 300])
def test_a_run_with_a_learner_prints_nothing_wider_than_the_terminal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], columns: int) -> None:
    """The learning tables (five arms), the systems table and the per-user line all fit the terminal."""
    from memsim.analysis.cli import main

    config = tmp_path / "tiny.toml"
    config.write_text('[scenario]\nname = "persona"\nusers = 2\nmonths = 1\n\n[run]\nseed = 0\nk = 5\nn_boot = 100\n',
                      encoding="utf-8")
    monkeypatch.delenv(WIDE_ENV, raising=False)
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["run", str(config), "--system", "naive", "--system", "control-learner",
                 "--out", str(tmp_path / "run"), "--no-report", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "learning from" in out and "control-learner~false" in out
    # Only lines that name a path (the config, the run folder) may be longer: a path is not cut.
    wide = [line for line in out.split("\n") if len(line) > columns and str(tmp_path) not in line]
    assert not wide, wide
    # Folded, the footnotes give way to a pointer; wide enough for the tables, they are printed, each folded.
    if columns < 200:
        assert "docs/concepts/contrasts.md" in out and "MDE: design-based" not in out
    else:
        assert "MDE: design-based" in out and "docs/concepts/contrasts.md" not in out


@pytest.mark.slow
def test_demo_quick_prints_nothing_wider_than_100_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Exactly what a newcomer runs first, ``memsim demo --quick``, in a 100-column terminal (issue 39, item 1)."""
    from memsim.analysis.cli import main

    monkeypatch.delenv(WIDE_ENV, raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["demo", "--quick", "--out", str(tmp_path / "run"), "--no-report", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Learning through use" in out and "control-learner~placebo" in out
    wide = [line for line in out.split("\n") if len(line) > 100 and str(tmp_path) not in line
            and "scenarios/configs" not in line]
    assert not wide, wide


def test_a_markdown_page_fits_the_terminal_keeping_its_leading_columns() -> None:
    """``memsim compare`` and ``memsim board`` print their Markdown through ``fit_markdown``: each table keeps
    the leading columns that fit and names the file with every column; long prose folds."""
    from memsim.core.table import fit_markdown

    head = "| system | overall (%) | 1st half (%) | 2nd half (%) | gain over twin, 2nd half (pp) | DiD vs static control (pp) |"
    rows = ["| naive | 62.9 [60.1, 65.3] | 61.0 | 64.0 | — | — |",
            "| http[url=a\\|b] | 55.0 [52.0, 58.0] | 54.0 | 56.0 | +1.2 [-0.3, +2.8] | -0.4 [-1.9, +1.1] |"]
    page = "\n".join(["# memsim comparison", "", head, "|---|---|---|---|---|---|", *rows, "",
                      "- every figure comes from the run's metrics.json " * 4])
    assert fit_markdown(page, None, where="compare.md") == page
    text = fit_markdown(page, 60, where="runs/compare/compare.md")
    lines = text.split("\n")
    assert all(len(line) <= 60 for line in lines), [len(line) for line in lines]
    table = [line for line in lines if line.startswith(("system", "naive", "http"))]
    assert table[0].split() == ["system", "overall", "(%)", "1st", "half", "(%)"]
    assert "62.9 [60.1, 65.3]" in table[1] and table[2].startswith("http[url=a|b]")
    assert "(table: 3 of 6 columns; all with memsim --wide, and in runs/compare/compare.md)" in " ".join(lines)
    assert sum(line.startswith("- every figure") for line in lines) == 1 and len(lines) > 12
