"""The shared on-disk key-value store under the embedding and LLM response caches."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from memsim.memory.kvcache import KVCache
from memsim.core.errors import UserError


def _key(i: int) -> bytes:
    return i.to_bytes(4, "big") * 8


def _value(i: int) -> bytes:
    return f"value {i} ".encode() * (1 + i % 5)


def _writer(path: str, ids: list[int]) -> None:
    store = KVCache(path)
    for start in range(0, len(ids), 20):
        chunk = ids[start : start + 20]
        store.put_many((_key(i), _value(i)) for i in chunk)
        store.get_many([_key(i) for i in chunk])
    store.purge([_key(i) for i in ids if i % 10 == 0])


def test_round_trip_overwrite_and_len(tmp_path: Path) -> None:
    store = KVCache(tmp_path / "sub" / "kv.sqlite")
    assert store.get(b"absent") is None and len(store) == 0
    store.put(b"k", b"first")
    store.put_many([(b"k", b"second"), (b"empty", b""), (b"\x00\xff", bytes(range(256)))])
    assert store.get(b"k") == b"second" and store.get(b"empty") == b""
    assert len(store) == 3
    store.close()
    again = KVCache(store.path)  # another object, as another run would open it
    found, damaged = again.get_many([b"k", b"\x00\xff", b"absent"])
    assert found == {b"k": b"second", b"\x00\xff": bytes(range(256))} and damaged == 0


def test_lookup_is_batched_over_many_keys(tmp_path: Path) -> None:
    store = KVCache(tmp_path / "kv.sqlite")
    store.put_many((_key(i), _value(i)) for i in range(2500))  # more than one statement may bind
    found, damaged = store.get_many([_key(i) for i in range(2500)])
    assert len(found) == 2500 and damaged == 0 and found[_key(1234)] == _value(1234)


def test_damaged_rows_read_as_misses_and_are_overwritten(tmp_path: Path) -> None:
    store = KVCache(tmp_path / "kv.sqlite")
    store.put_many([(b"a", b"alpha"), (b"b", b"beta"), (b"c", b"gamma")])
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE kv SET value = X'00ff' WHERE key = ?", (b"a",))
        # a valid row's value copied onto another key is caught: the checksum covers the key
        db.execute("UPDATE kv SET value = (SELECT value FROM kv WHERE key = ?) WHERE key = ?", (b"c", b"b"))
    found, damaged = store.get_many([b"a", b"b", b"c"])
    assert found == {b"c": b"gamma"} and damaged == 2
    assert store.get(b"a") is None
    store.put_many([(b"a", b"alpha"), (b"b", b"beta")])
    found, damaged = store.get_many([b"a", b"b", b"c"])
    assert damaged == 0 and found == {b"a": b"alpha", b"b": b"beta", b"c": b"gamma"}


def test_purge_deletes_only_the_given_keys(tmp_path: Path) -> None:
    store = KVCache(tmp_path / "kv.sqlite")
    store.put_many((_key(i), _value(i)) for i in range(10))
    assert store.purge([_key(2), _key(5), b"never written"]) == 2
    assert store.purge([]) == 0
    assert len(store) == 8 and store.get(_key(2)) is None and store.get(_key(3)) == _value(3)
    other = KVCache(store.path)  # the deletion is on disk, not only in this object
    assert other.get(_key(5)) is None and len(other) == 8


def test_two_connections_see_each_others_writes(tmp_path: Path) -> None:
    a, b = KVCache(tmp_path / "kv.sqlite"), KVCache(tmp_path / "kv.sqlite")
    a.put(b"x", b"from a")
    assert b.get(b"x") == b"from a"
    b.put(b"x", b"from b")
    assert a.get(b"x") == b"from b"
    assert a.purge([b"x"]) == 1 and b.get(b"x") is None


def test_two_processes_writing_one_store_leave_it_consistent(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    # Overlapping ranges written in opposite orders, so both processes contend for the same keys.
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_writer, args=(str(path), list(range(0, 400)))),
        ctx.Process(target=_writer, args=(str(path), list(reversed(range(200, 600))))),
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    for p in procs:
        if p.is_alive():
            p.kill()
            pytest.fail("writer did not finish")
        assert p.exitcode == 0
    store = KVCache(path)
    found, damaged = store.get_many([_key(i) for i in range(600)])
    assert damaged == 0
    assert set(found) == {_key(i) for i in range(600) if i % 10}
    assert all(found[_key(i)] == _value(i) for i in range(600) if i % 10)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_an_unusable_folder_is_a_user_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(UserError, match="cannot open LLM response cache"):
        KVCache(blocker / "kv.sqlite", label="LLM response cache").open()

