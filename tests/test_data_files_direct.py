"""The library loaders refuse what the command line refuses: devices, FIFOs, UTF-16, before reading."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memsim.core.errors import UserError
from memsim.static_benchmarks.locomo import load_locomo
from memsim.static_benchmarks.longmemeval import iter_instances, read_question_ids


def test_locomo_loader_refuses_a_device_unread() -> None:
    with pytest.raises(UserError, match=r"is a (device|FIFO).*\(a regular file\)"):
        load_locomo("/dev/zero")


def test_locomo_loader_names_utf16(tmp_path: Path) -> None:
    f = tmp_path / "locomo16.json"
    f.write_text(json.dumps([{"sample_id": "x"}]), encoding="utf-16")
    with pytest.raises(UserError, match=r"locomo16\.json: encoded in UTF-16"):
        load_locomo(f)


def test_longmemeval_loader_refuses_a_fifo_and_utf16(tmp_path: Path) -> None:
    fifo = tmp_path / "lme.fifo"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"is a (device|FIFO).*\(a regular file\)"):
        list(iter_instances(fifo))  # no writer: opening it would block forever
    f = tmp_path / "lme16.json"
    f.write_text(json.dumps([{"question_id": "q1"}]), encoding="utf-16")
    with pytest.raises(UserError, match=r"lme16\.json: encoded in UTF-16"):
        list(iter_instances(f))


def test_question_ids_refuse_a_fifo_and_read_utf8(tmp_path: Path) -> None:
    fifo = tmp_path / "ids.fifo"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"is a (device|FIFO).*\(a regular file\)"):
        read_question_ids(fifo)
    ids = tmp_path / "ids.txt"
    ids.write_text("\ufeffq1\n# skipped\nq2\n", encoding="utf-8")
    assert read_question_ids(ids) == ("q1", "q2")
