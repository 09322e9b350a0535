"""Reports and comparisons of run folders written by the pipeline's recorder and summariser."""

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

from memsim.analysis.cli import compare as compare_cli, report as report_cli
from memsim.analysis.pipeline import execute, make_spec
from memsim.analysis.report import (
    DEFAULT_FADING,
    DEFAULT_WINDOW,
    DEFAULT_WINDOW_DAYS,
    compare_runs,
    load_run,
    summary_text,
    write_report,
)
from memsim.analysis.summary import summarise, write_summary
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources, SystemSpec
from memsim.core.errors import UserError
from memsim.sim.recorder import Recorder
from memsim.sim.spec import RunSpec, ScenarioEntry, system_entries

CHROMIUM = "/usr/bin/chromium"
SYSTEMS = (("naive", 0.5, 0.5), ("gated", 0.3, 0.8), ("decay", 0.4, 0.6))
METRIC = "recall_all@10"
"""The headline column of the hand-made runs (k = 10)."""
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _write_folder(path: Path, spec: RunSpec, probes: list[dict], timeline: list[dict], info: dict) -> Path:
    """Write rows through the recorder, then metrics.json and perf.json through the summariser (as ``execute`` does)."""
    rec = Recorder(path)
    rec.open(spec)
    for row in probes:
        rec.probe(row)
    for row in timeline:
        rec.timeline(row)
    rec.commit("all")
    rows, tl, run_info = rec.finish(info)
    write_summary(path, summarise(spec, rows, tl, run_info), wall_seconds=1.0)
    return path


def make_run(path: Path, *, seed: int = 0, reader: bool = True, n_questions: int = 90,
             systems: tuple[tuple[str, float, float], ...] = SYSTEMS) -> Path:
    """A longitudinal run folder with known per-half success rates per system (label, 1st half, 2nd half)."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_questions):
        days = q * 2.0
        user = f"u{q % 3}"
        for system, p1, p2 in systems:
            hit = float(rng.random() < (p1 if q < n_questions / 2 else p2))
            row = {
                "system": system,
                "episode": user,
                "user_id": user,
                "question_id": f"q{q}",
                "q_index": q,
                "time": T0 + timedelta(days=days),
                "t_days": days,
                "kind": ("single-hop", "multi-hop", "temporal")[q % 3],
                "topic": "work",
                "reask": False,
                "thread_id": f"q{q}",
                "question": f"Where does the user work now? ({q})",
                "gold": f"Acme {q}",
                "evidence_ids": [f"{user}:t{q}"],
                "first_rank": 1 if hit else None,
                "retrieve_ms": float(rng.gamma(2.0, 3.0)),
                "retrieved_ids": ["m1", "m2"],
                "retrieved_text": [f"memory <b>{q}</b> & co", "another memory"],
                "isolation_failures": 0,
                "deleted_leaks": 0,
                **{f"{m}@{k}": hit for m in ("recall_all", "recall_any", "ndcg") for k in (1, 5, 10)},
                "stale_above_current": float("nan"),
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
    timeline = [
        {
            "system": system,
            "episode": f"u{i % 3}",
            "user_id": f"u{i % 3}",
            "time": T0 + timedelta(days=i * 6.0),
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
        for system, _, _ in systems
    ]
    spec = RunSpec(
        scenario=ScenarioEntry(name="persona", args={"users": 3}),
        systems=system_entries([SystemSpec(s) for s, _, _ in systems]),
        seed=seed,
        ks=(1, 5, 10),
        n_boot=300,
        memsim_version="test",
    )
    info = {"totals": {"users": 3, "questions": n_questions}, "span_days": 2.0 * n_questions, "total": 1, "unit": "day"}
    return _write_folder(path, spec, rows, timeline, info)


def make_static_run(path: Path) -> Path:
    """A static LoCoMo-style run folder: two conversations, questions by kind, adversarial ones excluded."""
    rng = np.random.default_rng(5)
    rows = []
    for i in range(40):
        hit = float(rng.random() < 0.6)
        conv = f"conv-{i % 2}"
        kind = ("multi-hop", "temporal", "open-domain", "single-hop", "adversarial")[i % 5]
        excluded = "adversarial" if kind == "adversarial" else None
        rows.append(
            {
                "system": "dense",
                "episode": conv,
                "user_id": conv,
                "question_id": f"{conv}:q{i}",
                "q_index": i,
                "time": T0,
                "t_days": 0.0,
                "kind": kind,
                "question": f"question {i}",
                "gold": f"gold {i}",
                "evidence_ids": [f"D1:{i}"],
                "excluded": excluded,
                "retrieved_ids": ["a"],
                "retrieved_text": ["some memory"],
                "first_rank": 1 if hit else None,
                "retrieve_ms": 2.0,
                "isolation_failures": 0,
                "deleted_leaks": 0,
                **{f"{m}@{k}": (float("nan") if excluded else hit) for m in ("recall_all", "recall_any", "ndcg") for k in (1, 10)},
            }
        )
    spec = RunSpec(
        kind="static",
        scenario=ScenarioEntry(name="locomo", args={"data": "locomo10.json"}),
        systems=system_entries([SystemSpec("dense")]),
        ks=(1, 10),
        retrieve_k=10,
        n_boot=200,
        memsim_version="test",
    )
    info = {"totals": {"episodes": 2, "questions": 40}, "span_days": 0.0, "total": 2, "unit": "episode"}
    return _write_folder(path, spec, rows, [], info)


def _images(page: str) -> list[str]:
    return re.findall(r"src='data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)'", page)


def _visible(page: str) -> str:
    """The page's text as a reader sees it: tags removed, entities decoded."""
    import html as html_lib

    return html_lib.unescape(re.sub(r"<[^>]+>", "", page))


def _svgs(page: str) -> dict[str, ET.Element]:
    """Each figure of a page by its alt text, parsed."""
    pairs = re.findall(r"<img class='plot' alt='([^']+)' src='data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)'", page)
    return {alt: ET.fromstring(base64.b64decode(data)) for alt, data in pairs}


def _by_id(root: ET.Element, prefix: str) -> list[ET.Element]:
    return [el for el in root.iter() if (el.get("id") or "").startswith(prefix)]


def _legend_labels(root: ET.Element) -> list[str]:
    """Text of the figure's legend (``plots`` gives it the SVG id ``legend``)."""
    legends = _by_id(root, "legend")
    return ["".join(t.itertext()).strip() for lg in legends for t in lg.iter() if t.tag.endswith("text")]


def _panels(root: ET.Element) -> list[ET.Element]:
    return [el for el in root.iter() if re.fullmatch(r"axes_\d+", el.get("id") or "")]


def test_report_has_every_section_and_figure(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    out = write_report(run)
    assert out == run / "report.html"
    page = out.read_text()
    for section in ("learning", "spec", "summary", "curves", "timelines", "categories", "worst"):
        assert f"<section id='{section}'>" in page, section
    # No system of this run learns from feedback: its overall figures lead, the change through use follows
    # (a run with a learner leads with learning: test_real_run_report_leads_with_the_gain_over_twin...).
    assert page.index("<section id='summary'>") < page.index("<section id='learning'>")
    assert "Change through use" in page
    assert "<th>answer</th>" in page  # a reader answered: the worst questions show its answers
    alts = re.findall(r"<img class='plot' alt='([^']+)'", page)
    assert alts == [
        "recall_all@10 over question index",  # a retrieval curve is named by its metric, never accuracy
        "recall_all@10 over simulated days",
        "answer_f1 over question index",
        "answer_f1 over simulated days",
        "storage and cost timeline",
        "latency timeline",
        "reader cost timeline",
    ]
    # No system here learns from feedback: the lead figure is a sentence, not an empty plot.
    assert "No system in this run learns from feedback" in page
    assert "<p class='nodata' data-figure='gain-over-twin'>" in page
    for data in _images(page):
        root = ET.fromstring(base64.b64decode(data))
        assert root.tag.endswith("svg")
    # Self-contained: nothing fetched from anywhere.
    assert not re.search(r"(src|href)=['\"](https?:)?//", page)
    assert "<link" not in page
    # The lead table is metrics.json's learning table: per-user halves of the constructed rates and the
    # DiD against the static control with its interval; 3 users, so intervals are conditional on them.
    metrics = json.loads((run / "metrics.json").read_text())
    text = _visible(page)
    assert "DiD vs static control (pp) [95% CI]" in page and "naive (static control)" in page
    assert "CONDITIONAL ON THESE 3 USERS" in page
    for system in ("gated", "decay"):
        e = metrics["systems"][system]
        assert f"{system}</td><td>{100 * e['first']:.1f}</td><td>{100 * e['second']:.1f}</td>" in page
        assert f"{100 * e['did_control']:+.1f} [{100 * e['did_control_lo']:+.1f}, {100 * e['did_control_hi']:+.1f}]" in page
    # Every interval is metrics.json's: the overall one of each system, the per-kind ones.
    for system, _, _ in SYSTEMS:
        head = metrics["systems"][system]["overall"]["scores"][METRIC]
        assert f"{100 * head['mean']:.1f} [{100 * head['lo']:.1f}, {100 * head['hi']:.1f}]" in page
        kind = metrics["systems"][system]["per_kind"]["temporal"]["scores"][METRIC]
        assert f"{100 * kind['mean']:.1f} [{100 * kind['lo']:.1f}, {100 * kind['hi']:.1f}]" in text
    # Per kind: ONE table of systems x kinds, shaded by value.
    assert page.count("<table class='heat'>") == 1
    heat = page[page.index("<table class='heat'>"):]
    heat = heat[: heat.index("</table>")]
    # The header, then per metric (recall_all@10, answer_f1) a group row and one row per system.
    assert heat.count("<tr") == 1 + 2 * (1 + len(SYSTEMS))
    assert "temporal (n=30)" in heat and "style='background:rgba(" in heat
    # Every figure: a complete legend, no empty panel.
    for alt, root in _svgs(page).items():
        labels = _legend_labels(root)
        for system, _, _ in SYSTEMS:
            assert system in labels, (alt, labels)
        for ax in _panels(root):
            assert _by_id(ax, "series-"), f"{alt}: an empty panel"
    # Worst questions show question, gold, answer and retrieved memories (escaped).
    assert "memory &lt;b&gt;" in page and "Acme " in page and "answer " in page
    md = (run / "report.md").read_text()
    # The arms table names the metric in its headers and carries stale>cur per half (moved with the contrasts layout).
    assert ("| system | recall_all@10 1st half % | recall_all@10 2nd half % | stale>cur 1st % | stale>cur 2nd % |" in md
            and "## Per question kind" in md and "## Worst questions" in md)
    # No system of this run uses feedback: the section says so instead of "Learning through use" (issue 39).
    assert "## Change through use: recall_all@10" in md and "## Change through use: answer_f1" in md
    assert "Learning through use" not in md


def test_report_renders_the_learning_tables_of_metrics_json(tmp_path: Path) -> None:
    """Every figure of the learning tables (the headline and each judge's) is metrics.json's; the report computes none."""
    run = make_run(tmp_path / "run")
    metrics = json.loads((run / "metrics.json").read_text())
    md = (write_report(run).parent / "report.md").read_text()
    tables = {METRIC: metrics["systems"], **metrics["answer_learning"]}
    assert set(tables) == {METRIC, "answer_f1"}
    for metric, table in tables.items():
        block = md[md.index(f"## Change through use: {metric}"):]
        block = block[:block.index("\n\n", block.index("| system"))]
        for system, e in table.items():
            if "gain_second" not in e:
                continue
            row = next(line for line in block.splitlines() if line.startswith(f"| {system} |"))
            gain = f"{100 * e['gain_second']:+.1f} [{100 * e['gain_second_lo']:+.1f}, {100 * e['gain_second_hi']:+.1f}]"
            assert gain in row and f"{100 * e['first']:.1f}" in row and f"{100 * e['second']:.1f}" in row


@pytest.mark.slow
def test_report_is_deterministic(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", reader=False)
    first = write_report(run).read_text()
    second = write_report(run).read_text()
    assert first == second
    assert "answer_f1" not in first and "reader cost timeline" not in first


def test_static_run_gets_tables_without_curves(tmp_path: Path) -> None:
    run = make_static_run(tmp_path / "static")
    data = load_run(run)
    assert not data.longitudinal and data.metric == METRIC and data.control is None
    assert not {"first", "second", "gain_second", "did_control"} & set(data.entry("dense"))  # no halves in a static run
    page = write_report(run).read_text()
    assert "<section id='summary'>" in page and "<section id='categories'>" in page
    assert "<section id='curves'>" not in page and "<section id='timelines'>" not in page
    assert "Learning through use" not in page
    assert "temporal" in page and "gold 3" in page and "adversarial 8" in page
    assert len(_images(page)) == 0  # per kind is a shaded table; a static run has no curves
    assert page.count("<table class='heat'>") == 1 and "not scored: 8 adversarial (no evidence to retrieve" in page
    metrics = json.loads((run / "metrics.json").read_text())
    for kind in ("temporal", "single-hop"):
        score = metrics["systems"]["dense"]["per_kind"][kind]["scores"][METRIC]
        assert f"{100 * score['mean']:.1f} [{100 * score['lo']:.1f}, {100 * score['hi']:.1f}]" in _visible(page)
    # Headline figures, no curves: the per-kind tables of the one summariser.
    assert "overall" in summary_text(data) and "adversarial 8" in summary_text(data)


def test_bad_run_folders_raise_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such run folder"):
        write_report(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="missing spec.json"):
        write_report(tmp_path / "empty")
    run = make_run(tmp_path / "run", reader=False)
    probes = pl.read_parquet(run / "probes.parquet")
    probes.drop(METRIC).write_parquet(run / "probes.parquet")
    with pytest.raises(UserError, match=r"probes.parquet: no column 'recall_all@10' \(the metric of spec.json\)"):
        write_report(run)
    probes.drop("kind").write_parquet(run / "probes.parquet")
    with pytest.raises(UserError, match="probes.parquet: missing column.s. kind"):
        write_report(run)
    probes.write_parquet(run / "probes.parquet")
    metrics = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_text(json.dumps({**metrics, "metric": "recall_all@5"}))
    with pytest.raises(UserError, match="metrics.json: metric 'recall_all@5' is not the metric of spec.json"):
        write_report(run)
    (run / "metrics.json").unlink()  # recomputable from the rows: the report summarises in memory
    assert write_report(run).is_file() and not (run / "metrics.json").exists()
    # Every command reads the folder through the one reader: a damaged or missing file is named.
    from memsim.analysis.cli.erasure import erasure_main
    from memsim.analysis.summary import summarise_folder

    run_json = (run / "run.json").read_text()
    (run / "run.json").write_text("[1, 2")
    with pytest.raises(UserError, match=r"run.json: not valid JSON"):
        summarise_folder(run)
    (run / "run.json").unlink()
    with pytest.raises(UserError, match=r"not a finished run folder \(run.json missing\)"):
        summarise_folder(run)
    with pytest.raises(UserError, match=r"not a finished run folder \(timeline.parquet missing\)"):
        (run / "timeline.parquet").rename(run / "t.parquet")
        erasure_main(argparse.Namespace(run_dir=run))
    (run / "t.parquet").rename(run / "timeline.parquet")
    (run / "run.json").write_text(run_json)
    (run / "probes.parquet").unlink()
    with pytest.raises(UserError, match="missing probes.parquet .the run did not finish"):
        write_report(run)
    (run / "spec.json").write_text("{not json")
    with pytest.raises(UserError, match="spec.json"):
        write_report(run)


def test_compare_runs_ranks_systems_across_seeds(tmp_path: Path) -> None:
    twin = (("gated~twin", 0.3, 0.3),)
    runs = [make_run(tmp_path / f"seed{s}", seed=s, reader=False, systems=SYSTEMS + twin) for s in range(3)]
    page = compare_runs(runs, tmp_path / "cmp").read_text()
    for section in ("runs", "summary", "seeds", "ranking", "curves"):
        assert f"<section id='{section}'>" in page, section
    assert len(_images(page)) == 2
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "Friedman chi-square" in md and "Kendall's W" in md and "(n=3)" in md
    # Per run, the figures are each run's metrics.json: overall, halves, gain over the twin, DiD vs static control.
    assert "| gain over twin, 2nd half (pp) | DiD vs static control (pp) |" in md and "from the run's metrics.json" in md
    systems = json.loads((runs[1] / "metrics.json").read_text())["systems"]
    g = systems["gated"]
    overall = g["overall"]["scores"][METRIC]["mean"]
    assert (f"| seed1 | gated | {METRIC} | 90 | {100 * overall:.1f} | {100 * g['first']:.1f} | {100 * g['second']:.1f} "
            f"| {100 * g['gain_second']:+.1f} | {100 * g['did_control']:+.1f} |") in md
    d = systems["decay"]  # no twin: no gain; the static control has no DiD against itself
    assert f"| {100 * d['second']:.1f} | — | {100 * d['did_control']:+.1f} |" in md
    assert "gain_second" not in d and "did_control" not in systems["naive"]
    assert f"| seed1 | naive | {METRIC} | 90 |" in md and md.count(" | — | — |") >= 3
    # Runs of different metrics are not ranked together.
    static = make_static_run(tmp_path / "static")
    assert compare_runs([static], tmp_path / "cmp-static").is_file()
    spec = json.loads((static / "spec.json").read_text())
    (static / "spec.json").write_text(json.dumps({**spec, "metric": "recall_all@1"}))
    (static / "metrics.json").unlink()
    with pytest.raises(UserError, match="different metrics"):
        compare_runs([runs[0], static], tmp_path / "cmp2")


def test_cli_modules_write_and_print(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path / "run", reader=False)
    parser = argparse.ArgumentParser()
    report_cli.report_arguments(parser)
    assert report_cli.report_main(parser.parse_args([str(run)])) == 0
    out = capsys.readouterr().out
    assert "1st half %" in out and "DiD vs static control" in out and out.strip().endswith(f"report: {run / 'report.html'}")
    with pytest.raises(UserError, match="--fading"):
        report_cli.report_main(parser.parse_args([str(run), "--fading", "1.5"]))
    static = make_static_run(tmp_path / "static")
    assert report_cli.report_main(parser.parse_args([str(static)])) == 0
    out = capsys.readouterr().out
    assert "recall_all" in out and "excluded from scores: adversarial 8" in out
    parser = argparse.ArgumentParser()
    compare_cli.compare_arguments(parser)
    assert compare_cli.compare_main(parser.parse_args([str(run), "--out", str(tmp_path / "c")])) == 0
    assert (tmp_path / "c" / "compare.html").is_file()
    # The parsers repeat the report's defaults so that they need not import it.
    assert (report_cli._WINDOW, report_cli._WINDOW_DAYS, report_cli._FADING) == (
        DEFAULT_WINDOW, DEFAULT_WINDOW_DAYS, DEFAULT_FADING)
    assert (compare_cli._WINDOW, compare_cli._FADING) == (DEFAULT_WINDOW, DEFAULT_FADING)


def _need_chromium() -> None:
    """Skip without Debian's chromium, except on CI, where its absence is a failure."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} missing: CI must install Debian's chromium (apt-get install -y chromium)")
        pytest.skip(f"{CHROMIUM} not installed (apt-get install -y chromium)")


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
    _need_chromium()
    run = make_run(tmp_path / "run")
    page = write_report(run)
    dom, console = _render(page)
    assert console == []
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None
    assert 'data-figures="7"' in body.group(0) and 'data-figures-ok="7"' in body.group(0)
    # The check can fail: a figure that does not decode is reported on the console.
    html_text = page.read_text()
    broken = tmp_path / "broken.html"
    broken.write_text(re.sub(r"base64,[A-Za-z0-9+/=]+'", "base64,AAAA'", html_text, count=1))
    dom, console = _render(broken)
    assert any("figure failed to render" in line for line in console)
    assert 'data-figures-ok="6"' in dom


def test_pipeline_writes_reports_of_both_run_kinds(tmp_path: Path) -> None:
    """``execute(..., report=True)`` writes the report of a real longitudinal run, and ``memsim report`` of it works."""
    spec = make_spec("longitudinal", "persona", {"users": 2, "months": 1.5}, (SystemSpec("naive"), SystemSpec("bm25")),
                     seed=1, n_boot=100)
    out = tmp_path / "persona"
    execute(spec, out_dir=out, resources=Resources(rng=np.random.default_rng(1), embedder_factory=lambda: HashEmbedder(64)),
            report=True)
    page = (out / "report.html").read_text()
    assert "<section id='curves'>" in page and "Change through use: recall_all@10" in page
    metrics = json.loads((out / "metrics.json").read_text())
    head = metrics["systems"]["bm25"]["overall"]["scores"]["recall_all@10"]
    assert f"{100 * head['mean']:.1f} [{100 * head['lo']:.1f}, {100 * head['hi']:.1f}]" in page


def test_static_locomo_run_gets_a_report(tmp_path: Path, locomo_path: Path) -> None:
    """A static LoCoMo run on the real file: per-kind tables with intervals, no learning curves."""
    spec = make_spec("static", "locomo", {"data": str(locomo_path), "limit_conversations": 2}, (SystemSpec("naive"),),
                     k=10, retrieve_k=10, source=str(locomo_path))
    out = tmp_path / "locomo"
    execute(spec, out_dir=out, resources=Resources(rng=np.random.default_rng(0), embedder_factory=lambda: HashEmbedder(64)),
            report=True)
    page = (out / "report.html").read_text()
    assert "<section id='categories'>" in page and "<section id='curves'>" not in page
    assert "adversarial" in page and "multi-hop" in page
    metrics = json.loads((out / "metrics.json").read_text())
    score = metrics["systems"]["naive"]["per_kind"]["single-hop"]["scores"]["recall_all@10"]
    assert f"{100 * score['mean']:.1f} [{100 * score['lo']:.1f}, {100 * score['hi']:.1f}]" in _visible(page)


_CLIP_CHECK = """
window.addEventListener('load', function () {
  var clipped = [], svgs = document.querySelectorAll('svg');
  svgs.forEach(function (svg, i) {
    var box = svg.getBoundingClientRect();
    svg.querySelectorAll('text').forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (r.width > 0 && (r.left < box.left - 0.5 || r.right > box.right + 0.5 ||
                          r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)) {
        clipped.push(i + ':' + t.textContent);
      }
    });
  });
  document.body.setAttribute('data-svgs', String(svgs.length));
  document.body.setAttribute('data-clipped', clipped.join('|'));
});
"""


@pytest.mark.slow
def test_real_run_report_leads_with_the_gain_over_twin_and_every_legend_is_complete_in_chromium(tmp_path: Path) -> None:
    """A real run with a learning system: the lead table and figure, complete legends, no empty panel, nothing cut off."""
    _need_chromium()
    systems = (SystemSpec("naive"), SystemSpec("bm25"), SystemSpec("neuroplastic"))
    spec = make_spec("longitudinal", "persona", {"users": 3, "months": 2.0}, systems, seed=2, n_boot=200, placebo=True)
    out = tmp_path / "real"
    execute(spec, out_dir=out, resources=Resources(rng=np.random.default_rng(2), embedder_factory=lambda: HashEmbedder(64)),
            report=True)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["twins"] == {"neuroplastic": "neuroplastic~twin"}
    labels = list(metrics["systems"])
    assert {"neuroplastic~twin", "neuroplastic~placebo"} <= set(labels)
    page = (out / "report.html").read_text()
    # The lead: the twin table of metrics.json, then the gain-over-twin figure, before anything else.
    first = re.search(r"<section id='(\w+)'>", page)
    assert first is not None and first.group(1) == "learning"
    lead = page[page.index("<section id='learning'>"):page.index("<section id='summary'>")]
    e = metrics["systems"]["neuroplastic"]
    gain = f"{100 * e['gain_second']:+.1f} [{100 * e['gain_second_lo']:+.1f}, {100 * e['gain_second_hi']:+.1f}]"
    assert gain in lead and "neuroplastic~twin (twin of neuroplastic: told nothing)" in lead
    assert "CONDITIONAL ON THESE 3 USERS" in lead
    assert "alt='gain over twin over simulated time'" in lead
    svgs = _svgs(page)
    gain_svg = svgs["gain over twin over simulated time"]
    assert "neuroplastic − twin" in _legend_labels(gain_svg)
    assert "neuroplastic~placebo − twin" in _legend_labels(gain_svg)
    # The point estimates are metrics.json's gain curve.
    from memsim.analysis.learning import gain_curve_band
    band = gain_curve_band(pl.read_parquet(out / "probes.parquet"), metric=METRIC, system="neuroplastic",
                           twin="neuroplastic~twin", window_days=14.0, rng=np.random.default_rng(0), n_boot=200)
    assert [round(b["gain"], 12) for b in band] == [round(p["gain"], 12) for p in metrics["gain_curves"]["neuroplastic"]]
    # Every figure over systems names each system in full in its legend, and no panel is empty.
    for alt, root in svgs.items():
        legend = _legend_labels(root)
        if alt != "gain over twin over simulated time":
            for label in labels:
                assert label in legend, (alt, label, legend)
        panels = _panels(root)
        assert panels, alt
        for ax in panels:
            assert _by_id(ax, "series-"), f"{alt}: an empty panel"
    # No system LLM calls here: the token panel is left out and a sentence says so.
    assert "No system made LLM calls of its own in this run" in page
    storage_titles = " ".join("".join(t.itertext()) for t in svgs["storage and cost timeline"].iter() if t.tag.endswith("text"))
    assert "LLM tokens" not in storage_titles
    # In the browser: every figure decodes, and no text of any figure (legends included) falls outside it.
    dom, console = _render(out / "report.html")
    assert console == []
    n = len(_images(page))
    assert f'data-figures="{n}"' in dom and f'data-figures-ok="{n}"' in dom
    harness = tmp_path / "figures.html"
    # Inline (not as images) so that the browser's own text metrics can be read; the XML prologue goes.
    inline = "".join("<div><svg" + base64.b64decode(data).decode("utf-8").split("<svg", 1)[1] + "</div>"
                     for data in _images(page))
    harness.write_text(f"<!DOCTYPE html><html><body>{inline}<script>{_CLIP_CHECK}</script></body></html>")
    dom, console = _render(harness)
    assert console == []
    assert f'data-svgs="{n}"' in dom
    assert 'data-clipped=""' in dom, re.search(r'data-clipped="([^"]*)"', dom)
    # The check can fail: a label wider than its picture is reported.
    cut = "<div><svg xmlns='http://www.w3.org/2000/svg' width='60' height='20'><text x='0' y='15'>neuroplastic~twin</text></svg></div>"
    harness.write_text(f"<!DOCTYPE html><html><body>{cut}<script>{_CLIP_CHECK}</script></body></html>")
    dom, _ = _render(harness)
    assert 'data-clipped="0:neuroplastic~twin"' in dom
