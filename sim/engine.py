"""SimPy processes that play episodes against every system under test.

One process per episode (``episode_timeline``) waits until each of its
events is due and hands it to the ``Harness``, which delivers it to every
system in the same order. A question is retrieved and scored for every system
before any feedback about it exists; the feedback is a separate process
(``delayed_feedback``) that waits out the configured delay. Maintenance is
its own process (``maintenance``). Systems see turns, question text, a
correctness signal, deletion requests and ticks: never gold fields.

Every arm's row records the bit its channel carried (``told``), so the dose
each arm got can be checked from the rows. A system is told its channel's
verdict; a twin nothing; an ``always_false`` / ``always_true`` arm a constant
bit on the same questions; a **placebo** the bits its system was told,
permuted within the same user and the same week (``placebo_doses``, read from
the system's rows of an earlier pass), so it gets the same number of calls
and of True bits per user and week, unrelated to its own answers.

Turns the engine writes itself (a ``correction`` restatement, an
``implicit`` reaction) get fresh opaque ids and no metadata. A restatement
states a *fact* in new words (``restatement``: the question and its gold
answer in one of ``CORRECTION_FRAMES``), never the text, id or metadata of
the turn it came from. It is a new turn: retrieval scores count only the
scenario's evidence turns, so retrieving a restatement is never read as
retrieving gold (a reader may still answer from it). Only the harness's
private map knows which evidence a restatement states, so that a deletion
forgets it with that evidence. A question that is not scored (NaN metric or
judge score, an answer error) sends no feedback at all; the harness counts
it (``feedback_unscored``). The one exception is instruments
(``memsim.memory.inject``): a ``control-`` system with an ``oracle`` method
is handed the question's evidence ids just before it retrieves, so that a
known effect can be injected.

Scoring is done by the run's scorers (``memsim.sim.scorers``); the harness itself
adds only what every row has: who asked what, what came back, how long it
took, and the safety counts (isolation failures, deletion leaks).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import simpy

from memsim.core.errors import UserError
from memsim.memory.base import Retrieved, Turn, render_turn
from memsim.sim.arms import (CORRECTION_FRAMES, FEEDBACK_MODES, Dose, EngineConfig, SystemUnderTest,
                             placebo_doses, restatement, verdict_of, week_of)
from memsim.sim.erasure import CopyFinder
from memsim.sim.events import Deletion, Episode, Event, Feedback, Question, Session, Tick
from memsim.sim.feedback_loop import FeedbackRules
from memsim.sim.forgetting import Forgetting
from memsim.sim.implicit import behaviour, react, read_reaction, say
from memsim.sim.load import Load
from memsim.sim.recorder import Recorder
from memsim.sim.scorers import Scorer

__all__ = [
    "SystemUnderTest",
    "EngineConfig",
    "CORRECTION_FRAMES",
    "FEEDBACK_MODES",
    "Dose",
    "restatement",
    "verdict_of",
    "week_of",
    "placebo_doses",
    "Harness",
    "episode_timeline",
    "delayed_feedback",
    "delayed_reaction",
    "maintenance",
    "start_processes",
]

AnswerFn = Callable[..., Mapping[str, Any]]

@dataclass
class Harness(FeedbackRules, Forgetting):
    """Delivers each event to every system, scores questions and records rows."""

    env: simpy.Environment
    systems: Sequence[SystemUnderTest]
    recorder: Recorder
    config: EngineConfig
    scorers: Sequence[Scorer]
    answer: AnswerFn | None = None
    """Optional reader + judges: ``answer(question, question_date, memories, gold, category, question_id)``."""
    judge_keys: tuple[str, ...] = ()
    prepare: Callable[[Sequence[str]], Any] | None = None
    """Optional shared pre-step (the run's embedder): called with the texts of a
    session or question before any system sees them, so that the first system
    in the list does not pay for embedding texts every dense system shares.
    Its time is recorded as ``embed_ms``; latencies of systems exclude it."""
    episode_of: Mapping[str, str] = field(default_factory=dict)
    """user_id -> episode id (the ``episode`` column)."""
    caches: Mapping[str, Any] | None = None
    """memsim's own caches to purge after a deletion (``memsim.sim.erasure.purge_caches`` keywords); None: none."""
    erasures: list[dict[str, Any]] = field(default_factory=list)
    """One entry per deletion whose caches were purged: what they held before, what was purged, what is left."""
    purges: list[dict[str, Any]] = field(default_factory=list)
    """Without ``caches``: one entry per deletion, with the texts the run's caches are to be purged of
    (``purge_texts``) once every arm has played."""
    load: Load | None = None
    """Bounded services (``memsim.sim.load``): sessions and questions queue for them; None: no queueing."""
    q_index: int = 0
    """Questions asked so far (the next question's index)."""
    turn_owner: dict[str, str] = field(default_factory=dict)
    """turn_id -> user_id of every turn played so far (for isolation checks)."""
    turn_text: dict[str, str] = field(default_factory=dict)
    """turn_id -> text of every turn played so far (for probing deletions)."""
    _turns: dict[str, Turn] = field(default_factory=dict)
    _deleted: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    _deleted_text: dict[tuple[str, str], CopyFinder] = field(default_factory=dict)
    """(label, user) -> the texts of the turns deleted for that arm and user, searched for in every retrieval
    (less what the user said again in turns they kept: ``CopyFinder``'s ``said``)."""
    _deleted_texts: dict[str, list[str]] = field(default_factory=dict)
    """user -> texts of the user's turns deleted so far."""
    _user_finder: dict[str, CopyFinder] = field(default_factory=dict)
    """user -> the finder of that user's deleted texts, told what the user says again after the deletion."""
    _user_turns: dict[str, list[str]] = field(default_factory=dict)
    """user -> ids of the scenario's turns the user has said, in order."""
    _threads: dict[str, str] = field(default_factory=dict)
    _rngs: dict[str, np.random.Generator] = field(default_factory=dict)
    doses: Mapping[tuple[str, str, int], Sequence[Dose]] = field(default_factory=dict)
    """The placebos' bits: (system label, user, week) -> doses (``placebo_doses``, from an earlier pass's rows)."""
    _dosed: dict[tuple[str, str, int], int] = field(default_factory=dict)
    """(placebo label, user, week) -> doses used so far."""
    beyond_dose: dict[str, int] = field(default_factory=dict)
    """placebo label -> scored questions past its system's dose in their window (told nothing; see ``finish_one``)."""
    feedback_unscored: dict[str, int] = field(default_factory=dict)
    """label -> questions whose feedback was not sent because they were not scored."""
    feedback_told: dict[str, dict[str, int]] = field(default_factory=dict)
    """label -> ``"right>true"``-style counts: the channel's verdict against the bit the arm was told
    (the row's ``told``; ``none``: nothing), so a channel's agreement with what it knows is measured, not assumed."""
    _owed: dict[tuple[str, str], list[Question]] = field(default_factory=dict)
    """(label, user) -> questions whose correction is owed: the user had no other fact to restate yet."""
    _asked: dict[str, list[tuple[Question, str]]] = field(default_factory=dict)
    """user -> (question, thread) asked so far, in order: the facts a placebo's correction may restate."""
    _superseded: dict[str, set[str]] = field(default_factory=dict)
    """user -> turn ids a question asked so far names as superseded (their facts are no longer current)."""
    _gone: dict[str, set[str]] = field(default_factory=dict)
    """user -> turn ids the user asked to forget (their facts are never restated)."""
    _corrections: dict[tuple[str, str], list[Turn]] = field(default_factory=dict)
    _restated: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    """(label, evidence turn id) -> ids of that arm's restatements of the fact the turn holds."""
    _restates: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Restatement id -> the evidence turns of the fact it states: the private map, used by deletions only."""

    def __post_init__(self) -> None:
        if self.config.feedback_from == "answer" and not self.judge_keys:
            # Without a judge there is no answer verdict; falling back to the oracle bit would mislabel the run.
            raise UserError('feedback_from = "answer" needs a reader and a judge; this run has none '
                            '(name a reader with --reader short|cot, or choose another channel)')

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
        """Deliver one event to every live system."""
        if self.load is not None and isinstance(event, (Session, Question)):
            # Under load each system's copy of the event queues for its services (load_dispatch).
            load_dispatch(self.load, self, event)
        elif isinstance(event, Session):
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
        embed_ms = self.arrive(event)
        for sut in self._live():
            done = self.ingest_one(sut, event)
            if done is not None:
                ms, stats, n = done
                self._timeline(sut, event.user_id, "session", stats, ingest_ms=ms, embed_ms=embed_ms, turns=n)

    def arrive(self, event: Session) -> float:
        """Note a session's turns (owners, texts) and embed them once for every system; the embed time in ms."""
        for t in event.turns:
            self.turn_owner[t.turn_id] = t.user_id
            self.turn_text[t.turn_id] = t.text
            self._turns[t.turn_id] = t
            self._user_turns.setdefault(t.user_id, []).append(t.turn_id)
            finder = self._user_finder.get(t.user_id)
            if finder is not None:  # a phrase of a deleted turn the user says again is theirs to keep
                finder.said_again((t.text,))
        return self._prepare([render_turn(t) for t in event.turns])

    def ingest_one(self, sut: SystemUnderTest, event: Session) -> tuple[float, Any, int] | None:
        """Ingest a session into one system: (wall ms, its stats after, turns ingested), or None when it failed."""
        now = event.time
        turns = event.turns
        restated = self._corrections.pop((sut.label, event.user_id), None)
        if restated:
            # The user restates, at the start of this session, what this system got wrong.
            turns = (*(replace(t, created_at=now, session_id=event.session_id) for t in restated), *turns)
            for t in restated:
                self.turn_owner[t.turn_id] = t.user_id
                self.turn_text[t.turn_id] = t.text
        t0 = time.perf_counter()
        try:
            sut.system.ingest(turns, user_id=event.user_id, now=now)
            ms = (time.perf_counter() - t0) * 1000.0  # the ingest alone, not the stats read after it
            stats = sut.system.stats()
        except Exception as exc:  # a failing system must not stop the others
            self._fail(sut, "ingest", exc)
            return None
        return ms, stats, len(turns)

    def question(self, q: Question) -> None:
        """Retrieve for the question in every system, score it, schedule feedback."""
        index, thread, embed_ms = self.ask(q)
        for sut in self._live():
            got = self.retrieve_one(sut, q, index, thread, embed_ms)
            if got is None:
                continue
            row, memories = got
            self.answer_one(row, q, memories)
            self.finish_one(sut, q, row, memories)

    def ask(self, q: Question) -> tuple[int, str, float]:
        """Give an arriving question its index and thread and embed its text once: (index, thread, embed ms)."""
        index = self.q_index
        self.q_index += 1
        embed_ms = 0.0 if self.unasked(q) else self._prepare([q.text])
        thread = self._thread(q)
        self._asked.setdefault(q.user_id, []).append((q, thread))
        if q.superseded:
            self._superseded.setdefault(q.user_id, set()).update(q.superseded)
        return index, thread, embed_ms

    def unasked(self, q: Question) -> bool:
        """Whether nothing reads a retrieval for ``q``: excluded from scores, no reader answers it, no feedback follows.

        Such a question is recorded (and counted as excluded) without being retrieved or embedded.
        """
        return q.excluded is not None and self.answer is None and self.config.feedback_from == "none"

    def retrieve_one(
        self, sut: SystemUnderTest, q: Question, index: int, thread: str, embed_ms: float
    ) -> tuple[dict[str, Any], list[Retrieved]] | None:
        """Retrieve for a question in one system and score it: (row, memories), or None when it failed."""
        if self.unasked(q):
            row = self._row(q, index, thread, [], 0.0, sut.label)
            row.update(retrieve_ms=None, embed_ms=embed_ms)
            return row, []
        t0 = time.perf_counter()
        try:
            if sut.receives_gold:
                # The one gold side channel: instruments only (see memory.inject).
                sut.system.oracle(q.question_id, q.evidence, user_id=q.user_id, t_days=self.t_days())  # type: ignore[attr-defined]
            got = sut.system.retrieve(q.text, user_id=q.user_id, now=q.time, k=self.config.fetch_k)
            if len(got) > self.config.fetch_k:
                raise RuntimeError(f"returned {len(got)} memories for k={self.config.fetch_k}")
        except Exception as exc:
            self._fail(sut, "retrieve", exc)
            return None
        ms = (time.perf_counter() - t0) * 1000.0
        row = self._row(q, index, thread, got, ms, sut.label)
        row["embed_ms"] = embed_ms
        return row, got

    def answer_one(self, row: dict[str, Any], q: Question, got: Sequence[Retrieved]) -> None:
        """Have the reader answer from the memories and the judges score it, into ``row`` (when a reader runs)."""
        if self.answer is None:
            return
        try:
            # The reader and judges see the benchmark's own date text and question id where it has them
            # (a judge's rubric may depend on the id); systems never do.
            when = q.extra.get("question_date", q.time)
            qid = q.extra.get("question_id", q.question_id)
            # A judge's per-category rules take the file's code (LoCoMo's "1".."5"), not the label.
            category = q.extra.get("category", q.kind)
            row.update(self.answer(q.text, when, list(got[: self.config.k]), q.gold, category, qid))
        except UserError as exc:
            # The endpoint is gone (retries spent): keep this row and stop the run;
            # every row recorded before stays on disk.
            row["error"] = f"answer: {exc}"
            self.recorder.probe(row)
            raise
        except Exception as exc:
            row["error"] = f"answer: {type(exc).__name__}: {exc}"

    def finish_one(self, sut: SystemUnderTest, q: Question, row: dict[str, Any], got: Sequence[Retrieved]) -> None:
        """Decide what the arm is told about the question, record the row (with ``told``), start the feedback.

        A placebo's scored question past its system's dose in that user's week (its system failed
        mid-run, or was left unscored on a question the placebo scored) is told nothing: a placebo
        never gets a bit its system was not told. Such questions are counted in ``beyond_dose``.
        """
        channel = self.config.feedback_from
        row["told"] = None
        if channel == "none" or sut.feedback == "withheld":
            self.recorder.probe(row)
            return
        verdict = self._verdict(row)
        if verdict is None:
            # Nothing is known of an unscored answer: telling the system "wrong" would be a made-up bit.
            self.feedback_unscored[sut.label] = self.feedback_unscored.get(sut.label, 0) + 1
            self.recorder.probe(row)
            return
        dose = self._dose(sut, q, verdict)
        retrieved = [m.memory_id for m in got]
        told: bool | None = dose[0]
        if told is None:
            pass
        elif channel == "correction":
            # No feedback call: the restatement is the whole message (told False: one is queued or owed).
            restated = self._pay_owed(sut, q)
            if not told:
                restated += self._restate(sut, q)
            # Which facts were queued here (question ids), so anyone can check from the rows what each arm was told.
            row["restated"] = restated or None
        elif channel.startswith("implicit"):
            kind = dose[1]
            if sut.feedback == "given":
                # Drawn now, in question order, so the reactions do not depend on when deliveries interleave.
                reaction = react(told, q.text, self._rng(f"implicit:{sut.label}"), behaviour(channel),
                                 tuple(q.extra.get("paraphrases", ())))
            elif kind == "silent":
                reaction = None
            else:
                # Another arm says what its dose says, about its own question.
                kind = kind or ("thank" if told else "complain")
                reaction = say(kind, q.text, self._rng(f"implicit:{sut.label}"), tuple(q.extra.get("paraphrases", ())))
            row["reaction"] = "silent" if reaction is None else reaction.kind
            told = None if reaction is None else read_reaction(reaction.text)
            if reaction is not None:
                self.env.process(delayed_reaction(self.env, self, sut, q, retrieved, reaction.text))
        else:
            self.env.process(delayed_feedback(self.env, self, sut, q, retrieved, told))
        row["told"] = told
        self.recorder.probe(row)
        tally = self.feedback_told.setdefault(sut.label, {})
        key = f"{'right' if verdict else 'wrong'}>{str(told).lower()}"
        tally[key] = tally.get(key, 0) + 1

    def _row(
        self, q: Question, index: int, thread: str, got: list[Retrieved], ms: float, label: str
    ) -> dict[str, Any]:
        owner = self.turn_owner
        isolation = sum(1 for m in got for t in m.source_turn_ids if owner.get(t, q.user_id) != q.user_id)
        deleted = self._deleted.get((label, q.user_id), set())
        copies = self._deleted_text.get((label, q.user_id))
        # A leak by provenance, or by text whatever the provenance says (a copy that lost its source).
        leaks = sum(1 for m in got if deleted.intersection(m.source_turn_ids) or (copies and copies.holds(m.text)))
        # Turns the user asked in their own words to forget (the world's record; nothing was deleted through the API).
        forgotten = frozenset(q.extra.get("forgotten", ()))
        kept = sum(1 for m in got if forgotten.intersection(m.source_turn_ids)) if forgotten else 0
        row: dict[str, Any] = {
            "system": label,
            "episode": self.episode_of.get(q.user_id, q.user_id),
            "user_id": q.user_id,
            "question_id": q.question_id,
            "q_index": index,
            "time": q.time,
            "t_days": self.t_days(),
            "kind": q.kind,
            "topic": q.topic,
            "reask": q.reask_of is not None,
            "thread_id": thread,
            "question": q.text,
            "gold": q.gold,
            "evidence_ids": list(q.evidence),
            # The gold evidence as said, for error analysis (redacted with the rest if its turn is deleted later).
            "evidence_text": [self.turn_text.get(t) for t in q.evidence],
            "superseded_ids": list(q.superseded),
            "excluded": q.excluded,
            "retrieve_ms": ms,
            "n_retrieved": len(got),
            "retrieved_ids": [m.memory_id for m in got],
            # A restatement is a turn of its own: retrieving it is not retrieving the evidence it restates.
            "retrieved_sources": [list(m.source_turn_ids) for m in got],
            "retrieved_scores": [float(m.score) for m in got],
            "retrieved_text": [m.text for m in got],
            "isolation_failures": isolation,
            "deleted_leaks": leaks,
            "forgotten_turns": len(forgotten),
            "forgotten_leaks": kept,
            "error": None,
        }
        for scorer in self.scorers:
            row.update(scorer.score(q, got, ks=self.config.ks))
        return row

    def maintain(self) -> None:
        """Run every system's maintenance and record its footprint."""
        now = self.now()
        for sut in self._live():
            t0 = time.perf_counter()
            try:
                sut.system.maintain(now=now)
                ms = (time.perf_counter() - t0) * 1000.0
                stats = sut.system.stats()
            except Exception as exc:
                self._fail(sut, "maintain", exc)
                continue
            self._timeline(sut, "", "tick", stats, ingest_ms=ms)

    def _timeline(self, sut: SystemUnderTest, user_id: str, kind: str, stats: Any, **extra: Any) -> None:
        self.recorder.timeline(
            {
                "system": sut.label,
                "episode": self.episode_of.get(user_id, user_id),
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


def episode_timeline(env: simpy.Environment, harness: Harness, events: Iterable[Event]) -> Any:
    """One episode's life (a user's months, a conversation): wait for each event's time, then hand it on."""
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


def delayed_reaction(
    env: simpy.Environment, harness: Harness, sut: SystemUnderTest, q: Question, retrieved: Sequence[str], text: str
) -> Any:
    """Deliver the user's reaction to an answer (``implicit`` channel) after the configured delay."""
    yield env.timeout(harness.config.feedback_delay_s)
    harness.react_now(sut, q, retrieved, text)


def maintenance(env: simpy.Environment, harness: Harness, every_s: float) -> Any:
    """Call every system's ``maintain`` on a fixed schedule."""
    while True:
        yield env.timeout(every_s)
        harness.maintain()


def load_dispatch(load: Load, harness: Harness, event: Session | Question) -> None:
    """Start one job per live system for an arriving session or question."""
    env = harness.env
    if isinstance(event, Session):
        embed_ms = harness.arrive(event)
        for sut in harness._live():
            key = (sut.label, event.user_id)
            load.pending[key] = load.pending.get(key, 0) + 1
            load.in_flight += 1
            env.process(ingest_job(env, harness, load, sut, event, embed_ms))
    else:
        index, thread, embed_ms = harness.ask(event)
        for sut in harness._live():
            load.in_flight += 1
            env.process(question_job(env, harness, load, sut, event, index, thread, embed_ms))


def ingest_job(
    env: simpy.Environment,
    harness: Harness,
    load: Load,
    sut: SystemUnderTest,
    event: Session,
    embed_ms: float,
) -> Any:
    """A session waits for a memory worker, is ingested, and holds the worker for its service time."""
    dep = load.deployment(env, sut.label, stream=sut.twin_of)
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
    dep = load.deployment(env, sut.label, stream=sut.twin_of)
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


def start_processes(env: simpy.Environment, harness: Harness, episodes: Iterable[Episode]) -> None:
    """One ``episode_timeline`` per episode, plus ``maintenance`` when it is scheduled."""
    for ep in episodes:
        env.process(episode_timeline(env, harness, ep.events))
    if harness.config.maintenance_every_s > 0:
        env.process(maintenance(env, harness, harness.config.maintenance_every_s))

