"""Benchmarks of static LoCoMo: cold and warm, against the plain reference pipeline, across embedding backends.

``bench_locomo`` runs the static LoCoMo spec twice through the pipeline on
one new embedding cache: cold, then warm. ``bench_compare`` runs the plain
reference pipeline (``memsim.analysis.reference_pipeline``) and memsim on the
same workload; ``bench_backends`` embeds LoCoMo's texts with each backend.

The other benches live beside it and are re-exported here: the engine
(``bench_engine``), ``memsim demo`` cold and warm (``bench_demo``), users and
workers (``bench_run_scale``). Every bench says how busy the machine was
(``bench_load``: ``machine_load``, ``load_report``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memsim.analysis.bench_demo import bench_demo, demo_stages, format_demo
from memsim.analysis.bench_engine import NullMemory, bench_engine
from memsim.analysis.bench_load import (
    LOAD_THRESHOLD,
    OTHERS_THRESHOLD,
    cpu_model,
    format_load,
    load_report,
    machine_load,
    merge_load,
    others_cpu,
)
from memsim.analysis.bench_run_scale import bench_scale, format_scale
from memsim.memory.registry import SystemSpec
from memsim.core.table import text_table

__all__ = [
    "NullMemory", "TimedEmbedder", "bench_engine", "bench_demo", "demo_stages", "format_demo", "bench_locomo", "format_locomo_bench",
    "bench_compare", "format_compare", "bench_backends", "format_backends", "bench_scale", "format_scale",
    "LOAD_THRESHOLD", "OTHERS_THRESHOLD", "cpu_model", "machine_load", "others_cpu", "load_report", "merge_load",
    "format_load",
]


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
    pairs = [
        _compare_pair(data, systems, k=k, backend=backend, limit_conversations=limit_conversations,
                      cold_export=cold_export, order=order)
        for _ in range(repeat)
    ]
    out.update(_pair_figures(pairs, order=order, k=k))
    return out


def _compare_pair(
    data: Path, systems: Sequence[SystemSpec], *, k: int, backend: str, limit_conversations: int | None,
    cold_export: bool, order: str,
) -> dict[str, Any]:
    """One pair of runs, the reference and memsim in ``order``, each with its load; the ratios of the pair."""
    from memsim.analysis.reference_pipeline import reference_locomo

    n = len(systems)
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
    return pair


def _pair_figures(pairs: Sequence[dict[str, Any]], *, order: str, k: int) -> dict[str, Any]:
    """The pairs summed up: the median pair's runs, the ratios' medians and ranges, each pair, the load, the recall deltas."""
    out: dict[str, Any] = {}
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
