"""memsim's one on-disk cache: a key-value store in a SQLite file, shared by processes.

Every cache memsim keeps (sentence embeddings, LLM responses) maps a
content hash to bytes that are costly to recompute, and is read and written
by several processes at once (the systems of a sweep, the workers of a
pool). ``KVCache`` is that store, with one locking policy for all of them:

- WAL mode, so readers never wait for a writer and two processes can share a
  file; a writer waits on SQLite's lock (busy timeout) and the few operations
  SQLite refuses at once when the file is busy are retried with backoff.
- A checksum per row over key and value: a damaged or misplaced row reads as
  a miss, and the next ``put`` of that key overwrites it.
- ``purge`` deletes entries, so that memsim can drop its own copies of what a
  user asked to forget; ``find_containing`` / ``purge_containing`` find and
  delete the entries whose value, or the note written with it (an LLM
  prompt, say), contains a given text.

The connection is opened on first use and again after a fork (a SQLite
connection must not cross one).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from memsim.core.errors import UserError
from memsim.core.heal import is_damage, set_aside

__all__ = ["KVCache", "default_cache_dir"]

_BUSY_TIMEOUT_S = 60.0
# SQLite's historic limit on bound parameters is 999; stay under it.
_LOOKUP_CHUNK = 900
_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    key BLOB PRIMARY KEY,
    value BLOB NOT NULL,
    checksum BLOB NOT NULL
) WITHOUT ROWID
"""
# Notes live in their own table, so that files written before notes existed open unchanged.
_NOTES = """
CREATE TABLE IF NOT EXISTS notes (
    key BLOB PRIMARY KEY,
    note BLOB NOT NULL
) WITHOUT ROWID
"""

_T = TypeVar("_T")


def default_cache_dir() -> Path:
    """Where caches live: ``$MEMSIM_CACHE_DIR`` if set, else ``~/.cache/memsim``."""
    env = os.environ.get("MEMSIM_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "memsim"


def _retry(op: Callable[[], _T], *, attempts: int = 20) -> _T:
    """Run a SQLite operation, retrying while another process holds the lock.

    The busy timeout already waits inside SQLite; this loop covers the cases
    where SQLite gives up at once (switching to WAL, lock upgrades).
    """
    delay = 0.01
    for attempt in range(attempts):
        try:
            return op()
        except sqlite3.OperationalError as exc:
            msg = str(exc).lower()
            if ("locked" not in msg and "busy" not in msg) or attempt == attempts - 1:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    raise AssertionError("unreachable")


def _checksum(key: bytes, value: bytes) -> bytes:
    # The key is hashed too, so a value copied onto another key is caught;
    # its length goes first so that no (key, value) split can collide with another.
    h = hashlib.sha256(len(key).to_bytes(4, "little"))
    h.update(key)
    h.update(value)
    return h.digest()[:16]


class KVCache:
    """Bytes by bytes key in one SQLite file (WAL mode), with a checksum per row.

    Safe to share between threads (one connection per process behind a lock)
    and between processes (SQLite's locking, busy timeout and retries).

    Args:
        path: The SQLite file (created with its folder on first use).
        label: What the cache holds, for error messages (``embedding cache``).
    """

    def __init__(self, path: str | os.PathLike[str], *, label: str = "cache") -> None:
        self.path = Path(path)
        self.label = label
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            return self._connect()
        except UserError as exc:
            if not (is_damage(exc.__context__) and set_aside(self.path, self.label, exc.__context__)):
                raise
        return self._connect()  # a fresh file in place of the damaged one

    def _heal(self, exc: BaseException) -> None:
        """After a read or write found the file damaged: set it aside and reconnect to a fresh one, or re-raise."""
        if not is_damage(exc):
            raise exc
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        if not set_aside(self.path, self.label, exc):
            raise exc
        self._connect()

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
            _retry(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
            conn.execute("PRAGMA synchronous = NORMAL")
            # A purged entry is overwritten on disk, not just unlinked from the b-tree.
            conn.execute("PRAGMA secure_delete = ON")
            _retry(lambda: conn.execute(_SCHEMA))
            _retry(lambda: conn.execute(_NOTES))
        except (OSError, sqlite3.Error) as exc:
            raise UserError(  # keeps the error as its context: _connection heals a damaged file
                f"cannot open {self.label} {self.path}: {exc}; "
                "set MEMSIM_CACHE_DIR to a writable folder or turn the cache off"
            ) from exc
        self._conn, self._pid = conn, os.getpid()
        return conn

    def open(self) -> KVCache:
        """Open (and create) the file now, so that a bad folder fails here rather than at first use.

        Raises:
            UserError: the file cannot be opened or created.
        """
        with self._lock:
            self._connection()
        return self

    def get_many(self, keys: Sequence[bytes]) -> tuple[dict[bytes, bytes], int]:
        """Look up ``keys`` in batches.

        Returns:
            The values found, by key, and the number of damaged rows seen
            (left out of the result: they read as misses).
        """
        with self._lock:
            try:
                return self._get_many(keys)
            except sqlite3.DatabaseError as exc:
                self._heal(exc)
                return {}, 0  # the fresh file holds nothing: every key is a miss

    def _get_many(self, keys: Sequence[bytes]) -> tuple[dict[bytes, bytes], int]:
        found: dict[bytes, bytes] = {}
        damaged = 0
        conn = self._connection()
        for start in range(0, len(keys), _LOOKUP_CHUNK):
            chunk = list(keys[start : start + _LOOKUP_CHUNK])
            marks = ",".join("?" * len(chunk))
            rows = _retry(
                lambda: conn.execute(
                    f"SELECT key, value, checksum FROM kv WHERE key IN ({marks})", chunk
                ).fetchall()
            )
            for key, value, checksum in rows:
                key, value = bytes(key), bytes(value)
                if bytes(checksum) != _checksum(key, value):
                    damaged += 1
                else:
                    found[key] = value
        return found, damaged

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``; None when absent or damaged."""
        return self.get_many([key])[0].get(key)

    def put_many(self, items: Iterable[tuple[bytes, bytes]], *, notes: Mapping[bytes, str] | None = None) -> None:
        """Write values (overwriting any row with the same key) in one transaction.

        ``notes`` (key -> text) are kept beside the values for ``find_containing``:
        what a value was derived from that the value itself does not show
        (the prompt of a cached reply).
        """
        rows = [(key, value, _checksum(key, value)) for key, value in items]
        self._write("INSERT OR REPLACE INTO kv(key, value, checksum) VALUES (?, ?, ?)", rows)
        if notes:
            self._write(
                "INSERT OR REPLACE INTO notes(key, note) VALUES (?, ?)",
                [(key, note.encode("utf-8")) for key, note in notes.items()],
            )

    def put(self, key: bytes, value: bytes, *, note: str | None = None) -> None:
        """Write one value (and its note)."""
        self.put_many([(key, value)], notes=None if note is None else {key: note})

    def find_containing(self, texts: Iterable[str]) -> list[bytes]:
        """Keys whose value or note contains any of ``texts`` (UTF-8 bytes, case-sensitive; a full scan)."""
        needles = [t.encode("utf-8") for t in texts if t]
        if not needles:
            return []
        with self._lock:
            try:
                return self._find(needles)
            except sqlite3.DatabaseError as exc:
                self._heal(exc)
                return []

    def _find(self, needles: list[bytes]) -> list[bytes]:
        found: dict[bytes, None] = {}
        conn = self._connection()
        for needle in needles:
            rows = _retry(
                lambda: conn.execute(
                    "SELECT key FROM kv WHERE instr(value, ?) > 0 "
                    "UNION SELECT key FROM notes WHERE instr(note, ?) > 0",
                    (needle, needle),
                ).fetchall()
            )
            found.update((bytes(r[0]), None) for r in rows)
        return list(found)

    def purge_containing(self, texts: Iterable[str]) -> int:
        """Delete every entry whose value or note contains any of ``texts``; how many were deleted."""
        return self.purge(self.find_containing(texts))

    def purge(self, keys: Iterable[bytes]) -> int:
        """Delete the entries of ``keys`` (absent ones are skipped).

        Returns:
            How many entries were deleted.
        """
        rows = [(key,) for key in keys]
        self._write("DELETE FROM notes WHERE key = ?", rows)
        deleted = self._write("DELETE FROM kv WHERE key = ?", rows)
        if deleted:
            # secure_delete zeroes the pages in the database, but the write-ahead log still holds
            # their earlier versions: fold it in and truncate it, so no copy of the text stays on disk.
            with self._lock:
                conn = self._connection()
                _retry(lambda: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())
        return deleted

    def _write(self, sql: str, rows: list[tuple[bytes, ...]]) -> int:
        """Run ``sql`` once per row in one transaction; the number of rows changed."""
        if not rows:
            return 0
        with self._lock:
            try:
                return self._write_rows(sql, rows)
            except sqlite3.DatabaseError as exc:
                self._heal(exc)
                return self._write_rows(sql, rows)

    def _write_rows(self, sql: str, rows: list[tuple[bytes, ...]]) -> int:
        conn = self._connection()

        def write() -> int:
            # IMMEDIATE takes the write lock up front, so a busy database
            # fails here (and is retried) rather than halfway through.
            conn.execute("BEGIN IMMEDIATE")
            try:
                changed = conn.executemany(sql, rows).rowcount
                conn.execute("COMMIT")
            except BaseException:
                # Leave no transaction open, so a retry can BEGIN again.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return changed

        return _retry(write)

    def __len__(self) -> int:
        with self._lock:
            conn = self._connection()
            try:
                return int(_retry(lambda: conn.execute("SELECT COUNT(*) FROM kv").fetchone())[0])
            except sqlite3.DatabaseError as exc:
                self._heal(exc)
                return 0

    def close(self) -> None:
        """Close the connection (reopened on next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None
