"""``memsim bench demo``: ``memsim demo`` cold and warm, each in a fresh process, stage by stage.

``bench_demo`` runs the demo twice on one new embedding cache: cold (every
text embedded by the model) and warm (every text a cache hit).
``demo_stages`` reads the throughput per stage from a finished run folder.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memsim.analysis.bench_load import cpu_model, format_load, load_report, machine_load, merge_load
from memsim.core.table import text_table

__all__ = ["demo_stages", "bench_demo", "format_demo"]


def demo_stages(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Throughput per stage of one finished run folder (``run.json`` and ``perf.json``).

    ``embedding``: texts embedded (not found cached), seconds and texts per
    second; ``systems``: per arm, turns ingested per second of its own ingest
    time and its retrieval latency (mean, p50, p95 ms).
    """
    import json

    folder = Path(run_dir)
    run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    perf = json.loads((folder / "perf.json").read_text(encoding="utf-8"))
    emb = run.get("embedding") or {}
    seconds, embedded = float(emb.get("seconds") or 0.0), int(emb.get("embedded") or 0)
    turns = int((run.get("totals") or {}).get("turns") or 0)
    systems = {}
    for label, figures in perf.get("systems", {}).items():
        ingest_s = float(figures.get("ingest_ms_total") or 0.0) / 1000.0
        systems[label] = {
            "ingest_s": round(ingest_s, 3),
            "turns_per_s": round(turns / ingest_s, 1) if ingest_s > 0 else None,
            "retrieve_ms": figures.get("retrieve_ms"),
        }
    units = run.get("units") or {}
    timing = units.get("timing") or {}
    parts = {m.get("key"): m for m in run.get("parts") or []}
    play = {}
    for key, t in sorted(timing.items()):
        arms = ((parts.get(key) or {}).get("unit") or {}).get("arms") or [key]
        play[" + ".join(arms)] = {"seconds": t.get("seconds"), "peak_rss_mb": t.get("peak_rss_mb"), "where": t.get("where")}
    phases = perf.get("phases_s") or {}
    return {
        "turns": turns,
        "questions": int((run.get("totals") or {}).get("questions") or 0),
        "embedding": {"texts": int(emb.get("texts") or 0), "embedded": embedded, "seconds": round(seconds, 1),
                      "texts_per_s": round(embedded / seconds, 1) if seconds > 0 and embedded else None},
        "run_s": perf.get("wall_seconds"),
        "play_s": round(float(perf.get("wall_seconds") or 0.0) - seconds, 1) if perf.get("wall_seconds") else None,
        "statistics_s": phases.get("statistics"),
        "report_s": phases.get("report"),
        "workers": units.get("workers"),
        "play_per_unit": play,
        "systems": systems,
    }


def bench_demo(*, cache_dir: str | None = None, extra_args: Sequence[str] = (), report: bool = True) -> dict[str, Any]:
    """Wall time of ``memsim demo`` cold (new cache) and warm (same cache), each in a fresh process, stage by stage.

    The new cache holds no exported ONNX graph either, so cold includes the
    export. ``*_cpu_s`` are the child's CPU seconds (user + system, all
    threads); ``*_stages`` the run folder's throughput per stage
    (``demo_stages``: texts embedded per second, turns ingested per second
    per arm); ``*_load`` the machine's load around each phase.
    """
    owned = cache_dir is None
    tmp = tempfile.mkdtemp(prefix="memsim-bench-demo-") if owned else cache_dir
    env = {**os.environ, "MEMSIM_CACHE_DIR": str(Path(tmp) / "cache")}
    out: dict[str, Any] = {}
    for phase in ("cold", "warm"):
        run_dir = Path(tmp) / f"run-{phase}"
        cmd = [sys.executable, "-m", "memsim", "demo", "--no-progress", "--out", str(run_dir), *extra_args,
               *([] if report else ["--no-report"])]
        before = machine_load()
        t0 = time.perf_counter()
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        out[f"{phase}_s"] = round(time.perf_counter() - t0, 1)
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU seconds of the child (all threads): steadier than wall time on a shared machine.
        out[f"{phase}_cpu_s"] = round(cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime, 1)
        out[f"{phase}_load"] = load_report(before, machine_load())
        if proc.returncode != 0:
            raise RuntimeError(f"memsim demo ({phase}) failed: {proc.stderr[-2000:]}")
        out[f"{phase}_stages"] = demo_stages(run_dir)
    out["cache_dir"] = env["MEMSIM_CACHE_DIR"]
    out["load"] = merge_load([out["cold_load"], out["warm_load"]])
    out["cpu"] = cpu_model()
    out["cores"] = os.cpu_count()
    return out


def format_demo(figures: Mapping[str, Any]) -> str:
    """The demo bench as lines: wall and CPU per phase, embedding texts/s, turns/s and retrieval per arm, the load."""
    lines = []
    for phase in ("cold", "warm"):
        st = figures[f"{phase}_stages"]
        emb = st["embedding"]
        rate = f"{emb['texts_per_s']:.1f} texts/s" if emb["texts_per_s"] else "nothing to embed"
        lines.append(f"{phase}: {figures[f'{phase}_s']:.1f} s wall, {figures[f'{phase}_cpu_s']:.1f} CPU s; "
                     f"{st['turns']:,} turns, {st['questions']:,} questions; embedding {emb['embedded']:,} of "
                     f"{emb['texts']:,} texts in {emb['seconds']:.1f} s ({rate})")
        phases = [(name, st.get(key)) for name, key in (("embed", "embedding"), ("play", "play_s"),
                                                         ("statistics", "statistics_s"), ("report", "report_s"))]
        said = [f"embed {emb['seconds']:.1f} s"] + [f"{n} {v:.1f} s" for n, v in phases[1:] if v is not None]
        rest = figures[f"{phase}_s"] - emb["seconds"] - sum(v for _, v in phases[1:] if v is not None)
        lines.append(f"  phases: {', '.join(said)}, start-up and world generation {rest:.1f} s; "
                     f"workers: {st.get('workers')}")
    play = figures["warm_stages"].get("play_per_unit") or {}
    if play:
        lines.append("warm run, play per unit (arm), wall seconds and its process's peak memory:")
        lines.append(text_table(["unit", "s", "peak MB", "where"],
                                [[k, f"{v['seconds']:.1f}", f"{v['peak_rss_mb']:.0f}" if v.get("peak_rss_mb") else "-",
                                  v.get("where") or ""] for k, v in play.items()]))
    rows = []
    for label, row in figures["warm_stages"]["systems"].items():
        ret = row.get("retrieve_ms") or {}
        tps = f"{row['turns_per_s']:,.0f}" if row["turns_per_s"] else "-"
        rows.append([label, f"{row['ingest_s']:.1f}", tps, f"{ret.get('p50', float('nan')):.2f}",
                     f"{ret.get('p95', float('nan')):.2f}"])
    lines.append("warm run, per arm:")
    lines.append(text_table(["arm", "ingest s", "turns/s", "ret p50 ms", "ret p95 ms"], rows))
    lines.append(format_load(figures["load"]))
    return "\n".join(lines)
