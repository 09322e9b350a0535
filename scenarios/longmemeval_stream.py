"""LongMemEval instances replayed on their dates, each question at its ``question_date``.

Every instance of a LongMemEval file brings a haystack of dated sessions and
one question. The stream replays the sessions at their dates and asks the
question at its ``question_date``; turns carry ``metadata["date_text"]`` (the
file's date string) and the official turn keys ``<session_id>_<index + 1>``,
so the gold evidence is the official one: the user turns marked
``has_answer`` inside answer sessions.

Ids that would reveal gold are renamed before any system sees them: the
file names answer sessions ``answer_...`` and abstention questions
``..._abs``, so session ids become ``opaque_session_id`` (a hash: the same
session keeps one id across instances), turn keys keep their official form
on that id, and question ids are opaque too (feedback names them). The
file's question id stays with the question (``topic`` and
``extra["question_id"]``), where only rows and scorers read it.

Who the user is (``group``):

- ``shared`` (default): all instances are one user (``"longmemeval"``) whose
  life is the union of the haystacks. A session that several instances list
  (the fillers drawn from ShareGPT and UltraChat are listed by many) is
  ingested once, at the earliest date any instance gives it; later listings
  with another date or other content are counted in ``meta`` and dropped.
  This is what makes the stream longitudinal: questions are interleaved with
  new sessions and every question is asked of a memory that keeps growing.
  The price: each question searches every instance's haystack, not only its
  own, so evidence scores are lower than the official per-instance ones, and
  instances written about different fictional facts share one memory.
- ``instance``: each instance is its own user (user id = question id) with
  only its own haystack, as the official protocol runs them, but all users
  replayed together against one instance of each system. The user id is
  the question's opaque id; session and turn ids are prefixed with it
  (``"<user>/<turn key>"``) because provenance must name exactly one user's
  turn; a session listed twice by one instance is ingested once.

- ``users``: many users made of the published instances, each with
  several questions. The instances that pass the filters are dealt out in
  file order, round robin, to ``users`` users (default: as many as give each
  ``instances_per_user``; the remainder is left out and counted as
  ``ungrouped``). A user's instances share one calendar. With
  ``calendar = "shifted"`` (default) instance ``j`` of a user is shifted by
  whole days so that its question falls ``j * spacing_days`` after the
  user's first question, so each haystack keeps its own order and time of
  day, haystacks of one user interleave, and each question is asked at its
  (shifted) date; turns carry the shifted date in the file's format. Dates
  written inside the text ("on March 3rd": 219 user turns of the oracle
  file) are not shifted, so they disagree with that calendar. With
  ``calendar = "published"`` nothing is shifted: every session and question
  keeps the file's own date, so the text agrees with the calendar as in the
  benchmark, and a user's questions fall wherever their instances' dates
  put them. Ids are per user, as in ``instance`` mode; a session
  that two of a user's instances list is ingested once (at the first
  instance's date) when its turns are the same, and as two sessions when
  they differ (the second copy's id ends in ``~<j>``).
  With ``reask_rate`` a question is asked again ``U(reask_min_days,
  reask_max_days)`` days later, verbatim or (``paraphrase_rate``) in one of
  ``memsim.scenarios.locomo_stream.PARAPHRASES``; only this draws from the
  generator.

Left out and counted (``meta["excluded"]``): abstention questions (``_abs``)
unless ``include_abstention`` (they are then asked with no evidence and
score NaN), questions without any gold user turn (single-session-assistant,
whose evidence is an assistant turn) and, in ``shared`` mode, questions
whose gold turns were all dropped with a conflicting copy of their session.
A left-out instance contributes no sessions. When an evidence session is
dated after its question (the file allows it), the question is asked a
minute after that session, so no question precedes its evidence; such moves
are counted. Only user turns are ingested by default (the official retrieval
corpus); ``user_only = false`` ingests assistant turns too.

Without re-asks the stream takes no random draws: the same file and
arguments give the same stream whatever the seed.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memsim.memory.base import Turn
from memsim.scenarios.base import FileScenario, ScenarioStream
from memsim.scenarios.locomo_stream import PARAPHRASES, paraphrase
from memsim.core.errors import UserError
from memsim.sim.events import Event, Question, Session, sort_events
from memsim.static_benchmarks.data import fetch_hint, locate, resolve_given
from memsim.static_benchmarks.longmemeval import (
    QUESTION_TYPES,
    Instance,
    LmeSession,
    LoadWarnings,
    gold_turn_keys,
    iter_instances,
    memory_turns,
    opaque_id,
    opaque_session_id,
    opaque_turn_key,
    session_of,
)

__all__ = ["LongMemEvalFileArgs", "LongMemEvalStreamConfig", "LongMemEvalStreamScenario", "SHARED_USER", "default_longmemeval_path"]

SHARED_USER = "longmemeval"
"""The user id of every event in ``shared`` mode."""

_MOVE = timedelta(minutes=1)
_DAY = timedelta(days=1)
_DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"  # how LongMemEval writes dates: 2023/05/30 (Tue) 23:40


def default_longmemeval_path() -> Path | None:
    """``$MEMSIM_LONGMEMEVAL`` when set, else the fetched S file (cleaned first), else None."""
    return locate("longmemeval")


class LongMemEvalFileArgs(BaseModel):
    """The arguments every LongMemEval scenario has: the file and a question-type filter."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: str = Field("", description="a LongMemEval JSON file (empty: $MEMSIM_LONGMEMEVAL)")
    types: tuple[str, ...] = Field((), description="question types to keep (empty: all)")

    @field_validator("types")
    @classmethod
    def _known_types(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [t for t in v if t not in QUESTION_TYPES]
        if unknown:
            raise ValueError(f"unknown question type(s) {', '.join(unknown)}; valid: {', '.join(QUESTION_TYPES)}")
        return tuple(v)

    def path(self) -> Path | None:
        """The data file to read, if one is named."""
        return resolve_given(self.data, "longmemeval") if self.data else default_longmemeval_path()


class LongMemEvalStreamConfig(LongMemEvalFileArgs):
    """Arguments of the ``longmemeval_stream`` scenario (validated; unknown keys are errors)."""

    group: Literal["shared", "instance", "users"] = Field(
        "shared", description="one user for all instances, one per instance, or users of several instances each")
    limit_instances: int | None = Field(None, ge=1, description="keep the first N instances that pass the filters")
    include_abstention: bool = Field(False, description="also ask abstention (_abs) questions (unscored)")
    user_only: bool = Field(True, description="ingest only user turns (the official retrieval corpus)")
    users: int | None = Field(None, ge=1, description="group users: how many users (default: as many as the instances fill)")
    instances_per_user: int = Field(7, ge=1, description="group users: instances (questions) dealt to each user")
    calendar: Literal["shifted", "published"] = Field(
        "shifted", description="group users: shift each instance so that a user's questions are spacing_days apart "
        "(dates written in the text are not shifted), or keep every published date (the text agrees with the calendar)")
    spacing_days: float = Field(7.0, gt=0, description="group users: days between a user's successive questions")
    reask_rate: float = Field(0.0, ge=0, le=1, description="group users: chance a question is asked again later")
    paraphrase_rate: float = Field(0.5, ge=0, le=1, description="group users: chance a re-ask is reworded")
    reask_min_days: float = Field(1.0, ge=0, description="group users: earliest re-ask after the first asking")
    reask_max_days: float = Field(14.0, gt=0, description="group users: latest re-ask after the first asking")

    @model_validator(mode="after")
    def _check(self) -> LongMemEvalStreamConfig:
        if self.reask_min_days >= self.reask_max_days:
            raise ValueError(f"reask_min_days ({self.reask_min_days}) must be below reask_max_days ({self.reask_max_days})")
        grouping = [k for k in _GROUPING if getattr(self, k) != type(self).model_fields[k].default]
        if self.group != "users" and {"users", "reask_rate", "calendar"} & set(grouping):
            raise ValueError(f"{', '.join(grouping)} need group = \"users\" (group is {self.group!r})")
        if self.calendar == "published" and "spacing_days" in grouping:
            raise ValueError("spacing_days needs calendar = \"shifted\": the published calendar keeps every date")
        return self


_GROUPING = ("users", "instances_per_user", "calendar", "spacing_days", "reask_rate", "paraphrase_rate", "reask_min_days",
             "reask_max_days")
"""The options of ``group = "users"`` (left out of the spec while at their defaults)."""


class LongMemEvalStreamScenario(FileScenario):
    """The ``longmemeval_stream`` scenario: see the module docstring."""

    name = "longmemeval_stream"
    config_model = LongMemEvalStreamConfig

    def spec_args(self) -> dict[str, Any]:
        """Resolved arguments, JSON-ready; the grouping options only where they differ from their defaults.

        So the spec of a run made before the grouping existed does not change.
        """
        fields = LongMemEvalStreamConfig.model_fields
        return {k: v for k, v in super().spec_args().items()
                if k not in _GROUPING or getattr(self.config, k) != fields[k].default}

    def __init__(self, config: LongMemEvalStreamConfig | None = None, *, source: str = "") -> None:
        self.config = config or LongMemEvalStreamConfig()
        where = f" in {source}" if source else ""
        path = self.config.path()
        if path is None:
            raise UserError(
                f"scenario.data{where}: name a LongMemEval file (or set MEMSIM_LONGMEMEVAL), or {fetch_hint('longmemeval')}"
            )
        if not path.is_file():
            raise UserError(
                f"LongMemEval data file not found: {path} (scenario.data{where}); {fetch_hint('longmemeval')}"
            )

    # -- generation -------------------------------------------------------

    def generate(self, rng: np.random.Generator) -> ScenarioStream:
        """Read the file and build the sessions and questions (``rng`` is not drawn from)."""
        cfg = self.config
        path = cfg.path()
        assert path is not None  # checked in __init__
        warnings = LoadWarnings()
        excluded = {"abstention": 0, "no_gold_turns": 0, "evidence_dropped": 0, "type": 0}
        counts = {"moved_after_evidence": 0, "shared_sessions_reused": 0, "session_date_conflicts": 0,
                  "session_content_conflicts": 0, "duplicate_sessions": 0}
        events: list[Event] = []
        # shared mode: session id -> (time, turn texts) of the copy that was kept
        kept: dict[str, tuple[datetime, tuple[str, ...]]] = {}
        kept_turns: dict[str, Session] = {}
        instances = 0
        grouped: list[tuple[Instance, frozenset[str]]] = []
        for inst in iter_instances(path, warnings=warnings):
            if cfg.types and inst.question_type not in cfg.types:
                excluded["type"] += 1
                continue
            # An abstention question's haystack does not hold its answer: it has no evidence to score.
            gold = frozenset() if inst.is_abstention else frozenset(opaque_turn_key(k) for k in gold_turn_keys(inst))
            if inst.is_abstention and not cfg.include_abstention:
                excluded["abstention"] += 1
                continue
            if not gold and not inst.is_abstention:
                excluded["no_gold_turns"] += 1
                continue
            if cfg.limit_instances is not None and instances >= cfg.limit_instances:
                break
            instances += 1
            if cfg.group == "users":
                grouped.append((inst, gold))
            elif cfg.group == "instance":
                events.extend(self._instance_events(inst, gold, counts))
            else:
                q = self._shared_events(inst, gold, kept, kept_turns, counts, excluded)
                if q is not None:
                    events.append(q)
        if cfg.group == "shared":
            events.extend(kept_turns.values())
        extra_meta: dict[str, Any] = {}
        if cfg.group == "users":
            user_events, extra_meta = self._grouped_events(grouped, rng, counts, excluded, path)
            events.extend(user_events)
        if not any(isinstance(e, Question) for e in events):
            raise UserError(f"scenario longmemeval_stream: no usable question in {path} with these filters")
        ordered = tuple(sort_events(events))
        meta = {
            "data": str(path),
            "group": cfg.group,
            "instances": instances,
            "excluded": excluded,
            **counts,
            **extra_meta,
            "load_warnings": warnings.to_json(),
        }
        return ScenarioStream(
            start=ordered[0].time, end=ordered[-1].time + timedelta(minutes=1), events=ordered, meta=meta
        )

    def _grouped_events(self, grouped: list[tuple[Instance, frozenset[str]]], rng: np.random.Generator,
                        counts: dict[str, int], excluded: dict[str, int], path: Path) -> tuple[list[Event], dict[str, Any]]:
        """The events of ``group = "users"``, and what the grouping did (for ``meta``)."""
        cfg = self.config
        n_users = len(grouped) // cfg.instances_per_user
        if cfg.users is not None:
            if cfg.users > n_users:
                raise UserError(
                    f"scenario.users = {cfg.users}: {path} gives {len(grouped)} usable instances, enough for "
                    f"{n_users} users of instances_per_user = {cfg.instances_per_user}"
                )
            n_users = cfg.users
        if n_users == 0:
            raise UserError(f"scenario.instances_per_user = {cfg.instances_per_user}: {path} gives only "
                            f"{len(grouped)} usable instances, not enough for one user")
        dealt = grouped[: n_users * cfg.instances_per_user]
        excluded["ungrouped"] = len(grouped) - len(dealt)
        counts["reasks"] = 0
        events: list[Event] = []
        for u in range(n_users):
            mine = dealt[u::n_users]
            user = opaque_id("u", "|".join(inst.question_id for inst, _ in mine))
            anchor = mine[0][0].question_date
            kept: dict[str, tuple[str, tuple[str, ...]]] = {}  # opaque session id -> (session id used, turn texts)
            for j, (inst, gold) in enumerate(mine):
                # Whole days, so that each haystack keeps its time of day and its order.
                shift = (timedelta(0) if cfg.calendar == "published" else
                         _DAY * round((anchor + j * timedelta(days=cfg.spacing_days) - inst.question_date) / _DAY))
                own: dict[str, str] = {}  # this instance's opaque session id -> the session id of its copy
                at: dict[str, datetime] = {}
                for session, turns in zip(inst.sessions, self._turns(inst), strict=True):
                    sid = opaque_session_id(session.session_id)
                    texts = tuple(t.text for t in turns)
                    if sid in kept and kept[sid][1] == texts:
                        counts["shared_sessions_reused"] += 1
                        own[sid] = kept[sid][0]
                        continue
                    if sid in kept:
                        counts["session_content_conflicts"] += 1
                    name = f"{user}/{sid}" if sid not in kept else f"{user}/{sid}~{j}"
                    kept.setdefault(sid, (name, texts))
                    own[sid] = name
                    events.append(self._shifted(session, turns, user, name, shift, at))
                keys = [k for k in sorted(gold) if session_of(k) in own]
                evidence = tuple(f"{own[session_of(k)]}_{k.rpartition('_')[2]}" for k in keys)
                first = self._question(inst, user, evidence, [at[t] for t in evidence if t in at], counts, shift=shift)
                events.append(first)
                if rng.random() < cfg.reask_rate:
                    delay = timedelta(days=float(rng.uniform(cfg.reask_min_days, cfg.reask_max_days)))
                    reword = rng.random() < cfg.paraphrase_rate
                    template = PARAPHRASES[int(rng.integers(len(PARAPHRASES)))]
                    events.append(replace(
                        first, question_id=f"{first.question_id}:r1", time=first.time + delay,
                        text=paraphrase(first.text, template) if reword else first.text, reask_of=first.question_id,
                    ))
                    counts["reasks"] += 1
        return events, {"users": n_users, "instances_per_user": cfg.instances_per_user, "calendar": cfg.calendar}

    def _shifted(self, session: LmeSession, turns: list[Turn], user: str, name: str, shift: timedelta,
                 at: dict[str, datetime]) -> Session:
        """One user's copy ``name`` of a haystack session, ``shift`` later, its turns dated in the file's format."""
        when = session.date + shift
        # Unshifted, the file's own date text stays as written.
        meta = {"date_text": when.strftime(_DATE_FORMAT) if shift else session.date_text}
        renamed = tuple(
            replace(t, turn_id=f"{name}_{t.turn_id.rpartition('_')[2]}", user_id=user, session_id=name,
                    created_at=when, metadata=meta)
            for t in turns
        )
        at.update((t.turn_id, when) for t in renamed)
        return Session(session_id=name, user_id=user, time=when, turns=renamed)

    def _turns(self, inst: Instance) -> list[list[Turn]]:
        return memory_turns(inst, granularity="turn", user_only=self.config.user_only, rename=opaque_session_id)

    def _question(self, inst: Instance, user: str, evidence: tuple[str, ...], evidence_at: list[datetime],
                  counts: dict[str, int], *, shift: timedelta = timedelta(0)) -> Question:
        when = inst.question_date + shift
        if evidence_at and max(evidence_at) >= when:
            when = max(evidence_at) + _MOVE
            counts["moved_after_evidence"] += 1
        return Question(
            question_id=opaque_id("q", inst.question_id),
            user_id=user,
            time=when,
            text=inst.question,
            gold=inst.answer,
            kind=inst.question_type,
            evidence=evidence,
            topic=inst.question_id,
            extra={"question_id": inst.question_id,
                   "question_date": when.strftime(_DATE_FORMAT) if shift else inst.question_date_text},
        )

    def _instance_events(self, inst: Instance, gold: frozenset[str], counts: dict[str, int]) -> list[Event]:
        user = opaque_id("u", inst.question_id)
        out: list[Event] = []
        seen: set[str] = set()
        at: dict[str, datetime] = {}
        for session, turns in zip(inst.sessions, self._turns(inst), strict=True):
            if session.session_id in seen:
                counts["duplicate_sessions"] += 1
                continue
            seen.add(session.session_id)
            sid = f"{user}/{opaque_session_id(session.session_id)}"
            renamed = tuple(
                replace(t, turn_id=f"{user}/{t.turn_id}", user_id=user, session_id=sid) for t in turns
            )
            for t in turns:
                at[t.turn_id] = session.date
            if renamed:
                out.append(Session(session_id=sid, user_id=user, time=session.date, turns=renamed))
        keys = sorted(k for k in gold if k in at)
        evidence = tuple(f"{user}/{k}" for k in keys)
        out.append(self._question(inst, user, evidence, [at[k] for k in keys], counts))
        return out

    def _shared_events(
        self,
        inst: Instance,
        gold: frozenset[str],
        kept: dict[str, tuple[datetime, tuple[str, ...]]],
        kept_turns: dict[str, Session],
        counts: dict[str, int],
        excluded: dict[str, int],
    ) -> Question | None:
        own: dict[str, tuple[str, ...]] = {}
        for session, turns in zip(inst.sessions, self._turns(inst), strict=True):
            texts = tuple(t.text for t in turns)
            sid = opaque_session_id(session.session_id)
            own.setdefault(sid, texts)
            if sid in kept:
                counts["shared_sessions_reused"] += 1
                when, held = kept[sid]
                if held != texts:
                    counts["session_content_conflicts"] += 1
                if session.date != when:
                    counts["session_date_conflicts"] += 1
                    if session.date < when and held == texts and sid in kept_turns:
                        # The earliest date any instance gives a shared session wins.
                        old = kept_turns[sid]
                        kept_turns[sid] = replace(
                            old, time=session.date, turns=tuple(replace(t, created_at=session.date) for t in old.turns)
                        )
                        kept[sid] = (session.date, held)
                continue
            kept[sid] = (session.date, texts)
            if turns:
                kept_turns[sid] = Session(
                    session_id=sid,
                    user_id=SHARED_USER,
                    time=session.date,
                    turns=tuple(replace(t, user_id=SHARED_USER) for t in turns),
                )
        # A gold turn counts only when the kept copy of its session is this instance's copy.
        keys = [k for k in sorted(gold) if (sid := session_of(k)) in kept and kept[sid][1] == own.get(sid)]
        if gold and not keys:
            excluded["evidence_dropped"] += 1
            return None
        return self._question(inst, SHARED_USER, tuple(keys), [kept[session_of(k)][0] for k in keys], counts)
