"""VectorStore: exact search against brute force, isolation, removal, persistence."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memsim.memory.store import MANIFEST_NAME, VectorStore
from memsim.core.errors import UserError

DIM = 16


def unit_rows(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    x = rng.normal(size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def brute_force(vectors: np.ndarray, ids: list[int], query: np.ndarray, k: int) -> list[int]:
    scores = vectors @ query
    order = sorted(range(len(ids)), key=lambda j: (-scores[j], ids[j]))
    return [ids[j] for j in order[:k]]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def test_search_matches_brute_force(rng: np.random.Generator) -> None:
    store = VectorStore(DIM)
    vectors = unit_rows(rng, 200)
    ids = [int(i) for i in rng.permutation(10_000)[:200]]
    store.add("u", ids, vectors)
    for query in unit_rows(rng, 5):
        got = store.search("u", query, 10)
        assert [i for i, _ in got] == brute_force(vectors, ids, query, 10)
        scores = [s for _, s in got]
        assert scores == sorted(scores, reverse=True)
        by_id = dict(zip(ids, vectors @ query, strict=True))
        assert all(abs(by_id[i] - s) < 1e-5 for i, s in got)


def test_k_larger_than_partition_and_unknown_user(rng: np.random.Generator) -> None:
    store = VectorStore(DIM)
    store.add("u", [1, 2, 3], unit_rows(rng, 3))
    assert sorted(i for i, _ in store.search("u", unit_rows(rng, 1)[0], 50)) == [1, 2, 3]
    assert store.search("nobody", unit_rows(rng, 1)[0], 5) == []
    with pytest.raises(ValueError, match="k must be"):
        store.search("u", unit_rows(rng, 1)[0], 0)
    with pytest.raises(ValueError, match="shape"):
        store.search("u", np.ones(DIM + 1, dtype=np.float32), 1)


def test_where_filter_is_exact_when_most_ids_are_rejected(rng: np.random.Generator) -> None:
    store = VectorStore(DIM)
    vectors = unit_rows(rng, 1000)
    ids = list(range(1000))
    store.add("u", ids, vectors)
    query = unit_rows(rng, 1)[0]
    # Keep only the three ids that rank worst, so the search must widen to the end.
    worst = brute_force(vectors, ids, query, 1000)[-3:]
    got = store.search("u", query, 5, where=lambda i: i in set(worst))
    assert [i for i, _ in got] == worst
    keep_even = store.search("u", query, 7, where=lambda i: i % 2 == 0)
    evens = [i for i in ids if i % 2 == 0]
    assert [i for i, _ in keep_even] == brute_force(vectors[evens], evens, query, 7)


def test_users_are_isolated(rng: np.random.Generator) -> None:
    store = VectorStore(DIM)
    a, b = unit_rows(rng, 4), unit_rows(rng, 4)
    store.add("alice", [0, 1, 2, 3], a)
    store.add("bob", [0, 1, 2, 3], b)  # the same ids in another partition are fine
    for j in range(4):
        (best, score), *_ = store.search("bob", b[j], 4)
        assert best == j and score == pytest.approx(1.0, abs=1e-5)
        np.testing.assert_allclose(store.vector("bob", j), b[j])
        np.testing.assert_allclose(store.vector("alice", j), a[j])
    # bob's scores against alice's first vector are bob's vectors, not alice's
    got = dict(store.search("bob", a[0], 4))
    np.testing.assert_allclose([got[i] for i in range(4)], b @ a[0], atol=1e-5)
    store.remove("alice", [0, 1, 2, 3])
    assert store.users() == ["bob"] and store.count("bob") == 4 and store.count("alice") == 0


def test_duplicate_ids_rejected_and_nothing_added(rng: np.random.Generator) -> None:
    store = VectorStore(DIM)
    store.add("u", [5, 6], unit_rows(rng, 2))
    with pytest.raises(ValueError, match="already stored"):
        store.add("u", [7, 6], unit_rows(rng, 2))
    with pytest.raises(ValueError, match="repeat"):
        store.add("u", [8, 8], unit_rows(rng, 2))
    with pytest.raises(ValueError, match="ids for"):
        store.add("u", [9], unit_rows(rng, 2))
    with pytest.raises(ValueError, match="shape"):
        store.add("u", [9], np.ones((1, DIM + 2), dtype=np.float32))
    assert store.ids("u") == [5, 6] and store.count() == 2


def test_remove_counts_and_removed_vectors_never_return(rng: np.random.Generator) -> None:
    store = VectorStore(DIM)
    vectors = unit_rows(rng, 10)
    store.add("u", list(range(10)), vectors)
    assert store.remove("u", [2, 4, 99]) == 2
    assert store.remove("u", [2]) == 0
    assert store.remove("nobody", [1]) == 0
    assert store.ids("u") == [0, 1, 3, 5, 6, 7, 8, 9]
    assert store.count() == 8 and store.nbytes == 8 * DIM * 4
    returned = {i for i, _ in store.search("u", vectors[2], 10)}
    assert returned == {0, 1, 3, 5, 6, 7, 8, 9}
    with pytest.raises(KeyError):
        store.vector("u", 2)
    # a removed id may be added again
    store.add("u", [2], vectors[2:3])
    assert store.search("u", vectors[2], 1)[0][0] == 2


def test_save_load_round_trip_with_awkward_user_ids(tmp_path, rng: np.random.Generator) -> None:
    store = VectorStore(DIM)
    users = ["../etc/passwd", "a/b\\c", "ünï 🙂", "", "manifest.json"]
    for n, user in enumerate(users):
        store.add(user, [n * 100 + j for j in range(n + 1)], unit_rows(rng, n + 1))
    store.save(tmp_path / "s")
    loaded = VectorStore.load(tmp_path / "s")
    assert loaded.dim == DIM and loaded.users() == store.users()
    assert loaded.nbytes == store.nbytes
    query = unit_rows(rng, 1)[0]
    for user in users:
        assert loaded.ids(user) == store.ids(user)
        assert loaded.search(user, query, 3) == store.search(user, query, 3)
        for i in store.ids(user):
            np.testing.assert_array_equal(loaded.vector(user, i), store.vector(user, i))
    # loaded stores keep working: duplicates still detected, adds still fine
    with pytest.raises(ValueError):
        loaded.add("", [300], unit_rows(rng, 1))
    loaded.add("", [999], unit_rows(rng, 1))
    assert loaded.count("") == 5
    # saving fewer users removes the index files nobody names any more
    for user in users[1:]:
        store.remove(user, store.ids(user))
    store.save(tmp_path / "s")
    files = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert files == [MANIFEST_NAME, "user-000000.faiss"]
    assert VectorStore.load(tmp_path / "s").users() == [users[0]]


def test_load_errors_name_the_file(tmp_path, rng: np.random.Generator) -> None:
    with pytest.raises(UserError, match="manifest.json: not found"):
        VectorStore.load(tmp_path)
    store = VectorStore(DIM)
    store.add("u", [1, 2], unit_rows(rng, 2))
    store.save(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST_NAME).read_text())
    manifest["dim"] = DIM + 1
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(UserError, match=r"user-000000\.faiss: expected"):
        VectorStore.load(tmp_path)
    manifest["dim"] = DIM
    manifest["users"][0]["file"] = "../elsewhere.faiss"
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="not an index file name"):
        VectorStore.load(tmp_path)
    (tmp_path / MANIFEST_NAME).write_text("{not json")
    with pytest.raises(UserError, match="unreadable"):
        VectorStore.load(tmp_path)
