"""The command line: one-line errors with exit code 2, a small real run, the benchmark dispatcher."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsim.analysis.cli import main


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "scenario.toml"
    path.write_text(body)
    return path


SMALL = '[scenario]\nname = "persona"\nusers = 1\nmonths = 1\n[run]\nseed = 2\nk = 5\nn_boot = 200\n'


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--system", "nosuch"], "unknown memory system 'nosuch'; known systems: "),
        (["--system", "naive:oops"], "expected key=value"),
    ],
)
def test_run_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys, argv, needle) -> None:
    cfg = _config(tmp_path, SMALL)
    assert main(["run", str(cfg), "--out", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


def test_run_bad_config_names_key_and_file(tmp_path: Path, capsys) -> None:
    cfg = _config(tmp_path, '[scenario]\nname = "persona"\nquestions_per_week = -1\n')
    assert main(["run", str(cfg), "--system", "naive"]) == 2
    err = capsys.readouterr().err
    assert "scenario.questions_per_week" in err and str(cfg) in err


@pytest.mark.slow
def test_small_run_end_to_end_with_real_embedder(tmp_path: Path, capsys) -> None:
    cfg = _config(tmp_path, SMALL)
    out = tmp_path / "run"
    assert main(["run", str(cfg), "--system", "naive", "--system", "surprise", "--out", str(out), "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert "totals: users 1" in printed and "DiD vs static control" in printed and "no feedback use" in printed and f"run folder: {out}" in printed
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["systems"]) == {"naive", "surprise"}
    assert metrics["isolation_failures"] == 0
    spec = json.loads((out / "spec.json").read_text())
    assert spec["seed"] == 2
    info = json.loads((out / "run.json").read_text())
    assert info["embedder"] == "all-MiniLM-L6-v2+onnx"  # the default backend
    emb = info["embedding"]  # every text embedded once, up front, before the clock started
    assert emb["texts"] > 0 and emb["embedded"] + emb["cached"] == emb["texts"]
    assert f"{emb['texts']} distinct texts, {emb['embedded']} embedded, {emb['cached']} found cached" in printed


def test_bench_engine_prints_figures(capsys) -> None:
    assert main(["bench", "engine", "--users", "2", "--months", "1", "--systems", "2"]) == 0
    lines = dict(line.split(None, 1) for line in capsys.readouterr().out.strip().splitlines())
    assert int(lines["questions"]) > 0 and float(lines["events_per_s"]) > 0


def test_no_option_that_sizes_nothing() -> None:
    """Answers are asked one at a time, so there is no --llm-concurrency to pretend otherwise."""
    from memsim.analysis.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser(["run"]).parse_args(["run", "x.toml", "--llm-concurrency", "8"])
