"""Play a stream of episodes against the systems of a spec: the one driver of every run.

Two settings of one loop (``RunSpec.kind``):

- ``longitudinal``: systems are built once; every episode (a user's months)
  plays at once on one simulated clock, with feedback after a delay and
  maintenance ticks. Rows are committed after each simulated day. The arms
  are played in **passes** (``passes``): first every arm that needs nothing
  from another (systems, twins, constant arms), then the placebos, whose
  bits are their systems' told bits from the first pass's rows, permuted
  within user and week (``memsim.sim.engine.placebo_doses``). A pass is one
  call of ``play_pass``; its parts are keyed by pass (``d000001``, ``end``;
  then ``p1-d000001``, ``p1-end``), so rows come out in pass, day, arm
  order, and a pass whose parts are all committed is not played again when a
  run resumes.
- ``static``: episodes (a conversation, an instance) play one after another,
  each against freshly built systems, questions after ingest, no feedback.
  Episodes stream from the loader, so memory stays flat however large the
  file. Rows are committed after each episode.

The stream of checkpoints is the primitive (``iter_run``); ``run`` consumes
it. The runner writes rows only (``memsim.sim.recorder``); tables, intervals and
reports are ``analysis``'s job.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
import simpy

from memsim.memory.base import render_turn
from memsim.memory.gated import deferred_purges
from memsim.memory.guard import GuardedSystem, SystemCallFailed
from memsim.memory.registry import Resources, build_memory, learns_from_feedback
from memsim.sim.erasure import audit_caches, cache_texts, purge_caches
from memsim.sim.engine import EngineConfig, Harness, SystemUnderTest, placebo_doses, start_processes
from memsim.core.errors import UserError
from memsim.core.heal import repairs
from memsim.core.streams import streams
from memsim.sim.events import Deletion, Episode, Question, Session, Tick
from memsim.sim.inline_guard import InlineGuardedSystem, inline_possible
from memsim.sim.load import Load
from memsim.sim.recorder import Recorder
from memsim.sim.scorers import build_scorer
from memsim.sim.spec import RunSpec, speaks_in_turns

__all__ = ["Checkpoint", "RunResult", "iter_run", "run", "episode_totals", "upfront_texts", "passes", "plan_units",
           "unit_steps", "Unit", "UnitContext", "UnitOutcome", "arms_of", "Clock", "play_serial",
           "one_thread"]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Progress after a simulated day (longitudinal) or an episode (static); the last carries the result."""

    done: int
    """Arm-days or episodes done."""
    total: int | None
    """Arm-days or episodes in the run (None while a streamed file is still being read)."""
    unit: str
    """``arm-day`` (a longitudinal run: a simulated day of one arm) or ``episode``."""
    probes: int
    """Probe rows recorded so far by this process."""
    result: RunResult | None = None
    """Set on the final checkpoint."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a finished run produced."""

    out_dir: Path | None
    probes: pl.DataFrame
    timeline: pl.DataFrame
    info: dict[str, Any]
    """``run.json``: totals, failures, the systems' own reports, the parts."""
    wall_seconds: float = 0.0
    """Wall time of this process's share of the run (a resumed run counts only what it played)."""
    failures: list[dict[str, Any]] = field(default_factory=list)


def episode_totals(episodes: Iterable[Episode]) -> dict[str, Any]:
    """Users, sessions, turns, questions and deletions of some episodes."""
    users: dict[str, None] = {}
    out = {"users": 0, "episodes": 0, "sessions": 0, "turns": 0, "questions": 0, "deletions": 0}
    for ep in episodes:
        out["episodes"] += 1
        for e in ep.events:
            uid = getattr(e, "user_id", None)
            if uid is not None:
                users.setdefault(uid, None)
            if isinstance(e, Session):
                out["sessions"] += 1
                out["turns"] += len(e.turns)
            elif isinstance(e, Question):
                out["questions"] += 1
            elif isinstance(e, Deletion):
                out["deletions"] += 1
    out["users"] = len(users)
    return out


def _twins(spec: RunSpec, name: str, args: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label suffix, feedback mode) of the twins a system gets in a longitudinal run."""
    if spec.fresh_per_episode or not spec.twins or spec.feedback_from == "none":
        return []
    # Under the correction and implicit channels every system can change through use (it ingests the user's turns).
    if not speaks_in_turns(spec.feedback_from) and not learns_from_feedback(name, args):
        return []
    arms = [("~twin", "withheld")]
    if spec.placebo:
        arms.append(("~placebo", "shuffled"))
    if spec.constant_arms:
        arms += [("~false", "false"), ("~true", "true")]
    return arms


def _system(spec: RunSpec, name: str, args: Mapping[str, Any], resources: Resources, label: str) -> Any:
    """One system built for the run: an in-process one held to the protocol's contract (``GuardedSystem``).

    An in-process system is built and called on a thread of its own, each call
    within ``spec.call_deadline_s``; whatever it raises (``sys.exit`` and
    ``GeneratorExit`` included) or returns against the protocol marks it failed
    with one line naming it, the call and the error. An HTTP system has its own
    deadline and checks (``memsim.memory.http``) and is called directly.

    Raises:
        UserError: the arguments are bad, or the constructor raised or hung (naming the system).
    """
    if name == "http":
        return build_memory(name, args, resources=resources)
    # On the main thread the deadline is a timer and calls stay on this thread (a thread hop per call costs
    # about a tenth of a millisecond, seconds over a run); elsewhere each system gets a thread of its own.
    guard = InlineGuardedSystem if inline_possible() else GuardedSystem
    try:
        return guard.build(lambda: build_memory(name, args, resources=resources), label=label,
                           deadline_s=spec.call_deadline_s)
    except SystemCallFailed as exc:
        # Bad arguments, an unknown name, a constructor that raised or hung: the user's to fix, one line.
        raise UserError(f"cannot build system {label!r}: {str(exc).removeprefix(f'system {label}: ')}") from None


def _build(spec: RunSpec, resources: Resources, rngs: list[Any] | None = None) -> list[SystemUnderTest]:
    """The spec's systems in order, then their twins (each built from the rng state its system saw).

    ``rngs``, when given, gets the rng state each system's build began with, so that any arm can be
    rebuilt alone with the same draws (``_build_arms``).
    """
    suts: list[SystemUnderTest] = []
    twins: list[SystemUnderTest] = []
    for s in spec.systems:
        before = resources.fork()
        if rngs is not None:
            rngs.append(before.rng)
        try:
            suts.append(SystemUnderTest(s.name, s.display, _system(spec, s.name, s.args, resources, s.display)))
            for suffix, mode in _twins(spec, s.name, s.args):
                twin = _system(spec, s.name, s.args, before.fork(), s.display + suffix)
                twins.append(SystemUnderTest(s.name, s.display + suffix, twin, feedback=mode, twin_of=s.display))
        except (ValueError, ImportError) as exc:
            raise UserError(f"cannot build system {s.display!r}: {exc}") from None
    return suts + twins


@dataclass(frozen=True, slots=True)
class Arm:
    """Where an arm comes from: its label, its system's place in the spec, its feedback mode and twin suffix."""

    label: str
    system: int
    """Index of its system in ``spec.systems``."""
    feedback: str = "given"
    suffix: str = ""
    """The twin suffix (``~twin``, ``~placebo``, ...); empty for the system itself."""


def arms_of(spec: RunSpec) -> list[Arm]:
    """The spec's arms in ``_build``'s order: the systems, then each system's twins."""
    own = [Arm(s.display, i) for i, s in enumerate(spec.systems)]
    twins = [Arm(s.display + suffix, i, mode, suffix)
             for i, s in enumerate(spec.systems) for suffix, mode in _twins(spec, s.name, s.args)]
    return own + twins


def _build_arms(spec: RunSpec, resources: Resources, rngs: Sequence[Any], labels: Sequence[str]) -> list[SystemUnderTest]:
    """The arms ``labels``, each built alone from the rng state its build began with in ``_build`` (same draws)."""
    by_label = {a.label: a for a in arms_of(spec)}
    out = []
    for label in labels:
        arm = by_label[label]
        s = spec.systems[arm.system]
        system = _system(spec, s.name, s.args, resources.at(rngs[arm.system]), label)
        out.append(SystemUnderTest(s.name, label, system, feedback=arm.feedback,
                                   twin_of=s.display if arm.suffix else None))
    return out


def _failed(suts: Sequence[SystemUnderTest]) -> list[str]:
    """Labels of the systems that have failed (their rows of the part are left out, and a rerun adds them)."""
    return [s.label for s in suts if s.failed is not None]


def _reports(suts: Sequence[SystemUnderTest]) -> dict[str, Any]:
    return {s.label: s.system.report() for s in suts if callable(getattr(s.system, "report", None))}


def iter_run(
    spec: RunSpec,
    episodes: Iterable[Episode],
    *,
    out_dir: Path | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    resources: Resources | None = None,
    answer: Any | None = None,
    scorers: Sequence[Any] | None = None,
    workers: Any = None,
) -> Iterator[Checkpoint]:
    """Play ``episodes`` against the spec's systems, yielding checkpoints.

    Args:
        spec: the run's definition (written to ``spec.json``; a folder of another spec is refused).
        episodes: what to play, in order (a generator for streamed files).
        out_dir: run folder (None: rows stay in memory).
        start: simulated time zero of a longitudinal run (default: the first event).
        end: time after its last event (default: a minute after the last event).
        resources: shared run resources (embedder); default made from the seed's ``systems`` stream.
        answer: optional reader + judges (``memsim.sim.answer.AnswerSetup``).
        scorers: the spec's scorers, built (``memsim.analysis.pipeline.resolve`` builds them once); default built here.
        workers: how a longitudinal run's units are played (``memsim.sim.workers.Workers``: processes, a
            Dask cluster); default one after another in this process. The rows are the same either way.

    Raises:
        UserError: bad systems or scorers, a folder of another spec, an
            endpoint that is gone (rows committed so far stay on disk, and the
            cut-short part is kept for inspection; rerunning resumes).
    """
    if resources is None:
        resources = Resources(rng=streams(spec.seed)["systems"])
    if scorers is None:
        scorers = [build_scorer(name) for name in spec.scorers]
    recorder = Recorder(out_dir)
    recorder.open(spec)
    p = _Play(spec, recorder, resources, list(scorers), answer, workers=workers)
    play = _static if spec.fresh_per_episode else _longitudinal
    t0 = time.perf_counter()
    info = p.info
    try:
        yield from play(p, episodes, start, end)
    except UserError:
        if p.part is not None:
            recorder.commit(p.part, complete=False)
        recorder.finish(info, complete=False)
        raise
    except BaseException:  # a bug, an interrupt, or the generator closed early: the folder's lock goes back
        recorder.release()
        raise
    wall = time.perf_counter() - t0
    # Which embedder the systems shared (None when no system embeds).
    info["embedder"] = getattr(resources.made_embedder, "model_id", None)
    if answer is not None and hasattr(answer, "cost"):
        info["llm"] = answer.cost()
    if repairs():
        info["cache_repairs"] = repairs()  # cache files found damaged, set aside and rebuilt
    probes, timeline, info = recorder.finish(info)
    result = RunResult(out_dir, probes, timeline, info, wall, info.get("failures", []))
    yield Checkpoint(info.get("total", 0), info.get("total", 0), info.get("unit", ""), recorder.n_probes, result)


def run(spec: RunSpec, episodes: Iterable[Episode], **kwargs: Any) -> RunResult:
    """Run to the end and return the result."""
    result = None
    for cp in iter_run(spec, episodes, **kwargs):
        result = cp.result
    assert result is not None
    return result


def upfront_texts(episodes: Iterable[Episode], *, unasked: Callable[[Question], bool] | None = None) -> list[str]:
    """The distinct texts a run embeds up front (turns as rendered, questions), in first-seen order.

    Args:
        episodes: the run's episodes.
        unasked: questions for which it is true are left out (``Harness.unasked``: nothing retrieves for them).
    """
    texts: dict[str, None] = {}
    for ep in episodes:
        for e in ep.events:
            if isinstance(e, Session):
                texts.update((render_turn(t), None) for t in e.turns)
            elif isinstance(e, Question) and not (unasked is not None and unasked(e)):
                texts[e.text] = None
    return list(texts)


def doomed_texts(episodes: Iterable[Episode]) -> list[str]:
    """The texts of the turns the episodes delete, as memsim's caches may hold them (``cache_texts``)."""
    return list(dict.fromkeys(t for d in _deletions(list(episodes), ()) for t in d["texts"]))


def _embed_up_front(resources: Resources, episodes: Sequence[Episode], info: dict[str, Any], harness: Harness) -> None:
    """Embed every text the episodes will need, in large batches, into the cache before the clock starts.

    The systems then find each vector in the shared embedder's cache instead of
    embedding a session or a question at a time. ``info["embedding"]`` adds up
    the distinct texts, how many the model computed and how many were found
    cached, and the seconds spent.
    """
    embedder = resources.made_embedder
    if embedder is None:
        return
    texts = upfront_texts(episodes, unasked=harness.unasked)
    if not texts:
        return
    # A deleted turn's vector is purged from the cache once the run has played, so a rerun computes it again.
    # A vector can differ in its last bit with the batch it was computed in: these texts are purged now and
    # computed in batches of their own, so that they come out the same on a first run and on a rerun.
    doomed = set(doomed_texts(episodes))
    if doomed and harness.caches is not None:
        # Entities do not depend on their batch, and the recogniser may be filling its cache now.
        purge_caches(sorted(doomed), **{k: v for k, v in harness.caches.items() if k != "entity_caches"})
    before = embedder.stats
    t0 = time.perf_counter()
    embedder.encode([t for t in texts if t not in doomed])
    embedder.encode([t for t in texts if t in doomed])
    after = embedder.stats
    tally = info.setdefault("embedding", {"texts": 0, "embedded": 0, "cached": 0, "repaired": 0, "seconds": 0.0})
    tally["texts"] += len(texts)
    tally["embedded"] += after.misses - before.misses
    tally["cached"] += after.hits - before.hits
    tally["repaired"] = tally.get("repaired", 0) + after.repaired - before.repaired
    tally["seconds"] = round(tally["seconds"] + time.perf_counter() - t0, 3)


def entity_recognisers(suts: Sequence[SystemUnderTest]) -> list[Any]:
    """One entity recogniser per entity cache the arms' gates read (``entity_recognizer``), in arm order."""
    out: dict[str, Any] = {}
    for s in suts:
        rec = getattr(s.system, "entity_recognizer", None)
        if rec is not None and rec.cache_dir is not None:
            out.setdefault(str(rec.cache_dir), rec)
    return list(out.values())


def _turn_texts(episodes: Sequence[Episode]) -> list[str]:
    return list(dict.fromkeys(t.text for ep in episodes for e in ep.events if isinstance(e, Session) for t in e.turns))


def _recognise_up_front(suts: Sequence[SystemUnderTest], episodes: Sequence[Episode]) -> Callable[[], dict[str, Any]] | None:
    """Start recognising the entities of every turn the gated arms will see into their entity cache, or None.

    Arms whose gates recognise entities (``entity_recognizer``) otherwise each look up, and on a cold
    cache each compute, the entities of every session as it comes: twice at once for two gated arms on
    two workers. Here they are computed once, in large batches, in a process of its own while the run's
    process embeds, and every worker finds them cached. Returns the function that waits for it and says
    what was done (``run.json``'s ``entities``); a failure there is recorded and the arms compute what
    is missing themselves.
    """
    recognisers = {str(rec.cache_dir): rec for rec in entity_recognisers(suts)}
    if not recognisers:
        return None
    texts = _turn_texts(episodes)
    t0 = time.perf_counter()
    jobs = [(folder, rec.missing(texts)) for folder, rec in recognisers.items()]
    jobs = [(folder, todo) for folder, todo in jobs if todo]
    tally: dict[str, Any] = {"texts": len(texts), "recognised": 0}
    if not jobs:
        tally["seconds"] = round(time.perf_counter() - t0, 3)
        return lambda: tally
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from memsim.memory.gated import recognise_into_cache

    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    futures = [pool.submit(recognise_into_cache, folder, todo) for folder, todo in jobs]

    def wait() -> dict[str, Any]:
        try:
            for f in futures:
                tally["recognised"] += f.result()["texts"]
        except Exception as exc:  # noqa: BLE001 - the arms recognise what is missing themselves
            tally["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        tally["seconds"] = round(time.perf_counter() - t0, 3)
        return tally

    return wait


def _config(spec: RunSpec, start: datetime, *, static: bool) -> EngineConfig:
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
class _Play:
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
            config=_config(self.spec, start, static=static),
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
    """The rng state each system's build began with (``_build``)."""
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
    suts = _build_arms(spec, ctx.resources, ctx.rngs, unit.labels)
    recorder = Recorder(None)
    recorder.open(spec)
    recorder.defer_redaction = True
    p = _Play(spec, recorder, ctx.resources, ctx.scorers, ctx.answer)
    harness = p.harness(suts, clock.start, static=False)
    harness.caches = None
    harness.doses = dict(doses or {})
    env = harness.env
    start_processes(env, harness, clock.episodes)
    for rec in entity_recognisers(suts):  # the world's entities into this process in one read
        rec.missing(_turn_texts(clock.episodes))
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
            exc.partial = UnitOutcome(unit.key, *recorder.take(), _failed(suts), {})  # type: ignore[attr-defined]
            raise
    probes, timeline, failures = recorder.take()
    outcome = {
        "system_reports": _reports(suts),
        "feedback_unscored": harness.feedback_unscored,
        "feedback_told": harness.feedback_told,
        "placebo_beyond_dose": harness.beyond_dose,
        "corrections_owed": harness.owed(),
        "purges": harness.purges,
    }
    return UnitOutcome(unit.key, probes, timeline, failures, _failed(suts), outcome)


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


_PASS_KEYS = ("system_reports", "feedback_unscored", "feedback_told", "placebo_beyond_dose", "corrections_owed")
"""What each unit adds to ``run.json``, label by label."""


def _refuse_day_parts(recorder: Recorder) -> None:
    """A folder begun by a memsim that committed a longitudinal run by the day cannot be resumed by units."""
    old = [m["key"] for m in recorder.parts() if not str(m.get("key", "")).startswith("a")]
    if old and recorder.out_dir is not None and not recorder.finished:
        raise UserError(f"{recorder.out_dir}: its parts ({old[0]}, ...) were committed by the day, by an older memsim; "
                        "rerun into another --out")


def _longitudinal(
    p: _Play, episodes: Iterable[Episode], start: datetime | None, end: datetime | None
) -> Iterator[Checkpoint]:
    eps = list(episodes)
    if not eps:
        raise UserError("the scenario has no events")
    start = start or min(ep.start for ep in eps)
    last = max(ep.end for ep in eps)
    span = ((end or last) - start).total_seconds()
    total_days = max(1, math.ceil(span / 86400.0))
    # The start is the origin of the placebo's weeks: with it, anyone can check each arm's dose from the rows.
    p.info.update(totals=episode_totals(eps), span_days=round(span / 86400.0, 2), total=total_days, unit="day",
                  start=start.isoformat())
    p.clock_start = start
    rngs: list[Any] = []
    suts = _build(p.spec, p.resources, rngs)
    p.recorder.arms(suts)
    _refuse_day_parts(p.recorder)
    clock = Clock(eps, start, span, total_days)
    units = plan_units(suts)
    todo = [u for u in units if not p.recorder.is_done(u.key)]
    total = len(units) * total_days
    done = {u.key: (0 if u in todo else total_days) for u in units}
    p.entity_caches = entity_recognisers(suts)
    if todo:
        labels = {label for u in todo for label in u.labels}
        entities = _recognise_up_front([s for s in suts if s.label in labels], eps)
        _embed_up_front(p.resources, eps, p.info, p.harness([], start, static=False))
        if entities is not None:
            p.info["entities"] = entities()
        yield Checkpoint(sum(done.values()), total, "arm-day", p.recorder.n_probes)
    ctx = UnitContext(p.spec, clock, p.resources, rngs, p.scorers, p.answer)
    timing: dict[str, Any] = {}
    try:
        yield from _play_units(p, ctx, units, todo, done, total, timing)
    except UserError as exc:
        for part in [getattr(exc, "partial", None), *getattr(exc, "partials", ())]:
            if part is not None:  # kept for inspection; a rerun plays the unit again whole
                p.recorder.commit_frames(part.key, part.probes, part.timeline, part.failures, complete=False,
                                         missing=part.missing)
        raise
    how = p.workers.describe(len(todo)) if p.workers is not None else {"mode": "serial"}
    p.info["units"] = {"count": len(units), "workers": how,
                       "played": len(todo), "rule": "one per arm; the arms of HTTP systems together",
                       "timing": timing}
    for u in units:
        _merge_pass(p.info, p.recorder.part_info(u.key).get("unit") or {})
    _purge_after_play(p, _deletions(eps, p.purges))


def _play_units(p: _Play, ctx: UnitContext, units: Sequence[Unit], todo: Sequence[Unit], done: dict[str, int],
                total: int, timing: dict[str, Any]) -> Iterator[Checkpoint]:
    """Play the units ``todo`` (here, or on ``p.workers``), committing each as it ends."""
    total_days = p.info["total"]
    n_probes = 0
    play = p.workers.play if p.workers is not None else play_serial
    for event in play(ctx, todo, lambda u: _doses(p, u)):
        if isinstance(event, UnitOutcome):
            # The texts to purge are copies of deleted turns: held here, never written into the run folder.
            p.purges += event.outcome.pop("purges", None) or []
            p.recorder.commit_frames(event.key, event.probes, event.timeline, event.failures,
                                     {"unit": {**event.outcome, "arms": list(next(u.labels for u in units if u.key == event.key))}},
                                     missing=event.missing)
            n_probes += event.probes.height
            done[event.key] = total_days
            timing[event.key] = event.stats
        else:
            key, day = event
            done[key] = max(done[key], day)
        yield Checkpoint(sum(done.values()), total, "arm-day", n_probes)


def _deletions(episodes: Sequence[Episode], played: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every deletion of the run with the texts memsim's caches may hold for it, in time order.

    The deleted turns' texts come from the episodes; restatements of them (the correction channel)
    from the units played by this process (``played``: ``Harness.purges``).
    """
    turns: dict[str, Any] = {}
    out: dict[str, dict[str, Any]] = {}
    for ep in episodes:
        for e in ep.events:
            if isinstance(e, Session):
                turns.update((t.turn_id, t) for t in e.turns)
            elif isinstance(e, Deletion):
                out[e.deletion_id] = {"deletion_id": e.deletion_id, "user_id": e.user_id, "time": str(e.time),
                                      "texts": cache_texts(turns[t] for t in e.turn_ids if t in turns)}
    for entry in played:
        slot = out.get(entry["deletion_id"])
        if slot is not None:
            slot["texts"] = list(dict.fromkeys([*slot["texts"], *entry["texts"]]))
    return sorted(out.values(), key=lambda d: (d["time"], d["deletion_id"]))


def _purge_after_play(p: _Play, deletions: Sequence[Mapping[str, Any]]) -> None:
    """Purge memsim's own caches of every deleted turn once all arms have played, recording each purge.

    Workers read the shared caches while they play, each arm at its own pace: purged earlier, an arm
    still before that deletion in simulated time would find a vector gone and embed it again.
    """
    caches = p.caches()
    if caches is None:
        return
    for d in deletions:
        texts = d["texts"]
        before = audit_caches(texts, **caches)
        purged = purge_caches(texts, **caches)
        after = audit_caches(texts, **caches)
        p.info.setdefault("erasure", []).append(
            {"deletion_id": d["deletion_id"], "user_id": d["user_id"], "time": d["time"],
             "held_before": before, "purged": purged, "held_after": after, "when": "after the play"})


def _doses(p: _Play, unit: Unit) -> dict[tuple[str, str, int], list[Any]] | None:
    """A unit's placebos' doses, read from their systems' committed rows (None: the unit has no placebo)."""
    if not unit.placebo_of:
        return None
    rows = p.recorder.committed_probes(unit.needs)
    answer = p.answer
    judge_keys = tuple(answer.score_columns) if answer is not None else ()
    wanted = [c for c in ("system", "user_id", "time", "told", "reaction", "error", p.spec.metric, *judge_keys[:1])
              if c in rows.columns]
    rows = rows.select(wanted).filter(pl.col("system").is_in(sorted(unit.placebo_of)))
    config = _config(p.spec, p.clock_start, static=False)
    return placebo_doses(rows.iter_rows(named=True), set(unit.placebo_of), config, judge_keys)


def _merge_pass(info: dict[str, Any], outcome: Mapping[str, Any]) -> None:
    """Add one unit's outcome to ``run.json``'s (each arm is in one unit, so labels never collide)."""
    for key in _PASS_KEYS:
        info.setdefault(key, {}).update(outcome.get(key) or {})


def _maintained_after_ingest(ep: Episode) -> Episode:
    """The episode with one maintenance tick after its last session and before its first question.

    Static protocols ingest everything, then ask: the tick lets a system
    consolidate what it holds (as it would overnight) before it is asked.
    Static runs carry no feedback, so nothing learned from feedback acts here.
    """
    events = list(ep.events)
    first_q = next((i for i, e in enumerate(events) if isinstance(e, Question)), None)
    if first_q is None or not any(isinstance(e, Session) for e in events[:first_q]):
        return ep
    last_session = max(e.time for e in events[:first_q] if isinstance(e, Session))
    events.insert(first_q, Tick(time=max(last_session, events[first_q].time)))
    return replace(ep, events=tuple(events))


def _static(
    p: _Play, episodes: Iterable[Episode], start: datetime | None, end: datetime | None
) -> Iterator[Checkpoint]:
    total = len(episodes) if isinstance(episodes, Sequence) else None
    sums: dict[str, Any] = {}
    first: datetime | None = None
    last: datetime | None = None
    q_offset = 0
    done = 0
    for i, ep in enumerate(episodes):
        part = f"e{i:06d}"
        totals = episode_totals([ep])
        first = ep.start if first is None else min(first, ep.start)
        last = ep.end if last is None else max(last, ep.end)
        for k, v in totals.items():
            sums[k] = sums.get(k, 0) + v
        if not p.recorder.is_done(part):
            p.part = part
            suts = _build(p.spec, p.resources)
            p.recorder.arms(suts)
            harness = p.harness(suts, ep.start, static=True)
            _embed_up_front(p.resources, [ep], p.info, harness)
            harness.q_index = q_offset
            harness.episode_of = {getattr(e, "user_id"): ep.episode_id for e in ep.events}
            start_processes(harness.env, harness, [_maintained_after_ingest(ep)])
            harness.env.run()
            # A failed system is asked nothing more (its last call may never have returned).
            final = {s.label: {"items": st.items, "bytes": st.bytes}
                     for s in suts if s.failed is None for st in (s.system.stats(),)}
            p.recorder.commit(
                part, {"episode": ep.episode_id, "totals": totals, "stats": final, "reports": _reports(suts)},
                missing=_failed(suts),
            )
            p.part = None
        q_offset += totals["questions"]
        done += 1
        yield Checkpoint(done, total, "episode", p.recorder.n_probes)
    if done == 0:
        raise UserError("the benchmark has no episodes (nothing selected from the file)")
    # Users are counted per episode (an episode's user ids are its own).
    span = ((last or first) - first).total_seconds() if first else 0.0  # type: ignore[operator]
    p.info.update(totals=sums, span_days=round(span / 86400.0, 2), total=done, unit="episode")
