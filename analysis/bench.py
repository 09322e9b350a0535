"""Benchmarks that print figures: the engine, ``memsim demo``, static LoCoMo cold and warm.

``bench_engine`` replays a persona stream against a memory that does no work
(it keeps nothing and retrieves nothing), so the figure is the cost of the
simulator itself: SimPy scheduling, scoring, recording and feedback.
``bench_demo`` runs ``memsim demo`` twice in fresh processes on one new
embedding cache: cold (every text embedded by the model) and warm (every text
a cache hit). ``bench_locomo`` runs the static LoCoMo spec twice through the
pipeline on one new cache: cold, then warm.
"""

from __future__ import annotations

import os
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

from memory.base import MemoryStats, Retrieved, Turn
from memory.registry import Resources, SystemSpec
from scenarios.base import build_scenario
from sim.engine import EngineConfig, Harness, SystemUnderTest, start_processes
from sim.events import Question, Session
from sim.recorder import Recorder
from sim.scorers import build_scorer

__all__ = ["NullMemory", "TimedEmbedder", "bench_engine", "bench_demo", "bench_locomo", "format_locomo_bench"]


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
    t0 = time.perf_counter()
    stream = build_scenario("persona", {"users": users, "months": months}).generate(np.random.default_rng(seed))
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


def bench_demo(*, cache_dir: str | None = None, extra_args: Sequence[str] = ()) -> dict[str, Any]:
    """Wall time of ``memsim demo`` cold (new cache) and warm (same cache), each in a fresh process."""
    owned = cache_dir is None
    tmp = tempfile.mkdtemp(prefix="memsim-bench-demo-") if owned else cache_dir
    env = {**os.environ, "MEMSIM_CACHE_DIR": str(Path(tmp) / "cache")}
    out: dict[str, Any] = {}
    for phase in ("cold", "warm"):
        cmd = [sys.executable, "-m", "analysis.cli", "demo", "--no-report", "--out", str(Path(tmp) / f"run-{phase}"), *extra_args]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        out[f"{phase}_s"] = round(time.perf_counter() - t0, 1)
        if proc.returncode != 0:
            raise RuntimeError(f"memsim demo ({phase}) failed: {proc.stderr[-2000:]}")
    out["cache_dir"] = env["MEMSIM_CACHE_DIR"]
    return out


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
    from analysis.pipeline import execute, make_spec

    if make_embedder is None:

        def make_embedder(cache_dir: Path) -> Any:
            from memory.embed import Embedder

            return Embedder(cache_dir=cache_dir)

    spec = make_spec(
        "static", "locomo", {"data": str(data), "limit_conversations": limit_conversations}, [system],
        k=k, retrieve_k=max(k, 50), scorers=("evidence",), control=None,
    )
    figures: dict[str, Any] = {"system": system.display, "k": k}
    with tempfile.TemporaryDirectory(prefix="memsim-bench-") as tmp:
        for phase in ("cold", "warm"):
            timed: list[TimedEmbedder] = []

            def embedder() -> TimedEmbedder:
                timed.append(TimedEmbedder(make_embedder(Path(tmp))))
                return timed[-1]

            t0 = time.perf_counter()
            outcome = execute(
                spec, out_dir=out_dir if phase == "warm" else None,
                resources=Resources(rng=np.random.default_rng(0), embedder_factory=embedder),
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
    return "\n".join(lines)
