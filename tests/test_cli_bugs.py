"""Rough edges a new user met in the first hour, each pinned by a test that failed before its fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import memsim
from memsim.analysis.cli import main

SRC = str(Path(memsim.__file__).parent.parent)  # this checkout's memsim, for child processes


def _memsim(*argv: str, env: dict[str, str] | None = None, **kw: object) -> subprocess.Popen:
    full = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "memsim", *argv], env=full, **kw)  # type: ignore[call-overload]


# --------------------------------------------------------------------------- memsim data list


def test_data_list_sees_the_file_memsim_locomo_points_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """It said 'absent' for LoCoMo while $MEMSIM_LOCOMO pointed at the file every run then read."""
    locomo = tmp_path / "elsewhere" / "locomo10.json"
    locomo.parent.mkdir()
    locomo.write_text("[]", encoding="utf-8")
    monkeypatch.setenv("MEMSIM_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("MEMSIM_LOCOMO", str(locomo))
    assert main(["data", "list", "--verify"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith("locomo "))
    assert "present, SHA256 MISMATCH" in row  # found, and hashed against the official file (this is not it)
    assert str(locomo) in out
    assert f"locomo                      {locomo}" in out  # the 'read when no --data is given' line


def test_data_list_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """``memsim data list --verify | head`` ended in a BrokenPipeError traceback."""
    proc = _memsim("data", "list", "--verify", env={"MEMSIM_DATA_DIR": str(tmp_path)},
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is written, as ``head`` is after its lines
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "BrokenPipeError" not in err and "Traceback" not in err, err
    assert proc.returncode == 141
