"""The one error type the command line turns into a one-line message and exit code 2, and the failures it treats alike."""

from __future__ import annotations

import errno
import sys

__all__ = ["UserError", "expected_failure"]


class UserError(Exception):
    """Bad input from the user: a file, record, field or value they can fix.

    The message names the file/record/field and, where there is a fixed set,
    the valid choices. The command line prints it on one line (no traceback
    unless ``--debug``) and exits with code 2.
    """


# Exceptions of optional libraries that only bad input (a damaged file, a wrong-shape reply) raises,
# by module and class name, so that this bottom module imports none of them.
_INPUT_ERRORS = (
    ("polars.exceptions", "ComputeError"),
    ("pyarrow.lib", "ArrowInvalid"),
    ("sqlite3", "DatabaseError"),
    ("ijson.common", "JSONError"),
)


def expected_failure(exc: BaseException) -> str | None:
    """The one-line message for a failure caused by input or the environment, or None for a bug.

    Input and environment failures are I/O (``OSError``), parsing (JSON,
    TOML, text encodings, damaged parquet or SQLite files), validation
    (pydantic) and resources (``RecursionError`` from deep nesting,
    ``MemoryError`` and ``OverflowError`` from absurd sizes). Anything else
    is a bug in memsim and keeps its traceback.

    Args:
        exc: the exception that stopped a command.
    """
    if isinstance(exc, OSError):
        what = "no space left on device" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc) or type(exc).__name__)
        where = exc.filename if exc.filename is not None else None
        return f"{where}: {what}" if where is not None else f"{type(exc).__name__}: {what}"
    if isinstance(exc, RecursionError):
        return "input nested too deeply to process (a file or reply deeper than its schema allows)"
    if isinstance(exc, MemoryError):
        return "out of memory: an input or setting asks for more than this machine holds; use smaller sizes"
    if isinstance(exc, OverflowError):
        return f"a number or date out of range: {exc}"
    if isinstance(exc, UnicodeError):
        return f"text that is not valid Unicode (a lone surrogate or a broken encoding): {exc}"
    name = type(exc).__name__
    if name == "ValidationError" and type(exc).__module__.startswith("pydantic"):
        return _validation(exc)
    for module, cls in _INPUT_ERRORS:
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(exc, getattr(loaded, cls, ())):
            return f"{name}: {exc}"
    if isinstance(exc, ValueError) and type(exc).__name__ in ("JSONDecodeError", "TOMLDecodeError"):
        return f"not valid {'JSON' if name == 'JSONDecodeError' else 'TOML'}: {exc}"
    return None


def _validation(exc: BaseException) -> str:
    """A pydantic error as one line: ``Model.field: message`` per error, no links."""
    title = getattr(exc, "title", "value")
    parts = []
    for err in exc.errors()[:5]:  # type: ignore[attr-defined]
        key = ".".join(str(p) for p in err["loc"]) or "(value)"
        parts.append(f"{title}.{key}: {err['msg'].removeprefix('Value error, ')} (got {_short(err.get('input'))})")
    return "invalid " + "; ".join(parts)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
