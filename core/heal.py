"""Caches that heal: a physically damaged SQLite cache file is set aside, with one warning, and rebuilt empty.

A cache holds nothing that cannot be recomputed, so a file SQLite cannot
read (``file is not a database``, ``database disk image is malformed``) does
not stop a run: ``set_aside`` confirms the damage with an integrity check,
renames the file and its WAL beside it as ``<name>.damaged-<time>`` (kept for
whoever wants to look, never read again) and the cache starts a fresh file.
Every file set aside in this process is listed by ``repairs()``, which the
run summary reports.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

__all__ = ["is_damage", "set_aside", "repairs", "intact"]

_log = logging.getLogger("memsim.cache")
_REPAIRS: list[dict[str, str]] = []


def is_damage(exc: BaseException) -> bool:
    """Whether ``exc`` says the file itself is damaged (not busy, locked or unwritable)."""
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)


def intact(path: Path) -> bool:
    """Whether SQLite's integrity check passes on ``path`` (a file that cannot be opened fails it)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
        try:
            return conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def set_aside(path: Path, label: str, error: BaseException) -> bool:
    """Move a damaged cache file aside so that the cache can be rebuilt; False when it proves intact.

    Args:
        path: the SQLite file.
        label: what it holds (``"embedding cache"``), for the warning.
        error: the error that raised the suspicion.
    """
    if path.exists() and intact(path):
        return False
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        part = Path(f"{path}{suffix}")
        if part.exists():
            part.replace(Path(f"{aside}{suffix}"))
    _log.warning("%s %s is damaged (%s): set aside as %s and rebuilt; its entries are recomputed", label, path, error, aside.name)
    _REPAIRS.append({"cache": label, "path": str(path), "set_aside": str(aside), "error": str(error)})
    return True


def repairs() -> list[dict[str, str]]:
    """The cache files set aside in this process, oldest first."""
    return list(_REPAIRS)
