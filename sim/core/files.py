"""Files: atomic writes (a reader sees the old file or the new one, never half of one) and TOML reads."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsim.sim.core.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["write_atomic", "write_text_atomic", "read_toml"]


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


def read_toml(path: Path, what: str, *, missing: str = "") -> dict[str, Any]:
    """The parsed TOML file ``path``; a missing, unreadable or malformed one raises ``UserError``.

    Args:
        path: the file.
        what: what the file is, as the messages name it (``"config"``, ``"sweep spec"``).
        missing: how a missing file is named, when not ``what``.
    """
    if not path.is_file():
        raise UserError(f"{missing or what} not found: {path}")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {what} {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{what} {path} is not valid TOML: {exc}") from None
