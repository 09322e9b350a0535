"""Every bench says how busy the machine was; ``bench compare --repeat`` interleaves and takes the median."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from memsim.analysis import bench
from memsim.analysis.bench import bench_compare, bench_locomo, format_compare, format_load, load_report, machine_load
from memsim.analysis.cli import main
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import SystemSpec

QUIRKS = Path(__file__).parent / "fixtures" / "locomo_quirks.json"


def _loadavg(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "loadavg"
    path.write_text(text)
    return path


def test_machine_load_reads_the_averages_and_the_other_runnable_threads(tmp_path: Path) -> None:
    snap = machine_load(_loadavg(tmp_path, "0.30 0.77 1.23 3/94 26682\n"))
    assert (snap["load_1m"], snap["load_5m"], snap["load_15m"]) == (0.30, 0.77, 1.23)
    # The reader itself is one of the three runnable threads.
    assert snap["runnable_others"] == 2 and snap["cores"] >= 1
    gone = machine_load(tmp_path / "missing")
    assert gone["load_1m"] is None and gone["runnable_others"] is None


def test_load_report_marks_a_busy_machine_and_says_why() -> None:
    quiet = {"load_1m": 0.4, "load_5m": 0.5, "load_15m": 0.6, "runnable_others": 0, "cores": 2}
    busy = {**quiet, "load_1m": 3.0}
    # The load average after a run includes the run itself, so it is not judged; others runnable are.
    report = load_report(quiet, {**busy, "runnable_others": 0})
    assert not report["under_load"] and report["reasons"] == []
    assert "UNDER LOAD" not in format_load(report) and "before load average 0.40 0.50 0.60, 0 other runnable" in format_load(report)
    report = load_report(busy, {**quiet, "runnable_others": 2})
    assert report["under_load"]
    assert report["reasons"] == ["load average 3.00 on 2 cores before (above 0.5 per core)", "2 other runnable threads after"]
    assert "UNDER LOAD (load average 3.00 on 2 cores before" in format_load(report)


def test_merged_load_counts_the_runs_under_load() -> None:
    quiet = {"load_1m": 0.4, "load_5m": 0.5, "load_15m": 0.6, "runnable_others": 0, "cores": 2}
    reports = [load_report(quiet, quiet), load_report({**quiet, "load_1m": 3.5}, {**quiet, "runnable_others": 4}), load_report(quiet, quiet)]
    merged = bench.merge_load(reports)
    assert merged["under_load"] and merged["runs_under_load"] == 1
    assert merged["reasons"] == ["1 of 3 runs under load", "load average before up to 3.50 on 2 cores", "up to 4 other runnable threads"]
    assert merged["before"] == reports[0]["before"] and merged["after"] == reports[-1]["after"]
    assert not bench.merge_load(reports[::2])["under_load"]


def test_bench_locomo_output_carries_the_load() -> None:
    f = bench_locomo(QUIRKS, SystemSpec("naive"), k=5, make_embedder=lambda _: HashEmbedder(32))
    load = f["load"]
    assert set(load) == {"before", "after", "threshold", "others", "cpu", "under_load", "reasons"}
    assert load["others"] is not None and load["others"]["wall_s"] > 0
    assert {"load_1m", "load_5m", "load_15m", "runnable_others", "cores"} <= set(load["before"])
    assert load["before"]["load_1m"] is not None and load["after"]["runnable_others"] is not None
    assert bench.format_locomo_bench(f).splitlines()[-1].strip() == format_load(load)


def test_every_bench_ends_with_the_load(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "engine", "--users", "2", "--months", "1", "--systems", "1"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("machine (") and "before load average" in last and "after load average" in last


def _fake_pipelines(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replace both pipelines by stubs whose wall times make the ratios 0.5, 0.2, 0.4, ... in turn."""
    calls: list[str] = []
    memsim_walls = itertools.cycle([5.0, 2.0, 4.0])

    def reference(data: Any, **_: Any) -> dict[str, Any]:
        calls.append("reference")
        return {"wall_s": 10.0, "cpu_s": 8.0, "stages": {}, "recall_all@30": 0.5, "pipeline": "stub", "model": "m",
                "batch_size": 64, "texts": 3, "questions": 1}

    def memsim(data: Any, systems: Any, **_: Any) -> dict[str, Any]:
        calls.append("memsim")
        wall = next(memsim_walls)
        return {"wall_s": wall, "cpu_s": wall, "stages": {}, "systems": ["naive"], "embedder": "e", "texts_embedded": 3,
                "texts_cached": 0, "per_system": {"naive": {"recall_all@30": 0.5}}, "recall_all@30": 0.5}

    import memsim.analysis.reference_pipeline as ref_module

    monkeypatch.setattr(ref_module, "reference_locomo", reference)
    monkeypatch.setattr(bench, "_memsim_locomo", memsim)
    return calls


def test_compare_repeat_interleaves_and_reports_the_median_with_its_range(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_pipelines(monkeypatch)
    f = bench_compare(QUIRKS, [SystemSpec("naive")], repeat=3, backend="onnx")
    assert calls == ["reference", "memsim"] * 3
    assert [p["ratio"] for p in f["pairs"]] == [0.5, 0.2, 0.4]
    assert (f["ratio"], f["ratio_min"], f["ratio_max"]) == (0.4, 0.2, 0.5)
    # The stages shown are the median pair's.
    assert f["memsim"]["wall_s"] == 4.0 and f["memsim"]["load"]["before"]["cores"] >= 1
    assert f["under_load"] == f["load"]["under_load"] == any(p["under_load"] for p in f["pairs"])
    text = format_compare(f)
    assert "median 0.400 over 3 interleaved pairs (min 0.200, max 0.500)" in text
    assert text.splitlines()[-1].strip() == format_load(f["load"])
    calls.clear()
    bench_compare(QUIRKS, [SystemSpec("naive")], repeat=2, backend="onnx", order="memsim-first")
    assert calls == ["memsim", "reference"] * 2


def test_compare_repeat_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "compare", "--data", str(QUIRKS), "--repeat", "0"]) == 2
    assert "--repeat: must be at least 1, got 0" in capsys.readouterr().err


def _stat(tmp_path: Path, name: str, busy_ticks: int) -> Path:
    path = tmp_path / name
    path.write_text(f"cpu  {busy_ticks} 0 0 99999 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")
    return path


def test_the_cpu_the_rest_of_the_machine_used_decides_not_the_load_average_a_previous_run_left(tmp_path: Path) -> None:
    """A load average of 3.4 left by the bench's own previous pair is not load; another job's CPU seconds are."""
    import os

    tick = os.sysconf("SC_CLK_TCK")
    loadavg = _loadavg(tmp_path, "3.40 3.56 2.52 1/94 26682\n")
    before = machine_load(loadavg, _stat(tmp_path, "s0", 1000 * tick))
    assert before["cpu_busy_s"] == pytest.approx(1000.0)
    own = before["own_cpu_s"]
    # 10 s later: the machine was busy 20 CPU s, of which this process 19.5: the rest used 0.5 CPU s (2.5% of 2 cores).
    quiet_after = {**before, "cpu_busy_s": 1020.0, "own_cpu_s": own + 19.5, "at": before["at"] + 10.0, "cores": 2}
    report = load_report({**before, "cores": 2}, quiet_after)
    assert not report["under_load"] and report["others"]["others_cpu_s"] == pytest.approx(0.5)
    assert "the rest of the machine used 0.5 CPU s during it (2.5% of the cores)" in format_load(report)
    # Another job took a core for most of the same 10 s.
    busy_after = {**quiet_after, "cpu_busy_s": 1030.5}
    report = load_report({**before, "cores": 2}, busy_after)
    assert report["under_load"]
    assert report["reasons"] == ["the rest of the machine used 11.0 CPU s in 10.0 s (55% of 2 cores, above 5%)"]
    merged = bench.merge_load([load_report({**before, "cores": 2}, quiet_after), report])
    assert merged["runs_under_load"] == 1 and merged["others"]["others_cpu_s"] == pytest.approx(11.5)
    assert "the rest of the machine used up to 55% of the cores in one run" in merged["reasons"]
    # Without /proc/stat, the load average and runnable threads decide as before.
    fallback = machine_load(loadavg, tmp_path / "missing")
    assert fallback["cpu_busy_s"] is None and load_report(fallback, fallback)["under_load"]


def test_the_cpu_model_and_its_int8_instructions_are_named(tmp_path: Path) -> None:
    """int8 speed depends on an 8-bit dot-product instruction; the load line says whether the CPU has one."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx avx2 fma\n\n")
    cpu = bench.cpu_model(info)
    assert cpu == {"model": "AMD EPYC", "avx2": True, "avx512": False, "int8_dot": []}
    info.write_text("model name\t: Xeon\nflags\t\t: avx2 avx512f avx512_vnni\n")
    assert bench.cpu_model(info)["int8_dot"] == ["avx512_vnni"]
    assert bench.cpu_model(tmp_path / "missing")["model"] is None
    quiet = {"load_1m": 0.4, "load_5m": 0.5, "load_15m": 0.6, "runnable_others": 0, "cores": 2}
    report = {**load_report(quiet, quiet), "cpu": cpu}
    assert format_load(report).startswith("machine (2 cores, AMD EPYC, AVX2, no 8-bit dot product): before")


def test_the_demo_bench_gives_texts_per_second_and_turns_per_second_per_arm(tmp_path: Path) -> None:
    """Stage figures come from the run folder itself: run.json's embedding and totals, perf.json's ingest time."""
    import json

    from memsim.analysis.pipeline import execute, make_spec

    spec = make_spec("longitudinal", "life", {"users": 2, "months": 1.0}, (SystemSpec("naive"), SystemSpec("bm25")),
                     seed=0, n_boot=100)
    out = tmp_path / "run"
    execute(spec, out_dir=out, embedder_factory=lambda: HashEmbedder(32))
    stages = bench.demo_stages(out)
    run = json.loads((out / "run.json").read_text())
    perf = json.loads((out / "perf.json").read_text())
    assert stages["turns"] == run["totals"]["turns"] > 0
    for label in ("naive", "bm25"):
        ingest_s = perf["systems"][label]["ingest_ms_total"] / 1000
        assert stages["systems"][label]["turns_per_s"] == pytest.approx(stages["turns"] / ingest_s, rel=1e-3)
    quiet = {"load_1m": 0.4, "load_5m": 0.5, "load_15m": 0.6, "runnable_others": 0, "cores": 2}
    figures = {"cold_s": 10.0, "cold_cpu_s": 12.0, "warm_s": 4.0, "warm_cpu_s": 4.1,
               "cold_stages": {**stages, "embedding": {"texts": 900, "embedded": 900, "seconds": 9.0, "texts_per_s": 100.0}},
               "warm_stages": stages, "load": load_report(quiet, quiet)}
    text = bench.format_demo(figures)
    assert "cold: 10.0 s wall, 12.0 CPU s" in text and "embedding 900 of 900 texts in 9.0 s (100.0 texts/s)" in text
    assert any(line.split()[0] == "bm25" for line in text.splitlines()[2:]) and text.splitlines()[-1].startswith("machine (")


def test_the_scale_table_says_what_a_timed_run_still_computed() -> None:
    from memsim.analysis.bench_run_scale import format_scale

    row = {"users": 300, "workers_asked": "2", "turns": 29054, "units": 6, "run_s": 72.8, "wall_s": 84.9,
           "user_months_per_s": 4.12, "peak_mb": 692.0, "worker_peak_mb": 882.0, "embedded": 35,
           "entities_recognised": 28911}
    figures = {"rows": [row], "systems": ["naive", "neuroplastic"], "load": load_report(machine_load(), machine_load())}
    table = format_scale(figures)
    assert "still embedded / entities recognised" in table and "35 / 28,911" in table
    assert "29,054" in table and "4.12" in table and table.splitlines()[-1].startswith("machine (")


def test_run_scale_without_a_warm_up_needs_a_warmed_cache(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "run-scale", "--users", "30", "--no-warm-up"]) == 2
    assert "--no-warm-up needs --cache DIR" in capsys.readouterr().err
