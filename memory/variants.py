"""Retrieval variants that wrap any registered system: recency boosts, cross-encoder rerank, per-speaker stores.

A re-scoring variant builds its inner system from the registry (``inner`` +
``inner_args``), asks it for more candidates than requested, re-scores them
and returns the top ``k``. Everything else (ingest, feedback, maintenance,
forgetting, stats) goes to the inner system unchanged, so provenance and
deletion stay its own. ``probe`` asks the inner system's ``probe`` for the
candidates, so a measurement changes nothing on either side.

- ``PositionRecencyMemory`` (published): ``score x (1 + 0.15 x position)``
  over ``2k`` candidates, position = where the memory's turn stands in the
  user's history, 0 for the first turn ingested, 1 for the latest.
- ``RecencyMemory`` (memsim): ``score + 0.1 x 0.5 ** (age_days / 30)``.
- ``RerankMemory`` (published): a cross-encoder over 50 candidates, top ``k``.
- ``PerSpeakerMemory`` (published LoCoMo retrieval): each speaker's turns in
  a store of their own, the top ``k_per_speaker`` of each returned together.
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsim.memory.base import MemoryStats, Retrieved, Turn
from memsim.memory.registration import Registration
from memsim.core.errors import UserError

if TYPE_CHECKING:
    from memsim.memory.base import MemorySystem
    from memsim.memory.resources import Resources

__all__ = ["PositionRecencyMemory", "RecencyMemory", "RerankMemory", "PerSpeakerMemory", "load_cross_encoder"]


class _Forward:
    """The calls a wrapper leaves to its inner system (``self.inner``): housekeeping, stats, report."""

    inner: MemorySystem

    def maintain(self, *, now: datetime) -> None:
        """Maintain the inner system."""
        self.inner.maintain(now=now)

    def stats(self) -> MemoryStats:
        """The inner system's stats."""
        return self.inner.stats()

    def report(self) -> dict[str, Any]:
        """The inner system's ``report()``, if it has one, else ``{}``."""
        fn = getattr(self.inner, "report", None)
        return dict(fn()) if callable(fn) else {}


class _Wrapper(_Forward):
    """Forwards the protocol to the inner system; subclasses re-score its candidates (``_rescore``)."""

    def __init__(
        self, *, resources: Resources, inner: str, inner_args: Mapping[str, Any] | None, candidates: int | None
    ) -> None:
        if candidates is not None and (not isinstance(candidates, int) or isinstance(candidates, bool) or candidates < 1):
            raise UserError(f"{type(self).__name__}: candidates must be a positive integer, got {candidates!r}")
        self.inner_name = inner
        self.candidates = candidates
        self.inner: MemorySystem = resources.build(inner, inner_args)

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Ingest into the inner system."""
        self.inner.ingest(turns, user_id=user_id, now=now)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The inner system's candidates (retrieved, with its side effects), re-scored, top ``k``."""
        cands = self.inner.retrieve(query, user_id=user_id, now=now, k=self._pool(k))
        return self._rescore(query, cands, user_id=user_id, now=now, k=k)

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The same ranking from the inner system's ``probe``: nothing changes, here or inside."""
        cands = self.inner.probe(query, user_id=user_id, now=now, k=self._pool(k))
        return self._rescore(query, cands, user_id=user_id, now=now, k=k)

    def _pool(self, k: int) -> int:
        """Candidates asked of the inner system for a request of ``k``."""
        return max(k, self.candidates or k)

    def _rescore(self, query: str, cands: list[Retrieved], *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The top ``k`` of the inner candidates under this variant's score (pure)."""
        raise NotImplementedError

    def feedback(
        self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime
    ) -> None:
        """Pass the signal to the inner system (ids are the inner system's)."""
        self.inner.feedback(question_id, retrieved, correct, user_id=user_id, now=now)

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Forget in the inner system."""
        self.inner.forget(turn_ids, user_id=user_id, now=now)


def _rank(items: list[tuple[float, Retrieved]], k: int) -> list[Retrieved]:
    items.sort(key=lambda p: (-p[0], p[1].memory_id))
    return [
        Retrieved(r.memory_id, r.text, float(s), r.created_at, r.source_turn_ids) for s, r in items[:k]
    ]


class PositionRecencyMemory(_Wrapper):
    """Recency by position, as published: ``score x (1 + weight x position)`` over ``2k`` candidates.

    ``position`` is where the memory's turn stands among the turns the user
    has had ingested so far, in arrival order: ``i / max(n - 1, 1)`` for the
    ``i``-th of ``n`` turns (0 = the first turn, 1 = the latest), counted
    over every turn of the user, all speakers and turns a gate dropped
    included, as the published code counts positions over the whole
    history. A memory made of several turns takes its newest turn; one whose
    turns the wrapper never saw gets 0.5 (the published fallback).
    Forgetting a turn drops its position; positions of the others stay.

    Defaults: ``inner="naive"``, ``weight=0.15``, ``candidates=None``
    (``2 x k``, as published; an int fixes the pool).
    """

    def __init__(
        self,
        *,
        resources: Resources,
        inner: str = "naive",
        inner_args: Mapping[str, Any] | None = None,
        weight: float = 0.15,
        candidates: int | None = None,
    ) -> None:
        """Build ``inner`` with ``inner_args`` from the registry and wrap it."""
        if not isinstance(weight, (int, float)) or isinstance(weight, bool) or weight < 0:
            raise UserError(f"recency: weight must be a non-negative number, got {weight!r}")
        super().__init__(resources=resources, inner=inner, inner_args=inner_args, candidates=candidates)
        self.weight = float(weight)
        self._order: dict[str, dict[str, int]] = {}
        self._count: dict[str, int] = {}

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Number the turns in arrival order, then ingest them into the inner system."""
        order = self._order.setdefault(user_id, {})
        n = self._count.get(user_id, 0)
        for t in turns:
            order.setdefault(t.turn_id, n)
            n += 1
        self._count[user_id] = n
        self.inner.ingest(turns, user_id=user_id, now=now)

    def _pool(self, k: int) -> int:
        return max(k, self.candidates) if self.candidates is not None else 2 * k

    def position(self, memory: Retrieved, *, user_id: str) -> float:
        """The memory's position in the user's history, in [0, 1] (0.5 when unknown)."""
        order = self._order.get(user_id, {})
        seen = [order[t] for t in memory.source_turn_ids if t in order]
        if not seen:
            return 0.5
        return max(seen) / max(self._count.get(user_id, 0) - 1, 1)

    def _rescore(self, query: str, cands: list[Retrieved], *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The inner candidates re-scored by position, top ``k``."""
        return _rank([(r.score * (1.0 + self.weight * self.position(r, user_id=user_id)), r) for r in cands], k)

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Forget in the inner system and drop the turns' positions."""
        self.inner.forget(turn_ids, user_id=user_id, now=now)
        order = self._order.get(user_id, {})
        for t in turn_ids:
            order.pop(t, None)


class RecencyMemory(_Wrapper):
    """Recency-boosted retrieval over any system, by age (memsim's half-life boost).

    New score: ``inner score + weight * 0.5 ** (age_days / half_life_days)``,
    where age is ``now - created_at``. Defaults: ``inner="naive"``,
    ``weight=0.1``, ``half_life_days=30.0``, ``candidates=50``.
    """

    def __init__(
        self,
        *,
        resources: Resources,
        inner: str = "naive",
        inner_args: Mapping[str, Any] | None = None,
        weight: float = 0.1,
        half_life_days: float = 30.0,
        candidates: int = 50,
    ) -> None:
        """Build ``inner`` with ``inner_args`` from the registry and wrap it."""
        if half_life_days <= 0:
            raise UserError(f"recency: half_life_days must be positive, got {half_life_days!r}")
        super().__init__(resources=resources, inner=inner, inner_args=inner_args, candidates=candidates)
        self.weight = float(weight)
        self.half_life_days = float(half_life_days)

    def _rescore(self, query: str, cands: list[Retrieved], *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The inner candidates re-scored with the recency boost, top ``k``."""
        scored = []
        for r in cands:
            age = max(0.0, (now - r.created_at).total_seconds() / 86400.0)
            scored.append((r.score + self.weight * math.pow(0.5, age / self.half_life_days), r))
        return _rank(scored, k)


_CE_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4)
def load_cross_encoder(path: str, max_length: int = 512) -> Any:
    """A sentence-transformers ``CrossEncoder`` from a local folder, loaded once per process.

    Raises:
        UserError: the folder does not exist or holds no loadable model.
    """
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise UserError(f"rerank: model folder {folder} does not exist (argument 'model')")
    with _CE_LOCK:
        # Never reach for a hub: the model is a folder on disk.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import CrossEncoder

        try:
            return CrossEncoder(str(folder), device="cpu", local_files_only=True, max_length=max_length)
        except (OSError, ValueError) as exc:
            raise UserError(f"rerank: cannot load a cross-encoder from {folder}: {exc}") from None


class RerankMemory(_Wrapper):
    """Cross-encoder reranking over any system.

    The inner system proposes ``candidates`` memories; a sentence-transformers
    ``CrossEncoder`` loaded from the local folder ``model`` scores each
    (query, memory text) pair and the best ``k`` by that score are returned
    (``score`` is the cross-encoder's output). As published, the pool is 50
    dense candidates, so reranking changes which memories make the top ``k``
    (a pool of ``k`` could only reorder them). Defaults: ``inner="naive"``,
    ``candidates=50``, ``batch_size=32``, ``max_length=512``; ``model`` has no
    default and must be given (the published model is
    ``cross-encoder/ms-marco-MiniLM-L-6-v2``, used from a local folder).
    """

    def __init__(
        self,
        *,
        resources: Resources,
        model: str | None = None,
        inner: str = "naive",
        inner_args: Mapping[str, Any] | None = None,
        candidates: int = 50,
        batch_size: int = 32,
        max_length: int = 512,
    ) -> None:
        """Build ``inner`` and remember the model folder (loaded on first retrieval)."""
        if not model:
            raise UserError("rerank: argument 'model' (a local cross-encoder folder) is required")
        if not Path(model).expanduser().is_dir():
            raise UserError(f"rerank: model folder {model} does not exist (argument 'model')")
        super().__init__(resources=resources, inner=inner, inner_args=inner_args, candidates=candidates)
        self.model = str(model)
        self.batch_size = int(batch_size)
        self.max_length = int(max_length)

    def _rescore(self, query: str, cands: list[Retrieved], *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The inner candidates re-scored by the cross-encoder, top ``k``."""
        if not cands:
            return []
        encoder = load_cross_encoder(self.model, self.max_length)
        scores = encoder.predict(
            [(query, r.text) for r in cands], batch_size=self.batch_size, show_progress_bar=False
        )
        return _rank([(float(s), r) for s, r in zip(scores, cands, strict=True)], k)


_SUB = "::"


class PerSpeakerMemory(_Forward):
    """Each speaker's turns in a store of their own, as the published LoCoMo runs keep them.

    The inner system (``inner`` + ``inner_args``) holds one store per
    (user, speaker), under the user id ``"<user>::<speaker>"`` (the turns it
    is given carry that user id; turn ids are unchanged, so provenance is); a retrieval
    asks each of the user's speakers for its top ``min(k_per_speaker, k)``
    and returns them together, best score first (ties: speakers in order of
    first appearance), at most ``k`` (so a request of ``2 x 30`` returns the
    published "top 30 per speaker"). Feedback goes to the store that served
    each memory; forgetting reaches every store of the user.

    Defaults: ``inner="naive"``, ``k_per_speaker=30``.
    """

    def __init__(
        self,
        *,
        resources: Resources,
        inner: str = "naive",
        inner_args: Mapping[str, Any] | None = None,
        k_per_speaker: int = 30,
    ) -> None:
        """Build ``inner`` with ``inner_args`` from the registry."""
        if not isinstance(k_per_speaker, int) or isinstance(k_per_speaker, bool) or k_per_speaker < 1:
            raise UserError(f"per-speaker: k_per_speaker must be a positive integer, got {k_per_speaker!r}")
        self.inner_name = inner
        self.k_per_speaker = k_per_speaker
        self.inner: MemorySystem = resources.build(inner, inner_args)
        self._speakers: dict[str, list[str]] = {}
        self._served: dict[str, dict[str, str]] = {}

    @staticmethod
    def store_of(user_id: str, speaker: str) -> str:
        """The inner user id of ``speaker``'s store."""
        return f"{user_id}{_SUB}{speaker}"

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Ingest each speaker's turns, in order, into that speaker's store."""
        groups: dict[str, list[Turn]] = {}
        for t in turns:
            groups.setdefault(t.speaker, []).append(t)
        known = self._speakers.setdefault(user_id, [])
        for speaker, group in groups.items():
            if speaker not in known:
                known.append(speaker)
            store = self.store_of(user_id, speaker)
            self.inner.ingest([replace(t, user_id=store) for t in group], user_id=store, now=now)

    def _gather(self, fetch: Any, query: str, user_id: str, now: datetime, k: int) -> list[tuple[str, Retrieved]]:
        got: list[tuple[float, int, str, Retrieved]] = []
        per = min(self.k_per_speaker, k)
        for rank, speaker in enumerate(self._speakers.get(user_id, ())):
            for r in fetch(query, user_id=self.store_of(user_id, speaker), now=now, k=per):
                got.append((r.score, rank, speaker, r))
        got.sort(key=lambda g: (-g[0], g[1]))
        return [(speaker, r) for _, _, speaker, r in got[:k]]

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The top ``k_per_speaker`` of every speaker's store, together, best first (at most ``k``)."""
        got = self._gather(self.inner.retrieve, query, user_id, now, k)
        served = self._served.setdefault(user_id, {})
        for speaker, r in got:
            served[r.memory_id] = speaker
        return [r for _, r in got]

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The same list from the stores' ``probe``: nothing changes."""
        return [r for _, r in self._gather(self.inner.probe, query, user_id, now, k)]

    def feedback(
        self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime
    ) -> None:
        """Pass the signal to each store, with the ids it served."""
        served = self._served.get(user_id, {})
        by_speaker: dict[str, list[str]] = {}
        for mid in retrieved:
            speaker = served.get(mid)
            if speaker is not None:
                by_speaker.setdefault(speaker, []).append(mid)
        for speaker in self._speakers.get(user_id, ()):
            if speaker in by_speaker:
                self.inner.feedback(
                    question_id, by_speaker[speaker], correct, user_id=self.store_of(user_id, speaker), now=now
                )

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Forget in every store of the user."""
        for speaker in self._speakers.get(user_id, ()):
            self.inner.forget(turn_ids, user_id=self.store_of(user_id, speaker), now=now)


REGISTRATIONS = (
    Registration(
        "recency",
        PositionRecencyMemory,
        description="as published: any system (inner=NAME), score x (1 + 0.15 x position in the user's history), 2k candidates",
        standalone=False,
        learns=None,
    ),
    Registration(
        "recency-halflife",
        RecencyMemory,
        description="memsim's recency: any system (inner=NAME), score + 0.1 x 0.5^(age days / 30)",
        standalone=False,
        learns=None,
    ),
    Registration(
        "rerank",
        RerankMemory,
        description="any system (inner=NAME): 50 candidates reranked by a local cross-encoder (model=PATH), top k",
        standalone=False,
        learns=None,
    ),
    Registration(
        "per-speaker",
        PerSpeakerMemory,
        description="as published for LoCoMo: any system (inner=NAME), one store per speaker, top 30 of each",
        standalone=False,
        learns=None,
    ),
    Registration(
        "naive+recency",
        PositionRecencyMemory,
        description="naive with the published position boost: score x (1 + 0.15 x position)",
        defaults={"inner": "naive"},
        learns=None,
    ),
    Registration(
        "naive+recency-halflife",
        RecencyMemory,
        description="naive with memsim's recency boost (half-life 30 days)",
        defaults={"inner": "naive"},
        learns=None,
    ),
    Registration(
        "naive+rerank",
        RerankMemory,
        description="naive top-50 reranked by a local cross-encoder (model=PATH), top k",
        standalone=False,
        defaults={"inner": "naive"},
        learns=None,
    ),
)
"""The systems this module registers, in order (``memsim.memory.registry.BUILTIN_MODULES``)."""
