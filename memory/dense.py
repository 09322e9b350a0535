"""Per-user memory records over one ``VectorStore``: the bookkeeping dense systems share.

A system decides *what* to store; this keeps *how*: int ids in the vector
store, the ``Memory`` record of each id, a turn -> memories index so that
``forget`` finds every memory derived from a turn (merged ones included), a
search that never returns memories created after ``now``, and the byte
counts ``stats()`` reports.

Records may be split into partitions (e.g. one per speaker) so that a system
can search one partition alone; a user's search spans all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime

import numpy as np

from memsim.memory.base import Memory, MemoryStats, Retrieved, Turn, meta_bytes, render_turn, text_bytes
from memsim.memory.store import VectorStore

__all__ = ["DenseIndex", "parse_memory_id"]

_SEP = "\x1f"


def parse_memory_id(memory_id: str) -> int | None:
    """The int id behind a ``"m<int>"`` memory id, or None for anything else."""
    if memory_id[:1] != "m" or not memory_id[1:].isdigit():
        return None
    return int(memory_id[1:])


class DenseIndex:
    """Memories of many users, each with a unit vector, searchable by cosine.

    Ids are ints, unique across users for the life of the index; the public
    ``memory_id`` of id ``i`` is ``"m{i}"``.
    """

    def __init__(self, dim: int) -> None:
        """Make an empty index for vectors of size ``dim``."""
        self.dim = dim
        self.store = VectorStore(dim)
        self._mem: dict[str, dict[int, Memory]] = {}
        self._part: dict[str, dict[int, str]] = {}
        self._parts: dict[str, dict[str, int]] = {}  # user -> partition -> live count
        self._by_turn: dict[str, dict[str, set[int]]] = {}
        self._latest: dict[str, datetime] = {}
        self._next = 0
        self._text_bytes = 0
        self._meta_bytes = 0  # kept as memories come and go, so that stats() costs nothing per memory
        self._held = 0

    # -- writing -------------------------------------------------------------

    def add(
        self,
        user_id: str,
        memories: Sequence[Memory],
        vectors: np.ndarray,
        *,
        partition: str = "",
    ) -> list[int]:
        """Store ``memories`` (their ``memory_id`` is replaced) with unit ``vectors``; return ids."""
        if not memories:
            return []
        vecs = np.asarray(vectors, dtype=np.float32).reshape(len(memories), self.dim)
        ids = list(range(self._next, self._next + len(memories)))
        self._next += len(memories)
        mems = self._mem.setdefault(user_id, {})
        parts = self._part.setdefault(user_id, {})
        by_turn = self._by_turn.setdefault(user_id, {})
        for i, m in zip(ids, memories, strict=True):
            rec = Memory(f"m{i}", m.text, m.created_at, tuple(m.source_turn_ids))
            mems[i] = rec
            parts[i] = partition
            for t in rec.source_turn_ids:
                by_turn.setdefault(t, set()).add(i)
            self._text_bytes += text_bytes(rec.text)
            self._meta_bytes += meta_bytes(rec)
            self._held += 1
            latest = self._latest.get(user_id)
            if latest is None or rec.created_at > latest:
                self._latest[user_id] = rec.created_at
        counts = self._parts.setdefault(user_id, {})
        counts[partition] = counts.get(partition, 0) + len(ids)
        self.store.add(self._key(user_id, partition), ids, vecs)
        return ids

    def add_turns(self, user_id: str, turns: Sequence[Turn], vectors: np.ndarray) -> list[int]:
        """Store each turn as one memory (``render_turn`` text, the turn as provenance) in its speaker's partition.

        ``vectors`` are the unit vectors of the rendered turns, one per turn. Returns the ids in turn order.
        """
        ids = [0] * len(turns)
        by_speaker: dict[str, list[int]] = {}
        for n, t in enumerate(turns):
            by_speaker.setdefault(t.speaker, []).append(n)
        for speaker, rows in by_speaker.items():
            new = self.add(
                user_id,
                [Memory("", render_turn(turns[n]), turns[n].created_at, (turns[n].turn_id,)) for n in rows],
                vectors[rows],
                partition=speaker,
            )
            for n, i in zip(rows, new, strict=True):
                ids[n] = i
        return ids

    def remove(self, user_id: str, ids: Iterable[int]) -> int:
        """Remove memories ``ids`` of ``user_id``; returns how many were removed."""
        mems = self._mem.get(user_id)
        if not mems:
            return 0
        by_part: dict[str, list[int]] = {}
        by_turn = self._by_turn[user_id]
        for i in set(ids):
            rec = mems.pop(i, None)
            if rec is None:
                continue
            by_part.setdefault(self._part[user_id].pop(i), []).append(i)
            self._text_bytes -= text_bytes(rec.text)
            self._meta_bytes -= meta_bytes(rec)
            self._held -= 1
            for t in rec.source_turn_ids:
                holders = by_turn.get(t)
                if holders is not None:
                    holders.discard(i)
                    if not holders:
                        del by_turn[t]
        removed = 0
        for part, pids in by_part.items():
            removed += self.store.remove(self._key(user_id, part), sorted(pids))
            self._parts[user_id][part] -= len(pids)
        return removed

    # -- reading -------------------------------------------------------------

    def get(self, user_id: str, i: int) -> Memory:
        """The record of id ``i``."""
        return self._mem[user_id][i]

    def has(self, user_id: str, i: int) -> bool:
        """Whether ``user_id`` holds id ``i``."""
        return i in self._mem.get(user_id, ())

    def partition(self, user_id: str, i: int) -> str:
        """The partition id ``i`` was stored in."""
        return self._part[user_id][i]

    def vector(self, user_id: str, i: int) -> np.ndarray:
        """The stored unit vector of id ``i``."""
        return self.store.vector(self._key(user_id, self._part[user_id][i]), i)

    def matrix(self, user_id: str, partition: str = "") -> tuple[np.ndarray, np.ndarray]:
        """Ids and unit vectors of one partition of ``user_id``, rows in storage order.

        The vectors may be a read-only view of the store (``VectorStore.matrix``):
        use them before the next ``add`` or ``remove``.
        """
        return self.store.matrix(self._key(user_id, partition))

    def ids(self, user_id: str) -> list[int]:
        """Ids of ``user_id``, oldest id first."""
        return sorted(self._mem.get(user_id, ()))

    def users(self) -> list[str]:
        """Users with at least one memory, sorted."""
        return sorted(u for u, m in self._mem.items() if m)

    def count(self, user_id: str | None = None) -> int:
        """Memories of ``user_id`` (all users when None)."""
        if user_id is None:
            return self._held
        return len(self._mem.get(user_id, ()))

    def derived(self, user_id: str, turn_ids: Collection[str]) -> list[int]:
        """Ids of every memory whose provenance meets ``turn_ids``."""
        by_turn = self._by_turn.get(user_id, {})
        out: set[int] = set()
        for t in turn_ids:
            out |= by_turn.get(t, set())
        return sorted(out)

    def retrieved(self, user_id: str, i: int, score: float) -> Retrieved:
        """A ``Retrieved`` for id ``i`` with ``score``."""
        m = self._mem[user_id][i]
        return Retrieved(m.memory_id, m.text, float(score), m.created_at, m.source_turn_ids)

    def search(
        self,
        user_id: str,
        query: np.ndarray,
        k: int,
        *,
        now: datetime | None = None,
        partition: str | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(id, cosine)`` of ``user_id``, created at or before ``now``.

        Args:
            user_id: whose memories.
            query: unit query vector.
            k: how many at most.
            now: the time filter (None: no filter).
            partition: search this partition only (None: all of the user's).
        """
        counts = self._parts.get(user_id)
        if not counts or k <= 0:
            return []
        parts = [partition] if partition is not None else sorted(p for p, n in counts.items() if n > 0)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        hits: list[tuple[int, float]] = []
        for part in parts:
            hits.extend(self._search_part(user_id, part, q, k, now))
        hits.sort(key=lambda h: (-h[1], h[0]))
        return hits[:k]

    def _search_part(
        self, user_id: str, part: str, q: np.ndarray, k: int, now: datetime | None
    ) -> list[tuple[int, float]]:
        total = self._parts[user_id].get(part, 0)
        if total <= 0:
            return []
        mems = self._mem[user_id]
        latest = self._latest.get(user_id)
        where: Callable[[int], bool] | None = None
        if now is not None and latest is not None and latest > now:
            # Only then can a memory lie in the future of ``now``; the store widens its search.
            cutoff = now
            where = lambda i: mems[i].created_at <= cutoff  # noqa: E731
        return self.store.search(self._key(user_id, part), q, min(k, total), where=where)

    def stats(self) -> MemoryStats:
        """Items, vector bytes, text bytes and provenance bytes (running totals)."""
        return MemoryStats(
            items=self.count(),
            vector_bytes=self.store.nbytes,
            text_bytes=self._text_bytes,
            metadata_bytes=self._meta_bytes,
        )

    @staticmethod
    def _key(user_id: str, partition: str) -> str:
        return user_id if not partition else f"{user_id}{_SEP}{partition}"
