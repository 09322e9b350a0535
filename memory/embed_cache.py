"""The embedding cache: content-addressed vectors of one model in one ``KVCache`` file.

Keys are ``sha256(model_id + NUL + text)``; values are the vectors as
little-endian float32 bytes. Several processes read and write the file at
once; an entry that fails its checksum (or has the wrong length) is reported
as damaged, never returned, and overwritten by the next write of its key.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from memsim.memory.kvcache import KVCache

__all__ = ["EmbeddingCache", "text_key"]


def _safe_name(model_id: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("._") or "model"
    return f"{stem[:80]}-{hashlib.sha256(model_id.encode()).hexdigest()[:8]}"


def text_key(model_id: str, text: str) -> bytes:
    """The cache key of ``text`` under ``model_id`` (32 bytes)."""
    h = hashlib.sha256(model_id.encode("utf-8"))
    h.update(b"\0")
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.digest()


class EmbeddingCache:
    """Content-addressed vectors of one model in one ``KVCache`` file.

    Keys are ``sha256(model_id + NUL + text)``; values are the vectors as
    little-endian float32 bytes. A row whose checksum fails or whose length is
    not ``dim`` floats is reported as damaged and left out; the next write of
    its key overwrites it.

    Args:
        path: The SQLite file (created with its folder if missing).
        model_id: Model name mixed into every key.
        dim: Vector length; rows of another length count as damaged.

    Attributes:
        store: The key-value store underneath (``store.purge(keys)`` drops entries).
    """

    def __init__(self, path: str | os.PathLike[str], *, model_id: str, dim: int) -> None:
        self.path = Path(path)
        self.model_id = model_id
        self.dim = int(dim)
        self.store = KVCache(self.path, label="embedding cache")

    @classmethod
    def for_model(cls, cache_dir: str | os.PathLike[str], *, model_id: str, dim: int) -> EmbeddingCache:
        """The cache file of ``model_id`` under ``cache_dir/embeddings/``."""
        path = Path(cache_dir) / "embeddings" / f"{_safe_name(model_id)}.sqlite"
        return cls(path, model_id=model_id, dim=dim)

    def key(self, text: str) -> bytes:
        """The cache key of ``text`` (32 bytes)."""
        return text_key(self.model_id, text)

    def get_many(self, keys: Sequence[bytes]) -> tuple[dict[bytes, np.ndarray], int]:
        """Look up ``keys``.

        Returns:
            The valid vectors found, by key, and the number of damaged rows
            seen (left out of the result; a later ``put_many`` overwrites them).
        """
        blobs, damaged = self.store.get_many(keys)
        found: dict[bytes, np.ndarray] = {}
        for key, blob in blobs.items():
            if len(blob) != self.dim * 4:
                damaged += 1
            else:
                found[key] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return found, damaged

    def put_many(self, items: Iterable[tuple[bytes, np.ndarray]]) -> None:
        """Write vectors (overwriting any row with the same key) in one transaction."""
        rows = []
        for key, vec in items:
            blob = np.ascontiguousarray(vec, dtype="<f4").tobytes()
            if len(blob) != self.dim * 4:
                raise ValueError(f"vector of length {len(blob) // 4}, cache holds {self.dim}")
            rows.append((key, blob))
        self.store.put_many(rows)

    def __len__(self) -> int:
        return len(self.store)

    def close(self) -> None:
        """Close the connection (reopened on next use)."""
        self.store.close()
