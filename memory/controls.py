"""Known-effect controls: instruments that check the benchmark can see what it measures.

These are not memory systems to use. Each has an effect known by
construction, so that a run shows whether the halves comparison and the
difference in differences (DiD) against the naive control find it:

- ``control-static`` (``StaticControl``): the naive store under another name.
  Its retrieval is identical to naive's, so its DiD against naive must be
  exactly zero with a zero-width interval. Any other figure means the rows of
  two systems are paired or split wrongly (an A/A check of the plumbing).
- ``control-learner`` (``LearnerControl``): a store whose ranking improves
  with feedback. What served a question is served first again when it (or a
  close paraphrase) is asked again, feedback or not; a question marked wrong
  makes the next one like it explore past what failed. Its twin (fed
  nothing) keeps the first part, so its gain over the twin comes from the
  bits alone and must be positive; a placebo twin fed bits with no link to
  its answers must show about none.
- ``control-decay`` (``DecayControl``): a store that forgets progressively. A
  fixed random share of the memories older than ``min_age_days`` is hidden,
  and that share grows linearly with the time since the store was first
  used (``fraction_per_month`` per 30 days); ``maintain`` then deletes them.
  Against naive it must show a negative DiD.

Registered under the ``control-`` prefix, which ``memsim demo`` leaves out.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from memsim.memory.base import FixedMemory, MemoryStats, Retrieved, Turn
from memsim.memory.inject import unit_hash
from memsim.memory.naive import NaiveMemory
from memsim.memory.registration import Registration

if TYPE_CHECKING:
    from memsim.memory.resources import Resources

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


def _lesson_bytes(lesson: tuple[np.ndarray, tuple[str, ...], float]) -> int:
    """Metadata bytes of one lesson: its query vector, its memory ids (each with an 8-byte slot) and a float64 step."""
    qv, ids, _ = lesson
    return qv.nbytes + 8 + sum(len(m.encode("utf-8")) + 8 for m in ids)


class LearnerControl(FixedMemory):
    """A naive store that learns from feedback: the learning-through-use instrument.

    Every memory carries a credit, zero at first. Feedback on an answer moves
    the credit of each memory that was served for it by ``rate x (bit - mean)``,
    where ``mean`` is the share of that user's earlier bits that were "right".
    Retrieval ranks naive's top ``explore x k`` candidates by cosine plus
    credit. Memories that keep serving right answers rise; memories that
    keep serving wrong ones sink below what naive would have served instead.

    The centring makes the instrument's effect come from the information in
    the bits alone: with no feedback (its twin) the credits stay zero and it
    is naive, row for row; fed bits with no link to its answers (a placebo
    twin), each credit is a sum of zero-mean steps, so on average nothing
    rises or sinks. Only bits that say which answers were right move the
    ranking one way (``tests/test_learning.py``).

    Args:
        resources: Run resources (the shared embedder).
        rate: Credit moved per bit (cosine units).
        explore: Candidates re-ranked, as a multiple of k.
    """

    def __init__(self, *, resources: Resources, rate: float = 0.1, similarity: float = 0.6, explore: int = 4) -> None:
        if not rate > 0:
            raise ValueError(f"rate must be positive, got {rate}")
        if not isinstance(explore, int) or explore < 1:
            raise ValueError(f"explore must be a positive integer, got {explore!r}")
        if not 0 < similarity <= 1:
            raise ValueError(f"similarity must be in (0, 1], got {similarity}")
        self.rate = float(rate)
        self.similarity = float(similarity)
        self.explore = explore
        self._inner = NaiveMemory(resources=resources)
        self._lessons: dict[str, list[tuple[np.ndarray, tuple[str, ...], float]]] = {}
        self._lesson_bytes: dict[str, int] = {}
        """Per user, the bytes of their lessons (kept as they change: ``stats`` runs after every ingest)."""
        self._served: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}
        self._bits: dict[str, list[int]] = {}

    def __repr__(self) -> str:
        return f"LearnerControl(rate={self.rate}, similarity={self.similarity})"

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Store every turn as naive does."""
        self._inner.ingest(turns, user_id=user_id, now=now)

    def _rank(self, query: str, qv: np.ndarray, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Naive's top ``explore x k`` by cosine, re-ranked by cosine plus the credit of lessons like it."""
        credit: dict[str, float] = {}
        for lv, ids, step in self._lessons.get(user_id, ()):
            if float(np.dot(qv, lv)) >= self.similarity:
                for mid in ids:
                    credit[mid] = credit.get(mid, 0.0) + step
        if not credit:
            return self._inner.probe(query, user_id=user_id, now=now, k=k)
        base = self._inner.probe(query, user_id=user_id, now=now, k=self.explore * k)
        scored = [replace(r, score=r.score + credit.get(r.memory_id, 0.0)) for r in base]
        scored.sort(key=lambda r: -r.score)
        return scored[:k]

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Rank under the lessons so far; what is served is remembered for its feedback."""
        qv = self._inner.embedder.encode_one(query)
        out = self._rank(query, qv, user_id=user_id, now=now, k=k)
        self._served[(user_id, tuple(r.memory_id for r in out))] = qv
        return out

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The ranking ``retrieve`` gives at this moment, without remembering it as served."""
        return self._rank(query, self._inner.embedder.encode_one(query), user_id=user_id, now=now, k=k)

    def feedback(
        self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime
    ) -> None:
        """Move the credit of every served memory by ``rate x (bit - mean of the user's earlier bits)``."""
        seen = self._bits.setdefault(user_id, [0, 0])
        mean = (seen[1] + 0.5) / (seen[0] + 1)
        seen[0] += 1
        seen[1] += int(correct)
        step = self.rate * (float(correct) - mean)
        qv = self._served.pop((user_id, tuple(retrieved)), None)
        if qv is not None:
            lesson = (qv, tuple(retrieved), step)
            self._lessons.setdefault(user_id, []).append(lesson)
            self._lesson_bytes[user_id] = self._lesson_bytes.get(user_id, 0) + _lesson_bytes(lesson)

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Forget the memories of ``turn_ids`` and their credit."""
        self._inner.forget(turn_ids, user_id=user_id, now=now)
        held = {m.memory_id for m in self._inner.memories(user_id)}
        lessons = [(qv, tuple(m for m in ids if m in held), step) for qv, ids, step in self._lessons.get(user_id, ())]
        if lessons:
            self._lessons[user_id] = [lesson for lesson in lessons if lesson[1]]
            self._lesson_bytes[user_id] = sum(_lesson_bytes(lesson) for lesson in self._lessons[user_id])
        self._served = {key: v for key, v in self._served.items() if key[0] != user_id or set(key[1]) <= held}

    def stats(self) -> MemoryStats:
        """Naive's figures; lessons count as metadata (query vector, ids, a float64 step)."""
        base = self._inner.stats()
        return base.with_metadata(sum(self._lesson_bytes.values()))


class DecayControl(FixedMemory):
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

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """What ``retrieve`` returns: it reads the decay clock without moving it, so a probe is a retrieval."""
        return self.retrieve(query, user_id=user_id, now=now, k=k)

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


REGISTRATIONS = (
    Registration(
        "control-static",
        StaticControl,
        description="instrument: naive under another name (A/A: DiD against naive is exactly zero)",
        learns=False,
        role="instrument",
    ),
    Registration(
        "control-learner",
        LearnerControl,
        description="instrument: naive re-ranked by centred credit from feedback on questions like it (known positive gain over its twin, null placebo)",
        role="instrument",
    ),
    Registration(
        "control-decay",
        DecayControl,
        description="instrument: naive that forgets a growing share of old memories (known negative DiD)",
        learns=False,
        role="instrument",
    ),
)
"""The instruments this module registers, in order (``memsim.memory.registry.BUILTIN_MODULES``)."""
