"""``memsim bench engine``: the simulator's own cost, against a memory that does no work.

``bench_engine`` replays a persona stream against null memories (they keep
nothing and retrieve nothing), so the figure is the cost of the simulator
itself: SimPy scheduling, scoring, recording and feedback.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import simpy

from memsim.memory.base import MemoryStats, Retrieved, Turn
from memsim.sim.engine import EngineConfig, Harness, SystemUnderTest, start_processes
from memsim.sim.events import Question, Session
from memsim.sim.recorder import Recorder
from memsim.sim.scorers import build_scorer

__all__ = ["NullMemory", "bench_engine"]


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
