"""Latency under load: the memory service and the LLM endpoint as ``simpy.Resource``s.

Without a ``[load]`` table a run hands each event to every system at the
moment it is due and takes no simulated time. With one (the processes are
``load_dispatch``, ``ingest_job`` and ``question_job`` in ``memsim.sim.engine``),
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
the deadline is a miss (``deadline_miss``); ``memsim.analysis.load`` reports
accuracy with and without deadlines.

Service times of the memory service are ``modelled`` (drawn from the
configured distributions with the run's seeded generator: the same seed
gives the same queues, and the load table goes into ``metrics.json``; a
system's twin and placebo draw from their system's stream, so the arms of
one system see the same service times and queue alike) or
``measured`` (the wall time of the call: queues then depend on the machine,
so the load table goes into ``perf.json`` only). A modelled operation takes
effect when its service ends; a measured one when it starts (its duration is
only known once it has run).

Deletions, maintenance, feedback and the ``implicit`` channel's reaction
turns are not queued: they reach the systems when due, as without load. A deletion that arrives while the session holding its turns
is still queued is applied before that session is ingested; the leak that
follows shows in the deleted-leak counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import simpy
from pydantic import BaseModel, ConfigDict, Field
from memsim.core.streams import labelled


__all__ = ["Service", "LoadSettings", "Deployment", "Load", "percentiles"]


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

    memory_workers: int = Field(1, ge=1, le=1024, description="concurrent operations the memory service runs, per system")
    llm_workers: int = Field(1, ge=1, le=1024, description="concurrent answers the LLM endpoint runs, per system")
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

    def deployment(self, env: simpy.Environment, label: str, *, stream: str | None = None) -> Deployment:
        """The deployment of system ``label``: its own services, and the random stream named ``stream``.

        Args:
            env: the run's clock.
            label: the arm (a system, its twin or its placebo): each arm has its own services.
            stream: the system whose service times it draws (a twin's and a placebo's: their system's,
                so that all arms draw the same times and queue alike); None: its own label.
        """
        dep = self.deployments.get(label)
        if dep is None:
            dep = self.deployments[label] = Deployment(
                memory=simpy.Resource(env, capacity=self.settings.memory_workers),
                llm=simpy.Resource(env, capacity=self.settings.llm_workers),
                rng=labelled(self.seed, f"load:{stream or label}"),
            )
        return dep


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """p50, p95, p99 and mean of some seconds (None when there are none)."""
    v = np.asarray([x for x in values if x is not None and not math.isnan(x)], dtype=float)
    if v.size == 0:
        return {"p50": None, "p95": None, "p99": None, "mean": None}
    p50, p95, p99 = np.percentile(v, [50, 95, 99])
    return {"p50": float(p50), "p95": float(p95), "p99": float(p99), "mean": float(v.mean())}
