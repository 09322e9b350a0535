"""The static control: every turn stored verbatim, retrieved by cosine.

``NaiveMemory`` never changes what it holds except on ``forget``: feedback and
maintenance do nothing. It is the baseline every learning system is compared
with on the same question stream.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memsim.memory.base import FixedMemory, Memory, MemoryStats, Retrieved, Turn, render_turn, text_bytes
from memsim.memory.embed import TextEmbedder
from memsim.memory.registration import Registration
from memsim.memory.resources import Resources
from memsim.memory.store import VectorStore

__all__ = ["NaiveMemory", "TIMESTAMP_BYTES", "VECTOR_ID_BYTES"]

TIMESTAMP_BYTES = 8
"""Bytes counted per stored timestamp (an int64 of microseconds)."""
VECTOR_ID_BYTES = 8
"""Bytes counted per int64 vector id."""


@dataclass(slots=True)
class _UserMemories:
    """One user's memories and the indexes over them."""

    by_vid: dict[int, Memory] = field(default_factory=dict)
    """Memory by its int64 vector id."""
    by_turn: dict[str, set[int]] = field(default_factory=dict)
    """Provenance index: turn id -> vector ids of memories derived from it."""
    by_memory_id: dict[str, int] = field(default_factory=dict)
    """Memory id -> vector id."""


def _metadata_bytes(memory: Memory) -> int:
    """Bytes of per-memory state other than text and vector.

    Counted as the UTF-8 bytes of the memory id and of every provenance turn
    id, plus one int64 timestamp and one int64 vector id.
    """
    return (
        text_bytes(memory.memory_id)
        + sum(text_bytes(t) for t in memory.source_turn_ids)
        + TIMESTAMP_BYTES
        + VECTOR_ID_BYTES
    )


class NaiveMemory(FixedMemory):
    """Every turn as one memory; top-k by cosine within the user.

    A memory's text is ``render_turn(turn)``, its id the turn id, its
    provenance ``(turn_id,)`` and its time the turn's ``created_at``.
    Ingesting a turn id the user already holds is ignored (ingest is
    idempotent), so replaying a session does not duplicate memories. A turn
    that was forgotten and arrives again is stored again.

    Args:
        resources: Run resources; ``resources.embedder`` is used unless
            ``embedder`` is given.
        embedder: Embedder to use instead of the run's shared one.
    """

    def __init__(self, *, resources: Resources, embedder: TextEmbedder | None = None) -> None:
        self._embedder: TextEmbedder = embedder if embedder is not None else resources.embedder
        self._store = VectorStore(self._embedder.dim)
        self._users: dict[str, _UserMemories] = {}
        self._next_vid = 0
        self._text_bytes = 0
        self._metadata_bytes = 0

    def __repr__(self) -> str:
        return f"NaiveMemory(embedder={self._embedder!r}, items={self._store.count()})"

    @property
    def embedder(self) -> TextEmbedder:
        """The embedder in use."""
        return self._embedder

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Store each new turn as one memory, embedding them in one batch.

        Raises:
            ValueError: a turn belongs to another user.
        """
        user = self._users.get(user_id)
        held = user.by_memory_id if user is not None else {}
        fresh: dict[str, Turn] = {}
        for turn in turns:
            if turn.user_id != user_id:
                raise ValueError(
                    f"turn {turn.turn_id!r} belongs to user {turn.user_id!r}, ingested for {user_id!r}"
                )
            if turn.turn_id not in held and turn.turn_id not in fresh:
                fresh[turn.turn_id] = turn
        if not fresh:
            return
        memories = [
            Memory(
                memory_id=turn.turn_id,
                text=render_turn(turn),
                created_at=turn.created_at,
                source_turn_ids=(turn.turn_id,),
            )
            for turn in fresh.values()
        ]
        vectors = self._embedder.encode([m.text for m in memories])
        vids = list(range(self._next_vid, self._next_vid + len(memories)))
        self._store.add(user_id, vids, vectors)
        self._next_vid += len(memories)
        if user is None:
            user = self._users[user_id] = _UserMemories()
        for vid, memory in zip(vids, memories, strict=True):
            user.by_vid[vid] = memory
            user.by_memory_id[memory.memory_id] = vid
            for turn_id in memory.source_turn_ids:
                user.by_turn.setdefault(turn_id, set()).add(vid)
            self._text_bytes += text_bytes(memory.text)
            self._metadata_bytes += _metadata_bytes(memory)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Top ``k`` memories of ``user_id`` by cosine, none created after ``now``.

        Raises:
            ValueError: ``k`` < 1.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        user = self._users.get(user_id)
        if user is None:
            return []
        by_vid = user.by_vid
        hits = self._store.search(
            user_id,
            self._embedder.encode_one(query),
            k,
            where=lambda vid: by_vid[vid].created_at <= now,
        )
        out = []
        for vid, score in hits:
            m = by_vid[vid]
            out.append(
                Retrieved(
                    memory_id=m.memory_id,
                    text=m.text,
                    score=score,
                    created_at=m.created_at,
                    source_turn_ids=m.source_turn_ids,
                )
            )
        return out

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """What ``retrieve`` returns: retrieval changes nothing here, so a probe is a retrieval."""
        return self.retrieve(query, user_id=user_id, now=now, k=k)

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Remove every memory of ``user_id`` whose provenance includes one of ``turn_ids``."""
        user = self._users.get(user_id)
        if user is None:
            return
        doomed: set[int] = set()
        for turn_id in turn_ids:
            doomed.update(user.by_turn.get(turn_id, ()))
        if not doomed:
            return
        self._store.remove(user_id, doomed)
        for vid in doomed:
            memory = user.by_vid.pop(vid)
            del user.by_memory_id[memory.memory_id]
            for turn_id in memory.source_turn_ids:
                vids = user.by_turn.get(turn_id)
                if vids is not None:
                    vids.discard(vid)
                    if not vids:
                        del user.by_turn[turn_id]
            self._text_bytes -= text_bytes(memory.text)
            self._metadata_bytes -= _metadata_bytes(memory)
        if not user.by_vid:
            del self._users[user_id]

    def stats(self) -> MemoryStats:
        """Items, vector bytes (float32), text bytes (UTF-8) and metadata bytes.

        Metadata bytes are the UTF-8 bytes of each memory id and each of its
        provenance turn ids, plus ``TIMESTAMP_BYTES`` and ``VECTOR_ID_BYTES``
        per memory. No LLM calls are made.
        """
        return MemoryStats(
            items=self._store.count(),
            vector_bytes=self._store.nbytes,
            text_bytes=self._text_bytes,
            metadata_bytes=self._metadata_bytes,
        )

    def memories(self, user_id: str) -> list[Memory]:
        """Every memory ``user_id`` holds, oldest first (ties by id); for inspection and tests."""
        user = self._users.get(user_id)
        if user is None:
            return []
        return sorted(user.by_vid.values(), key=lambda m: (m.created_at, m.memory_id))


REGISTRATIONS = (
    Registration(
        "naive",
        NaiveMemory,
        description="every turn stored as one memory; top-k by cosine",
        learns=False,
        role="baseline",
    ),
)
"""The system this module registers (``memsim.memory.registry.BUILTIN_MODULES``)."""
