"""The embedder's backends: the sentence-transformers model on torch, and its ONNX export run by ONNX Runtime.

``load_sentence_transformer`` loads a local folder on CPU, without a
download. ``export_onnx`` traces the model's forward pass into an ONNX graph
once per weights (fused by ONNX Runtime's transformer optimizer, optionally
quantised to int8) under ``<cache dir>/onnx/``; ``OnnxModel`` runs it with the
model's own fast tokenizer, texts sorted by length and cut into batches of
at most ``batch_tokens`` padded tokens. torch, sentence-transformers and ONNX
Runtime are imported only inside these functions.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memsim.memory.kvcache import default_cache_dir
from memsim.core.errors import UserError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = ["EXPORT_VERSION", "load_sentence_transformer", "export_onnx", "usable_cores", "token_batches", "OnnxModel"]

EXPORT_VERSION = 2
"""Bumped whenever the export recipe changes, so old exported graphs are not reused.
2: eager attention in the trace and the transformer optimizer's fusions."""


def _offline() -> None:
    # Never reach for a hub at run time; everything is on disk.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def load_sentence_transformer(path: Path, *, show_progress: bool, eager: bool = False) -> SentenceTransformer:
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
    base = root / "onnx" / f"{weights_sha256[:24]}-v{EXPORT_VERSION}"
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

    model = load_sentence_transformer(model_path, show_progress=False, eager=True)
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


def token_batches(lengths: Sequence[int], budget: int) -> list[np.ndarray]:
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


class OnnxModel:
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
        for rows in token_batches([len(e.ids) for e in encodings], batch_tokens):
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
