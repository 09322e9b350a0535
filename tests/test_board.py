"""``memsim export``: a run's per-question rows as JSON Lines (the board itself is not built yet)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsim.analysis.cli import main


def test_export_jsonl_has_one_row_per_question_and_system(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from test_report import make_run

    run = make_run(tmp_path / "run", reader=True, n_questions=12)
    assert main(["export", str(run), "--jsonl"]) == 0
    assert f"wrote 36 rows (3 systems) to {run / 'questions.jsonl'}" in capsys.readouterr().out
    rows = [json.loads(line) for line in (run / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 36 and {r["system"] for r in rows} == {"naive", "gated", "decay"}
    first = rows[0]
    for key in ("question_id", "question", "gold", "evidence_ids", "retrieved_ids", "answer", "recall_all@10"):
        assert key in first, key
    assert main(["export", str(run), "--jsonl", "--out", "-"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 36
    assert main(["export", str(tmp_path / "nothing"), "--jsonl"]) == 2
