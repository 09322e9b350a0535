"""Sweeps: spec validation, cells as run folders, failures, local vs Dask, kill and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from memsim.analysis.sweep import expand, load_sweep, read_index, run_sweep, sweep_from_mapping
from memsim.core.errors import UserError

ROOT = Path(__file__).resolve().parent.parent

TINY = """
systems = ["naive", "neuroplastic", "control-learner"]

[sweep]
name = "tiny"
seeds = 5
embedder = "hash"

[scenario]
name = "persona"
users = 2
months = 1

[run]
seed = 0
k = 10
n_boot = 200
"""
"""Three systems x five seeds of a two-user month: fifteen cells of about half a second each."""

# Logs every socket address a Python process connects, binds, sends to or resolves (PEP 578 audit hooks);
# on PYTHONPATH it is imported by the sweep process and by every worker process it starts.
_AUDIT = '''
import os, sys
_log = os.environ.get("MEMSIM_NET_AUDIT")
if _log:
    def _hook(event, args):
        if event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
            addr = args[1] if len(args) > 1 else None
        elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
            addr = args[0]
        else:
            return
        with open(_log, "a") as f:
            f.write(f"{os.getpid()}\\t{event}\\t{addr!r}\\n")
    sys.addaudithook(_hook)
'''


def _write(tmp: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp / name
    path.write_text(text, encoding="utf-8")
    return path


def _memsim(*args: str, env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "memsim", *args], cwd=ROOT, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def _metrics(sweep_dir: Path) -> dict[str, bytes]:
    return {p.parent.name: p.read_bytes() for p in sorted((sweep_dir / "cells").glob("*/metrics.json"))}


# --------------------------------------------------------------------------- spec


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda s: s.replace("seeds = 5", "seeds = 0"), "sweep.seeds"),
        (lambda s: s.replace('embedder = "hash"', 'embedder = "glove"'), "sweep.embedder"),
        (lambda s: s.replace('"neuroplastic"', '"neuroplasticc"'), "systems[1]: unknown memory system"),
        (lambda s: s.replace("k = 10", "k = 0"), "run.k"),
        (lambda s: s + "\n[run.grid]\nretrieval = [1, 2]\n", "run.grid.retrieval"),
        (lambda s: s.replace("months = 1", "months = 1\n[scenario.grid]\nreask_rate = 0.3"), "scenario.grid.reask_rate"),
        (lambda s: s.replace("users = 2", "userz = 2"), "userz"),
        (lambda s: s.replace("months = 1", "months = 1\n[scenario.grid]\nreask_rate = [0.3, 7.0]"), "reask_rate"),
        (lambda s: s + "\n[extras]\nx = 1\n", "extras"),
        (lambda s: s + "\n[answer]\nreader = \"long\"\n", "answer.reader"),
    ],
)
def test_bad_spec_is_a_clear_error_naming_the_key(tmp_path: Path, edit, key: str) -> None:
    path = _write(tmp_path, edit(TINY))
    with pytest.raises(UserError) as err:
        load_sweep(path)
    assert key in str(err.value) and str(path) in str(err.value)


def test_expand_grids_ablations_and_designs() -> None:
    spec = sweep_from_mapping({
        "systems": [{"name": "neuroplastic", "ablations": True}],
        "sweep": {"seeds": [3, 9], "embedder": "hash", "design": "one-at-a-time"},
        "scenario": {"name": "persona", "users": 2, "months": 1, "grid": {"reask_rate": [0.0, 0.3, 0.6]}},
        "run": {"grid": {"feedback_delay_hours": [1.0, 24.0]}},
    })
    cells = expand(spec)
    # base + reask 0.0 + reask 0.6 + delay 24 (0.3 and 1.0 are the base values) = 4 points;
    # neuroplastic and its 5 ablations (no-ltp, no-associations, no-inhibition, no-consolidation,
    # no-abstractions), each beside the naive control; 2 seeds.
    assert len(cells) == 4 * 6 * 2
    assert {c.seed for c in cells} == {3, 9}
    assert all(c.systems[0] == "naive" and len(c.systems) == 2 for c in cells)
    assert {c.systems[1] for c in cells} >= {"neuroplastic", "neuroplastic-no-ltp"}
    assert sum(c.is_base for c in cells) == 12
    points = {json.dumps(c.point, sort_keys=True) for c in cells}
    assert '{"run.feedback_delay_hours": 24.0}' in points and "{}" in points
    assert len({c.cell_id for c in cells}) == len(cells)
    factorial = sweep_from_mapping({
        "systems": ["naive", "neuroplastic"], "sweep": {"seeds": 1, "embedder": "hash", "split": "together"},
        "scenario": {"name": "persona", "users": 2, "months": 1, "grid": {"reask_rate": [0.0, 0.3, 0.6]}},
        "run": {"grid": {"feedback_delay_hours": [1.0, 24.0]}},
    })
    cells = expand(factorial)
    assert len(cells) == 3 * 2 and all(c.systems == ("naive", "neuroplastic") for c in cells)
    # Each cell's resolved spec carries its point.
    c = next(c for c in cells if c.point == {"scenario.reask_rate": 0.6, "run.feedback_delay_hours": 24.0})
    assert c.spec["scenario"]["args"]["reask_rate"] == 0.6 and c.spec["feedback_delay_hours"] == 24.0


# --------------------------------------------------------------------------- failures and records


def test_failing_cell_is_recorded_and_the_rest_go_on(tmp_path: Path) -> None:
    spec = load_sweep(_write(tmp_path, TINY.replace('"neuroplastic", "control-learner"', '"naive+rerank:model=/nonexistent/model"')
                             .replace("seeds = 5", "seeds = 2")))
    lines: list[str] = []
    result = run_sweep(spec, tmp_path / "out", workers=2, progress=lines.append)
    assert result.counts == {"done": 2, "failed": 2, "pending": 0}
    index = read_index(tmp_path / "out")
    failed = index.filter(pl.col("state") == "failed")
    assert failed.height == 4  # two cells x (control, reranked system)
    assert all("model folder /nonexistent/model does not exist" in e for e in failed["error"].to_list())
    done = index.filter(pl.col("state") == "done")
    assert done.height == 2 and done["accuracy"].is_not_null().all() and set(done["seed"].to_list()) == {0, 1}
    record = json.loads((tmp_path / "out" / failed["dir"][0] / "cell.json").read_text())
    assert record["state"] == "failed" and "UserError" in record["error"] and "Traceback" in record["traceback"]
    ok = json.loads((tmp_path / "out" / done["dir"][0] / "cell.json").read_text())
    assert ok["state"] == "done" and ok["spec"]["seed"] == ok["seed"] and ok["spec"]["systems"][0]["name"] == "naive"
    assert ok["packages"]["numpy"] and ok["packages"]["polars"] and ok["revision"]
    # A rerun plays nothing: failed cells stay failed unless asked.
    again = run_sweep(spec, tmp_path / "out", workers=1)
    assert again.ran == 0 and again.counts["failed"] == 2
    assert sum("failed" in line for line in lines) == 2


# --------------------------------------------------------------------------- local vs dask, kill and resume


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny sweep, played without interruption on the local pool (2 workers)."""
    tmp = tmp_path_factory.mktemp("sweep-local")
    spec = _write(tmp, TINY)
    proc = _memsim("sweep", str(spec), "--out", str(tmp / "out"), "--executor", "local", "--workers", "2")
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    assert "15 done, 0 failed" in out
    return tmp / "out"


@pytest.mark.slow
def test_dask_local_cluster_gives_identical_metrics_and_stays_on_loopback(tmp_path: Path, uninterrupted: Path) -> None:
    pytest.importorskip("distributed")
    audit = tmp_path / "audit"
    audit.mkdir()
    (audit / "sitecustomize.py").write_text(_AUDIT, encoding="utf-8")
    log = tmp_path / "net.log"
    spec = _write(tmp_path, TINY)
    proc = _memsim("sweep", str(spec), "--out", str(tmp_path / "dask"), "--executor", "dask", "--workers", "2",
                   env={"PYTHONPATH": f"{audit}{os.pathsep}{ROOT}", "MEMSIM_NET_AUDIT": str(log)})
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    local, dask = _metrics(uninterrupted), _metrics(tmp_path / "dask")
    assert len(local) == 15 and local == dask
    entries = [line.split("\t") for line in log.read_text().splitlines()]
    pids = {e[0] for e in entries}
    assert len(pids) >= 3, "the audit hook did not reach the scheduler and both workers"
    assert any(e[1] == "socket.connect" for e in entries)
    loopback = ("'127.", "('127.", "'::1'", "('::1'", "'localhost'", "None")
    outside = [e for e in entries if not e[2].startswith(loopback)]
    assert not outside, f"connections beyond loopback: {outside[:5]}"


@pytest.mark.slow
def test_killed_sweep_resumes_to_identical_results(tmp_path: Path, uninterrupted: Path) -> None:
    spec = _write(tmp_path, TINY)
    out = tmp_path / "out"
    proc = _memsim("sweep", str(spec), "--out", str(out), "--workers", "1", start_new_session=True)
    deadline = time.monotonic() + 300
    done_before: dict[str, float] = {}
    while time.monotonic() < deadline:
        records = list(out.glob("cells/*/cell.json"))
        # Kill once three cells are finished and another is in the middle of its run (a day committed).
        in_flight = [p for p in out.glob("cells/*/parts/*.json") if not (p.parent.parent / "cell.json").exists()]
        if len(records) >= 3 and in_flight:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    done_before = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("cells/*/metrics.json")
                   if (p.parent / "cell.json").exists()}
    assert 3 <= len(done_before) < 15, "the sweep was not killed midway"
    assert read_index(out)["state"].to_list().count("pending") > 0
    again = _memsim("sweep", str(spec), "--out", str(out), "--workers", "1")
    text, _ = again.communicate(timeout=600)
    assert again.returncode == 0, text
    assert f"{len(done_before)} of 15 cells already finished" in text
    # Finished cells were not played again; every cell equals the uninterrupted sweep's, byte for byte.
    assert {k: (out / "cells" / k / "metrics.json").stat().st_mtime_ns for k in done_before} == done_before
    assert _metrics(out) == _metrics(uninterrupted)
    index = read_index(out)
    assert set(index["state"].to_list()) == {"done"}


# --------------------------------------------------------------------------- aggregation


@pytest.mark.slow
def test_compare_sweep_aggregates_over_seeds_ranks_and_plots_each_knob(tmp_path: Path, capsys) -> None:
    from memsim.analysis.cli import main
    from memsim.analysis.stats import summarise_seeds
    from memsim.analysis.sweep_compare import aggregate, rankings

    text = (TINY.replace("seeds = 5", "seeds = 3").replace('name = "tiny"', 'name = "tiny"\nsplit = "together"')
            .replace("months = 1", "months = 1\n[scenario.grid]\nreask_rate = [0.0, 0.6]"))
    spec = load_sweep(_write(tmp_path, text))
    run_sweep(spec, tmp_path / "sw", workers=2)
    index = read_index(tmp_path / "sw")
    assert index.height == 2 * 3 * 3 and set(index["state"]) == {"done"}  # 2 points x 3 seeds x 3 systems
    table = aggregate(index)
    assert table.height == 2 * 3 and set(table["seeds"]) == {3}
    point = '{"scenario.reask_rate": 0.6}'
    neuro = index.filter((pl.col("system") == "neuroplastic") & (pl.col("point") == point))
    row = table.filter((pl.col("system") == "neuroplastic") & (pl.col("point") == point)).row(0, named=True)
    expect = summarise_seeds(neuro["accuracy"].to_numpy())
    assert row["accuracy"] == pytest.approx(expect.mean) and row["accuracy_lo"] == pytest.approx(expect.ci[0])
    assert table.filter(pl.col("system") == "naive")["did_twin_n"].to_list() == [0, 0]  # naive has no twin
    ranked = rankings(index, "accuracy")[f"persona {point}"]
    assert [e["mean"] for e in ranked] == sorted((e["mean"] for e in ranked), reverse=True)
    assert {e["system"] for e in ranked} == {"naive", "neuroplastic", "control-learner"}
    assert all("friedman_rank" in e for e in ranked)  # three systems over three seeds
    assert {e["system"] for e in rankings(index, "did_twin")[f"persona {point}"]} == {"neuroplastic", "control-learner"}
    assert main(["compare", str(tmp_path / "sw")]) == 0
    out = capsys.readouterr().out
    assert "Ranking on learning effect" in out and "reask_rate = 0.6" in out and "(n=3)" in out
    plot = tmp_path / "sw" / "compare" / "plots" / "knob-scenario-reask_rate.png"
    assert plot.read_bytes()[:4] == b"\x89PNG" and plot.stat().st_size > 5000
    assert (tmp_path / "sw" / "compare" / "summary.parquet").is_file()
    assert "<table>" in (tmp_path / "sw" / "compare" / "compare.html").read_text()


@pytest.mark.slow
def test_minilm_workers_share_the_embedding_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the real model, a text embedded by one cell is read from the shared cache by the others."""
    # A cache of its own: another test of this process may have embedded the same world's texts already.
    monkeypatch.setenv("MEMSIM_CACHE_DIR", str(tmp_path / "cache"))
    text = (TINY.replace('"neuroplastic", "control-learner"', '"control-learner"').replace("seeds = 5", "seeds = 1")
            .replace('embedder = "hash"', 'embedder = "minilm"'))
    spec = load_sweep(_write(tmp_path, text))
    first = run_sweep(spec, tmp_path / "a", workers=1)
    assert first.counts["done"] == 2

    def stats(out: Path) -> list[dict]:
        return [json.loads((out / "cells" / r.cell.cell_id / "cell.json").read_text())["embeddings"]
                for r in first.records]

    naive, both = stats(tmp_path / "a")
    # the first cell embeds the world's texts (92 distinct ones on seed 0), the second finds them all cached
    assert naive["model"].startswith("all-MiniLM-L6-v2") and naive["misses"] > 50
    assert both["misses"] == 0 and both["hits"] >= naive["misses"]  # same seed: every text already embedded
    # Another sweep of the same cells on two worker processes reads everything from the cache file.
    again = run_sweep(spec, tmp_path / "b", workers=2)
    assert again.counts["done"] == 2
    assert all(s["misses"] == 0 and s["hits"] >= naive["misses"] for s in stats(tmp_path / "b"))
    assert _metrics(tmp_path / "a") == _metrics(tmp_path / "b")


def test_a_second_sweep_on_the_same_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from filelock import FileLock; "
                               "lock = FileLock(sys.argv[1]); lock.acquire(); print('held', flush=True); time.sleep(60)",
                               str(out / ".sweep.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UserError, match="another memsim sweep is playing this folder"):
            run_sweep(load_sweep(_write(tmp_path, TINY)), out, workers=1)
    finally:
        holder.kill()
        holder.wait()


def test_dry_run_lists_cells_with_their_cost(tmp_path: Path, capsys) -> None:
    from memsim.analysis.cli import main
    from memsim.analysis.sweep import estimate

    text = TINY.replace("seeds = 5", "seeds = 2").replace('"neuroplastic", "control-learner"', '"neuroplastic"')
    path = _write(tmp_path, text + '\n[answer]\nreader = "short"\njudge = ["contains", "llm_locomo"]\n')
    spec = load_sweep(path)
    cells = expand(spec)
    costs = estimate(spec, cells, calibrate_s=1.0)
    assert [c["played"] for c in costs] == [1, 1, 6, 6]  # naive; naive + neuroplastic, its twin, placebo and constant arms
    for c in costs:
        assert c["seconds"] > 0 and c["questions"] > 0
        assert c["llm_calls"] == c["questions"] * c["played"] * 2  # the reader and one LLM judge
        assert c["tokens"] > c["llm_calls"] * 150
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--dry-run", "--calibrate-s", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("persona") == 4 and "4 cells; estimated" in out and "LLM calls" in out
    assert not (tmp_path / "out").exists()  # nothing ran


@pytest.mark.slow
def test_dask_executor_on_an_existing_scheduler(tmp_path: Path, uninterrupted: Path) -> None:
    """``--scheduler ADDRESS``: cells go to a cluster started elsewhere (here a LocalCluster on loopback)."""
    distributed = pytest.importorskip("distributed")
    spec = load_sweep(_write(tmp_path, TINY.replace("seeds = 5", "seeds = 2")))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None,
                                  scheduler_port=0) as cluster:
        result = run_sweep(spec, tmp_path / "out", executor="dask", scheduler=cluster.scheduler_address)
    assert result.counts == {"done": 6, "failed": 0, "pending": 0}
    local = _metrics(uninterrupted)
    assert all(local[k] == v for k, v in _metrics(tmp_path / "out").items()) and len(_metrics(tmp_path / "out")) == 6
    with pytest.raises(UserError, match="--scheduler needs --executor dask"):
        run_sweep(spec, tmp_path / "x", executor="local", scheduler=cluster.scheduler_address)


def test_ablations_are_the_registered_ablations_named_after_the_system() -> None:
    from memsim.memory.registry import memory_names, memory_role

    spec = sweep_from_mapping({
        "systems": [{"name": "neuroplastic", "ablations": True}],
        "sweep": {"seeds": 1, "embedder": "hash"},
        "scenario": {"name": "persona", "users": 2, "months": 1},
    })
    picked = {c.systems[1] for c in expand(spec)} - {"neuroplastic"}
    by_name = {n for n in memory_names() if n.startswith("neuroplastic-no-")}
    assert picked == by_name and len(picked) == 5
    assert all(memory_role(n) == "ablation" for n in picked)
