"""``memsim board`` (runs and sweeps ranked under one protocol, frontier plots) and ``memsim export --jsonl``."""

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


def _runs(tmp_path: Path) -> list[Path]:
    from test_report import SYSTEMS, make_run, make_static_run

    a = make_run(tmp_path / "seed0", seed=0, reader=False, systems=SYSTEMS + (("gated~twin", 0.3, 0.3),))
    b = make_run(tmp_path / "seed1", seed=1, reader=False)
    return [a, b, make_static_run(tmp_path / "static")]


def test_board_ranks_runs_of_one_protocol_and_shows_others_apart(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    runs = _runs(tmp_path)
    assert main(["board", *map(str, runs), "--out", str(tmp_path / "board")]) == 0
    assert f"board: {tmp_path / 'board' / 'board.html'}" in capsys.readouterr().out
    data = json.loads((tmp_path / "board" / "board.json").read_text(encoding="utf-8"))
    assert [g["group"] for g in data] == ["longitudinal persona, recall_all@10, k=10", "static locomo, recall_all@10, k=10"]
    first, apart = data
    assert first["reason"] == "" and {r["run"] for r in first["ranking"]} == {str(runs[0]), str(runs[1])}
    assert all(r["system"] != "gated~twin" for r in first["ranking"])  # twins are arms, not systems
    heads = [r["headline"] for r in first["ranking"]]
    assert heads == sorted(heads, reverse=True) and first["ranking"][0]["rank"] == 1
    # gated learns from the evidence channel (the oracle bit) in seed0: marked and ranked apart.
    gated = next(r for r in first["ranked_apart"] if r["system"] == "gated" and r["run"] == str(runs[0]))
    assert gated["mark"] == "oracle-fed" and gated["rank"] == 1
    assert all(r["mark"] == "" for r in first["ranking"])
    metrics = json.loads((runs[0] / "metrics.json").read_text())["systems"]["gated"]
    assert gated["headline"] == metrics["overall"]["scores"]["recall_all@10"]["mean"]
    assert gated["gain_second"] == metrics["gain_second"] and gated["retrieve_p95_ms"] is not None
    assert "other kind (longitudinal vs static)" in apart["reason"] and "other scenario (persona vs locomo)" in apart["reason"]
    assert "## static locomo" in (tmp_path / "board" / "board.md").read_text(encoding="utf-8")


def test_frontier() -> None:
    from memsim.analysis.board import frontier

    # (score, cost): higher score, lower cost better
    assert frontier([(0.9, 10.0), (0.8, 1.0), (0.7, 5.0), (0.9, 12.0)]) == [True, True, False, False]


@pytest.mark.slow
def test_board_in_headless_chromium_has_the_ranking_and_frontier_plots(tmp_path: Path) -> None:
    from test_report import _need_chromium, _render

    from memsim.analysis.board import write_board

    _need_chromium()
    page = write_board(_runs(tmp_path), tmp_path / "board")
    dom, console = _render(page)
    assert console == []
    assert dom.count('class="ranking"') == 3  # two groups, and the first one's oracle-fed system ranked apart
    assert 'id="frontier-latency-0"' in dom and 'id="frontier-cost-0"' in dom
    assert "<circle" in dom and "gated" in dom


def test_board_reads_the_cells_of_a_sweep(tmp_path: Path) -> None:
    from memsim.analysis.board import write_board
    from memsim.analysis.sweep import run_sweep, sweep_from_mapping

    spec = sweep_from_mapping({
        "systems": ["naive", "control-learner"],
        "sweep": {"name": "b", "seeds": 2, "embedder": "hash"},
        "scenario": {"name": "persona", "users": 2, "months": 1},
        "run": {"seed": 0, "k": 5, "n_boot": 100},
    })
    run_sweep(spec, tmp_path / "sweep", executor="local", workers=1)
    write_board([*_runs(tmp_path / "runs"), tmp_path / "sweep"], tmp_path / "board")
    data = json.loads((tmp_path / "board" / "board.json").read_text(encoding="utf-8"))
    cells = next(g for g in data if g["group"] == "longitudinal persona, recall_all@5, k=5")
    rows = cells["ranking"] + cells["ranked_apart"]
    # 2 systems x 2 seeds: naive of one seed is one run, whichever cells played it beside another system.
    assert len(rows) == 4 and "other k (10 vs 5)" in cells["reason"]
    assert {r["system"] for r in cells["ranking"]} == {"naive"}
    assert {(r["system"], r["mark"]) for r in cells["ranked_apart"]} == {("control-learner", "instrument")}
