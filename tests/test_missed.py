"""Questions most systems miss: ranked by how many miss them, each with its evidence and every system's memories."""

from __future__ import annotations

import math
import re
from pathlib import Path

import polars as pl

from memsim.analysis.missed import NOT_IN_FOLDER, missed_markdown, missed_questions


def _rows() -> pl.DataFrame:
    """Three questions, three systems and a twin; q2 missed by all three, q1 by two, q3 by none."""
    hits = {"q1": {"a": 0.0, "b": 0.0, "c": 1.0}, "q2": {"a": 0.0, "b": 0.0, "c": 0.0}, "q3": {"a": 1.0, "b": 1.0, "c": 1.0}}
    rows = []
    for qid, by in hits.items():
        for system in ("a", "b", "c", "a~twin"):
            score = by.get(system, 0.0)
            rows.append({
                "system": system, "question_id": qid, "user_id": "u0", "kind": "single", "question": f"what about {qid}?",
                "gold": f"gold {qid}", "evidence_ids": [f"t-{qid}"], "excluded": None, "error": None,
                "recall_all@10": score, "first_rank": 1 if score else None, "answer": None,
                # system c keeps each turn alone as a memory: its text is the evidence turn's, as the run stored it
                "retrieved_sources": [[f"t-{qid}"]] if system == "c" and qid != "q2" else [["t-x", "t-y"]],
                "retrieved_text": [f"turn text of {qid}"] if system == "c" and qid != "q2" else ["[deleted]"],
            })
    # An abstention question is not scored: never ranked, whatever its NaN.
    rows.append({**rows[0], "question_id": "q4", "excluded": "abstention", "recall_all@10": math.nan})
    return pl.DataFrame(rows)


def test_questions_are_ranked_by_how_many_systems_miss_them() -> None:
    items = missed_questions(_rows(), metric="recall_all@10", systems=["a", "b", "c"])
    assert [(q.question_id, q.missed_by, q.systems) for q in items] == [("q2", 3, 3), ("q1", 2, 3)]
    q2, q1 = items
    assert [a.system for a in q1.attempts] == ["a", "b", "c"]  # the twin is an arm, not a system
    assert [a.missed for a in q1.attempts] == [True, True, False]
    assert q1.question == "what about q1?" and q1.gold == "gold q1"
    # Evidence text where some arm retrieved a memory made from that turn alone; else said to be missing.
    assert q1.evidence == (("t-q1", "turn text of q1"),)
    assert q2.evidence == (("t-q2", NOT_IN_FOLDER),)
    assert q2.attempts[0].memories == ("[deleted]",)  # redacted text stays redacted
    assert [q.question_id for q in missed_questions(_rows(), metric="recall_all@10", systems=["c"])] == ["q2"]
    assert "q2** (single, missed by 3 of 3)" in missed_markdown(items, "recall_all@10")


def test_the_evidence_text_the_run_recorded_is_shown_even_where_nothing_retrieved_it() -> None:
    """Rows with ``evidence_text`` (every run now) show the gold evidence as said, missed by every system or not;
    a redacted text stays redacted."""
    rows = _rows().with_columns(pl.col("question_id").map_elements(lambda q: [f"said in {q}"] if q != "q1" else ["[redacted]"],
                                                                   return_dtype=pl.List(pl.Utf8)).alias("evidence_text"))
    q2, q1 = missed_questions(rows, metric="recall_all@10", systems=["a", "b", "c"])
    assert q2.evidence == (("t-q2", "said in q2"),) and q1.evidence == (("t-q1", "[redacted]"),)


def test_the_report_drills_into_the_most_missed_questions(tmp_path: Path) -> None:
    from test_report import make_run

    from memsim.analysis.report import write_report

    run = make_run(tmp_path / "run", reader=True)
    page = write_report(run).read_text(encoding="utf-8")
    assert "<h2>Questions most systems miss</h2>" in page
    drills = re.findall(r"<details class='drill' data-question='([^']+)'><summary><span class='miss'>missed by (\d+) of (\d+)",
                        page)
    assert drills, "no expandable question"
    counts = [int(n) for _, n, _ in drills]
    assert counts == sorted(counts, reverse=True) and all(int(of) == 3 for _, _, of in drills)
    assert "<table class='attempts'>" in page and "gold evidence:" in page
    assert "<th>answer</th>" in page  # a reader ran: its answers are shown
    # Without a reader, neither table has an (empty) answer column.
    bare = write_report(make_run(tmp_path / "bare", reader=False)).read_text(encoding="utf-8")
    assert "<table class='attempts'>" in bare and "<table class='worst'>" in bare and "<th>answer</th>" not in bare
    # Every table of the page scrolls sideways instead of being cut.
    assert page.count("<table") == page.count("<div class='scroll'><table")
    assert "## Questions most systems miss" in (run / "report.md").read_text(encoding="utf-8")
