"""Files: atomic writes (a reader sees the old file or the new one, never half of one), bounded reads, TOML reads.

An input file is read only when it is a regular file: a FIFO would block
forever and a device such as ``/dev/zero`` never ends, so both are refused
before the first byte is read (``regular_file``). A read stops at a declared
size (``read_limited``) before memory grows, unless sizes are unbounded
(``memsim --no-size-limits``). Text files are UTF-8 (``decode_utf8``): a file
in UTF-16 or UTF-32 is recognised by its byte order mark or its zero bytes
and named as such, not read as garbage.
"""

from __future__ import annotations

import codecs
import os
import stat
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsim.core.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "write_atomic", "write_text_atomic", "read_toml", "regular_file", "read_limited", "decode_utf8", "utf8_problem",
    "wide_encoding",
    "MAX_CONFIG_BYTES",
]

MAX_CONFIG_BYTES = 4 * 1024 * 1024
"""Largest TOML config or sweep spec read (a config is a few kilobytes)."""


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
    if not path.exists():
        raise UserError(f"{missing or what} not found: {path}")
    try:
        text = decode_utf8(read_limited(path, what, MAX_CONFIG_BYTES), f"{what} {path}")
        return tomllib.loads(text)
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{what} {path} is not valid TOML: {exc}") from None
    except ValueError as exc:  # an integer of thousands of digits (Python's int-size guard)
        raise UserError(f"{what} {path}: a value out of range ({_cut(str(exc))})") from None


def _cut(text: str, most: int = 120) -> str:
    """``text`` on one line, cut to ``most`` characters (a hostile value is not echoed whole)."""
    one = " ".join(text.split())
    return one if len(one) <= most else one[: most - 3] + "..."


def regular_file(path: str | os.PathLike[str], what: str) -> int:
    """The size in bytes of ``path``, which must be an existing regular file (symlinks followed).

    Args:
        path: the input file.
        what: what the file is, as the messages name it (``"world file"``, ``"LoCoMo data file"``).

    Raises:
        UserError: the path does not exist, is a folder, or is not a regular
            file (a FIFO, a socket, a device such as ``/dev/zero``); nothing is
            read, so a FIFO with no writer cannot block.
    """
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise UserError(f"{what} not found: {p}") from None
    except OSError as exc:
        raise UserError(f"{p}: cannot read {what}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{p}: is a folder, expected a {what}")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                or stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise UserError(f"{p}: is {kind}, expected a {what} (a regular file)")
    return int(st.st_size)


def read_limited(path: str | os.PathLike[str], what: str, limit: int) -> bytes:
    """The bytes of regular file ``path``, refused past ``limit`` bytes (unless sizes are unbounded).

    The size is checked before reading and again while reading (a file that
    grows meanwhile is cut off at the limit), so memory never holds more than
    ``limit`` bytes and one block.

    Raises:
        UserError: not a regular file (``regular_file``), or larger than ``limit``
            (the message names the file, its size and the limit).
    """
    from memsim.core.validate import size_limits_on

    p = Path(path)
    size = regular_file(p, what)
    bounded = size_limits_on()
    if bounded and size > limit:
        raise UserError(f"{p}: {what} of {size:,} bytes is over the {limit:,}-byte limit (memsim --no-size-limits lifts it)")
    with p.open("rb") as f:
        data = f.read(limit + 1) if bounded else f.read()
    if bounded and len(data) > limit:
        raise UserError(f"{p}: {what} grew past the {limit:,}-byte limit while being read")
    return data


def utf8_problem(data: bytes) -> str | None:
    """Why ``data`` is not UTF-8 text, or None when it is (a UTF-8 byte order mark is allowed).

    UTF-16 and UTF-32 are recognised by their byte order marks, or, without
    one, by the zero bytes that ASCII text has in those encodings.
    """
    wide = wide_encoding(data)
    if wide is not None:
        return wide
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not valid UTF-8 at byte {exc.start} ({exc.reason}); memsim reads UTF-8 only"
    return None


def wide_encoding(head: bytes) -> str | None:
    """Why text starting with ``head`` is UTF-16 or UTF-32 rather than UTF-8, or None.

    Reads only the first 4 KiB, so it can judge a file by its first block
    (a parser such as Python's ``json`` would otherwise decode UTF-16
    silently).
    """
    for bom, name in ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                      (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16")):
        if head.startswith(bom):
            return f"encoded in {name} (byte order mark); memsim reads UTF-8 only: convert it (iconv -f {name} -t UTF-8)"
    head = head[:4096]
    if len(head) >= 4 and head.count(0) * 4 >= len(head):
        name = "UTF-32" if head[1:4] == b"\0\0\0" or head[:3] == b"\0\0\0" else "UTF-16"
        return f"looks encoded in {name} (zero bytes between characters); memsim reads UTF-8 only: convert it"
    return None


def decode_utf8(data: bytes, where: str) -> str:
    """``data`` as text, a leading UTF-8 byte order mark dropped.

    Raises:
        UserError: ``data`` is not UTF-8 (``utf8_problem`` says why), naming ``where``.
    """
    problem = utf8_problem(data)
    if problem is not None:
        raise UserError(f"{where}: {problem}")
    return data.decode("utf-8").removeprefix("\ufeff")
