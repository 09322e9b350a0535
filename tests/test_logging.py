"""``-v`` / ``-q``: diagnostics through ``logging`` on standard error; standard output stays the same."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from memsim.analysis.cli import main


def _judge_check(capsys, tmp_path: Path, *flags: str) -> tuple[str, str]:
    out = tmp_path / f"check{len(list(tmp_path.iterdir()))}"
    assert main([*flags, "judge-check", "--no-locomo", "--judge", "contains", "--per-kind", "1", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    return captured.out.replace(str(out), "OUT"), captured.err


def test_quiet_and_verbose_change_standard_error_only(capsys, tmp_path: Path) -> None:
    out, err = _judge_check(capsys, tmp_path)
    assert "contains: done" in err and "contains: done" not in out
    quiet_out, quiet_err = _judge_check(capsys, tmp_path, "-q")
    assert quiet_err == "" and quiet_out == out
    loud_out, loud_err = _judge_check(capsys, tmp_path, "-v")
    assert loud_out == out
    assert "INFO memsim.analysis.cli.judge_check:   contains: done" in loud_err
    assert logging.getLogger("memsim").level == logging.DEBUG
    # Running again does not stack handlers: each record is printed once.
    _, again = _judge_check(capsys, tmp_path)
    assert again.count("contains: done") == 1


def test_judge_check_progress_is_logged(caplog) -> None:
    from memsim.analysis.judge_check import stderr_progress

    with caplog.at_level(logging.INFO, logger="memsim"):
        stderr_progress("llm_locomo", 1, 250)
        stderr_progress("llm_locomo", 2, 250)
        stderr_progress("llm_locomo", 250, 250)
    assert [r.getMessage() for r in caplog.records] == ["judge check llm_locomo: 1/250 items",
                                                         "judge check llm_locomo: 250/250 items"]
    assert {r.name for r in caplog.records} == {"memsim.analysis.judge_check"}


def test_verbose_and_quiet_exclude_each_other_and_debug_keeps_tracebacks(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["-v", "-q", "list"])
    assert "not allowed with argument" in capsys.readouterr().err
    assert main(["--debug", "-q", "list"]) == 0
