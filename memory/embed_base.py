"""What every embedder shares: the ``TextEmbedder`` protocol, its ``EmbedStats`` and the checks on its input."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["EmbedStats", "TextEmbedder", "Counters", "check_texts", "normalise_rows"]


@dataclass(frozen=True, slots=True)
class EmbedStats:
    """What an embedder has done so far (this process, this instance)."""

    requested: int = 0
    """Texts passed to ``encode`` (duplicates included)."""
    unique_texts: int = 0
    """Distinct texts ever passed to this embedder."""
    hits: int = 0
    """Texts served from the cache, on disk or this process's copy of it (counted once per call)."""
    misses: int = 0
    """Texts the model computed (counted once per call)."""
    repaired: int = 0
    """Cache entries found damaged (bad length or checksum) and recomputed."""


@runtime_checkable
class TextEmbedder(Protocol):
    """What memory systems need from an embedder; ``Embedder`` and ``HashEmbedder`` satisfy it."""

    @property
    def model_id(self) -> str:
        """Name of the model, part of every cache key."""
        ...

    @property
    def dim(self) -> int:
        """Length of every vector."""
        ...

    @property
    def stats(self) -> EmbedStats:
        """Counts so far."""
        ...

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: float32 array of shape ``(len(texts), dim)``, rows L2-normalised."""
        ...

    def encode_one(self, text: str) -> np.ndarray:
        """Embed one text: float32 array of shape ``(dim,)``."""
        ...



def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list of strings; a bare string or a non-string item is a ``TypeError``."""
    # A bare string is a sequence of characters; embedding each character is
    # never what the caller meant.
    if isinstance(texts, str):
        raise TypeError("encode() takes a sequence of texts; use encode_one() for one text")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"text {i} is {type(t).__name__}, not str")
    return out


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float32, C-contiguous); a zero row stays zero."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # A zero row stays zero rather than becoming NaN.
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(vectors / norms, dtype=np.float32)


class Counters:
    """Mutable tallies behind the frozen ``EmbedStats`` snapshots."""

    __slots__ = ("requested", "seen", "hits", "misses", "repaired")

    def __init__(self) -> None:
        self.requested = 0
        self.seen: set[bytes] = set()
        self.hits = 0
        self.misses = 0
        self.repaired = 0

    def snapshot(self) -> EmbedStats:
        """The counts as a frozen ``EmbedStats``."""
        return EmbedStats(
            requested=self.requested,
            unique_texts=len(self.seen),
            hits=self.hits,
            misses=self.misses,
            repaired=self.repaired,
        )

