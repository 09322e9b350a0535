"""Benchmarks that print figures: the engine, ``memsim demo``, static LoCoMo cold and warm.

``bench_engine`` replays a persona stream against a memory that does no work
(it keeps nothing and retrieves nothing), so the figure is the cost of the
simulator itself: SimPy scheduling, scoring, recording and feedback.
``bench_demo`` runs ``memsim demo`` twice in fresh processes on one new
embedding cache: cold (every text embedded by the model) and warm (every text
a cache hit). ``bench_locomo`` runs the static LoCoMo spec twice through the
pipeline on one new cache: cold, then warm.

Every bench says how busy the machine was: ``machine_load`` reads the load
average and the number of other runnable threads (``/proc/loadavg``), the
machine's busy CPU seconds (``/proc/stat``) and this process's own (itself and
its finished children). ``load_report`` marks a measurement "under load" when
the CPU the rest of the machine used while it ran (busy CPU less this
process's) exceeds ``OTHERS_THRESHOLD`` of the cores. The load averages and
runnable counts are reported beside it but judged only where ``/proc/stat``
cannot be read: a load average before a run includes the bench's own previous
run (a second interleaved pair always starts at a load near the cores), and a
runnable count is one instant. Without the CPU figures, a measurement is under
load when the load average per core before it was above ``LOAD_THRESHOLD`` or
another thread was runnable at either end.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import simpy

from memsim.memory.base import MemoryStats, Retrieved, Turn
from memsim.memory.registry import SystemSpec
from memsim.core.table import text_table
from memsim.sim.engine import EngineConfig, Harness, SystemUnderTest, start_processes
from memsim.sim.events import Question, Session
from memsim.sim.recorder import Recorder
from memsim.sim.scorers import build_scorer

__all__ = [
    "NullMemory", "TimedEmbedder", "bench_engine", "bench_demo", "demo_stages", "format_demo", "bench_locomo", "format_locomo_bench",
    "bench_compare", "format_compare", "bench_backends", "format_backends",
    "LOAD_THRESHOLD", "machine_load", "load_report", "merge_load", "format_load",
]

LOAD_THRESHOLD = 0.5
"""Load average per core above which a measurement counts as taken under load (without ``/proc/stat``)."""
OTHERS_THRESHOLD = 0.05
"""Share of the cores the rest of the machine may use during a measurement before it counts as under load."""


def _busy_cpu_seconds(path: str | os.PathLike[str]) -> float | None:
    """Non-idle CPU seconds of the whole machine since boot (user, nice, system, irq, softirq, steal)."""
    try:
        fields = Path(path).read_text(encoding="ascii").splitlines()[0].split()
        if fields[0] != "cpu":
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    except (OSError, ValueError, IndexError):
        return None
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    """CPU seconds of this process (all its threads) and of its children that have been waited for."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


_INT8_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
"""CPU flags of an 8-bit dot-product instruction: without one, int8 matrix products run no faster than float here."""


def cpu_model(path: str | os.PathLike[str] = "/proc/cpuinfo") -> dict[str, Any]:
    """The CPU's model name, whether it has AVX2 and AVX-512, and its 8-bit dot-product flags (None where unknown)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {"model": None, "avx2": None, "avx512": None, "int8_dot": None}
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), None)
    flags = set(next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []))
    return {"model": model, "avx2": "avx2" in flags, "avx512": "avx512f" in flags,
            "int8_dot": [f for f in _INT8_FLAGS if f in flags]}


def machine_load(path: str | os.PathLike[str] = "/proc/loadavg", stat: str | os.PathLike[str] = "/proc/stat") -> dict[str, Any]:
    """How busy the machine is now: load averages, other runnable threads, usable cores, CPU seconds.

    ``runnable_others`` is the kernel's count of runnable threads less the one
    reading the file. ``cpu_busy_s`` (the machine's), ``own_cpu_s`` (this
    process's and its waited children's) and ``at`` (a monotonic clock) let
    ``load_report`` tell what the rest of the machine did between two
    snapshots. Where a file cannot be read (not Linux), its figures are None.
    """
    from memsim.memory.embed import usable_cores

    cores = usable_cores()
    cpu = {"cpu_busy_s": _busy_cpu_seconds(stat), "own_cpu_s": _own_cpu_seconds(), "at": time.monotonic()}
    try:
        fields = Path(path).read_text(encoding="ascii").split()
        one, five, fifteen = (float(x) for x in fields[:3])
        runnable = int(fields[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return {"load_1m": None, "load_5m": None, "load_15m": None, "runnable_others": None, "cores": cores, **cpu}
    return {"load_1m": one, "load_5m": five, "load_15m": fifteen, "runnable_others": max(runnable - 1, 0), "cores": cores,
            **cpu}


def others_cpu(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, float] | None:
    """CPU seconds the rest of the machine used between two snapshots, and that as a share of the cores; None without figures."""
    keys = ("cpu_busy_s", "own_cpu_s", "at")
    if any(before.get(k) is None or after.get(k) is None for k in keys):
        return None
    wall = float(after["at"]) - float(before["at"])
    others = max(0.0, (after["cpu_busy_s"] - before["cpu_busy_s"]) - (after["own_cpu_s"] - before["own_cpu_s"]))
    cores = before.get("cores") or 1
    return {"others_cpu_s": others, "wall_s": wall, "share": others / (wall * cores) if wall > 0 else 0.0}


def load_report(
    before: Mapping[str, Any], after: Mapping[str, Any], *, threshold: float = LOAD_THRESHOLD
) -> dict[str, Any]:
    """The load around one measurement and whether it was taken under load.

    Args:
        before: ``machine_load()`` just before the measurement.
        after: ``machine_load()`` just after it.
        threshold: load average per core (before) above which it is under load.

    Returns:
        ``before``, ``after``, ``threshold``, ``under_load`` and ``reasons``
        (why it is under load; empty when it is not).
    """
    reasons = []
    one, cores = before.get("load_1m"), before.get("cores") or 1
    rest = others_cpu(before, after)
    if rest is not None:
        if rest["share"] > OTHERS_THRESHOLD:
            reasons.append(f"the rest of the machine used {rest['others_cpu_s']:.1f} CPU s in {rest['wall_s']:.1f} s "
                           f"({100 * rest['share']:.0f}% of {cores} cores, above {100 * OTHERS_THRESHOLD:g}%)")
    else:
        if one is not None and one / cores > threshold:
            reasons.append(f"load average {one:.2f} on {cores} cores before (above {threshold:g} per core)")
        for name, snap in (("before", before), ("after", after)):
            others = snap.get("runnable_others")
            if others:
                reasons.append(f"{others} other runnable {'thread' if others == 1 else 'threads'} {name}")
    return {"before": dict(before), "after": dict(after), "threshold": threshold, "others": rest, "cpu": cpu_model(),
            "under_load": bool(reasons), "reasons": reasons}


def merge_load(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One report over several measurements in a row: the first's before, the last's after, the reasons summed up.

    ``runs_under_load`` counts the measurements marked under load; the reasons
    give that count, the highest load average before any of them and the most
    other runnable threads seen.
    """
    busy = [r for r in reports if r["under_load"]]
    rests = [r.get("others") for r in reports]
    rest = None
    if rests and all(x is not None for x in rests):
        cores = reports[0]["before"].get("cores") or 1
        cpu, wall = sum(x["others_cpu_s"] for x in rests), sum(x["wall_s"] for x in rests)
        rest = {"others_cpu_s": cpu, "wall_s": wall, "share": cpu / (wall * cores) if wall > 0 else 0.0,
                "share_max": max(x["share"] for x in rests)}
    reasons = []
    if busy:
        reasons.append(f"{len(busy)} of {len(reports)} runs under load")
        if rest is not None:
            reasons.append(f"the rest of the machine used up to {100 * rest['share_max']:.0f}% of the cores in one run")
        else:
            worst = max((r["before"].get("load_1m") or 0.0 for r in reports), default=0.0)
            reasons.append(f"load average before up to {worst:.2f} on {reports[0]['before'].get('cores')} cores")
            others = max((s.get("runnable_others") or 0 for r in reports for s in (r["before"], r["after"])), default=0)
            if others:
                reasons.append(f"up to {others} other runnable threads")
    return {"before": dict(reports[0]["before"]), "after": dict(reports[-1]["after"]), "threshold": reports[0]["threshold"],
            "others": rest, "cpu": reports[0].get("cpu"), "under_load": bool(busy), "runs_under_load": len(busy),
            "reasons": reasons}


def format_load(report: Mapping[str, Any]) -> str:
    """One line: the load before and after, and the mark when it was measured under load."""

    def snap(s: Mapping[str, Any]) -> str:
        if s.get("load_1m") is None:
            return "load unknown"
        return (f"load average {s['load_1m']:.2f} {s['load_5m']:.2f} {s['load_15m']:.2f}, "
                f"{s['runnable_others']} other runnable")

    b = report["before"]
    cpu = report.get("cpu") or {}
    what = f"{b['cores']} cores"
    if cpu.get("model"):
        isa = "AVX-512" if cpu.get("avx512") else "AVX2" if cpu.get("avx2") else "no AVX2"
        dot = ", ".join(cpu.get("int8_dot") or []) or "no 8-bit dot product"
        what += f", {cpu['model']}, {isa}, {dot}"
    line = f"machine ({what}): before {snap(b)}; after {snap(report['after'])}"
    rest = report.get("others")
    if rest is not None:
        line += f"; the rest of the machine used {rest['others_cpu_s']:.1f} CPU s during it ({100 * rest['share']:.1f}% of the cores)"
    if report["under_load"]:
        line += f"; UNDER LOAD ({'; '.join(dict.fromkeys(report['reasons']))})"
    return line


class NullMemory:
    """A memory that keeps nothing: the engine's own cost is all that is left."""

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Drop the turns."""

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Nothing to return."""
        return []

    probe = retrieve

    def feedback(self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime) -> None:
        """Ignore feedback."""

    def maintain(self, *, now: datetime) -> None:
        """Nothing to maintain."""

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Nothing to forget."""

    def stats(self) -> MemoryStats:
        """Always empty."""
        return MemoryStats()


def bench_engine(*, users: int = 20, months: float = 12.0, systems: int = 3, seed: int = 0) -> dict[str, Any]:
    """Replay a persona stream against ``systems`` null memories; return throughput figures."""
    from memsim.analysis.pipeline import scenario_stream

    t0 = time.perf_counter()
    stream = scenario_stream("persona", {"users": users, "months": months}, seed)
    gen_s = time.perf_counter() - t0
    env = simpy.Environment()
    rec = Recorder()
    suts = [SystemUnderTest(f"null{i}", f"null{i}", NullMemory()) for i in range(systems)]
    cfg = EngineConfig(start=stream.start, k=10, ks=(1, 5, 10), fetch_k=10, metric="recall_all@10")
    harness = Harness(env=env, systems=suts, recorder=rec, config=cfg, scorers=[build_scorer("evidence"), build_scorer("stale")])
    start_processes(env, harness, stream.episodes())
    t1 = time.perf_counter()
    env.run(until=(stream.end - stream.start).total_seconds() + cfg.feedback_delay_s + 1)
    run_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    rec.commit("all")
    rec.finish({})
    frame_s = time.perf_counter() - t2
    n_events = len(stream.events)
    n_questions = sum(isinstance(e, Question) for e in stream.events)
    n_sessions = sum(isinstance(e, Session) for e in stream.events)
    deliveries = n_events * systems + n_questions * systems  # events plus feedback, per system
    return {
        "users": users,
        "months": months,
        "systems": systems,
        "events": n_events,
        "sessions": n_sessions,
        "questions": n_questions,
        "generate_s": round(gen_s, 3),
        "replay_s": round(run_s, 3),
        "frames_s": round(frame_s, 3),
        "events_per_s": round(n_events / run_s, 1),
        "deliveries_per_s": round(deliveries / run_s, 1),
    }


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


class TimedEmbedder:
    """Wraps an embedder and adds up the wall time spent inside ``encode``.

    Args:
        inner: any embedder with ``model_id``, ``dim``, ``stats``, ``encode``.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.encode_s = 0.0
        # The first call that computes anything also loads the model: kept apart
        # so that the steady embedding rate can be told from the start-up cost.
        self.first_compute_s = 0.0
        self.first_compute_texts = 0

    @property
    def model_id(self) -> str:
        """The wrapped embedder's model id."""
        return str(self.inner.model_id)

    @property
    def dim(self) -> int:
        """The wrapped embedder's vector length."""
        return int(self.inner.dim)

    @property
    def stats(self) -> Any:
        """The wrapped embedder's counts."""
        return self.inner.stats

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` with the wrapped embedder, timing the call."""
        before = self.inner.stats.misses
        start = time.perf_counter()
        try:
            return self.inner.encode(texts)
        finally:
            elapsed = time.perf_counter() - start
            self.encode_s += elapsed
            computed = self.inner.stats.misses - before
            if not self.first_compute_texts and computed:
                self.first_compute_s, self.first_compute_texts = elapsed, computed

    def encode_one(self, text: str) -> np.ndarray:
        """Embed one text (timed through ``encode``)."""
        return self.encode([text])[0]


def bench_locomo(
    data: Path,
    system: SystemSpec,
    *,
    k: int = 30,
    limit_conversations: int | None = None,
    make_embedder: Any = None,
    out_dir: Path | None = None,
) -> dict[str, Any]:
    """Time the static LoCoMo spec on a fresh embedding cache (cold), then on the same cache (warm).

    Args:
        data: locomo10.json.
        system: the system under test.
        k: headline cut-off.
        limit_conversations: only the first N conversations.
        make_embedder: builds the embedder on a cache folder (default: the packaged MiniLM).
        out_dir: also write the warm run's folder here.

    Returns:
        Per phase: wall seconds, ingest seconds, texts requested / computed /
        cached, embedder seconds, texts per second (and once the model is
        loaded), retrieve p50/p95 ms, and the warm run's headline score. The
        temporary cache is removed afterwards; the user's cache is never touched.
    """
    from memsim.analysis.pipeline import execute, make_spec

    if make_embedder is None:

        def make_embedder(cache_dir: Path) -> Any:
            from memsim.memory.embed import Embedder

            return Embedder(cache_dir=cache_dir)

    spec = make_spec(
        "static", "locomo", {"data": str(data), "limit_conversations": limit_conversations}, [system],
        k=k, retrieve_k=max(k, 50), scorers=("evidence",), control=None,
    )
    figures: dict[str, Any] = {"system": system.display, "k": k}
    before = machine_load()
    with tempfile.TemporaryDirectory(prefix="memsim-bench-") as tmp:
        for phase in ("cold", "warm"):
            timed: list[TimedEmbedder] = []

            def embedder() -> TimedEmbedder:
                timed.append(TimedEmbedder(make_embedder(Path(tmp))))
                return timed[-1]

            t0 = time.perf_counter()
            outcome = execute(
                spec, out_dir=out_dir if phase == "warm" else None,
                embedder_factory=embedder,
            )
            wall = time.perf_counter() - t0
            emb = timed[0] if timed else None
            stats = emb.stats if emb else None
            lat = outcome.summary.timings["systems"][system.display]
            steady = (emb.encode_s - emb.first_compute_s) if emb else 0.0
            steady_texts = (stats.misses - emb.first_compute_texts) if emb else 0
            figures[phase] = {
                "wall_s": round(wall, 2),
                "ingest_s": round((lat["ingest_ms_total"] or 0.0) / 1000.0, 2),
                "questions": outcome.result.probes.height,
                "texts_requested": stats.requested if stats else 0,
                "texts_embedded": stats.misses if stats else 0,
                "cache_hits": stats.hits if stats else 0,
                "encode_s": round(emb.encode_s, 2) if emb else 0.0,
                "embedded_per_s": round(stats.misses / emb.encode_s, 1) if emb and stats.misses and emb.encode_s else None,
                "embedded_per_s_loaded": round(steady_texts / steady, 1) if steady_texts > 0 and steady > 0 else None,
                "retrieve_p50_ms": round(lat["retrieve_ms"]["p50"] or 0.0, 3),
                "retrieve_p95_ms": round(lat["retrieve_ms"]["p95"] or 0.0, 3),
            }
        figures["metric"] = spec.metric
        figures["score"] = outcome.summary.metrics["systems"][system.display]["mean"]
    figures["load"] = load_report(before, machine_load())
    return figures


def format_locomo_bench(f: Mapping[str, Any]) -> str:
    """The figures of ``bench_locomo`` as a few lines."""
    cold, warm = f["cold"], f["warm"]
    lines = [f"bench locomo: system {f['system']}, {cold['questions']} questions, {f['metric']} {f['score']:.3f}"]
    for name, p in (("cold", cold), ("warm", warm)):
        lines.append(
            f"  {name:<4} wall {p['wall_s']:8.1f} s  (systems ingest {p['ingest_s']:.1f} s, embedding apart); embedder: {p['texts_requested']} texts, "
            f"{p['texts_embedded']} computed, {p['cache_hits']} cached"
        )
    rate, loaded = cold["embedded_per_s"], cold["embedded_per_s_loaded"]
    lines.append(
        "  texts embedded per second (cold): "
        + (f"{rate} (model load included)" if rate else "n/a")
        + (f"; {loaded} once loaded" if loaded else "")
    )
    lines.append(
        f"  retrieve latency ms: cold p50 {cold['retrieve_p50_ms']:.2f} p95 {cold['retrieve_p95_ms']:.2f}; "
        f"warm p50 {warm['retrieve_p50_ms']:.2f} p95 {warm['retrieve_p95_ms']:.2f}"
    )
    lines.append("  " + format_load(f["load"]))
    return "\n".join(lines)


def _memsim_locomo(
    data: Path, systems: Sequence[SystemSpec], *, k: int, backend: str, cache_dir: Path,
    export_dir: Path | None, limit_conversations: int | None,
) -> dict[str, Any]:
    """One static LoCoMo run of ``systems`` through memsim's pipeline on an empty embedding cache, timed by stage."""
    from memsim.analysis.pipeline import execute, make_spec
    from memsim.memory.embed import Embedder

    made: list[Any] = []

    def embedder() -> Any:
        made.append(Embedder(cache_dir=cache_dir, backend=backend, export_dir=export_dir))
        return made[-1]

    t_start = time.perf_counter()
    cpu_start = time.process_time()
    t0 = time.perf_counter()
    spec = make_spec(
        "static", "locomo", {"data": str(data), "limit_conversations": limit_conversations}, list(systems),
        k=k, retrieve_k=max(k, 50), scorers=("evidence",), control=None,
    )
    spec_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    outcome = execute(spec, out_dir=None, embedder_factory=embedder)
    run_s = time.perf_counter() - t0
    wall = time.perf_counter() - t_start
    cpu = time.process_time() - cpu_start
    emb = made[0] if made else None
    info = outcome.result.info
    up_front = info.get("embedding") or {"texts": 0, "embedded": 0, "cached": 0, "seconds": 0.0}
    probes = outcome.result.probes
    per_system: dict[str, Any] = {}
    systems_s = 0.0
    for s in systems:
        lat = outcome.summary.timings["systems"][s.display]
        ingest = (lat["ingest_ms_total"] or 0.0) / 1000.0
        rows = probes.filter(probes["system"] == s.display) if probes.height else probes
        retrieve = float(rows["retrieve_ms"].fill_null(0).sum()) / 1000.0 if rows.height else 0.0
        systems_s += ingest + retrieve
        m = outcome.summary.metrics["systems"][s.display]
        per_system[s.display] = {
            "ingest_s": round(ingest, 3),
            "retrieve_s": round(retrieve, 3),
            f"recall_all@{k}": m["mean"],
            f"recall_any@{k}": (m.get("overall", {}).get("scores", {}).get(f"recall_any@{k}") or {}).get("mean"),
        }
    load_s = emb.load_seconds if emb is not None else 0.0
    embed_s = float(up_front["seconds"]) - load_s
    return {
        "pipeline": "memsim static locomo",
        "systems": [s.display for s in systems],
        "embedder": info.get("embedder"),
        "stages": {
            "spec": round(spec_s, 3),
            "model_load": round(load_s, 3),
            "embed_up_front": round(embed_s, 3),
            "systems": round(systems_s, 3),
            "rest": round(run_s - load_s - embed_s - systems_s, 3),
        },
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "texts": up_front["texts"],
        "texts_embedded": up_front["embedded"],
        "texts_cached": up_front["cached"],
        "questions": int(probes.filter(probes["system"] == systems[0].display).height) if probes.height else 0,
        "per_system": per_system,
        f"recall_all@{k}": per_system[systems[0].display][f"recall_all@{k}"],
    }


def bench_compare(
    data: Path,
    systems: Sequence[SystemSpec],
    *,
    k: int = 30,
    backend: str | None = None,
    limit_conversations: int | None = None,
    cold_export: bool = False,
    order: str = "reference-first",
    repeat: int = 1,
) -> dict[str, Any]:
    """The plain reference pipeline and memsim on the same static LoCoMo workload, in this process.

    Both start cold: memsim's embedding cache is a new temporary folder for
    every run, and the reference has none. The exported ONNX graph of an ONNX
    backend is taken from the user's cache (made there on first use, like the
    installed model) unless ``cold_export``, which exports it again into the
    temporary folder and counts that in memsim's model load. With ``repeat``
    above 1 the two run interleaved (A B A B ...), so that a change in the
    machine's load falls on both alike, and the ratio is the median over the
    pairs with its range.

    Args:
        data: locomo10.json.
        systems: memsim's systems, all in one run (texts embedded once for all).
        k: cut-off of both.
        backend: memsim's embedding backend (default: ``memory.embed.default_backend()``).
        limit_conversations: only the first N conversations.
        cold_export: export the ONNX graph afresh.
        order: ``reference-first`` or ``memsim-first`` (the first pays for shared imports).
        repeat: pairs of runs.

    Returns:
        ``reference`` and ``memsim`` (stages in seconds, wall, texts, recall, the
        ``load`` around the run) of the pair with the median ratio; ``ratio``:
        memsim's wall over the reference's times the number of systems (the
        reference embeds and searches once per system), the median over the
        pairs, with ``ratio_min`` and ``ratio_max``; ``cpu_ratio`` (and its
        range) the same for CPU seconds (steadier on a busy machine);
        ``pairs``: each pair's figures in the order run; ``load``: the load
        before the first run and after the last, ``under_load`` when any run
        was measured under load (``load_report``).
    """
    from memsim.analysis.reference_pipeline import reference_locomo
    from memsim.memory.embed import default_backend

    if order not in ("reference-first", "memsim-first"):
        raise ValueError(f"order must be reference-first or memsim-first, got {order!r}")
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    backend = backend or default_backend()
    if not systems:
        raise ValueError("bench compare needs at least one system")
    n = len(systems)
    out: dict[str, Any] = {"k": k, "backend": backend, "order": order, "cold_export": cold_export,
                           "limit_conversations": limit_conversations, "repeat": repeat, "reference_runs": n}
    pairs: list[dict[str, Any]] = []
    for _ in range(repeat):
        pair: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix="memsim-bench-compare-") as tmp:
            def run_reference() -> dict[str, Any]:
                return reference_locomo(data, k=k, limit_conversations=limit_conversations)

            def run_memsim() -> dict[str, Any]:
                return _memsim_locomo(
                    data, systems, k=k, backend=backend, cache_dir=Path(tmp) / "cache",
                    export_dir=Path(tmp) / "cache" if cold_export else None,
                    limit_conversations=limit_conversations,
                )

            steps = (("reference", run_reference), ("memsim", run_memsim))
            for name, step in steps if order == "reference-first" else steps[::-1]:
                before = machine_load()
                figures = step()
                figures["load"] = load_report(before, machine_load())
                pair[name] = figures
        ref_wall, ref_cpu = pair["reference"]["wall_s"] * n, pair["reference"]["cpu_s"] * n
        pair["ratio"] = round(pair["memsim"]["wall_s"] / ref_wall, 3) if ref_wall else None
        pair["cpu_ratio"] = round(pair["memsim"]["cpu_s"] / ref_cpu, 3) if ref_cpu else None
        pairs.append(pair)
    ratios = [p["ratio"] for p in pairs if p["ratio"] is not None]
    cpu_ratios = [p["cpu_ratio"] for p in pairs if p["cpu_ratio"] is not None]
    # The pair whose ratio is the median (the lower middle one of an even count) stands for the run.
    middle = sorted(range(len(pairs)), key=lambda i: (pairs[i]["ratio"] is None, pairs[i]["ratio"] or 0.0))[(len(pairs) - 1) // 2]
    out["reference"], out["memsim"] = pairs[middle]["reference"], pairs[middle]["memsim"]
    out["ratio"] = round(statistics.median(ratios), 3) if ratios else None
    out["ratio_min"], out["ratio_max"] = (min(ratios), max(ratios)) if ratios else (None, None)
    out["cpu_ratio"] = round(statistics.median(cpu_ratios), 3) if cpu_ratios else None
    out["cpu_ratio_min"], out["cpu_ratio_max"] = (min(cpu_ratios), max(cpu_ratios)) if cpu_ratios else (None, None)
    out["pairs"] = [
        {"ratio": p["ratio"], "cpu_ratio": p["cpu_ratio"],
         **{f"{name}_{x}": p[name][x] for name in ("reference", "memsim") for x in ("wall_s", "cpu_s")},
         "under_load": p["reference"]["load"]["under_load"] or p["memsim"]["load"]["under_load"]}
        for p in pairs
    ]
    order_run = [p[name]["load"] for p in pairs for name in (("reference", "memsim") if order == "reference-first" else ("memsim", "reference"))]
    out["load"] = merge_load(order_run)
    out["under_load"] = out["load"]["under_load"]
    key = f"recall_all@{k}"
    out["recall_delta"] = {
        name: (None if s[key] is None else round(s[key] - out["reference"][key], 4))
        for name, s in out["memsim"]["per_system"].items()
    }
    return out


def format_compare(f: Mapping[str, Any]) -> str:
    """The figures of ``bench_compare`` as a small table."""
    ref, mem, k = f["reference"], f["memsim"], f["k"]
    key = f"recall_all@{k}"
    n = f["reference_runs"]
    lines = [
        f"bench compare: static LoCoMo, k={k}, cold; memsim systems {', '.join(mem['systems'])} "
        f"(embedder {mem['embedder']}); reference: {ref['pipeline']} ({ref['model']}, batch {ref['batch_size']})",
    ]
    # The two pipelines' stages side by side, then the wall and CPU seconds of each.
    rs = [(n, f"{v:.2f}") for n, v in ref["stages"].items()]
    ms = [(n, f"{v:.2f}") for n, v in mem["stages"].items()]
    n = max(len(rs), len(ms))
    rows = [[*(rs[i] if i < len(rs) else ("", "")), *(ms[i] if i < len(ms) else ("", ""))] for i in range(n)]
    rows += [["wall", f"{ref['wall_s']:.2f}", "wall", f"{mem['wall_s']:.2f}"],
             ["cpu", f"{ref['cpu_s']:.2f}", "cpu", f"{mem['cpu_s']:.2f}"]]
    lines.append(text_table(["reference stage", "s", "memsim stage", "s"], rows, align="lrlr"))
    lines.append(
        f"  texts: reference encoded {ref['texts']}; memsim embedded {mem['texts_embedded']} distinct, "
        f"{mem['texts_cached']} found cached"
    )
    base = f"reference wall x {n}" if n > 1 else "reference wall"
    if f.get("repeat", 1) > 1:
        lines.append(
            f"  ratio memsim / {base}: median {f['ratio']:.3f} over {f['repeat']} interleaved pairs "
            f"(min {f['ratio_min']:.3f}, max {f['ratio_max']:.3f}); CPU seconds: median {f['cpu_ratio']:.3f} "
            f"(min {f['cpu_ratio_min']:.3f}, max {f['cpu_ratio_max']:.3f}); stages above: the median pair"
        )
        for i, p in enumerate(f["pairs"], start=1):
            lines.append(
                f"    pair {i}: reference {p['reference_wall_s']:.2f} s wall ({p['reference_cpu_s']:.2f} CPU), memsim "
                f"{p['memsim_wall_s']:.2f} s ({p['memsim_cpu_s']:.2f} CPU): ratio {p['ratio']:.3f}, CPU {p['cpu_ratio']:.3f}"
                + (" (under load)" if p["under_load"] else "")
            )
    else:
        lines.append(f"  ratio memsim / {base}: {f['ratio']:.3f} (CPU seconds: {f['cpu_ratio']:.3f})")
    lines.append(f"  {key}: reference {ref[key]:.4f} ({ref['questions']} questions)")
    for name, s in mem["per_system"].items():
        value = s[key]
        delta = f["recall_delta"][name]
        lines.append(f"  {key}: memsim {name} {value:.4f} (delta {delta:+.4f})" if value is not None else f"  {key}: memsim {name} n/a")
    lines.append("  " + format_load(f["load"]))
    return "\n".join(lines)


def bench_backends(
    data: Path,
    *,
    backends: Sequence[str] = ("torch", "onnx", "onnx-int8"),
    k: int = 30,
    limit_conversations: int | None = None,
) -> dict[str, Any]:
    """Embed LoCoMo's distinct texts with each backend (no cache) and compare vectors, speed and recall.

    Recall is the plain pipeline's (exact inner-product search per
    conversation, ``memsim.analysis.reference_pipeline.flat_recall``) on each
    backend's vectors, so a difference comes from the vectors alone. Cosine is
    per text against the first backend's vector (``torch`` by default).

    Returns:
        Per backend: ``load_s`` (model load, and export when the graph is not
        cached yet), ``encode_s``, ``texts_per_s``, ``encode_cpu_s`` (CPU
        seconds, all threads: steadier than wall time on a busy machine), ``cosine`` (min, p001,
        mean against the first backend), ``recall_all@k``, ``recall_any@k``.
    """
    from memsim.analysis.reference_pipeline import flat_recall, locomo_workload
    from memsim.memory.embed import Embedder

    convs = locomo_workload(data, limit_conversations=limit_conversations)
    texts = list(dict.fromkeys([t for c in convs for t in c.turn_texts] + [q.text for c in convs for q in c.questions]))
    out: dict[str, Any] = {"texts": len(texts), "k": k, "backends": {}}
    first: np.ndarray | None = None
    reports = []
    for backend in backends:
        before = machine_load()
        emb = Embedder(backend=backend, use_cache=False)
        t0 = time.perf_counter()
        emb.encode(texts[:1])
        load_s = time.perf_counter() - t0
        t0, cpu0 = time.perf_counter(), time.process_time()
        vecs = emb.encode(texts)
        encode_s, encode_cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
        row = {v: i for i, v in enumerate(texts)}
        all_hits: list[float] = []
        any_hits: list[float] = []
        for c in convs:
            a, b = flat_recall(
                c.turn_ids, vecs[[row[t] for t in c.turn_texts]], c.questions, vecs[[row[q.text] for q in c.questions]], k
            )
            all_hits += a
            any_hits += b
        figures: dict[str, Any] = {
            "model_id": emb.model_id,
            "load_s": round(load_s, 2),
            "encode_s": round(encode_s, 2),
            "texts_per_s": round(len(texts) / encode_s, 1),
            "encode_cpu_s": round(encode_cpu_s, 2),
            f"recall_all@{k}": round(float(np.mean(all_hits)), 4),
            f"recall_any@{k}": round(float(np.mean(any_hits)), 4),
        }
        if first is None:
            first = vecs
        else:
            cos = np.sum(first * vecs, axis=1)
            figures["cosine"] = {
                "min": round(float(cos.min()), 6),
                "p001": round(float(np.quantile(cos, 0.001)), 6),
                "mean": round(float(cos.mean()), 6),
            }
        figures["load"] = load_report(before, machine_load())
        reports.append(figures["load"])
        out["backends"][backend] = figures
        del emb
    out["load"] = merge_load(reports)
    return out


def format_backends(f: Mapping[str, Any]) -> str:
    """The figures of ``bench_backends`` as a table."""
    k = f["k"]
    names = list(f["backends"])
    lines = [
        f"bench backends: {f['texts']} distinct LoCoMo texts, cosine against {names[0]}, recall by exact search at k={k}",
    ]
    rows = []
    for name, b in f["backends"].items():
        cos = b.get("cosine") or {}
        rows.append([name, f"{b['load_s']:.1f}", f"{b['encode_s']:.1f}", f"{b['encode_cpu_s']:.1f}", f"{b['texts_per_s']:.1f}",
                     *(f"{cos[x]:.5f}" if x in cos else "-" for x in ("min", "p001", "mean")),
                     f"{b[f'recall_all@{k}']:.4f}", f"{b[f'recall_any@{k}']:.4f}",
                     "under load" if b["load"]["under_load"] else ""])
    head = ["backend", "load s", "encode s", "cpu s", "texts/s", "cos min", "cos p0.1%", "cos mean", "recall_all",
            "recall_any", ""]
    lines.append(text_table(head, rows, align="l" + "r" * 9 + "l"))
    lines.append("  " + format_load(f["load"]))
    return "\n".join(lines)


_SCALE_CHILD = """
import json, resource, sys, time, functools, tempfile
from pathlib import Path
from memsim.analysis.pipeline import execute, make_spec
from memsim.memory.embed import Embedder
from memsim.memory.registry import SystemSpec
users, months, workers, scheduler, systems, cache = json.loads(sys.argv[1])
spec = make_spec("longitudinal", "life", {"users": users, "months": months}, [SystemSpec(s) for s in systems],
                 seed=0, n_boot=200)
out = Path(tempfile.mkdtemp(prefix="memsim-bench-scale-")) / "run"
t0 = time.perf_counter()
outcome = execute(spec, out_dir=out, embedder_factory=functools.partial(Embedder, cache_dir=cache), workers=workers,
                  scheduler=scheduler)
wall = time.perf_counter() - t0
info = outcome.result.info
timing = info["units"]["timing"]
print(json.dumps({"wall_s": wall, "run_s": outcome.result.wall_seconds, "units": len(timing),
                  "unit_s": sum(t["seconds"] for t in timing.values()),
                  "worker_peak_mb": max((t.get("peak_rss_mb") or 0.0) for t in timing.values()),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "turns": info["totals"]["turns"], "questions": info["totals"]["questions"],
                  "embedded": (info.get("embedding") or {}).get("embedded", 0),
                  "workers": info["units"]["workers"]}))
import shutil
shutil.rmtree(out.parent, ignore_errors=True)
"""


def bench_scale(
    *, users: Sequence[int] = (30, 300, 3000), months: float = 1.0, workers: Sequence[str] = ("1", "2", "local:2"),
    systems: Sequence[str] = ("naive", "neuroplastic"),
) -> dict[str, Any]:
    """User-months simulated per second and peak memory against users and workers, each run in a fresh process.

    The life world of ``users`` users over ``months`` months against ``systems`` (with their twins,
    placebos and constant arms), MiniLM on a warm cache: each world is embedded once by an untimed
    warm-up run first, so that the figures measure the play (``embedded`` says what a timed run
    still computed). ``workers``: ``N`` (processes), ``0`` (in the run's process) or ``local:N`` (a
    Dask LocalCluster of N).
    """
    rows = []
    cache = tempfile.mkdtemp(prefix="memsim-bench-scale-cache-")
    before = machine_load()
    for n in users:
        warm = json.dumps([int(n), float(months), 0, None, list(systems)[:1], cache])
        proc = subprocess.run([sys.executable, "-c", _SCALE_CHILD, warm], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"bench scale ({n} users, warm-up) failed: {proc.stderr[-2000:]}")
        for w in workers:
            scheduler, _, count = w.rpartition(":")
            args = json.dumps([int(n), float(months), int(count), scheduler or None, list(systems), cache])
            proc = subprocess.run([sys.executable, "-c", _SCALE_CHILD, args], capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"bench scale ({n} users, workers {w}) failed: {proc.stderr[-2000:]}")
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            # The play (the runner's wall: building, embedding, the units, joining the rows), not start-up and statistics.
            got.update(users=n, months=months, workers_asked=w,
                       user_months_per_s=round(n * months / got["run_s"], 2))
            rows.append(got)
    import shutil

    shutil.rmtree(cache, ignore_errors=True)
    return {"rows": rows, "systems": list(systems), "load": load_report(before, machine_load()), "cpu": cpu_model(),
            "cores": os.cpu_count()}


def format_scale(figures: Mapping[str, Any]) -> str:
    """The scale bench as a table."""
    rows = [[str(r["users"]), r["workers_asked"], f"{r['turns']:,}", str(r["units"]), f"{r['run_s']:.1f}",
             f"{r['wall_s']:.1f}", f"{r['user_months_per_s']:.2f}", f"{r['peak_mb']:.0f}",
             f"{r['worker_peak_mb']:.0f}" if r["worker_peak_mb"] else "-"]
            for r in figures["rows"]]
    head = ["users", "workers", "turns", "units", "play s", "wall s", "user-months/s (play)", "run peak MB",
            "worker peak MB"]
    return "\n".join([text_table(head, rows), f"systems: {', '.join(figures['systems'])} (and their arms); "
                      "MiniLM, warm cache; play: the runner's wall (build, embed, units, rows); wall: the whole "
                      "process, statistics included",
                      format_load(figures["load"])])
