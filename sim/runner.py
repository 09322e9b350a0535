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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from memsim.memory.registry import Resources
from memsim.sim.erasure import audit_caches, purge_caches
from memsim.sim.engine import placebo_doses, start_processes
from memsim.core.errors import UserError
from memsim.core.heal import repairs
from memsim.core.streams import streams
from memsim.sim.events import Deletion, Episode, Question, Session, Tick
from memsim.sim.recorder import Recorder
from memsim.sim.scorers import build_scorer
from memsim.sim.spec import RunSpec
from memsim.sim.building import arm_reports, arms_of, build_systems, failed_arms
from memsim.sim.units import (Clock, Play, Unit, UnitContext, UnitOutcome, engine_config, one_thread, passes,
                              plan_units, play_serial, unit_steps)
from memsim.sim.upfront import deletions_of, embed_up_front, entity_recognisers, recognise_up_front, upfront_texts

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
    p = Play(spec, recorder, resources, list(scorers), answer, workers=workers)
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


_PASS_KEYS = ("system_reports", "feedback_unscored", "feedback_told", "placebo_beyond_dose", "corrections_owed")
"""What each unit adds to ``run.json``, label by label."""


def _refuse_day_parts(recorder: Recorder) -> None:
    """A folder begun by a memsim that committed a longitudinal run by the day cannot be resumed by units."""
    old = [m["key"] for m in recorder.parts() if not str(m.get("key", "")).startswith("a")]
    if old and recorder.out_dir is not None and not recorder.finished:
        raise UserError(f"{recorder.out_dir}: its parts ({old[0]}, ...) were committed by the day, by an older memsim; "
                        "rerun into another --out")


def _longitudinal(
    p: Play, episodes: Iterable[Episode], start: datetime | None, end: datetime | None
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
    suts = build_systems(p.spec, p.resources, rngs)
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
        entities = recognise_up_front([s for s in suts if s.label in labels], eps)
        embed_up_front(p.resources, eps, p.info, p.harness([], start, static=False))
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
    _purge_after_play(p, deletions_of(eps, p.purges))


def _play_units(p: Play, ctx: UnitContext, units: Sequence[Unit], todo: Sequence[Unit], done: dict[str, int],
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


def _purge_after_play(p: Play, deletions: Sequence[Mapping[str, Any]]) -> None:
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


def _doses(p: Play, unit: Unit) -> dict[tuple[str, str, int], list[Any]] | None:
    """A unit's placebos' doses, read from their systems' committed rows (None: the unit has no placebo)."""
    if not unit.placebo_of:
        return None
    rows = p.recorder.committed_probes(unit.needs)
    answer = p.answer
    judge_keys = tuple(answer.score_columns) if answer is not None else ()
    wanted = [c for c in ("system", "user_id", "time", "told", "reaction", "error", p.spec.metric, *judge_keys[:1])
              if c in rows.columns]
    rows = rows.select(wanted).filter(pl.col("system").is_in(sorted(unit.placebo_of)))
    config = engine_config(p.spec, p.clock_start, static=False)
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
    p: Play, episodes: Iterable[Episode], start: datetime | None, end: datetime | None
) -> Iterator[Checkpoint]:
    total = len(episodes) if isinstance(episodes, Sequence) else None
    sums: dict[str, Any] = {}
    first: datetime | None = None
    last: datetime | None = None
    q_offset = 0
    done = 0
    seen: set[bytes] = set()  # texts embedded up front for an earlier episode (episodes may share them)
    for i, ep in enumerate(episodes):
        part = f"e{i:06d}"
        totals = episode_totals([ep])
        first = ep.start if first is None else min(first, ep.start)
        last = ep.end if last is None else max(last, ep.end)
        for k, v in totals.items():
            sums[k] = sums.get(k, 0) + v
        if not p.recorder.is_done(part):
            p.part = part
            suts = build_systems(p.spec, p.resources)
            p.recorder.arms(suts)
            harness = p.harness(suts, ep.start, static=True)
            embed_up_front(p.resources, [ep], p.info, harness, seen=seen)
            harness.q_index = q_offset
            harness.episode_of = {getattr(e, "user_id"): ep.episode_id for e in ep.events}
            start_processes(harness.env, harness, [_maintained_after_ingest(ep)])
            harness.env.run()
            # A failed system is asked nothing more (its last call may never have returned).
            final = {s.label: {"items": st.items, "bytes": st.bytes}
                     for s in suts if s.failed is None for st in (s.system.stats(),)}
            p.recorder.commit(
                part, {"episode": ep.episode_id, "totals": totals, "stats": final, "reports": arm_reports(suts)},
                missing=failed_arms(suts),
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
