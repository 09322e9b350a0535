"""``HashEmbedder``: a deterministic bag-of-words stand-in for the embedder, for fast tests (no model, no cache)."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence

import numpy as np

from memsim.memory.embed_base import Counters, EmbedStats, check_texts

__all__ = ["HashEmbedder"]

_WORD = re.compile(r"\w+", re.UNICODE)


@functools.lru_cache(maxsize=1 << 16)
def _feature_slot(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


class HashEmbedder:
    """Deterministic bag-of-words embedder for fast tests; same interface as ``Embedder``.

    Lowercased word tokens (weight 1) and their character trigrams (weight
    0.5, so that "run" and "running" overlap a little) are hashed into
    ``dim`` signed slots and the vector is L2-normalised. Texts that share
    words get a higher cosine. The same text gives the same vector in every
    process (hashes do not depend on ``PYTHONHASHSEED``).

    Args:
        dim: Vector length.
    """

    def __init__(self, dim: int = 64) -> None:
        if dim < 1:
            raise ValueError(f"dim must be at least 1, got {dim}")
        self.dim: int = int(dim)
        self.model_id: str = f"hash-bow-{self.dim}"
        self._counts = Counters()

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim})"

    @property
    def stats(self) -> EmbedStats:
        """Counts so far (every distinct text of a call is a miss: there is no cache)."""
        return self._counts.snapshot()

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float64)
        words = _WORD.findall(text.lower())
        for word in words:
            slot, sign = _feature_slot("w:" + word, self.dim)
            vec[slot] += sign
            padded = f"#{word}#"
            for i in range(len(padded) - 2):
                slot, sign = _feature_slot("c:" + padded[i : i + 3], self.dim)
                vec[slot] += 0.5 * sign
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            # Text with no words still gets a unit vector, the same for all such texts.
            slot, sign = _feature_slot("empty", self.dim)
            vec[slot] = sign
            norm = 1.0
        return (vec / norm).astype(np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: float32 ``(len(texts), dim)``, rows L2-normalised."""
        items = check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        done: dict[str, int] = {}
        for i, text in enumerate(items):
            j = done.get(text)
            if j is None:
                done[text] = i
                out[i] = self._vector(text)
                self._counts.seen.add(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())
            else:
                out[i] = out[j]
        self._counts.requested += len(items)
        self._counts.misses += len(done)
        return out

    def encode_one(self, text: str) -> np.ndarray:
        """Embed one text: float32 ``(dim,)``."""
        if not isinstance(text, str):
            raise TypeError(f"text is {type(text).__name__}, not str")
        return self.encode([text])[0]
