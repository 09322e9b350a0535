"""Deterministic judges below the reliability bar carry their mark wherever their figures appear."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from memsim.analysis.judge_check import RELIABLE_ACCURACY, build_check_set, check_judge, deterministic_check, judge_mark
from memsim.sim.answer import make_judge

MINI_LME = Path(__file__).parent / "fixtures" / "longmemeval_s_mini.json"


def test_deterministic_check_is_the_file_free_check_and_marks_only_below_the_bar() -> None:
    items = build_check_set()
    for name in ("f1_locomo", "contains"):
        direct = check_judge(make_judge(name), items, cache=False)
        check = deterministic_check(name)
        assert check["accuracy"] == direct["accuracy"] and check["n"] == len(items)
        assert check["reliable"] is (direct["accuracy"] >= RELIABLE_ACCURACY) and check["deterministic"]
    f1 = deterministic_check("f1_locomo")
    assert not f1["reliable"]  # token F1 at 0.5 accepts stale and partial answers
    assert judge_mark(f1) == f"unreliable (check {100 * f1['accuracy']:.1f}% < 90%)"
    assert deterministic_check("contains")["reliable"] and judge_mark(deterministic_check("contains")) == ""


def test_an_unreliable_deterministic_judge_is_marked_in_tables_metrics_and_report(tmp_path: Path) -> None:
    from memsim.analysis.pipeline import execute, make_spec
    from memsim.analysis.report import write_report
    from memsim.analysis.summary import format_answer_accuracy, format_tables
    from memsim.memory.embed import HashEmbedder
    from memsim.memory.registry import Resources, SystemSpec

    judges = {n: make_judge(n) for n in ("f1_locomo", "contains")}

    class Answers:
        score_columns = [f"answer_{n}" for n in judges]

        def cost(self) -> dict[str, Any]:
            return {"calls": 0}

        def answer_and_judge(self, question, when, memories, gold, category, question_id):
            answer = f"It was {gold}."
            return {"answer": answer, **{f"answer_{n}": j.score(question=question, gold=gold, answer=answer,
                                                               category=category, question_id=question_id)
                                         for n, j in judges.items()}}

    spec = make_spec(
        "static", "longmemeval", {"data": str(MINI_LME), "user_only": False, "include_abstention": True},
        [SystemSpec("naive")], k=3, retrieve_k=10, scorers=("lme_turn",), metric="answer_f1_locomo",
        n_boot=100, answer={"reader": "short", "judge": ["f1_locomo", "contains"]},
    )
    resources = Resources(embedder_factory=lambda: HashEmbedder(dim=256))
    outcome = execute(spec, out_dir=tmp_path / "run", resources=resources, answer=Answers())
    m = outcome.summary.metrics
    mark = m["judges"]["answer_f1_locomo"]["mark"]
    assert mark.startswith("unreliable (check ") and m["judges"]["answer_f1_locomo"]["reliable"] is False
    assert m["judges"]["answer_contains"]["mark"] == ""
    assert f"f1_locomo: {mark}" in format_tables(m, "naive")
    text = format_answer_accuracy(m, outcome.result.probes, "naive", column="answer_f1_locomo")
    assert "answer_f1_locomo: overall" in text and text.rstrip().endswith(f"[{mark}]")
    row = next(line for line in text.splitlines() if line.startswith("f1_locomo "))
    assert row.endswith(mark)
    on_disk = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert on_disk["judges"]["answer_f1_locomo"]["mark"] == mark
    write_report(tmp_path / "run")
    md = (tmp_path / "run" / "report.md").read_text()
    html = (tmp_path / "run" / "report.html").read_text()
    assert f"answer_f1_locomo (%) [{mark}]" in md and "answer_contains (%) |" in md
    assert escape(f"[{mark}]") in html
