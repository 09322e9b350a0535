"""Synthetic users whose lives change over simulated months.

Each user starts with a value for every fact slot (home city, employer, job
title, partner, pets, hobbies, diet, favourite food / music / book, upcoming
trip, health event) and lives through random changes (moves, job changes, new
pets, changing tastes). Users tell the assistant about their facts in
sessions that arrive at random times, between small talk; the assistant now
and then recommends a book (an assistant-spoken fact). Questions arrive at
random times and ask about what the user has said so far: the current value,
the previous value, when something changed, counts across sessions, and
requests whose best answer depends on a preference. Some topics are asked
about far more often than others (Zipf popularity per user), and earlier
questions come back, verbatim or paraphrased. Users sometimes ask the
assistant to forget a topic.

Every question carries its gold answer, the turn ids that hold it, and the
turn ids that state values it has replaced. Same generator state, same stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from memsim.memory.base import Turn
from memsim.scenarios import persona_text as T
from memsim.scenarios.base import ScenarioStream
from memsim.core.validate import bounded, validate_args
from memsim.sim.events import Deletion, Event, Question, Session, sort_events
from memsim.core.streams import spawn

__all__ = ["PersonaConfig", "PersonaScenario", "BASE_CHANGE_RATES", "RECOMMENDATION_TOPIC"]

RECOMMENDATION_TOPIC = "book_recommendation"
"""Topic of questions about the assistant's own recommendations."""

BASE_CHANGE_RATES: Mapping[str, float] = {
    "home_city": 0.10,
    "employer": 0.10,
    "job_title": 0.08,
    "partner": 0.04,
    "pets": 0.15,
    "hobbies": 0.15,
    "diet": 0.08,
    "favourite_food": 0.12,
    "favourite_music": 0.12,
    "favourite_book": 0.12,
    "upcoming_trip": 0.30,
    "health_event": 0.10,
}
"""Changes per month for each slot before the ``change_rate`` multiplier."""

_DELETABLE = ("health_event", "partner", "home_city", "upcoming_trip")
_DAY = 86400.0
_LATER_OPTIONS = ("busy_hours", "as_of")
"""Options left out of the spec at their default (``PersonaScenario.spec_args``)."""
_MONTH_DAYS = 30.0


class PersonaConfig(BaseModel):
    """Arguments of the persona scenario (validated; unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    users: Annotated[int, bounded(100_000)] = Field(3, ge=1, description="number of simulated users")
    months: Annotated[float, bounded(240)] = Field(6.0, gt=0, description="simulated span in months of 30 days")
    sessions_per_week: Annotated[float, bounded(100)] = Field(2.0, gt=0, description="mean session arrivals per user per week (Poisson)")
    turns_per_session: Annotated[int, bounded(1_000)] = Field(8, ge=2, description="mean turns per session (user + assistant)")
    small_talk: float = Field(0.5, ge=0, le=1, description="share of turn pairs that are small talk")
    facts_per_session: Annotated[int, bounded(100)] = Field(3, ge=1, description="most facts a user tells in one session")
    questions_per_week: Annotated[float, bounded(1_000)] = Field(4.0, gt=0, description="mean questions per user per week (Poisson)")
    reask_rate: float = Field(0.3, ge=0, le=1, description="chance a question asks an earlier one again")
    paraphrase_rate: float = Field(0.5, ge=0, le=1, description="chance a re-ask is phrased differently")
    topic_skew: Annotated[float, bounded(100)] = Field(1.0, ge=0, description="Zipf exponent of topic popularity (0 = uniform)")
    change_rate: Annotated[float, bounded(1_000)] = Field(1.0, ge=0, description="multiplier on every slot's change rate")
    change_rates: dict[str, float] = Field(default_factory=dict, description="per-slot changes per month (override)")
    deletion_rate: Annotated[float, bounded(1_000)] = Field(0.1, ge=0, description="forget requests per user per month")
    recommendation_rate: float = Field(0.15, ge=0, le=1, description="chance a session has a book recommendation")
    slots: tuple[str, ...] = Field(tuple(T.SLOTS), description="fact slots in use")
    start: datetime = Field(datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc), description="simulated time zero")
    busy_hours: tuple[float, float] | None = Field(
        None, description="[from, to) hours of the day into which sessions and questions are folded (None: any time)"
    )
    as_of: bool = Field(False, description="also ask 'as of DATE' questions about changed facts (scored on that date's value)")

    @field_validator("slots")
    @classmethod
    def _known_slots(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [s for s in v if s not in T.SLOTS]
        if unknown:
            raise ValueError(f"unknown slots {unknown}; known slots: {', '.join(T.SLOTS)}")
        if not v:
            raise ValueError("at least one slot is needed")
        return tuple(v)

    @field_validator("change_rates")
    @classmethod
    def _known_rates(cls, v: dict[str, float]) -> dict[str, float]:
        for slot, rate in v.items():
            if slot not in T.SLOTS:
                raise ValueError(f"unknown slot {slot!r}; known slots: {', '.join(T.SLOTS)}")
            if rate < 0:
                raise ValueError(f"rate for {slot!r} must be >= 0, got {rate}")
        return v

    @field_validator("busy_hours")
    @classmethod
    def _hours(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not 0.0 <= v[0] < v[1] <= 24.0:
            raise ValueError(f"busy_hours needs 0 <= from < to <= 24, got {list(v)}")
        return v

    @field_validator("start")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        return v if v.tzinfo is not None else v.replace(tzinfo=timezone.utc)


@dataclass(slots=True)
class _Entry:
    """One value a slot took in a user's life."""

    value: str
    changed: datetime
    turn_id: str | None = None
    stated: datetime | None = None
    deleted: datetime | None = None


@dataclass(slots=True)
class _User:
    user_id: str
    history: dict[str, list[_Entry]] = field(default_factory=dict)
    pending: list[tuple[str, _Entry]] = field(default_factory=list)
    recommendations: list[_Entry] = field(default_factory=list)


class PersonaScenario:
    """The ``persona`` scenario: see the module docstring."""

    name = "persona"

    def __init__(self, config: PersonaConfig | None = None) -> None:
        self.config = config or PersonaConfig()

    config_model = PersonaConfig

    @classmethod
    def from_args(cls, args: Mapping[str, Any], *, source: str = "") -> PersonaScenario:
        """Build from a config table; bad keys or values raise ``UserError``."""
        return cls(validate_args(cls.config_model, args, what="scenario", source=source))  # type: ignore[arg-type]

    def spec_args(self) -> dict[str, Any]:
        """Resolved arguments, JSON-ready.

        Options added after the first release are left out while they have
        their default, so the spec of an existing run does not change.
        """
        cfg = self.config
        later = {k for k in _LATER_OPTIONS if getattr(cfg, k) == PersonaConfig.model_fields[k].default}
        return cfg.model_dump(mode="json", exclude=later)

    # -- generation -------------------------------------------------------

    def generate(self, rng: np.random.Generator) -> ScenarioStream:
        """Generate every user's sessions, questions and deletions."""
        cfg = self.config
        span = cfg.months * _MONTH_DAYS * _DAY
        events: list[Event] = []
        histories: dict[str, Any] = {}
        facts: dict[str, list[str]] = {}
        for u in range(cfg.users):
            user_rng = spawn(rng)
            user = _User(user_id=f"u{u + 1:02d}")
            events.extend(self._user_events(user, user_rng, span))
            histories[user.user_id] = {
                slot: [(e.value, e.turn_id, e.stated.isoformat() if e.stated else None) for e in entries]
                for slot, entries in user.history.items()
            }
            # The value each fact-bearing turn states (a rewrite of the turn must keep it).
            told = [*(e for entries in user.history.values() for e in entries), *user.recommendations]
            facts.update((e.turn_id, [e.value]) for e in told if e.turn_id)
        end = cfg.start + timedelta(seconds=span)
        return ScenarioStream(start=cfg.start, end=end, events=tuple(sort_events(events)),
                              meta={"histories": histories, "facts": facts})

    def _at(self, seconds: float) -> datetime:
        return self.config.start + timedelta(seconds=float(seconds))

    def _poisson_times(self, rng: np.random.Generator, rate_per_second: float, span: float) -> list[float]:
        if rate_per_second <= 0:
            return []
        n = int(rng.poisson(rate_per_second * span))
        times = sorted(float(x) for x in rng.uniform(0.0, span, size=n))
        hours = self.config.busy_hours
        if hours is None:
            return times
        # Fold each time of day into the busy window (same day, same order): users talk at the same hours.
        lo, hi = hours[0] * 3600.0, hours[1] * 3600.0
        clock = (self.config.start - self.config.start.replace(hour=0, minute=0, second=0, microsecond=0)).total_seconds()
        out = []
        for t in times:
            day, tod = divmod(clock + t, _DAY)
            out.append(day * _DAY + lo + tod / _DAY * (hi - lo) - clock)
        return [t for t in out if 0.0 <= t < span]

    def _user_events(self, user: _User, rng: np.random.Generator, span: float) -> list[Event]:
        cfg = self.config
        week = 7 * _DAY
        session_times = self._poisson_times(rng, cfg.sessions_per_week / week, span)
        # Initial values, told over the first sessions.
        for slot in cfg.slots:
            text = T.SLOTS[slot]
            n0 = int(rng.integers(1, 3)) if text.accumulates else 1
            values = rng.choice(len(text.values), size=n0, replace=False)
            entries = [_Entry(text.values[int(i)], cfg.start) for i in values]
            user.history[slot] = entries
            user.pending.extend((slot, e) for e in entries)
        order = rng.permutation(len(user.pending))
        user.pending = [user.pending[int(i)] for i in order]
        changes: list[tuple[float, str]] = []
        for slot in cfg.slots:
            rate = cfg.change_rates.get(slot, BASE_CHANGE_RATES[slot] * cfg.change_rate)
            changes.extend((t, slot) for t in self._poisson_times(rng, rate / (_MONTH_DAYS * _DAY), span))
        changes.sort()

        events: list[Event] = []
        ci = 0
        for si, st in enumerate(session_times):
            while ci < len(changes) and changes[ci][0] < st:
                self._apply_change(user, changes[ci][1], self._at(changes[ci][0]), rng)
                ci += 1
            events.append(self._session(user, si, self._at(st), rng))
        # Deletions are drawn before questions: a question never asks about deleted turns.
        events.extend(self._deletions(user, rng, span))
        events.extend(self._questions(user, rng, span))
        return events

    def _apply_change(self, user: _User, slot: str, when: datetime, rng: np.random.Generator) -> None:
        text = T.SLOTS[slot]
        entries = user.history[slot]
        taken = {e.value for e in entries} if text.accumulates else {entries[-1].value}
        choices = [v for v in text.values if v not in taken]
        if not choices:
            return
        entry = _Entry(choices[int(rng.integers(len(choices)))], when)
        if not text.accumulates:
            # A value replaced before it was ever told is never told.
            for i, (s, e) in enumerate(user.pending):
                if s == slot and e.turn_id is None:
                    del user.pending[i]
                    entries.remove(e)
                    break
        entries.append(entry)
        # Changes are news: told before the remaining initial facts.
        user.pending.insert(0, (slot, entry))

    def _session(self, user: _User, index: int, when: datetime, rng: np.random.Generator) -> Session:
        cfg = self.config
        sid = f"{user.user_id}-s{index + 1:03d}"
        n_pairs = max(1, int(rng.poisson(cfg.turns_per_session / 2)))
        n_facts = min(len(user.pending), cfg.facts_per_session, int(rng.binomial(n_pairs, 1.0 - cfg.small_talk)))
        if user.pending and n_facts == 0 and user.pending[0][1].changed > cfg.start:
            n_facts = 1  # news is told at the next session
        n_pairs = max(n_pairs, n_facts)
        fact_positions = set(int(i) for i in rng.choice(n_pairs, size=n_facts, replace=False))
        rec_position = int(rng.integers(n_pairs)) if rng.random() < cfg.recommendation_rate else -1
        turns: list[Turn] = []

        def add(speaker: str, text: str) -> str:
            tid = f"{sid}-t{len(turns) + 1:02d}"
            turns.append(Turn(turn_id=tid, user_id=user.user_id, speaker=speaker, text=text, created_at=when, session_id=sid))
            return tid

        for p in range(n_pairs):
            if p in fact_positions:
                slot, entry = user.pending.pop(0)
                text = T.SLOTS[slot]
                templates = text.change if entry.changed > cfg.start else text.state
                entry.turn_id = add("user", _pick(rng, templates).format(v=entry.value))
                entry.stated = when
                add("assistant", _pick(rng, T.ASSISTANT_REPLIES))
            elif p == rec_position:
                add("user", _pick(rng, T.BOOK_REQUESTS))
                book = _pick(rng, T.SLOTS["favourite_book"].values)
                entry = _Entry(book, when, stated=when)
                entry.turn_id = add("assistant", _pick(rng, T.BOOK_RECOMMENDATIONS).format(v=book))
                user.recommendations.append(entry)
            else:
                add("user", _small_talk(rng))
                add("assistant", _pick(rng, T.ASSISTANT_REPLIES))
        return Session(session_id=sid, user_id=user.user_id, time=when, turns=tuple(turns))

    def _deletions(self, user: _User, rng: np.random.Generator, span: float) -> list[Deletion]:
        cfg = self.config
        out: list[Deletion] = []
        for t in self._poisson_times(rng, cfg.deletion_rate / (_MONTH_DAYS * _DAY), span):
            when = self._at(t)
            candidates = []
            for slot in _DELETABLE:
                if slot not in user.history:
                    continue
                told = [e for e in user.history[slot] if e.stated is not None and e.stated < when and not _gone(e, when)]
                if told:
                    candidates.append((slot, told))
            if not candidates:
                continue
            slot, told = candidates[int(rng.integers(len(candidates)))]
            for e in told:
                e.deleted = when
            out.append(
                Deletion(
                    deletion_id=f"{user.user_id}-d{len(out) + 1:02d}",
                    user_id=user.user_id,
                    time=when,
                    turn_ids=tuple(e.turn_id for e in told if e.turn_id),
                    topic=slot,
                )
            )
        return out

    def _questions(self, user: _User, rng: np.random.Generator, span: float) -> list[Question]:
        cfg = self.config
        topics = [*cfg.slots, RECOMMENDATION_TOPIC]
        ranks = rng.permutation(len(topics)) + 1
        weights = {t: 1.0 / float(r) ** cfg.topic_skew for t, r in zip(topics, ranks)}
        asked: list[tuple[str, str, int]] = []  # (topic, kind, template index)
        out: list[Question] = []
        for t in self._poisson_times(rng, cfg.questions_per_week / (7 * _DAY), span):
            when = self._at(t)
            options = {topic: self._askable(user, topic, when) for topic in topics}
            options = {k: v for k, v in options.items() if v}
            if not options:
                continue
            reask_of: str | None = None
            previous = [(i, a) for i, a in enumerate(asked) if a[0] in options and a[1] in options[a[0]]]
            if previous and rng.random() < cfg.reask_rate:
                i, (topic, kind, tmpl) = previous[int(rng.integers(len(previous)))]
                reask_of = out[i].question_id
                templates = _templates(topic, kind)
                if len(templates) > 1 and rng.random() < cfg.paraphrase_rate:
                    tmpl = int(rng.choice([j for j in range(len(templates)) if j != tmpl]))
            else:
                names = sorted(options)
                w = np.array([weights[n] for n in names])
                topic = names[int(rng.choice(len(names), p=w / w.sum()))]
                kinds = sorted(options[topic])
                kind = kinds[int(rng.integers(len(kinds)))]
                tmpl = int(rng.integers(len(_templates(topic, kind))))
            fact = options[topic][kind]
            text = _templates(topic, kind)[tmpl].format(cur=fact["cur"])
            asked.append((topic, kind, tmpl))
            out.append(
                Question(
                    question_id=f"{user.user_id}-q{len(out) + 1:04d}",
                    user_id=user.user_id,
                    time=when,
                    text=text,
                    gold=fact["gold"],
                    kind=kind,
                    evidence=tuple(fact["evidence"]),
                    superseded=tuple(fact.get("superseded", ())),
                    topic=topic,
                    reask_of=reask_of,
                )
            )
        return out

    def _askable(self, user: _User, topic: str, when: datetime) -> dict[str, dict[str, Any]]:
        """Question kinds answerable from what the user has told (and not deleted) by ``when``."""
        if topic == RECOMMENDATION_TOPIC:
            recs = [e for e in user.recommendations if e.stated is not None and e.stated < when]
            if not recs:
                return {}
            cur = recs[-1]
            return {
                "assistant": {
                    "cur": cur.value,
                    "gold": cur.value,
                    "evidence": [cur.turn_id],
                    "superseded": [e.turn_id for e in recs[:-1] if e.value != cur.value],
                }
            }
        text = T.SLOTS[topic]
        told = [
            e for e in user.history[topic] if e.stated is not None and e.stated < when and not _gone(e, when)
        ]
        if not told:
            return {}
        told.sort(key=lambda e: (e.stated, e.turn_id))
        cur = told[-1]
        out: dict[str, dict[str, Any]] = {}
        # A value can come back (A -> B -> A); an old turn stating the current value is not stale.
        older = [e.turn_id for e in told[:-1] if e.value != cur.value]
        out["current"] = {
            "cur": cur.value,
            "gold": cur.value,
            "evidence": [cur.turn_id],
            "superseded": [] if text.accumulates else older,
        }
        if text.ask_when and cur.changed > self.config.start:
            # "When did I move to X" only makes sense for a change the user told about.
            out["when"] = {"cur": cur.value, "gold": _date_text(cur.stated), "evidence": [cur.turn_id]}
        if text.ask_previous and len(told) >= 2 and not text.accumulates:
            prev = told[-2]
            out["previous"] = {"cur": cur.value, "gold": prev.value, "evidence": [prev.turn_id, cur.turn_id]}
        if self.config.as_of and len(told) >= 2 and not text.accumulates:
            as_of = _as_of(told[-2], told[-1])
            if as_of is not None:
                # The value current on that date, not today's: the newer turn is the stale one here.
                out["as_of"] = {
                    "cur": _date_text(as_of),
                    "gold": told[-2].value,
                    "evidence": [told[-2].turn_id],
                    "superseded": [told[-1].turn_id],
                }
        if text.ask_count:
            out["count"] = {"cur": cur.value, "gold": str(len(told)), "evidence": [e.turn_id for e in told]}
        if text.ask_preference:
            out["preference"] = {"cur": cur.value, "gold": cur.value, "evidence": [cur.turn_id], "superseded": older}
        return out


def _gone(entry: _Entry, when: datetime) -> bool:
    return entry.deleted is not None and entry.deleted <= when


def _as_of(older: _Entry, newer: _Entry) -> datetime | None:
    """A day after ``older`` was told and before the day ``newer`` was (None when they share a day or the next)."""
    assert older.stated is not None and newer.stated is not None
    day = (older.stated + timedelta(days=1)).replace(hour=12, minute=0, second=0, microsecond=0)
    return day if day.date() < newer.stated.date() else None


def _templates(topic: str, kind: str) -> tuple[str, ...]:
    if topic == RECOMMENDATION_TOPIC:
        return T.ASK_RECOMMENDATION
    if kind == "as_of":
        label = topic.replace("_", " ")
        return (f"As of {{cur}}, what was my {label}?", f"What had I told you about my {label} as of {{cur}}?")
    text = T.SLOTS[topic]
    return {
        "current": text.ask_current,
        "previous": text.ask_previous,
        "when": text.ask_when,
        "count": text.ask_count,
        "preference": text.ask_preference,
    }[kind]


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return options[int(rng.integers(len(options)))]


def _small_talk(rng: np.random.Generator) -> str:
    line = _pick(rng, T.SMALL_TALK)
    return line.format(
        city=_pick(rng, T.SLOTS["home_city"].values),
        species=_pick(rng, ("dog", "cat", "rabbit", "parrot")),
        hobby=_pick(rng, T.SLOTS["hobbies"].values),
        food=_pick(rng, T.SLOTS["favourite_food"].values),
        music=_pick(rng, T.SLOTS["favourite_music"].values),
    )


def _date_text(when: datetime | None) -> str:
    assert when is not None
    return f"{when.day} {when:%B %Y}"

