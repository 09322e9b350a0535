"""Latency under load: the memory service and the LLM endpoint as ``simpy.Resource``s.

Without a ``[load]`` table a run hands each event to every system at the
moment it is due and takes no simulated time (``sim.engine``). With one,
every system under test is its own deployment with two bounded services:

- **memory**: ``memory_workers`` slots; a session's ingest and a question's
  retrieval each hold one slot for its service time;
- **llm**: ``llm_workers`` slots; a question's answer holds one slot for its
  service time (the endpoint's time is modelled, never measured here).

Many users' sessions and questions arrive at once, so queues form. Each
operation records its queue wait apart from its service time; a question's
latency is from its arrival to its answer. A question retrieved while a
session of the same user that arrived before it is still waiting or in
service for that system sees the older memory: it is counted
(``ingest_lag``) and scored as it is. With ``deadline_s`` an answer later than
the deadline is a miss (``deadline_miss``); ``analysis.load`` reports
accuracy with and without deadlines.

Service times of the memory service are ``modelled`` (drawn from the
configured distributions with the run's seeded generator: the same seed
gives the same queues, and the load table goes into ``metrics.json``) or
``measured`` (the wall time of the call: queues then depend on the machine,
so the load table goes into ``perf.json`` only). A modelled operation takes
effect when its service ends; a measured one when it starts (its duration is
only known once it has run).

Deletions and maintenance are not queued: they reach the systems when due,
as without load. A deletion that arrives while the session holding its turns
is still queued is applied before that session is ingested; the leak that
follows shows in the deleted-leak counts.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import simpy
from pydantic import BaseModel, ConfigDict, Field

from sim.events import Question, Session

if TYPE_CHECKING:  # the engine imports this module
    from sim.engine import Harness, SystemUnderTest

__all__ = ["Service", "LoadSettings", "Deployment", "Load", "ingest_job", "question_job"]


class Service(BaseModel):
    """A service-time distribution, in seconds.

    ``fixed``: always ``median_s``. ``lognormal``: median ``median_s`` and
    shape ``sigma`` (the log's standard deviation; p95 is
    ``median_s * exp(1.645 * sigma)``). ``exponential``: mean ``median_s / ln 2``
    (so that ``median_s`` is the median for every kind).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["fixed", "lognormal", "exponential"] = "lognormal"
    median_s: float = Field(0.05, ge=0, description="median service time, seconds")
    sigma: float = Field(0.5, ge=0, description="lognormal shape (std of the log)")

    def draw(self, rng: np.random.Generator) -> float:
        """One service time in seconds."""
        if self.kind == "fixed" or self.median_s == 0:
            return float(self.median_s)
        if self.kind == "lognormal":
            return float(self.median_s * math.exp(self.sigma * rng.standard_normal()))
        return float(rng.exponential(self.median_s / math.log(2.0)))


class LoadSettings(BaseModel):
    """The ``[load]`` table of a config: capacities, service times, deadline."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_workers: int = Field(1, ge=1, description="concurrent operations the memory service runs, per system")
    llm_workers: int = Field(1, ge=1, description="concurrent answers the LLM endpoint runs, per system")
    memory_time: Literal["modelled", "measured"] = Field(
        "modelled", description="memory service times: drawn from the distributions (deterministic) or measured wall time"
    )
    ingest_per_turn: Service = Field(
        default_factory=lambda: Service(median_s=0.02, sigma=0.5),
        description="modelled ingest time per turn of a session",
    )
    retrieve: Service = Field(
        default_factory=lambda: Service(median_s=0.05, sigma=0.5), description="modelled retrieval time"
    )
    answer: Service = Field(
        default_factory=lambda: Service(median_s=1.5, sigma=0.4), description="modelled LLM answer time"
    )
    deadline_s: float | None = Field(None, gt=0, description="answer deadline from the question's arrival (None: none)")

    @property
    def deterministic(self) -> bool:
        """Whether queues depend only on the seed (``memory_time = "modelled"``)."""
        return self.memory_time == "modelled"


@dataclass
class Deployment:
    """One system's services: its memory service and its LLM endpoint, and its own random stream."""

    memory: simpy.Resource
    llm: simpy.Resource
    rng: np.random.Generator


@dataclass
class Load:
    """The load settings of a run and each system's deployment, made on first use."""

    settings: LoadSettings
    seed: int = 0
    deployments: dict[str, Deployment] = field(default_factory=dict)
    pending: dict[tuple[str, str], int] = field(default_factory=dict)
    """(system, user) -> sessions arrived but not yet ingested by that system."""
    in_flight: int = 0
    """Jobs started and not yet done (the runner plays on until none is left)."""

    def deployment(self, env: simpy.Environment, label: str) -> Deployment:
        """The deployment of system ``label`` (one named random stream per system)."""
        dep = self.deployments.get(label)
        if dep is None:
            key = int.from_bytes(hashlib.sha256(f"load:{label}".encode()).digest()[:8], "big")
            dep = self.deployments[label] = Deployment(
                memory=simpy.Resource(env, capacity=self.settings.memory_workers),
                llm=simpy.Resource(env, capacity=self.settings.llm_workers),
                rng=np.random.default_rng([self.seed, key]),
            )
        return dep

    def dispatch(self, harness: Harness, event: Session | Question) -> None:
        """Start one job per live system for an arriving session or question."""
        env = harness.env
        if isinstance(event, Session):
            embed_ms = harness.arrive(event)
            for sut in harness._live():
                key = (sut.label, event.user_id)
                self.pending[key] = self.pending.get(key, 0) + 1
                self.in_flight += 1
                env.process(ingest_job(env, harness, self, sut, event, embed_ms))
        else:
            index, thread, embed_ms = harness.ask(event)
            for sut in harness._live():
                self.in_flight += 1
                env.process(question_job(env, harness, self, sut, event, index, thread, embed_ms))


def ingest_job(
    env: simpy.Environment,
    harness: Harness,
    load: Load,
    sut: SystemUnderTest,
    event: Session,
    embed_ms: float,
) -> Any:
    """A session waits for a memory worker, is ingested, and holds the worker for its service time."""
    dep = load.deployment(env, sut.label)
    arrived = env.now
    modelled = load.settings.deterministic
    with dep.memory.request() as req:
        yield req
        started = env.now
        if modelled:
            service = sum(load.settings.ingest_per_turn.draw(dep.rng) for _ in event.turns)
            yield env.timeout(service)
        done = harness.ingest_one(sut, event) if sut.failed is None else None
        if not modelled:
            service = done[0] / 1000.0 if done is not None else 0.0
            yield env.timeout(service)
    key = (sut.label, event.user_id)
    load.pending[key] = load.pending.get(key, 1) - 1
    load.in_flight -= 1
    if done is None:
        return
    ms, stats, n = done
    harness._timeline(
        sut, event.user_id, "session", stats, ingest_ms=ms, embed_ms=embed_ms, turns=n,
        ingest_wait_s=started - arrived, ingest_service_s=service, ingest_latency_s=env.now - arrived,
    )


def question_job(
    env: simpy.Environment,
    harness: Harness,
    load: Load,
    sut: SystemUnderTest,
    q: Question,
    index: int,
    thread: str,
    embed_ms: float,
) -> Any:
    """A question waits for a memory worker to retrieve, then for an LLM worker to answer; then it is scored."""
    dep = load.deployment(env, sut.label)
    settings = load.settings
    arrived = env.now
    with dep.memory.request() as req:
        yield req
        r_started = env.now
        if settings.deterministic:
            r_service = settings.retrieve.draw(dep.rng)
            yield env.timeout(r_service)
        lagged = load.pending.get((sut.label, q.user_id), 0) > 0
        got = harness.retrieve_one(sut, q, index, thread, embed_ms) if sut.failed is None else None
        if not settings.deterministic:
            r_service = got[0]["retrieve_ms"] / 1000.0 if got is not None else 0.0
            yield env.timeout(r_service)
    if got is None:
        load.in_flight -= 1
        return
    row, memories = got
    r_done = env.now
    with dep.llm.request() as req:
        yield req
        a_started = env.now
        a_service = settings.answer.draw(dep.rng)
        yield env.timeout(a_service)
        harness.answer_one(row, q, memories)
    latency = env.now - arrived
    row.update(
        t_days=arrived / 86400.0,
        ingest_lag=lagged,
        retrieve_wait_s=r_started - arrived,
        retrieve_service_s=r_service,
        retrieve_latency_s=r_done - arrived,
        llm_wait_s=a_started - r_done,
        llm_service_s=a_service,
        latency_s=latency,
        deadline_miss=None if settings.deadline_s is None else bool(latency > settings.deadline_s),
    )
    load.in_flight -= 1
    harness.finish_one(sut, q, row, memories)


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """p50, p95, p99 and mean of some seconds (None when there are none)."""
    v = np.asarray([x for x in values if x is not None and not math.isnan(x)], dtype=float)
    if v.size == 0:
        return {"p50": None, "p95": None, "p99": None, "mean": None}
    p50, p95, p99 = np.percentile(v, [50, 95, 99])
    return {"p50": float(p50), "p95": float(p95), "p99": float(p99), "mean": float(v.mean())}
