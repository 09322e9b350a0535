"""SimPy processes that replay a scenario against every system under test.

One process per user (``user_timeline``) waits until each of that user's
events is due and hands it to the ``Harness``, which delivers it to every
system in the same order. A question is retrieved and scored for every system
before any feedback about it exists; the feedback is a separate process
(``delayed_feedback``) that waits out the configured delay. Maintenance is
its own process (``maintenance``). Systems see turns, question text, a
correctness signal, deletion requests and ticks: never gold fields. The one
exception is instruments (``memory.inject``): a ``control-`` system with an
``oracle`` method is handed the question's evidence ids just before it
retrieves, so that a known effect can be injected.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import simpy

from memory.base import MemorySystem, Retrieved, render_turn
from memory.inject import receives_gold
from memory.registry import SystemSpec
from sim.errors import UserError
from sim.events import Deletion, Event, Feedback, Question, Session, Tick
from sim.recorder import Recorder
from sim.scoring import DEFAULT_KS, evidence_scores, first_evidence_rank, stale_above_current

__all__ = [
    "SystemUnderTest",
    "EngineConfig",
    "Harness",
    "user_timeline",
    "delayed_feedback",
    "maintenance",
    "turn_maps",
    "start_processes",
]

AnswerFn = Callable[..., Mapping[str, Any]]


@dataclass(slots=True)
class SystemUnderTest:
    """A built system, its spec, and whether it has failed."""

    spec: SystemSpec
    system: MemorySystem
    failed: str | None = None
    """The error that stopped it, if any; a failed system receives no more events."""

    @property
    def label(self) -> str:
        """The system's key in rows and tables."""
        return self.spec.display

    @property
    def receives_gold(self) -> bool:
        """Whether this is an instrument that gets gold evidence (``memory.inject.receives_gold``)."""
        return receives_gold(self.spec.name, self.system)


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """How the harness scores and when it gives feedback."""

    start: datetime
    """Simulated time zero."""
    k: int = 10
    """Memories retrieved per question; the headline metric is ``recall_all@k``."""
    ks: tuple[int, ...] = DEFAULT_KS
    """Cut-offs scored (``k`` is always added; cut-offs above k are scored on the k results)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "ks", tuple(sorted({*self.ks, self.k})))
    feedback_delay_s: float = 3600.0
    """Seconds between a question and its feedback."""
    feedback_from: str = "evidence"
    """What ``correct`` means: ``evidence`` (recall_all@k = 1) or ``answer`` (first judge >= 0.5)."""
    maintenance_every_s: float = 86400.0
    """Seconds between maintenance ticks (0 = none)."""


@dataclass
class Harness:
    """Delivers each event to every system, scores questions and records rows."""

    env: simpy.Environment
    systems: Sequence[SystemUnderTest]
    recorder: Recorder
    config: EngineConfig
    turn_owner: Mapping[str, str]
    """turn_id -> user_id of every turn in the scenario (for isolation checks)."""
    turn_text: Mapping[str, str]
    """turn_id -> text (for probing deletions)."""
    answer: AnswerFn | None = None
    """Optional reader + judges: ``answer(question, question_date, memories, gold, category, question_id)``."""
    judge_keys: tuple[str, ...] = ()
    prepare: Callable[[Sequence[str]], Any] | None = None
    """Optional shared pre-step (the run's embedder): called with the texts of a
    session or question before any system sees them, so that the first system
    in the list does not pay for embedding texts every dense system shares.
    Its time is recorded as ``embed_ms``; latencies of systems exclude it."""
    _q_index: int = 0
    _deleted: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    _threads: dict[str, str] = field(default_factory=dict)

    # -- helpers ----------------------------------------------------------

    def now(self) -> datetime:
        """The simulated wall clock."""
        return self.config.start + timedelta(seconds=self.env.now)

    def t_days(self) -> float:
        """Simulated days since the start."""
        return self.env.now / 86400.0

    def _live(self) -> list[SystemUnderTest]:
        return [s for s in self.systems if s.failed is None]

    def _fail(self, sut: SystemUnderTest, operation: str, exc: BaseException) -> None:
        msg = f"{type(exc).__name__}: {exc}"
        sut.failed = f"{operation} at day {self.t_days():.2f}: {msg}"
        self.recorder.failure(sut.label, self.now(), operation, msg)

    # -- events -----------------------------------------------------------

    def handle(self, event: Event) -> None:
        """Deliver one scenario event to every live system."""
        if isinstance(event, Session):
            self.session(event)
        elif isinstance(event, Question):
            self.question(event)
        elif isinstance(event, Deletion):
            self.deletion(event)
        elif isinstance(event, Tick):
            self.maintain()
        else:  # pragma: no cover - scenarios yield only the four kinds
            raise TypeError(f"unknown event {event!r}")

    def _prepare(self, texts: Sequence[str]) -> float:
        if self.prepare is None or not texts:
            return 0.0
        t0 = time.perf_counter()
        self.prepare(texts)
        return (time.perf_counter() - t0) * 1000.0

    def session(self, event: Session) -> None:
        """Ingest a session's turns into every system and record its footprint."""
        now = event.time
        embed_ms = self._prepare([render_turn(t) for t in event.turns])
        for sut in self._live():
            t0 = time.perf_counter()
            try:
                sut.system.ingest(event.turns, user_id=event.user_id, now=now)
                stats = sut.system.stats()
            except Exception as exc:  # a failing system must not stop the others
                self._fail(sut, "ingest", exc)
                continue
            ms = (time.perf_counter() - t0) * 1000.0
            self._timeline(sut, event.user_id, "session", stats, ingest_ms=ms, embed_ms=embed_ms, turns=len(event.turns))

    def question(self, q: Question) -> None:
        """Retrieve for the question in every system, score it, schedule feedback."""
        index = self._q_index
        self._q_index += 1
        k = self.config.k
        embed_ms = self._prepare([q.text])
        for sut in self._live():
            t0 = time.perf_counter()
            try:
                if sut.receives_gold:
                    # The one gold side channel: instruments only (see memory.inject).
                    sut.system.oracle(q.question_id, q.evidence, user_id=q.user_id, t_days=self.t_days())  # type: ignore[attr-defined]
                got = sut.system.retrieve(q.text, user_id=q.user_id, now=q.time, k=k)
            except Exception as exc:
                self._fail(sut, "retrieve", exc)
                continue
            ms = (time.perf_counter() - t0) * 1000.0
            row = self._score(q, index, got, ms, sut.label)
            row["embed_ms"] = embed_ms
            if self.answer is not None:
                try:
                    row.update(self.answer(q.text, q.time, got, q.gold, q.kind, q.question_id))
                except UserError as exc:
                    # The endpoint is gone (retries spent): keep this row and stop the run;
                    # the runner writes every row recorded so far.
                    row["system"] = sut.label
                    row["error"] = f"answer: {exc}"
                    self.recorder.probe(row)
                    raise
                except Exception as exc:
                    row["error"] = f"answer: {type(exc).__name__}: {exc}"
            row["system"] = sut.label
            self.recorder.probe(row)
            correct = self._correct(row)
            self.env.process(delayed_feedback(self.env, self, sut, q, [m.memory_id for m in got], correct))

    def _thread(self, q: Question) -> str:
        """Id of the first asking of a question that is asked again (itself otherwise)."""
        root = self._threads.get(q.reask_of, q.reask_of) if q.reask_of else q.question_id
        self._threads[q.question_id] = root
        return root

    def _correct(self, row: Mapping[str, Any]) -> bool:
        if self.config.feedback_from == "answer" and self.judge_keys:
            value = row.get(self.judge_keys[0])
            return bool(value is not None and not math.isnan(value) and value >= 0.5)
        return bool(row["evidence"] >= 1.0)

    def _score(self, q: Question, index: int, got: list[Retrieved], ms: float, label: str) -> dict[str, Any]:
        prov = [m.source_turn_ids for m in got]
        scores = evidence_scores(prov, q.evidence, self.config.ks)
        owner = self.turn_owner
        isolation = sum(1 for m in got for t in m.source_turn_ids if owner.get(t, q.user_id) != q.user_id)
        deleted = self._deleted.get((label, q.user_id), set())
        leaks = sum(1 for m in got if deleted.intersection(m.source_turn_ids))
        return {
            "user_id": q.user_id,
            "question_id": q.question_id,
            "q_index": index,
            "time": q.time,
            "t_days": self.t_days(),
            "kind": q.kind,
            "topic": q.topic,
            "reask": q.reask_of is not None,
            "thread_id": self._thread(q),
            "question": q.text,
            "gold": q.gold,
            "evidence_ids": list(q.evidence),
            "superseded_ids": list(q.superseded),
            "evidence": scores[f"recall_all@{self.config.k}"],
            "first_rank": first_evidence_rank(prov, q.evidence),
            "stale_above_current": stale_above_current(prov, q.evidence, q.superseded),
            "retrieve_ms": ms,
            "n_retrieved": len(got),
            "retrieved_ids": [m.memory_id for m in got],
            "retrieved_sources": [list(p) for p in prov],
            "retrieved_text": [m.text for m in got],
            "isolation_failures": isolation,
            "deleted_leaks": leaks,
            "error": None,
            **scores,
        }

    def deliver_feedback(self, sut: SystemUnderTest, fb: Feedback, retrieved: Sequence[str]) -> None:
        """Hand a question's correctness signal to one system."""
        if sut.failed is not None:
            return
        try:
            sut.system.feedback(fb.question_id, list(retrieved), fb.correct, user_id=fb.user_id, now=fb.time)
        except Exception as exc:
            self._fail(sut, "feedback", exc)

    def deletion(self, event: Deletion) -> None:
        """Forget the turns in every system, then probe that nothing derived from them comes back."""
        gone = set(event.turn_ids)
        for sut in self._live():
            try:
                sut.system.forget(event.turn_ids, user_id=event.user_id, now=event.time)
                leaked = 0
                for tid in event.turn_ids:
                    text = self.turn_text.get(tid)
                    if text is None:
                        continue
                    got = sut.system.retrieve(text, user_id=event.user_id, now=event.time, k=self.config.k)
                    leaked += sum(1 for m in got if gone.intersection(m.source_turn_ids))
                stats = sut.system.stats()
            except Exception as exc:
                self._fail(sut, "forget", exc)
                continue
            self._deleted.setdefault((sut.label, event.user_id), set()).update(gone)
            self._timeline(sut, event.user_id, "forget", stats, leaked=leaked, turns=len(gone))

    def maintain(self) -> None:
        """Run every system's maintenance and record its footprint."""
        now = self.now()
        for sut in self._live():
            t0 = time.perf_counter()
            try:
                sut.system.maintain(now=now)
                stats = sut.system.stats()
            except Exception as exc:
                self._fail(sut, "maintain", exc)
                continue
            ms = (time.perf_counter() - t0) * 1000.0
            self._timeline(sut, "", "tick", stats, ingest_ms=ms)

    def _timeline(self, sut: SystemUnderTest, user_id: str, kind: str, stats: Any, **extra: Any) -> None:
        self.recorder.timeline(
            {
                "system": sut.label,
                "user_id": user_id,
                "time": self.now(),
                "t_days": self.t_days(),
                "event": kind,
                "items": stats.items,
                "bytes": stats.bytes,
                "vector_bytes": stats.vector_bytes,
                "text_bytes": stats.text_bytes,
                "metadata_bytes": stats.metadata_bytes,
                "llm_calls": stats.llm_calls,
                "tokens": stats.tokens,
                **extra,
            }
        )


def user_timeline(env: simpy.Environment, harness: Harness, events: Iterable[Event]) -> Any:
    """One user's life: wait for each event's time, then hand it to the harness."""
    start = harness.config.start
    for event in events:
        due = (event.time - start).total_seconds()
        if due > env.now:
            yield env.timeout(due - env.now)
        harness.handle(event)


def delayed_feedback(
    env: simpy.Environment, harness: Harness, sut: SystemUnderTest, q: Question, retrieved: Sequence[str], correct: bool
) -> Any:
    """Deliver a question's correctness signal after the configured delay."""
    yield env.timeout(harness.config.feedback_delay_s)
    fb = Feedback(question_id=q.question_id, user_id=q.user_id, time=harness.now(), correct=correct)
    harness.deliver_feedback(sut, fb, retrieved)


def maintenance(env: simpy.Environment, harness: Harness, every_s: float) -> Any:
    """Call every system's ``maintain`` on a fixed schedule."""
    while True:
        yield env.timeout(every_s)
        harness.maintain()


def start_processes(env: simpy.Environment, harness: Harness, events: Iterable[Event]) -> None:
    """One ``user_timeline`` per user, plus ``maintenance`` when it is scheduled."""
    by_user: dict[str, list[Event]] = {}
    for e in events:
        by_user.setdefault(e.user_id, []).append(e)  # type: ignore[union-attr]
    for user_events in by_user.values():
        env.process(user_timeline(env, harness, user_events))
    if harness.config.maintenance_every_s > 0:
        env.process(maintenance(env, harness, harness.config.maintenance_every_s))


def turn_maps(events: Iterable[Event]) -> tuple[dict[str, str], dict[str, str]]:
    """turn_id -> user_id and turn_id -> text for every turn in ``events``."""
    owner: dict[str, str] = {}
    text: dict[str, str] = {}
    for e in events:
        if isinstance(e, Session):
            for t in e.turns:
                owner[t.turn_id] = t.user_id
                text[t.turn_id] = t.text
    return owner, text

