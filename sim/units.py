"""A longitudinal run's units: arms played together on a clock of their own, here or on a worker.

``plan_units`` splits a run's arms into units (each pass's arms, one unit
each, HTTP arms together); ``unit_steps`` plays one unit a simulated day at a
time and returns its rows; ``play_serial`` plays units one after another in
this process (``memsim.sim.workers`` plays them on worker processes or Dask).
``Play`` holds what both settings of the loop share while a run is played.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl
import simpy

from memsim.core.errors import UserError
from memsim.memory.gated import deferred_purges
from memsim.memory.registry import Resources
from memsim.sim.engine import EngineConfig, Harness, SystemUnderTest, start_processes
from memsim.sim.events import Episode
from memsim.sim.load import Load
from memsim.sim.recorder import Recorder
from memsim.sim.spec import RunSpec
from memsim.sim.building import arm_reports, build_arms, failed_arms
from memsim.sim.upfront import entity_recognisers, turn_texts

__all__ = ["Play", "engine_config", "passes", "Clock", "Unit", "plan_units", "UnitContext", "UnitOutcome", "unit_steps", "one_thread", "play_serial"]


def engine_config(spec: RunSpec, start: datetime, *, static: bool) -> EngineConfig:
    return EngineConfig(
        start=start,
        k=spec.k,
        ks=spec.ks,
        fetch_k=spec.fetch_k,
        metric=spec.metric,
        feedback_delay_s=spec.feedback_delay_hours * 3600.0,
        feedback_from="none" if static else spec.feedback_from,
        maintenance_every_s=0.0 if static else spec.maintenance_every_hours * 3600.0,
        seed=spec.seed,
    )


@dataclass
class Play:
    """What both settings of the loop share while a run is played."""

    spec: RunSpec
    recorder: Recorder
    resources: Resources
    scorers: list[Any]
    answer: Any
    info: dict[str, Any] = field(default_factory=dict)
    """Becomes ``run.json``."""
    part: str | None = None
    """The part being played (committed as cut short if the run stops)."""
    workers: Any = None
    """How units are played (``memsim.sim.workers.Workers``: ``play``, ``describe``); None: one after another, here."""
    clock_start: datetime | None = None
    """Simulated time zero of a longitudinal run."""
    purges: list[dict[str, Any]] = field(default_factory=list)
    """What the units played here said to purge from memsim's caches (texts: kept in memory only)."""
    entity_caches: list[Any] = field(default_factory=list)
    """The gates' entity recognisers, one per cache, whose deleted turns the run purges after the play."""

    def harness(self, suts: list[SystemUnderTest], start: datetime, *, static: bool) -> Harness:
        """A fresh clock and harness over ``suts``."""
        answer = self.answer
        return Harness(
            env=simpy.Environment(),
            systems=suts,
            recorder=self.recorder,
            config=engine_config(self.spec, start, static=static),
            scorers=self.scorers,
            answer=answer.answer_and_judge if answer is not None else None,
            judge_keys=tuple(answer.score_columns) if answer is not None else (),
            # Systems that embed made the shared embedder when they were built.
            prepare=self.resources.made_embedder.encode if self.resources.made_embedder is not None else None,
            load=Load(self.spec.load, seed=self.spec.seed) if self.spec.load is not None else None,
            caches=self.caches(),
        )

    def caches(self) -> dict[str, Any] | None:
        """memsim's persistent caches that hold copies of turns (purged after a deletion), or None when it has none."""
        embedder = self.resources.made_embedder
        out: dict[str, Any] = {}
        if embedder is not None and getattr(embedder, "cache", None) is not None:
            out["embedding_cache"] = embedder.cache
        llm = tuple(getattr(self.answer, "_caches", ()) or ())  # AnswerSetup's response caches
        if llm:
            out["llm_caches"] = llm
        if self.entity_caches:
            out["entity_caches"] = tuple(self.entity_caches)
        return out or None


def passes(suts: Sequence[SystemUnderTest]) -> list[list[SystemUnderTest]]:
    """The arms in the passes that play them: first those that need nothing from another arm, then the placebos.

    A placebo's bits are its system's told bits, so its system's whole pass must be played
    first. Within a pass the arms keep the order they were built in.
    """
    first = [s for s in suts if s.feedback != "shuffled"]
    placebos = [s for s in suts if s.feedback == "shuffled"]
    return [first, placebos] if placebos else [first]


@dataclass
class Clock:
    """A longitudinal run's simulated span, shared by its units."""

    episodes: list[Episode]
    start: datetime
    span: float
    """Seconds from the start to the end of the run."""
    days: int
    """Simulated days (each unit reports its progress by the day)."""


@dataclass(frozen=True, slots=True)
class Unit:
    """Arms played together, on a clock of their own, apart from the run's other arms: a part of the run folder.

    Arms share nothing while they play (each has its own store, rng streams and, under load, its own
    services), so each is a unit of its own, except the arms of HTTP systems: they reach services
    outside memsim, which may be one, so they play together. A unit's users stay together: one store
    serves all of an arm's users (and, under load, they queue for its services).
    """

    key: str
    """Its part key: ``a<pass>-<arm's place in the pass>`` (rows come out in key order)."""
    labels: tuple[str, ...]
    placebo_of: tuple[str, ...] = ()
    """The systems whose told bits its placebos are dosed with."""
    needs: tuple[str, ...] = ()
    """Keys of the units whose committed rows it reads first (its placebos' systems')."""


def plan_units(suts: Sequence[SystemUnderTest]) -> list[Unit]:
    """The units of a longitudinal run, in key order: each pass's arms (``passes``), one unit each, HTTP arms together."""
    units: list[Unit] = []
    home: dict[str, str] = {}
    for index, group in enumerate(passes(suts)):
        outside = [s for s in group if s.name == "http"]
        for pos, s in enumerate(group):
            if s.name == "http" and s is not outside[0]:
                continue
            members = outside if s.name == "http" else [s]
            key = f"a{index}-{pos:04d}"
            systems = tuple(dict.fromkeys(m.twin_of or m.label for m in members if m.feedback == "shuffled"))
            needs = tuple(dict.fromkeys(home[x] for x in systems))
            units.append(Unit(key, tuple(m.label for m in members), systems, needs))
            home.update((m.label, key) for m in members)
    return units


@dataclass
class UnitContext:
    """What playing any unit of a run needs: the same in the run's process and in a worker."""

    spec: RunSpec
    clock: Clock
    resources: Resources
    rngs: Sequence[Any]
    """The rng state each system's build began with (``build_systems``)."""
    scorers: list[Any]
    answer: Any = None


@dataclass
class UnitOutcome:
    """A unit's rows and what its play adds to ``run.json``, handed to the run's one writer to commit."""

    key: str
    probes: pl.DataFrame
    timeline: pl.DataFrame
    failures: list[dict[str, Any]]
    missing: list[str]
    outcome: dict[str, Any]
    stats: dict[str, Any] = field(default_factory=dict)
    """Where and how long it played, its worker's peak memory: measurements, kept apart from the rows."""


def unit_steps(
    ctx: UnitContext, unit: Unit, doses: Mapping[tuple[str, str, int], Sequence[Any]] | None = None,
) -> Generator[int, None, UnitOutcome]:
    """Play every episode against the arms of ``unit`` on a clock of their own, yielding each simulated day done.

    The arms are built alone from the rng states their builds began with, so they draw what they
    drew among all the run's arms; memsim's caches are not purged here (``Harness.purges`` lists what
    to purge once every unit has played). Returns the unit's rows and outcome.
    """
    spec, clock = ctx.spec, ctx.clock
    suts = build_arms(spec, ctx.resources, ctx.rngs, unit.labels)
    recorder = Recorder(None)
    recorder.open(spec)
    recorder.defer_redaction = True
    p = Play(spec, recorder, ctx.resources, ctx.scorers, ctx.answer)
    harness = p.harness(suts, clock.start, static=False)
    harness.caches = None
    harness.doses = dict(doses or {})
    env = harness.env
    start_processes(env, harness, clock.episodes)
    for rec in entity_recognisers(suts):  # the world's entities into this process in one read
        rec.missing(turn_texts(clock.episodes))
    # The gates' entity purges wait for the run's, like every other cache's (``Harness.purges``).
    with deferred_purges():
        try:
            for day in range(1, clock.days + 1):
                env.run(until=min(day * 86400.0, clock.span) if day < clock.days else clock.span + 1e-6)
                yield day
            # Feedback still in flight at the end is delivered so systems end in a defined state.
            until = clock.span + harness.config.feedback_delay_s + 1.0
            env.run(until=until)
            while harness.load is not None and harness.load.in_flight:
                # Under load, queues can outlast the scenario: play on until every job is done and its feedback given.
                until += 3600.0
                env.run(until=until)
            if harness.load is not None:
                env.run(until=until + harness.config.feedback_delay_s + 1.0)
        except UserError as exc:
            # An endpoint gone, say: the rows played so far go with the error, to be kept as a part cut short.
            exc.partial = UnitOutcome(unit.key, *recorder.take(), failed_arms(suts), {})  # type: ignore[attr-defined]
            raise
    probes, timeline, failures = recorder.take()
    outcome = {
        "system_reports": arm_reports(suts),
        "feedback_unscored": harness.feedback_unscored,
        "feedback_told": harness.feedback_told,
        "placebo_beyond_dose": harness.beyond_dose,
        "corrections_owed": harness.owed(),
        "purges": harness.purges,
    }
    return UnitOutcome(unit.key, probes, timeline, failures, failed_arms(suts), outcome)


@contextmanager
def one_thread() -> Iterator[None]:
    """Numeric libraries on one thread while a unit plays, here as in a worker.

    A unit's arithmetic then sums in the same order wherever it plays (a BLAS product split over two
    threads can differ from one thread's in the last bit, and a score that differs there can reorder
    a tie). Embedding before the play keeps every core.
    """
    from threadpoolctl import threadpool_limits

    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    with threadpool_limits(limits=1):
        if torch is not None:
            torch.set_num_threads(1)
        try:
            yield
        finally:
            if torch is not None and before is not None:
                torch.set_num_threads(before)


def play_serial(
    ctx: UnitContext, units: Sequence[Unit],
    doses_for: Callable[[Unit], Mapping[tuple[str, str, int], Sequence[Any]] | None],
) -> Iterator[UnitOutcome | tuple[str, int]]:
    """Play ``units`` one after another in this process, yielding ``(key, day)`` progress and each outcome.

    The caller commits each outcome before asking for the next event (a placebo's doses are read
    from its system's committed rows when its unit starts).
    """
    for unit in units:
        t0 = time.perf_counter()
        steps = unit_steps(ctx, unit, doses_for(unit))
        while True:
            try:
                with one_thread():  # as in a worker: a sum over more threads can differ in its last bit
                    day = next(steps)
            except StopIteration as stop:
                outcome: UnitOutcome = stop.value
                break
            yield unit.key, day
        outcome.stats = {"seconds": round(time.perf_counter() - t0, 3), "where": "here"}
        yield outcome
