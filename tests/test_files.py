"""Atomic writes (``memsim.core.files``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memsim.core.files import write_atomic, write_text_atomic


def test_write_replaces_whole_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    target.write_text("old", encoding="utf-8")
    write_text_atomic(target, "new\n")
    assert target.read_text(encoding="utf-8") == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_temporary_name_carries_the_process_id(tmp_path: Path) -> None:
    seen: list[str] = []

    def write(tmp: Path) -> None:
        seen.append(tmp.name)
        tmp.write_bytes(b"x")

    write_atomic(tmp_path / "index.parquet", write)
    assert seen[0].startswith(f".index.parquet.{os.getpid()}.") and seen[0].endswith(".tmp")


def test_failed_write_keeps_old_file_and_removes_temporary(tmp_path: Path) -> None:
    target = tmp_path / "manifest.json"
    target.write_text("old", encoding="utf-8")

    def write(tmp: Path) -> None:
        tmp.write_text("half", encoding="utf-8")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, write)
    assert target.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
