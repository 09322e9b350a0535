"""Records and the one protocol every memory system satisfies.

A memory system sees what a deployed one would: turns as they arrive,
questions, a delayed correctness signal, deletion requests and maintenance
ticks. It never sees gold answers or evidence ids. Provenance
(``source_turn_ids``) is what lets retrieval be scored without an LLM and
lets deletion be verified.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Turn",
    "Memory",
    "Retrieved",
    "MemoryStats",
    "MemorySystem",
    "text_bytes",
    "meta_bytes",
    "render_turn",
    "PerUserTally",
    "FixedMemory",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Turn:
    """One utterance in a conversation."""

    turn_id: str
    """Stable id, unique within a scenario (e.g. ``"conv-26:D1:3"``)."""
    user_id: str
    """The user whose history this turn belongs to."""
    speaker: str
    """Who spoke: a name, ``"user"`` or ``"assistant"``."""
    text: str
    """What was said."""
    created_at: datetime
    """When it was said (timezone-aware)."""
    session_id: str
    """The session the turn belongs to."""
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Extra fields (image captions, roles); never gold information."""


@dataclass(frozen=True, slots=True)
class Memory:
    """A stored memory as a system keeps it."""

    memory_id: str
    """Id, stable for the life of the memory."""
    text: str
    """The text that was stored."""
    created_at: datetime
    """When the memory came into being (its newest source turn)."""
    source_turn_ids: tuple[str, ...]
    """Provenance: every turn this memory was derived from."""


@dataclass(frozen=True, slots=True)
class Retrieved:
    """One retrieval result, best first in the list ``retrieve`` returns."""

    memory_id: str
    """Id of the memory."""
    text: str
    """Text of the memory, as the reader will see it."""
    score: float
    """The system's ranking score (higher is better)."""
    created_at: datetime
    """When the memory came into being."""
    source_turn_ids: tuple[str, ...]
    """Provenance: every turn this memory was derived from."""


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """What a system holds and what it has spent so far."""

    items: int = 0
    """Number of memories stored (all users)."""
    vector_bytes: int = 0
    """Bytes of stored vectors."""
    text_bytes: int = 0
    """Bytes of stored text (UTF-8)."""
    metadata_bytes: int = 0
    """Bytes of other per-memory state (ids, provenance, weights)."""
    llm_calls: int = 0
    """LLM calls the system made itself (extraction, summaries)."""
    tokens: int = 0
    """Tokens those calls used (prompt + completion)."""

    @property
    def bytes(self) -> int:
        """Total bytes: vectors + text + metadata."""
        return self.vector_bytes + self.text_bytes + self.metadata_bytes

    def with_metadata(self, extra: int) -> MemoryStats:
        """Memories and vectors and text as held underneath, plus ``extra`` bytes of a wrapper's own state.

        Only the store's figures carry over: the wrapper's own LLM calls and tokens are its to add.
        """
        return MemoryStats(
            items=self.items,
            vector_bytes=self.vector_bytes,
            text_bytes=self.text_bytes,
            metadata_bytes=self.metadata_bytes + extra,
        )


class PerUserTally:
    """A per-user figure recounted only for the users touched since it was last read.

    ``stats()`` is read after every session of every system; summing a state
    over all users each time makes a run quadratic in its users. A store
    calls ``touch(user_id)`` wherever that user's state may change (and
    ``touch_all`` for passes over every user); ``total`` then recounts those
    users alone and sums the kept figures.
    """

    __slots__ = ("_kept", "_stale")

    def __init__(self) -> None:
        self._kept: dict[str, int] = {}
        self._stale: set[str] = set()

    def touch(self, user_id: str) -> None:
        """``user_id``'s state may have changed."""
        self._stale.add(user_id)

    def touch_all(self, user_ids: Collection[str]) -> None:
        """Every user in ``user_ids`` may have changed."""
        self._stale.update(user_ids)

    def total(self, states: Mapping[str, Any], count: Callable[[Any], int]) -> int:
        """The sum over users of ``count(states[user_id])``, recounting only the touched users."""
        for user_id in self._stale:
            state = states.get(user_id)
            if state is None:
                self._kept.pop(user_id, None)
            else:
                self._kept[user_id] = int(count(state))
        self._stale.clear()
        return sum(self._kept.values())


def text_bytes(text: str) -> int:
    """UTF-8 size of ``text``; the unit ``MemoryStats.text_bytes`` counts in."""
    return len(text.encode("utf-8"))


def meta_bytes(m: Memory) -> int:
    """Bytes counted as metadata per memory: its id, a timestamp and its provenance ids."""
    return len(m.memory_id) + 8 + sum(len(t) for t in m.source_turn_ids)


@runtime_checkable
class MemorySystem(Protocol):
    """The seven methods the engine and the static protocols call.

    Methods return ``None`` except ``retrieve``, ``probe`` and ``stats``. Users
    never see each other's memories; ``retrieve`` and ``probe`` never return a
    memory created after ``now``; after ``forget`` nothing derived from the
    forgotten turns may be retrieved again. Only the stream (``ingest``,
    ``retrieve``, ``feedback``, ``maintain``, ``forget``) may change a system;
    measurements read it through ``probe``.
    """

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Take in the turns of a session (or part of one) as they arrive."""
        ...

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Return at most ``k`` memories for ``query``, best first."""
        ...

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Read-only retrieval, for measurements (deletion checks, audits, probes).

        Returns the same ranking ``retrieve`` would return at that moment
        (same ids, order and scores), but changes nothing: no hit counts, no
        co-retrieval counts, no record of what was served, no cache that a
        later ``retrieve`` would see differently, no random draws that shift
        later behaviour. Any number of probes leaves ``stats()`` and every
        later result of the stream exactly as they would have been without
        them.
        """
        ...

    def feedback(
        self,
        question_id: str,
        retrieved: Sequence[str],
        correct: bool,
        *,
        user_id: str,
        now: datetime,
    ) -> None:
        """Learn that the memories ``retrieved`` (ids) for a question served it well or not."""
        ...

    def maintain(self, *, now: datetime) -> None:
        """Periodic housekeeping (decay, consolidation)."""
        ...

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Remove every memory derived from ``turn_ids``, merged and summarised ones included."""
        ...

    def stats(self) -> MemoryStats:
        """What is held and what was spent so far."""
        ...


def render_turn(turn: Turn) -> str:
    """The memory text of a turn: ``"<date> | <speaker>: <text>"``.

    The date is the dataset's own date string when the turn carries one in
    ``metadata["date_text"]`` (LoCoMo's ``"1:56 pm on 8 May, 2023"``), else
    ``created_at`` as ``YYYY-MM-DD HH:MM``. Systems that store turns verbatim
    use this, so that every reader sees when a memory was said. A turn whose
    ``metadata["verbatim"]`` is true is its text alone (LongMemEval's official
    retrieval corpus indexes the content as written).
    """
    if turn.metadata.get("verbatim"):
        return turn.text
    date = turn.metadata.get("date_text") or turn.created_at.strftime("%Y-%m-%d %H:%M")
    return f"{date} | {turn.speaker}: {turn.text}"


class FixedMemory:
    """Mixin for systems that neither learn from feedback nor keep house.

    Inheriting it is optional (the protocol is structural); it only saves a
    fixed system from writing out the two calls that do nothing.
    """

    __slots__ = ()

    def feedback(
        self,
        question_id: str,
        retrieved: Sequence[str],
        correct: bool,
        *,
        user_id: str,
        now: datetime,
    ) -> None:
        """Ignored: a fixed system does not learn."""

    def maintain(self, *, now: datetime) -> None:
        """Nothing to maintain."""
