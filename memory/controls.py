"""Known-effect controls: instruments that check the benchmark can see what it measures.

These are not memory systems to use. Each has an effect known by
construction, so that a run shows whether the halves comparison and the
difference in differences (DiD) against the naive control find it:

- ``control-static`` (``StaticControl``): the naive store under another name.
  Its retrieval is identical to naive's, so its DiD against naive must be
  exactly zero with a zero-width interval. Any other figure means the rows of
  two systems are paired or split wrongly (an A/A check of the plumbing).
- ``control-learner`` (``LearnerControl``): a store whose ranking improves
  with feedback. Memories that served a question marked correct are pinned
  to that question and served first when it (or a close paraphrase) is asked
  again; a question marked wrong drops the pins of questions like it. Naive
  answers re-asks from an ever larger haystack, the learner from what worked,
  so its advantage grows over the stream. Against naive it must show a
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
from dataclasses import dataclass
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
class _Pin:
    """A confirmed answer: the memories served for a question that feedback marked correct."""

    query: np.ndarray
    """Unit vector of the question as it was asked."""
    ids: tuple[str, ...]
    """The memory ids served, in the order served."""
    correct: bool = True
    """True: a confirmed answer to serve again; False: a failed one to explore past."""


class LearnerControl:
    """A naive store that learns from feedback: the learning-through-use instrument.

    Each question it serves is remembered with its vector and the memory ids
    it was given. Feedback turns that into a lesson for later questions whose
    vector has cosine at least ``similarity`` with it (re-asks, paraphrases,
    questions on the same topic):

    - marked correct: the served memories are pinned and served first, in
      their old order, then naive's ranking fills the rest;
    - marked wrong: the next similar question keeps the better half of what
      failed and explores past the rest, drawing from naive's top
      ``explore x k``; failures accumulate, so each one explores deeper.

    A new lesson replaces the lessons of questions like it, so a pin that went
    stale when a fact changed costs one wrong answer and is gone. Naive
    answers from an ever larger haystack and slips; the learner draws on
    more lessons the longer it runs, so its advantage grows over the stream
    (a positive difference in differences, ``tests/test_controls.py``).

    Args:
        resources: Run resources (the shared embedder).
        similarity: Least query cosine at which a lesson applies (0..1].
        explore: After a failure, how many times k candidates to explore.
    """

    def __init__(self, *, resources: Resources, similarity: float = 0.6, explore: int = 4) -> None:
        if not 0 < similarity <= 1:
            raise ValueError(f"similarity must be in (0, 1], got {similarity}")
        if not isinstance(explore, int) or explore < 1:
            raise ValueError(f"explore must be a positive integer, got {explore!r}")
        self.similarity = float(similarity)
        self.explore = explore
        self._inner = NaiveMemory(resources=resources)
        self._pins: dict[str, list[_Pin]] = {}
        # Served but not yet judged: (user, ids served) -> query vector.
        self._served: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}

    def __repr__(self) -> str:
        return f"LearnerControl(similarity={self.similarity})"

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Store every turn as naive does."""
        self._inner.ingest(turns, user_id=user_id, now=now)

    def _like(self, user_id: str, qv: np.ndarray) -> list[tuple[float, int]]:
        pins = self._pins.get(user_id, [])
        sims = [(float(np.dot(qv, p.query)), i) for i, p in enumerate(pins)]
        return sorted((s for s in sims if s[0] >= self.similarity), reverse=True)

    def _rank(self, query: str, qv: np.ndarray, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """What to serve for ``query`` (unit vector ``qv``) under the lessons so far; changes nothing."""
        like = self._like(user_id, qv)
        pin = self._pins[user_id][like[0][1]] if like else None
        if pin is not None and not pin.correct:
            # A question like this failed: keep the best half of what was served, explore past the rest.
            base = self._inner.probe(query, user_id=user_id, now=now, k=self.explore * k)
            failed = set(pin.ids)
            keep = [r for r in base[: k] if r.memory_id in failed][: k // 2]
            kept = {r.memory_id for r in keep}
            out = keep + [r for r in base if r.memory_id not in failed and r.memory_id not in kept]
            out += [r for r in base if r.memory_id in failed and r.memory_id not in kept]
            return out[:k]
        base = self._inner.probe(query, user_id=user_id, now=now, k=k)
        out: list[Retrieved] = []
        if pin is not None:
            held = {m.memory_id: m for m in self._inner.memories(user_id)}
            for rank, mid in enumerate(pin.ids):
                m = held.get(mid)
                if m is not None and m.created_at <= now:
                    out.append(Retrieved(m.memory_id, m.text, 2.0 - rank / (len(pin.ids) + 1), m.created_at, m.source_turn_ids))
            seen = {r.memory_id for r in out}
            out.extend(r for r in base if r.memory_id not in seen)
            return out[:k]
        return base

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Pinned memories of the most similar confirmed question first, then naive's ranking.

        What is served is remembered with the question's vector, so that
        feedback on it can become a lesson.
        """
        qv = self._inner.embedder.encode_one(query)
        out = self._rank(query, qv, user_id=user_id, now=now, k=k)
        self._served[(user_id, tuple(r.memory_id for r in out))] = qv
        return out

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The ranking ``retrieve`` gives at this moment, without remembering it as served.

        A probe's results never become a lesson: feedback naming them finds
        no served question unless a ``retrieve`` served the same ids.
        """
        return self._rank(query, self._inner.embedder.encode_one(query), user_id=user_id, now=now, k=k)

    def feedback(
        self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime
    ) -> None:
        """Pin what served a correct answer; drop pins of questions like one answered wrong."""
        qv = self._served.pop((user_id, tuple(retrieved)), None)
        if qv is None:
            return
        like = self._like(user_id, qv)
        pins = self._pins.get(user_id, [])
        failed: set[str] = set()
        for _, i in like:
            if not pins[i].correct:
                failed.update(pins[i].ids)
        drop = {i for _, i in like}
        pins = [p for i, p in enumerate(pins) if i not in drop]
        if retrieved:
            # Wrong answers accumulate: each failure pushes exploration deeper.
            ids = tuple(retrieved) if correct else tuple(dict.fromkeys([*failed, *retrieved]))
            pins.append(_Pin(qv, ids, correct))
        if pins:
            self._pins[user_id] = pins
        else:
            self._pins.pop(user_id, None)

    def maintain(self, *, now: datetime) -> None:
        """Nothing to do."""

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Forget the memories of ``turn_ids`` and drop them from every pin."""
        self._inner.forget(turn_ids, user_id=user_id, now=now)
        held = {m.memory_id for m in self._inner.memories(user_id)}
        pins = []
        for p in self._pins.get(user_id, ()):
            ids = tuple(m for m in p.ids if m in held)
            if ids:
                pins.append(_Pin(p.query, ids, p.correct))
        if pins:
            self._pins[user_id] = pins
        else:
            self._pins.pop(user_id, None)
        self._served = {key: v for key, v in self._served.items() if key[0] != user_id or set(key[1]) <= held}

    def stats(self) -> MemoryStats:
        """Naive's figures; pins count as metadata (query vector + ids)."""
        base = self._inner.stats()
        extra = sum(p.query.nbytes + sum(len(m.encode("utf-8")) + 8 for m in p.ids) for ps in self._pins.values() for p in ps)
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

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """What ``retrieve`` returns: it reads the decay clock without moving it, so a probe is a retrieval."""
        return self.retrieve(query, user_id=user_id, now=now, k=k)

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
