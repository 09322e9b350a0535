"""The events a scenario yields and the engine replays.

All events are frozen and slotted; nothing downstream mutates them. Times are
timezone-aware datetimes; the engine's clock counts seconds from the
scenario's start. Gold fields (``gold``, ``evidence``, ``superseded``) live
on ``Question`` and never reach a memory system: the engine hands systems the
question text only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Union

from memsim.memory.base import Turn  # re-exported: a turn is an event's payload

__all__ = [
    "Turn",
    "Session",
    "Question",
    "Feedback",
    "Deletion",
    "Tick",
    "Event",
    "Episode",
    "sort_events",
    "episodes_by_user",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Session:
    """A conversation session: turns that arrive together."""

    session_id: str
    """Unique id of the session within the scenario."""
    user_id: str
    """Whose session it is."""
    time: datetime
    """When the session ends and its turns are ingested."""
    turns: tuple[Turn, ...]
    """The turns, in order."""


@dataclass(frozen=True, slots=True)
class Question:
    """A question a user asks; carries its gold fields for scoring only."""

    question_id: str
    """Unique id of this asking (a re-ask has its own id)."""
    user_id: str
    """Who asks."""
    time: datetime
    """When it is asked."""
    text: str
    """The question as the user phrases it (the only field systems see)."""
    gold: str
    """Gold answer at the time of asking."""
    kind: str
    """Question kind / category (e.g. ``current``, ``previous``, ``count``)."""
    evidence: tuple[str, ...]
    """Turn ids that together hold the answer."""
    superseded: tuple[str, ...] = ()
    """Turn ids that state values the answer has replaced (changed facts)."""
    topic: str = ""
    """Fact slot or topic the question is about (for popularity and re-asks)."""
    reask_of: str | None = None
    """Id of the earlier question this one asks again, if any."""
    excluded: str | None = None
    """Why the question is asked but left out of scores (e.g. ``adversarial``); None: scored."""
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Benchmark-specific gold for official scorers (e.g. LongMemEval's answer sessions)."""


@dataclass(frozen=True, slots=True)
class Feedback:
    """Delayed correctness signal for a question, made by the engine after scoring."""

    question_id: str
    """The question the feedback is about."""
    user_id: str
    """Who asked."""
    time: datetime
    """When the feedback arrives."""
    correct: bool
    """Whether the question was served well (its evidence score)."""


@dataclass(frozen=True, slots=True)
class Deletion:
    """A user's request to forget what they said in some turns."""

    deletion_id: str
    """Unique id of the request."""
    user_id: str
    """Who asks."""
    time: datetime
    """When the request arrives."""
    turn_ids: tuple[str, ...]
    """Turns to forget, with everything derived from them."""
    topic: str = ""
    """What the forgotten turns were about."""


@dataclass(frozen=True, slots=True)
class Tick:
    """A maintenance tick: every system's ``maintain`` is called."""

    time: datetime
    """When maintenance runs."""


Event = Union[Session, Question, Deletion, Tick]

_ORDER = {Session: 0, Deletion: 1, Question: 2, Tick: 3}


def sort_events(events: Iterable[Event]) -> list[Event]:
    """Events in time order; at equal times sessions, then deletions, questions, ticks.

    The sort is stable, so events of one kind at the same time keep their order.
    """
    return sorted(events, key=lambda e: (e.time, _ORDER[type(e)]))


@dataclass(frozen=True, slots=True)
class Episode:
    """What the engine plays as one unit: a user's months, a conversation, an instance.

    A longitudinal run plays all its episodes at once against systems built
    once; a static run plays them one after another, each against fresh
    systems.
    """

    episode_id: str
    """Unique id within the run (a part of the run folder is named by it)."""
    events: tuple[Event, ...]
    """The episode's events in time order."""

    @property
    def start(self) -> datetime:
        """Time of the first event."""
        return self.events[0].time

    @property
    def end(self) -> datetime:
        """Time of the last event."""
        return self.events[-1].time


def episodes_by_user(events: Iterable[Event]) -> list[Episode]:
    """One episode per user, in order of first appearance; ticks go to no episode."""
    by_user: dict[str, list[Event]] = {}
    for e in events:
        uid = getattr(e, "user_id", None)
        if uid is not None:
            by_user.setdefault(uid, []).append(e)
    return [Episode(uid, tuple(sort_events(evs))) for uid, evs in by_user.items()]
