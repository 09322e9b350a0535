"""Retrieval variants that wrap any registered system: recency boost and cross-encoder rerank.

A variant builds its inner system from the registry (``inner`` + ``inner_args``),
asks it for more candidates than requested, re-scores them and returns the
top ``k``. Everything else (ingest, feedback, maintenance, forgetting, stats)
goes to the inner system unchanged, so provenance and deletion stay its own.
``probe`` asks the inner system's ``probe`` for the candidates, so a
measurement changes nothing on either side.
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.base import MemoryStats, Retrieved, Turn
from sim.errors import UserError

if TYPE_CHECKING:
    from memory.base import MemorySystem
    from memory.registry import Resources

__all__ = ["RecencyMemory", "RerankMemory", "load_cross_encoder"]


class _Wrapper:
    """Forwards the protocol to the inner system; subclasses re-score its candidates (``_rescore``)."""

    def __init__(
        self, *, resources: Resources, inner: str, inner_args: Mapping[str, Any] | None, candidates: int
    ) -> None:
        from memory.registry import build_memory

        if not isinstance(candidates, int) or candidates < 1:
            raise UserError(f"{type(self).__name__}: candidates must be a positive integer, got {candidates!r}")
        self.inner_name = inner
        self.candidates = candidates
        self.inner: MemorySystem = build_memory(inner, dict(inner_args or {}), resources=resources)

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Ingest into the inner system."""
        self.inner.ingest(turns, user_id=user_id, now=now)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The inner system's candidates (retrieved, with its side effects), re-scored, top ``k``."""
        cands = self.inner.retrieve(query, user_id=user_id, now=now, k=max(k, self.candidates))
        return self._rescore(query, cands, now=now, k=k)

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The same ranking from the inner system's ``probe``: nothing changes, here or inside."""
        cands = self.inner.probe(query, user_id=user_id, now=now, k=max(k, self.candidates))
        return self._rescore(query, cands, now=now, k=k)

    def _rescore(self, query: str, cands: list[Retrieved], *, now: datetime, k: int) -> list[Retrieved]:
        """The top ``k`` of the inner candidates under this variant's score (pure)."""
        raise NotImplementedError

    def feedback(
        self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime
    ) -> None:
        """Pass the signal to the inner system (ids are the inner system's)."""
        self.inner.feedback(question_id, retrieved, correct, user_id=user_id, now=now)

    def maintain(self, *, now: datetime) -> None:
        """Maintain the inner system."""
        self.inner.maintain(now=now)

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Forget in the inner system."""
        self.inner.forget(turn_ids, user_id=user_id, now=now)

    def stats(self) -> MemoryStats:
        """The inner system's stats."""
        return self.inner.stats()

    def report(self) -> dict[str, Any]:
        """The inner system's ``report()``, if it has one, else ``{}``."""
        fn = getattr(self.inner, "report", None)
        return dict(fn()) if callable(fn) else {}


def _rank(items: list[tuple[float, Retrieved]], k: int) -> list[Retrieved]:
    items.sort(key=lambda p: (-p[0], p[1].memory_id))
    return [
        Retrieved(r.memory_id, r.text, float(s), r.created_at, r.source_turn_ids) for s, r in items[:k]
    ]


class RecencyMemory(_Wrapper):
    """Recency-boosted retrieval over any system.

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

    def _rescore(self, query: str, cands: list[Retrieved], *, now: datetime, k: int) -> list[Retrieved]:
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
    (``score`` is the cross-encoder's output). Defaults: ``inner="naive"``,
    ``candidates=30``, ``batch_size=32``, ``max_length=512``; ``model`` has no
    default and must be given.
    """

    def __init__(
        self,
        *,
        resources: Resources,
        model: str | None = None,
        inner: str = "naive",
        inner_args: Mapping[str, Any] | None = None,
        candidates: int = 30,
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

    def _rescore(self, query: str, cands: list[Retrieved], *, now: datetime, k: int) -> list[Retrieved]:
        """The inner candidates re-scored by the cross-encoder, top ``k``."""
        if not cands:
            return []
        encoder = load_cross_encoder(self.model, self.max_length)
        scores = encoder.predict(
            [(query, r.text) for r in cands], batch_size=self.batch_size, show_progress_bar=False
        )
        return _rank([(float(s), r) for s, r in zip(scores, cands, strict=True)], k)
