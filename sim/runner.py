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
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
import simpy

from memsim.memory.base import render_turn
from memsim.memory.guard import GuardedSystem, SystemCallFailed
from memsim.memory.registry import Resources, build_memory, learns_from_feedback
from memsim.sim.engine import EngineConfig, Harness, SystemUnderTest, placebo_doses, start_processes
from memsim.sim.core.errors import UserError
from memsim.sim.core.heal import repairs
from memsim.sim.core.streams import streams
from memsim.sim.events import Deletion, Episode, Question, Session, Tick
from memsim.sim.inline_guard import InlineGuardedSystem, inline_possible
from memsim.sim.load import Load
from memsim.sim.recorder import Recorder
from memsim.sim.scorers import build_scorer
from memsim.sim.spec import RunSpec, speaks_in_turns

__all__ = ["Checkpoint", "RunResult", "iter_run", "run", "episode_totals", "upfront_texts", "passes", "play_pass"]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Progress after a simulated day (longitudinal) or an episode (static); the last carries the result."""

    done: int
    """Days or episodes done."""
    total: int | None
    """Days or episodes in the run (None while a streamed file is still being read)."""
    unit: str
    """``day`` or ``episode``."""
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


def _build(spec: RunSpec, resources: Resources) -> list[SystemUnderTest]:
    """The spec's systems in order, then their twins (each built from the rng state its system saw)."""
    suts: list[SystemUnderTest] = []
    twins: list[SystemUnderTest] = []
    for s in spec.systems:
        before = resources.fork()
        try:
            suts.append(SystemUnderTest(s.name, s.display, _system(spec, s.name, s.args, resources, s.display)))
            for suffix, mode in _twins(spec, s.name, s.args):
                twin = _system(spec, s.name, s.args, before.fork(), s.display + suffix)
                twins.append(SystemUnderTest(s.name, s.display + suffix, twin, feedback=mode, twin_of=s.display))
        except (ValueError, ImportError) as exc:
            raise UserError(f"cannot build system {s.display!r}: {exc}") from None
    return suts + twins


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
    p = _Play(spec, recorder, resources, list(scorers), answer)
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
    before = embedder.stats
    t0 = time.perf_counter()
    embedder.encode(texts)
    after = embedder.stats
    tally = info.setdefault("embedding", {"texts": 0, "embedded": 0, "cached": 0, "repaired": 0, "seconds": 0.0})
    tally["texts"] += len(texts)
    tally["embedded"] += after.misses - before.misses
    tally["cached"] += after.hits - before.hits
    tally["repaired"] = tally.get("repaired", 0) + after.repaired - before.repaired
    tally["seconds"] = round(tally["seconds"] + time.perf_counter() - t0, 3)


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
        return out or None


def passes(suts: Sequence[SystemUnderTest]) -> list[list[SystemUnderTest]]:
    """The arms in the passes that play them: first those that need nothing from another arm, then the placebos.

    A placebo's bits are its system's told bits, so its system's whole pass must be played
    first. Within a pass the arms keep the order they were built in.
    """
    first = [s for s in suts if s.feedback != "shuffled"]
    placebos = [s for s in suts if s.feedback == "shuffled"]
    return [first, placebos] if placebos else [first]


def _part_key(index: int, part: str) -> str:
    """The key of a pass's part: the first pass's as before passes existed, later ones prefixed (``p1-``)."""
    return part if index == 0 else f"p{index}-{part}"


@dataclass
class _Clock:
    """A longitudinal run's simulated span, shared by its passes."""

    episodes: list[Episode]
    start: datetime
    span: float
    """Seconds from the start to the end of the run."""
    days: int
    """Simulated days (parts of one pass, besides its ``end``)."""

    def keys(self, index: int) -> list[str]:
        """The part keys of pass ``index``, in the order they are committed."""
        return [_part_key(index, f"d{day:06d}") for day in range(1, self.days + 1)] + [_part_key(index, "end")]


def play_pass(
    p: _Play, clock: _Clock, index: int, suts: list[SystemUnderTest], *, of: int = 1,
    doses: Mapping[tuple[str, str, int], Sequence[Any]] | None = None, embed: bool = True,
) -> Iterator[Checkpoint]:
    """Play every episode against the arms ``suts`` on a clock of their own, committing a part per day.

    Args:
        p: the run being played.
        clock: its span.
        index: the pass's number (0 first): its parts are keyed by it.
        suts: the arms of this pass (no arm of another pass is touched).
        of: how many passes the run has (for the checkpoints' counts).
        doses: the placebos' bits (``memsim.sim.engine.placebo_doses``); none for a pass without placebos.
        embed: embed the run's texts up front first (the first pass played in a process does).

    The pass's own outcome (feedback counts, cache purges, the arms' reports) is kept with its
    ``end`` part, so a resumed run that finds the pass committed reads it instead of playing it.
    """
    total = of * clock.days
    harness = p.harness(suts, clock.start, static=False)
    harness.doses = dict(doses or {})
    if embed:
        _embed_up_front(p.resources, clock.episodes, p.info, harness)
    env = harness.env
    start_processes(env, harness, clock.episodes)
    for day in range(1, clock.days + 1):
        p.part = _part_key(index, f"d{day:06d}")
        env.run(until=min(day * 86400.0, clock.span) if day < clock.days else clock.span + 1e-6)
        p.recorder.commit(p.part, missing=_failed(suts))
        yield Checkpoint(index * clock.days + day, total, "day", p.recorder.n_probes)
    # Feedback still in flight at the end is delivered so systems end in a defined state.
    p.part = _part_key(index, "end")
    until = clock.span + harness.config.feedback_delay_s + 1.0
    env.run(until=until)
    while harness.load is not None and harness.load.in_flight:
        # Under load, queues can outlast the scenario: play on until every job is done and its feedback given.
        until += 3600.0
        env.run(until=until)
    if harness.load is not None:
        env.run(until=until + harness.config.feedback_delay_s + 1.0)
    outcome = {
        "system_reports": _reports(suts),
        "erasure": [{**e, "pass": index} for e in harness.erasures],
        "feedback_unscored": harness.feedback_unscored,
        "feedback_told": harness.feedback_told,
        "placebo_beyond_dose": harness.beyond_dose,
        "corrections_owed": harness.owed(),
    }
    p.recorder.commit(p.part, {"pass": outcome}, missing=_failed(suts))
    p.part = None


_PASS_KEYS = ("system_reports", "feedback_unscored", "feedback_told", "placebo_beyond_dose", "corrections_owed")
"""What each pass adds to ``run.json``, label by label (``erasure`` entries are listed)."""


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
    suts = _build(p.spec, p.resources)
    p.recorder.arms(suts)
    clock = _Clock(eps, start, span, total_days)
    groups = passes(suts)
    embedded = False
    for index, group in enumerate(groups):
        keys = clock.keys(index)
        if all(p.recorder.is_done(k) for k in keys):
            # Committed whole by an earlier process: its rows and outcome are on disk.
            yield Checkpoint((index + 1) * total_days, len(groups) * total_days, "day", p.recorder.n_probes)
        else:
            doses = None
            if any(s.feedback == "shuffled" for s in group):
                doses = _doses(p, clock, {s.twin_of or s.label for s in group if s.feedback == "shuffled"})
            yield from play_pass(p, clock, index, group, of=len(groups), doses=doses, embed=not embedded)
            embedded = True
        _merge_pass(p.info, p.recorder.part_info(keys[-1]).get("pass") or {})


def _doses(p: _Play, clock: _Clock, systems: set[str]) -> dict[tuple[str, str, int], list[Any]]:
    """The placebos' doses, read from their systems' committed rows of the first pass."""
    rows = p.recorder.committed_probes(clock.keys(0))
    answer = p.answer
    judge_keys = tuple(answer.score_columns) if answer is not None else ()
    wanted = [c for c in ("system", "user_id", "time", "told", "reaction", "error", p.spec.metric, *judge_keys[:1])
              if c in rows.columns]
    rows = rows.select(wanted).filter(pl.col("system").is_in(sorted(systems)))
    config = _config(p.spec, clock.start, static=False)
    return placebo_doses(rows.iter_rows(named=True), systems, config, judge_keys)


def _merge_pass(info: dict[str, Any], outcome: Mapping[str, Any]) -> None:
    """Add one pass's outcome to ``run.json``'s (each arm is in one pass, so labels never collide)."""
    for key in _PASS_KEYS:
        info.setdefault(key, {}).update(outcome.get(key) or {})
    if outcome.get("erasure"):
        info.setdefault("erasure", []).extend(outcome["erasure"])


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
            final = {s.label: {"items": s.system.stats().items, "bytes": s.system.stats().bytes} for s in suts}
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
