"""``memsim bench compare``: the plain reference pipeline against memsim on static LoCoMo."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from memsim.analysis.bench import format_compare
from memsim.analysis.cli import main
from memsim.analysis.reference_pipeline import flat_recall
from memsim.sim.events import Question


def _question(qid: str, evidence: tuple[str, ...]) -> Question:
    return Question(question_id=qid, user_id="u", time=datetime(2024, 1, 1), text=qid, gold="", kind="test", evidence=evidence)


def test_flat_recall_scores_all_and_any_of_the_gold_turns() -> None:
    turn_ids = ["t0", "t1", "t2", "t3"]
    turns = np.eye(4, dtype=np.float32)
    # q0 points at t0 then t1; q1 at t3 only; q2 at t2 then t0.
    queries = np.array([[1.0, 0.9, 0, 0], [0, 0, 0, 1.0], [0.5, 0, 1.0, 0]], dtype=np.float32)
    questions = [_question("q0", ("t0", "t1")), _question("q1", ("t2", "t3")), _question("q2", ("t1",))]
    all_hits, any_hits = flat_recall(turn_ids, turns, questions, queries, k=2)
    assert all_hits == [1.0, 0.0, 0.0]
    assert any_hits == [1.0, 1.0, 0.0]
    # k larger than the conversation is cut to its size rather than failing.
    all_hits, _ = flat_recall(turn_ids, turns, questions, queries, k=10)
    assert all_hits == [1.0, 1.0, 1.0]


@pytest.mark.slow
def test_compare_one_conversation_json(locomo_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "compare.json"
    argv = ["bench", "compare", "--data", str(locomo_path), "--limit-conversations", "1", "--backend", "onnx",
            "--json", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    f = json.loads(out.read_text())
    ref, mem = f["reference"], f["memsim"]
    assert set(ref["stages"]) == {"load", "model_load", "encode", "index", "search", "score"}
    assert set(mem["stages"]) == {"spec", "model_load", "embed_up_front", "systems", "rest"}
    assert mem["embedder"] == "all-MiniLM-L6-v2+onnx" and mem["systems"] == ["naive"]
    # Cold: memsim embedded every distinct text of the conversation itself, none came from a cache.
    assert mem["texts_embedded"] == mem["texts"] > 0 and mem["texts_cached"] == 0
    # Same workload, same scored questions; the ONNX vectors rank as the torch ones do.
    assert ref["questions"] > 100
    assert abs(mem["recall_all@30"] - ref["recall_all@30"]) <= 0.002
    assert f["recall_delta"]["naive"] == pytest.approx(mem["recall_all@30"] - ref["recall_all@30"], abs=1e-4)
    assert f["ratio"] == pytest.approx(mem["wall_s"] / ref["wall_s"], rel=1e-2)
    assert 0 < ref["cpu_s"] and 0 < mem["cpu_s"]
    assert printed == format_compare(f) + "\n"
