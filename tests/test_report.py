"""Reports and comparisons built from small hand-made run folders."""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from analysis import compare_cli, report_cli
from analysis.report import compare_runs, load_run, write_report
from analysis.stats import MCNEMAR_TEST
from sim.errors import UserError

CHROMIUM = "/usr/bin/chromium"
SYSTEMS = (("naive", 0.5, 0.5), ("gated", 0.3, 0.8), ("decay", 0.4, 0.6))


def make_run(path: Path, *, seed: int = 0, reader: bool = True, n_questions: int = 90) -> Path:
    """A longitudinal run folder in the engine's format, with known per-half success rates."""
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    rows = []
    for q in range(n_questions):
        days = q * 2.0
        for system, p1, p2 in SYSTEMS:
            hit = float(rng.random() < (p1 if q < n_questions / 2 else p2))
            row = {
                "system": system,
                "user_id": f"u{q % 3}",
                "question_id": f"q{q}",
                "q_index": q,
                "time": t0 + timedelta(days=days),
                "t_days": days,
                "kind": ("single-hop", "multi-hop", "temporal")[q % 3],
                "topic": "work",
                "reask": False,
                **{f"recall_any@{k}": hit for k in (1, 5, 10)},
                **{f"recall_all@{k}": hit for k in (1, 5, 10)},
                **{f"ndcg@{k}": hit for k in (1, 5, 10)},
                "evidence": hit,
                "first_rank": 1 if hit else None,
                "stale_above_current": float("nan"),
                "retrieve_ms": float(rng.gamma(2.0, 3.0)),
                "retrieved_ids": ["m1", "m2"],
                "retrieved_text": [f"memory <b>{q}</b> & co", "another memory"],
                "question": f"Where does the user work now? ({q})",
                "gold": f"Acme {q}",
                "error": None,
            }
            if reader:
                row.update(
                    answer=f"answer {q}",
                    prompt_tokens=120,
                    completion_tokens=8,
                    llm_latency_ms=40.0,
                    truncated=False,
                    answer_f1=float(rng.random() * hit),
                )
            rows.append(row)
    pl.DataFrame(rows).write_parquet(path / "probes.parquet")
    timeline = [
        {
            "system": system,
            "user_id": f"u{i % 3}",
            "time": t0 + timedelta(days=i * 6.0),
            "t_days": i * 6.0,
            "event": "session",
            "items": 10 * i,
            "bytes": 4000 * i,
            "vector_bytes": 3000 * i,
            "text_bytes": 800 * i,
            "metadata_bytes": 200 * i,
            "llm_calls": i,
            "tokens": 30 * i,
            "ingest_ms": 5.0,
        }
        for i in range(30)
        for system, _, _ in SYSTEMS
    ]
    pl.DataFrame(timeline).write_parquet(path / "timeline.parquet")
    spec = {
        "kind": "longitudinal",
        "seed": seed,
        "k": 10,
        "metric": "recall_all@10",
        "control": "naive",
        "scenario": {"name": "persona", "args": {"users": 3}},
        "systems": [{"name": s, "args": {}, "label": s} for s, _, _ in SYSTEMS],
        "reader": {"name": "fake"} if reader else None,
        "judges": ["f1"] if reader else [],
        "memsim_version": "test",
    }
    (path / "spec.json").write_text(json.dumps(spec))
    return path


def make_static_run(path: Path) -> Path:
    """A static LoCoMo-style run folder: per-question scores by category, no timeline."""
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    rows = []
    for i in range(40):
        hit = float(rng.random() < 0.6)
        rows.append(
            {
                "system": "dense",
                "conversation": f"conv-{i % 2}",
                "question_id": f"conv-{i % 2}:q{i}",
                "category": str(1 + i % 4),
                "category_label": ("multi-hop", "temporal", "open-domain", "single-hop")[i % 4],
                "question": f"question {i}",
                "answer": f"gold {i}",
                "evidence": [f"D1:{i}"],
                "retrieved_ids": ["a"],
                "retrieved_text": ["some memory"],
                "first_evidence_rank": 1 if hit else None,
                "retrieve_ms": 2.0,
                **{f"{m}@{k}": hit for m in ("recall_any", "recall_all", "ndcg") for k in (1, 10)},
            }
        )
    pl.DataFrame(rows).write_parquet(path / "probes.parquet")
    (path / "spec.json").write_text(json.dumps({"kind": "static-locomo", "benchmark": "locomo", "k": 10}))
    return path


def _images(page: str) -> list[str]:
    return re.findall(r"src='data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)'", page)


def test_report_has_every_section_and_figure(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    out = write_report(run, n_boot=300)
    assert out == run / "report.html"
    page = out.read_text()
    for section in ("spec", "summary", "curves", "timelines", "categories", "worst"):
        assert f"<section id='{section}'>" in page, section
    alts = re.findall(r"<img class='plot' alt='([^']+)'", page)
    assert alts == [
        "recall_all@10 accuracy over question index",
        "recall_all@10 accuracy over simulated days",
        "answer_f1 accuracy over question index",
        "answer_f1 accuracy over simulated days",
        "storage and cost timeline",
        "latency timeline",
        "reader cost timeline",
        "recall_all@10 per category",
    ]
    for data in _images(page):
        root = ET.fromstring(base64.b64decode(data))
        assert root.tag.endswith("svg")
    # Self-contained: nothing fetched from anywhere.
    assert not re.search(r"(src|href)=['\"](https?:)?//", page)
    assert "<link" not in page
    # Summary carries the test name and the numbers of the constructed halves.
    assert MCNEMAR_TEST in page and "DiD vs naive (pp)" in page
    probes = pl.read_parquet(run / "probes.parquet")
    gated = probes.filter((pl.col("system") == "gated") & (pl.col("q_index") >= 45))
    assert f"{100 * gated['evidence'].mean():.1f} [" in page
    # Worst questions show question, gold, answer and retrieved memories (escaped).
    assert "memory &lt;b&gt;" in page and "Acme " in page and "answer " in page
    md = (run / "report.md").read_text()
    assert "| system | n | 1st half (%)" in md and "## Per category" in md and "## Worst questions" in md


@pytest.mark.slow
def test_report_is_deterministic(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", reader=False)
    first = write_report(run, n_boot=200).read_text()
    second = write_report(run, n_boot=200).read_text()
    assert first == second
    assert "answer_f1" not in first and "reader cost timeline" not in first


def test_static_run_gets_tables_without_curves(tmp_path: Path) -> None:
    run = make_static_run(tmp_path / "static")
    data = load_run(run)
    assert not data.longitudinal and data.metric == "recall_all@10" and data.category == "category_label"
    page = write_report(run, n_boot=200).read_text()
    assert "<section id='summary'>" in page and "<section id='categories'>" in page
    assert "<section id='curves'>" not in page and "<section id='timelines'>" not in page
    assert "temporal" in page and "gold 3" in page
    assert len(_images(page)) == 1


def test_bad_run_folders_raise_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such run folder"):
        write_report(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="missing spec.json"):
        write_report(tmp_path / "empty")
    run = make_run(tmp_path / "run")
    (run / "spec.json").write_text("{not json")
    with pytest.raises(UserError, match="spec.json: not valid JSON"):
        write_report(run)


def test_compare_runs_ranks_systems_across_seeds(tmp_path: Path) -> None:
    runs = [make_run(tmp_path / f"seed{s}", seed=s, reader=False) for s in range(3)]
    page = compare_runs(runs, tmp_path / "cmp", n_boot=200).read_text()
    for section in ("runs", "summary", "seeds", "ranking", "curves"):
        assert f"<section id='{section}'>" in page, section
    assert len(_images(page)) == 2
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "Friedman chi-square" in md and "Kendall's W" in md and "(n=3)" in md


def test_cli_modules_write_and_print(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path / "run", reader=False)
    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    assert report_cli.main(parser.parse_args([str(run), "--n-boot", "200"])) == 0
    out = capsys.readouterr().out
    assert "1st half (%)" in out and out.strip().endswith(f"report: {run / 'report.html'}")
    with pytest.raises(UserError, match="--fading"):
        report_cli.main(parser.parse_args([str(run), "--fading", "1.5"]))
    parser = argparse.ArgumentParser()
    compare_cli.add_arguments(parser)
    assert compare_cli.main(parser.parse_args([str(run), "--out", str(tmp_path / "c"), "--n-boot", "100"])) == 0
    assert (tmp_path / "c" / "compare.html").is_file()


def _render(page: Path) -> tuple[str, list[str]]:
    """DOM after load and the console lines chromium logged for ``page``."""
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
         "--enable-logging=stderr", "--v=1", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    return proc.stdout, console


@pytest.mark.slow
def test_report_renders_in_headless_chromium_without_console_errors(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} missing: CI must install Debian's chromium (apt-get install -y chromium)")
        pytest.skip(f"{CHROMIUM} not installed (apt-get install -y chromium)")
    run = make_run(tmp_path / "run")
    page = write_report(run, n_boot=200)
    dom, console = _render(page)
    assert console == []
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None
    assert 'data-figures="8"' in body.group(0) and 'data-figures-ok="8"' in body.group(0)
    # The check can fail: a figure that does not decode is reported on the console.
    html_text = page.read_text()
    broken = tmp_path / "broken.html"
    broken.write_text(re.sub(r"base64,[A-Za-z0-9+/=]+'", "base64,AAAA'", html_text, count=1))
    dom, console = _render(broken)
    assert any("figure failed to render" in line for line in console)
    assert 'data-figures-ok="7"' in dom
