"""Engine benchmarks: events per second with a trivial memory; ``memsim demo`` cold and warm.

``bench_engine`` replays a persona stream against a memory that does no work
(it keeps nothing and retrieves nothing), so the figure is the cost of the
simulator itself: SimPy scheduling, scoring, recording and feedback.
``bench_demo`` runs ``memsim demo`` twice in fresh processes on one new
embedding cache: cold (every text embedded by the model) and warm (every text
a cache hit).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import simpy

from memory.base import MemoryStats, Retrieved, Turn
from memory.registry import SystemSpec
from scenarios.base import build_scenario
from sim.engine import EngineConfig, Harness, SystemUnderTest, start_processes, turn_maps
from sim.events import Question, Session
from sim.recorder import Recorder

__all__ = ["NullMemory", "bench_engine", "bench_demo"]


class NullMemory:
    """A memory that keeps nothing: the engine's own cost is all that is left."""

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Drop the turns."""

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Nothing to return."""
        return []

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
    owner, text = turn_maps(stream.events)
    rec = Recorder()
    suts = [SystemUnderTest(SystemSpec(f"null{i}"), NullMemory()) for i in range(systems)]
    cfg = EngineConfig(start=stream.start, k=10)
    harness = Harness(env=env, systems=suts, recorder=rec, config=cfg, turn_owner=owner, turn_text=text)
    start_processes(env, harness, stream.events)
    t1 = time.perf_counter()
    env.run(until=(stream.end - stream.start).total_seconds() + cfg.feedback_delay_s + 1)
    run_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    rec.probes_frame()
    rec.timeline_frame()
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
