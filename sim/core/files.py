"""Atomic file writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["write_atomic", "write_text_atomic"]


def write_atomic(path: Path, write: Callable[[Path], object]) -> None:
    """Write ``path`` by calling ``write`` on a temporary file beside it, then renaming that over it.

    The temporary name carries the process and thread ids, so two writers
    of the same file never share one; it is removed when ``write`` fails.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """``write_atomic`` for UTF-8 text."""
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
