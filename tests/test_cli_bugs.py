"""Rough edges a new user met in the first hour, each pinned by a test that failed before its fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import memsim
from memsim.analysis.cli import main

SRC = str(Path(memsim.__file__).parent.parent)  # this checkout's memsim, for child processes


def _memsim(*argv: str, env: dict[str, str] | None = None, **kw: object) -> subprocess.Popen:
    full = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "memsim", *argv], env=full, **kw)  # type: ignore[call-overload]


# --------------------------------------------------------------------------- memsim data list


def test_data_list_sees_the_file_memsim_locomo_points_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """It said 'absent' for LoCoMo while $MEMSIM_LOCOMO pointed at the file every run then read."""
    locomo = tmp_path / "elsewhere" / "locomo10.json"
    locomo.parent.mkdir()
    locomo.write_text("[]", encoding="utf-8")
    monkeypatch.setenv("MEMSIM_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("MEMSIM_LOCOMO", str(locomo))
    assert main(["data", "list", "--verify"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith("locomo "))
    assert "present, SHA256 MISMATCH" in row  # found, and hashed against the official file (this is not it)
    assert str(locomo) in out
    assert f"locomo:                     {locomo}" in out  # the 'read when no --data is given' line


def test_data_list_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """``memsim data list --verify | head`` ended in a BrokenPipeError traceback."""
    proc = _memsim("data", "list", "--verify", env={"MEMSIM_DATA_DIR": str(tmp_path)},
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is written, as ``head`` is after its lines
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "BrokenPipeError" not in err and "Traceback" not in err, err
    assert proc.returncode == 141


# --------------------------------------------------------------------------- memsim compare


def _across(md: str) -> list[tuple[float, float, float]]:
    """(mean, lo, hi) of every interval in the 'Across runs' section of compare.md."""
    import re

    part = md.split("## Across runs", 1)[1].split("##", 1)[0]
    return [tuple(map(float, m)) for m in re.findall(r"([+-]?[\d.]+) \[([+-]?[\d.]+), ([+-]?[\d.]+)\] \(n=", part)]


def test_compare_clamps_intervals_of_proportions(tmp_path: Path) -> None:
    """A t interval over two seeds of a 97% system printed '91.3% [79.4, 103.1]'."""
    from test_report import make_run

    from memsim.analysis.report import compare_runs

    systems = (("naive", 0.97, 0.97), ("gated", 0.9, 0.99), ("decay", 0.95, 0.97))
    runs = [make_run(tmp_path / f"seed{s}", seed=s, reader=False, systems=systems) for s in range(2)]
    compare_runs(runs, tmp_path / "cmp")
    cells = _across((tmp_path / "cmp" / "compare.md").read_text(encoding="utf-8"))
    assert cells and all(-100.0 <= lo <= hi <= 100.0 for _, lo, hi in cells), cells
    assert any(hi == 100.0 for _, _, hi in cells)  # the case that ran past 100 before


def test_compare_counts_systems_across_run_folders(tmp_path: Path) -> None:
    """Two runs with five systems between them said 'needs at least 3 systems, got 1'."""
    from test_report import make_run

    from memsim.analysis.report import compare_runs

    a = make_run(tmp_path / "a", reader=False, systems=(("naive", 0.5, 0.5), ("s1", 0.4, 0.6), ("s2", 0.3, 0.3)))
    b = make_run(tmp_path / "b", reader=False, systems=(("naive", 0.5, 0.5), ("s3", 0.4, 0.6), ("s4", 0.3, 0.3)))
    compare_runs([a, b], tmp_path / "cmp")
    md = (tmp_path / "cmp" / "compare.md").read_text(encoding="utf-8")
    assert "5 systems across 2 runs, 1 in all of them (naive)" in md
    assert "got 1" not in md


@pytest.fixture(scope="module")
def tied_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-seed sweep of naive and control-static (naive under another name: the two tie exactly)."""
    from memsim.analysis.sweep import run_sweep, sweep_from_mapping

    spec = sweep_from_mapping({
        "systems": ["naive", "control-static"],
        "sweep": {"name": "tie", "seeds": 1, "embedder": "hash"},
        "scenario": {"name": "persona", "users": 2, "months": 1},
        "run": {"seed": 0, "k": 5, "n_boot": 100},
    })
    out = tmp_path_factory.mktemp("tie") / "sweep"
    run_sweep(spec, out, executor="local", workers=1)
    return out


def test_sweep_compare_ranks_ties_equally_and_renders_lists(tied_sweep: Path) -> None:
    """Tied systems were ranked 1 and 2, and compare.html showed its bullets as literal '- '."""
    from memsim.analysis.sweep_compare import compare_sweep

    md = compare_sweep(tied_sweep).read_text(encoding="utf-8")
    ranking = next(line for line in md.split("## Ranking on ", 1)[1].splitlines() if line.startswith("- "))
    assert "1. naive" in ranking and "1. control-static" in ranking and "2. " not in ranking, ranking
    page = (tied_sweep / "compare" / "compare.html").read_text(encoding="utf-8")
    assert "<li>" in page and "<table>" in page and "<p>- " not in page


# --------------------------------------------------------------------------- memsim report


def test_report_tables_order_cut_offs_numerically() -> None:
    """The printed tables of a static run read @1 @10 @30 @5 @50 (metrics.json's string order of its keys)."""
    import json

    from memsim.analysis.summary import format_tables

    scores = {f"{m}@{k}": {"mean": 0.5, "lo": 0.4, "hi": 0.6} for m in ("recall_all", "ndcg") for k in (1, 5, 10, 30, 50)}
    overall = {"scores": scores, "questions": 4, "scored": 4, "episodes": 2, "excluded": {}}
    metrics = json.loads(json.dumps({"metric": "recall_all@10", "systems": {"naive": {"per_kind": {}, "overall": overall}}},
                                    sort_keys=True))  # as read back from metrics.json
    lines = format_tables(metrics, "naive").splitlines()
    header = next(line for line in lines if line.startswith("recall_all "))
    assert header.split()[-5:] == ["@1", "@5", "@10", "@30", "@50"], header
    assert lines[0].startswith("ndcg ")  # families keep their order


# --------------------------------------------------------------------------- run, demo, static, rerun

LME_MINI = Path(__file__).parent / "fixtures" / "longmemeval_s_mini.json"
SMALL = '[scenario]\nname = "persona"\nusers = 1\nmonths = 1\n[run]\nseed = 2\nk = 5\nn_boot = 100\n'


def test_demo_dry_run_without_a_reader_writes_nothing_and_returns_at_once(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``memsim demo --dry-run`` played the whole demo for minutes and wrote a run folder."""
    import time

    started = time.perf_counter()
    assert main(["demo", "--dry-run", "--out", str(tmp_path / "demo")]) == 0
    assert time.perf_counter() - started < 30
    assert "reader none makes no LLM calls" in capsys.readouterr().out
    assert not (tmp_path / "demo").exists()


def test_progress_is_off_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """tqdm flooded non-terminal logs with carriage-return updates."""
    from memsim.analysis.cli.run import progress_bar

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert progress_bar() is None
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert callable(progress_bar()) and progress_bar(enabled=False) is None


def test_run_and_demo_take_no_progress_data_and_cache_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``run`` and ``demo`` had no ``--no-progress``, ``--data`` or ``--cache-dir`` (``static`` had them)."""
    from memsim.analysis.cli import build_parser

    for command in (["run", "x.toml"], ["demo"]):
        args = build_parser(command[:1]).parse_args([*command, "--no-progress", "--data", "d.json", "--cache-dir", "c"])
        assert (args.no_progress, args.data, args.cache_dir) == (True, "d.json", Path("c"))
    cfg = tmp_path / "s.toml"
    cfg.write_text(SMALL, encoding="utf-8")
    # --data goes to the scenario, which checks it as it checks scenario.data in a config
    assert main(["run", str(cfg), "--system", "naive", "--data", "x.json"]) == 2
    err = capsys.readouterr().err
    assert "data" in err and "with --data" in err


@pytest.mark.slow
def test_run_with_cache_dir_embeds_into_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "s.toml"
    cfg.write_text(SMALL, encoding="utf-8")
    cache = tmp_path / "cache"
    assert main(["run", str(cfg), "--system", "naive", "--out", str(tmp_path / "r"), "--no-report", "--no-progress",
                 "--cache-dir", str(cache)]) == 0
    assert any(cache.rglob("*")), "nothing was written to --cache-dir"


@pytest.mark.slow
def test_static_writes_its_report_and_its_rerun_prints_the_recall_tables(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``memsim static`` wrote no report.html; ``memsim rerun`` of a static run printed no recall table."""
    out = tmp_path / "static"
    assert main(["static", "longmemeval", "--data", str(LME_MINI), "--out", str(out), "--n-boot", "100",
                 "--no-progress"]) == 0
    assert (out / "report.html").is_file() and f"report: {out / 'report.html'}" in capsys.readouterr().out
    assert main(["rerun", str(out), "--out", str(tmp_path / "again"), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "system naive" in printed and "overall " in printed and "turn_recall_all" in printed
    assert "metrics.json identical to" in printed


# --------------------------------------------------------------------------- token and cost totals


def test_token_totals_include_cached_replies() -> None:
    """The run summary and metrics.json showed 758 prompt tokens of a run that used 7,638 (the rest cached)."""
    from memsim.sim.answer.llm import Completion
    from memsim.sim.answer.meter import Meter
    from memsim.sim.answer.setup import format_cost

    meter = Meter()
    meter.record(Completion("a", 758, 40, 0.5), model="gpt-4o-mini", kind="openai")
    meter.record(Completion("a", 6880, 300, 0.5, cached=True), model="gpt-4o-mini", kind="openai")
    s = meter.summary()
    assert (s["prompt_tokens"], s["cached_prompt_tokens"], s["cached_completion_tokens"]) == (758, 6880, 300)
    assert s["cached_cost_usd"] == pytest.approx((6880 * 0.15 + 300 * 0.60) / 1e6)
    assert s["by_role"][0]["cached_prompt_tokens"] == 6880
    line = format_cost(s)
    assert "7,638 prompt + 340 completion tokens with the cached replies' (758 + 40 sent now)" in line
    assert "the cached replies cost $0.0012 when made" in line


def test_report_shows_the_llm_totals(tmp_path: Path) -> None:
    """report.html showed neither the tokens nor the cost of the reader's and judges' calls."""
    import json

    from test_report import make_run

    from memsim.analysis.report import write_report

    run = make_run(tmp_path / "run")
    info = json.loads((run / "run.json").read_text(encoding="utf-8"))
    info["llm"] = {"calls": 3, "cached_calls": 2, "prompt_tokens": 300, "completion_tokens": 30, "latency_s": 1.5,
                   "cost_usd": 0.0, "cached_prompt_tokens": 200, "cached_completion_tokens": 20, "cached_cost_usd": 0.0}
    (run / "run.json").write_text(json.dumps(info), encoding="utf-8")
    page = write_report(run).read_text(encoding="utf-8")
    assert "LLM: 3 calls (2 cached), 500 prompt + 50 completion tokens with the cached replies&#39; (300 + 30 sent now)" in page


# --------------------------------------------------------------------------- the lean install

# The extras' packages made absent for one process: an import fails, and find_spec finds nothing, as in an
# environment where they were never installed.
_BLOCK = '''
import importlib.util, sys
BLOCKED = {"llama_cpp", "spacy", "dask", "distributed", "fastapi", "uvicorn", "mem0", "bm25s"}
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Absent())
_find_spec = importlib.util.find_spec
def find_spec(name, package=None):
    return None if name.partition(".")[0] in BLOCKED else _find_spec(name, package)
importlib.util.find_spec = find_spec
'''


def test_import_and_demo_without_the_optional_packages(tmp_path: Path) -> None:
    """``import memsim``, ``memsim --help`` and the demo's set-up need none of the extras' packages."""
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(_BLOCK, encoding="utf-8")
    env = {"PYTHONPATH": f"{block}{os.pathsep}{SRC}"}
    code = ("import importlib.util, memsim, memsim.sim, memsim.memory, memsim.analysis.cli\n"
            "from memsim.analysis.cli.run import demo_systems\n"
            "names = [s.name for s in demo_systems()]\n"
            "assert 'naive' in names and 'bm25' not in names and 'neuroplastic' not in names, names\n"
            "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr
    proc = _memsim("demo", "--dry-run", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "bm25, hybrid left out: not installed (pip install 'memsim[lexical]')" in out
    assert "neuroplastic left out: not installed (pip install 'memsim[nlp]')" in out
