"""Known-effect controls: instruments that check the benchmark can see what it measures.

These are not memory systems to use. Each has an effect known by
construction, so that a run shows whether the halves comparison and the
difference in differences (DiD) against the naive control find it:

- ``control-static`` (``StaticControl``): the naive store under another name.
  Its retrieval is identical to naive's, so its DiD against naive must be
  exactly zero with a zero-width interval. Any other figure means the rows of
  two systems are paired or split wrongly (an A/A check of the plumbing).
- ``control-learner`` (``LearnerControl``): a store whose ranking improves
  with feedback. It remembers each question it served (the query vector) and
  what the feedback said about the memories it returned: returned memories
  of a question marked correct are boosted, those of a question marked wrong
  are demoted, for later queries similar to that question. A re-asked
  question that failed is therefore answered from deeper in the ranking, and
  one that succeeded keeps its memories on top. Against naive it must show a
  positive DiD on scenarios with re-asked questions.
- ``control-decay`` (``DecayControl``): a store that forgets progressively. A
  fixed random share of the memories older than ``min_age_days`` is hidden,
  and that share grows linearly with the time since the store was first
  used (``fraction_per_month`` per 30 days); ``maintain`` then deletes them.
  Against naive it must show a negative DiD.

Registered under the ``control-`` prefix, which ``memsim demo`` leaves out.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from memory.base import MemoryStats, Retrieved, Turn
from memory.inject import unit_hash
from memory.naive import NaiveMemory

if TYPE_CHECKING:
    from memory.registry import Resources

__all__ = ["StaticControl", "LearnerControl", "DecayControl"]

_DAY_S = 86400.0
_MONTH_DAYS = 30.0


class StaticControl(NaiveMemory):
    """The naive store under another name: the A/A instrument.

    Behaves exactly like ``NaiveMemory`` (every turn one memory, top-k by
    cosine, feedback and maintenance ignored). Its difference in differences
    against naive is zero by construction; see the module docstring.

    Args:
        resources: Run resources (the shared embedder).
    """

    def __repr__(self) -> str:
        return f"StaticControl(items={self.stats().items})"


@dataclass(slots=True)
class _Lesson:
    """What feedback taught about one served question."""

    query: np.ndarray
    """Unit vector of the question as it was asked."""
    delta: dict[str, float] = field(default_factory=dict)
    """memory id -> +reward (served a correct answer) or -1 (served a wrong one)."""


class LearnerControl:
    """A naive store whose ranking learns from feedback, query by query.

    Retrieval re-scores naive's top ``candidates`` as ``cosine + strength x
    sum(sim x delta)`` over the remembered questions whose cosine ``sim`` to
    the query is at least ``similarity``; ``delta`` is ``+reward`` for a
    memory returned for a question marked correct and -1 for one returned for
    a question marked wrong. The reward is small by default: a strong one
    would pin memories that later go stale when a fact changes. The engine's feedback names the question by the
    ids it was served, which is how a lesson finds its query.

    Args:
        resources: Run resources (the shared embedder).
        strength: Weight of the learned adjustment against cosine (> 0).
        reward: Lesson for a memory that served a correct answer (>= 0; -1 for a wrong one).
        similarity: Least query cosine at which a lesson applies (0..1].
        candidates: Memories re-scored per retrieval (>= 1).
    """

    def __init__(
        self,
        *,
        resources: Resources,
        strength: float = 1.0,
        reward: float = 0.1,
        similarity: float = 0.9,
        candidates: int = 50,
    ) -> None:
        if not strength > 0:
            raise ValueError(f"strength must be positive, got {strength}")
        if not 0 <= similarity <= 1:
            raise ValueError(f"similarity must be in [0, 1], got {similarity}")
        if not isinstance(candidates, int) or candidates < 1:
            raise ValueError(f"candidates must be a positive integer, got {candidates!r}")
        if reward < 0:
            raise ValueError(f"reward must be >= 0, got {reward}")
        self.strength = float(strength)
        self.reward = float(reward)
        self.similarity = float(similarity)
        self.candidates = candidates
        self._inner = NaiveMemory(resources=resources)
        self._lessons: dict[str, list[_Lesson]] = {}
        # Served but not yet judged: (user, ids served) -> query vector.
        self._served: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}

    def __repr__(self) -> str:
        return f"LearnerControl(strength={self.strength}, similarity={self.similarity})"

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Store every turn as naive does."""
        self._inner.ingest(turns, user_id=user_id, now=now)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Naive's candidates re-ranked by what feedback on similar questions said."""
        pool = self._inner.retrieve(query, user_id=user_id, now=now, k=max(k, self.candidates))
        if not pool:
            return []
        qv = self._inner.embedder.encode_one(query)
        bonus: dict[str, float] = {}
        for lesson in self._lessons.get(user_id, ()):
            sim = 1.0 if self.similarity == 0 else float(np.dot(qv, lesson.query))
            if sim < self.similarity:
                continue
            for mid, d in lesson.delta.items():
                bonus[mid] = bonus.get(mid, 0.0) + sim * d
        scored = [(r.score + self.strength * bonus.get(r.memory_id, 0.0), i, r) for i, r in enumerate(pool)]
        # Ties keep naive's order, so with no lessons the ranking is naive's.
        scored.sort(key=lambda s: (-s[0], s[1]))
        out = [
            Retrieved(r.memory_id, r.text, float(s), r.created_at, r.source_turn_ids) for s, _, r in scored[:k]
        ]
        self._served[(user_id, tuple(r.memory_id for r in out))] = qv
        return out

    def feedback(
        self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime
    ) -> None:
        """Remember the served memories as good (correct) or bad (wrong) for this question."""
        qv = self._served.pop((user_id, tuple(retrieved)), None)
        if qv is None or not retrieved:
            return
        held = {m.memory_id for m in self._inner.memories(user_id)}
        sign = self.reward if correct else -1.0
        delta = {mid: sign for mid in retrieved if mid in held}
        if delta:
            self._lessons.setdefault(user_id, []).append(_Lesson(qv, delta))

    def maintain(self, *, now: datetime) -> None:
        """Nothing to do."""

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Forget the memories of ``turn_ids`` and every lesson about them."""
        self._inner.forget(turn_ids, user_id=user_id, now=now)
        held = {m.memory_id for m in self._inner.memories(user_id)}
        kept = []
        for lesson in self._lessons.get(user_id, ()):
            lesson.delta = {m: d for m, d in lesson.delta.items() if m in held}
            if lesson.delta:
                kept.append(lesson)
        if kept:
            self._lessons[user_id] = kept
        else:
            self._lessons.pop(user_id, None)
        self._served = {key: v for key, v in self._served.items() if key[0] != user_id or set(key[1]) <= held}

    def stats(self) -> MemoryStats:
        """Naive's figures; lessons count as metadata (query vector + ids)."""
        base = self._inner.stats()
        extra = 0
        for lessons in self._lessons.values():
            for lesson in lessons:
                extra += lesson.query.nbytes + sum(len(m.encode("utf-8")) + 8 for m in lesson.delta)
        return MemoryStats(
            items=base.items,
            vector_bytes=base.vector_bytes,
            text_bytes=base.text_bytes,
            metadata_bytes=base.metadata_bytes + extra,
        )


class DecayControl:
    """A naive store that loses a growing share of each user's old memories as it is used.

    Each memory gets a fixed draw ``u`` in [0, 1) (a keyed hash of its id, the
    key drawn once from the run's generator). A user's decay clock is the time
    of the newest turn ingested for them; its origin is their first ingest.
    A memory that is ``min_age_days`` older than the clock is gone when ``u <
    fraction_per_month x months from origin to clock``; ``retrieve`` skips it
    and ``maintain`` deletes it. The clock moves with use, not with the time
    of a query, so a store left alone forgets nothing more.

    Args:
        resources: Run resources (embedder and the run's generator).
        fraction_per_month: Growth of the forgotten share per 30 days (> 0).
        min_age_days: Memories younger than this on the clock are never forgotten (>= 0).
    """

    def __init__(self, *, resources: Resources, fraction_per_month: float = 0.15, min_age_days: float = 7.0) -> None:
        if not fraction_per_month > 0:
            raise ValueError(f"fraction_per_month must be positive, got {fraction_per_month}")
        if min_age_days < 0:
            raise ValueError(f"min_age_days must be >= 0, got {min_age_days}")
        self.fraction_per_month = float(fraction_per_month)
        self.min_age_days = float(min_age_days)
        self._inner = NaiveMemory(resources=resources)
        self._salt = int(resources.rng.spawn(1)[0].integers(2**62))
        # user -> (first ingest, newest turn ingested)
        self._clock: dict[str, tuple[datetime, datetime]] = {}

    def __repr__(self) -> str:
        return f"DecayControl(fraction_per_month={self.fraction_per_month}, min_age_days={self.min_age_days})"

    def _gone_test(self, user_id: str) -> Callable[[str, datetime], bool]:
        """A predicate on memories: forgotten on this user's clock?"""
        clock = self._clock.get(user_id)
        if clock is None:
            return lambda memory_id, created_at: False
        origin, now = clock
        months = (now - origin).total_seconds() / (_DAY_S * _MONTH_DAYS)
        share = min(1.0, max(0.0, self.fraction_per_month * months))
        min_age = self.min_age_days * _DAY_S

        def gone(memory_id: str, created_at: datetime) -> bool:
            if share <= 0.0 or (now - created_at).total_seconds() < min_age:
                return False
            return unit_hash(self._salt, f"{user_id}\x1f{memory_id}") < share

        return gone

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Store every turn as naive does and move the user's decay clock."""
        self._inner.ingest(turns, user_id=user_id, now=now)
        if turns:
            newest = max(t.created_at for t in turns)
            origin, clock = self._clock.get(user_id, (now, newest))
            self._clock[user_id] = (origin, max(clock, newest))

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Naive's top ``k`` among the memories not yet forgotten."""
        gone = self._gone_test(user_id)
        hidden = sum(1 for m in self._inner.memories(user_id) if gone(m.memory_id, m.created_at))
        got = self._inner.retrieve(query, user_id=user_id, now=now, k=k + hidden)
        return [r for r in got if not gone(r.memory_id, r.created_at)][:k]

    def feedback(
        self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime
    ) -> None:
        """Ignored: this control only forgets."""

    def maintain(self, *, now: datetime) -> None:
        """Delete every memory that is forgotten on its user's clock."""
        for user_id in sorted(self._clock):
            gone = self._gone_test(user_id)
            doomed = [t for m in self._inner.memories(user_id) if gone(m.memory_id, m.created_at) for t in m.source_turn_ids]
            if doomed:
                self._inner.forget(doomed, user_id=user_id, now=now)

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Forget every memory derived from ``turn_ids``."""
        self._inner.forget(turn_ids, user_id=user_id, now=now)

    def stats(self) -> MemoryStats:
        """Naive's figures for what is still held."""
        return self._inner.stats()
