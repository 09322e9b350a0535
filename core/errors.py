"""The one error type the command line turns into a one-line message and exit code 2, and the failures it treats alike."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator

__all__ = ["UserError", "SystemsFailed", "WorkerDied", "expected_failure", "naming_file", "short_value"]


class UserError(Exception):
    """Bad input from the user: a file, record, field or value they can fix.

    The message names the file/record/field and, where there is a fixed set,
    the valid choices. The command line prints it on one line (no traceback
    unless ``--debug``) and exits with code 2.
    """


class WorkerDied(UserError):
    """A worker process ended while it played a unit (a system that ended it, a crash in native code, the
    out-of-memory killer): an incomplete run, not bad input. One line, exit code 1; the units that ended are
    committed and rerunning the same command resumes."""

    exit_code = 1


class SystemsFailed(UserError):
    """Every system of a run failed before its first scored row: not bad input but an incomplete run.

    Printed on one line like any ``UserError``, with exit code 1, as a run in which some system failed later:
    the rows are committed and rerunning the same command resumes it.
    """

    exit_code = 1


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
            text = " ".join(str(exc).split())
            return f"{name}: {text if len(text) <= 300 else text[:297] + '...'}"
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


def short_value(value: object, most: int = 60) -> str:
    """``repr(value)`` cut to ``most`` characters: an error echoes a hostile value by a short prefix, never whole."""
    text = repr(value) if not isinstance(value, str) or len(value) <= most * 4 else repr(value[: most * 4])
    return text if len(text) <= most else text[: most - 3] + "..."


@contextlib.contextmanager
def naming_file(path: str | os.PathLike[str], doing: str) -> Iterator[None]:
    """Name ``path`` in any input or environment failure raised inside the block.

    A full disk (``OSError`` without a file name) or a damaged parquet part
    (polars' ``ComputeError``) otherwise reaches the user without the file
    it concerns. Inside the block such a failure becomes a ``UserError``
    ``"<path>: <doing>: <what failed>"``; a ``UserError`` and a bug (anything
    ``expected_failure`` does not know) pass unchanged.

    Args:
        path: the file or folder being read or written.
        doing: what was being done to it (``"writing run part"``, ``"reading rows"``).
    """
    try:
        yield
    except UserError:
        raise
    except Exception as exc:
        message = expected_failure(exc)
        if message is None:
            raise
        where = os.fspath(path)
        # An OSError that names its own file says it first; the block's file is said in front.
        message = message.removeprefix(f"{getattr(exc, 'filename', None)}: ") if isinstance(exc, OSError) else message
        raise UserError(f"{where}: {doing}: {message[:300]}") from exc
