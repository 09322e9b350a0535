"""Stores keep ``stats()`` as running totals; after any mix of operations they equal a full recount.

``stats()`` is read after every session of every system, so the stores keep
their sizes as they change instead of summing every user's state on each
read. These tests play ingest, retrieval, feedback, maintenance and deletion
for several users and recount the held state from scratch after each step.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from memsim.memory.base import PerUserTally, Turn
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources, build_memory

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)
WORDS = ["lives", "in", "Paris", "Lyon", "works", "as", "a", "nurse", "teacher", "likes", "tea", "coffee", "dog", "cat"]


def recount(system: object) -> tuple[int, int]:
    """(items, metadata bytes) summed over every user's held state, without the running totals."""
    name = type(system).__name__
    if name in ("PublishedNeuroplasticMemory", "DailyDecayNeuroplasticMemory"):
        import memsim.memory.neuroplastic as daily
        import memsim.memory.neuroplastic_published as published

        module = published if name == "PublishedNeuroplasticMemory" else daily
        base = system._index.stats()  # type: ignore[attr-defined]
        extra = sum(module._state_bytes(u) for u in system._users.values())  # type: ignore[attr-defined]
        return base.items, base.metadata_bytes + extra
    if name == "BM25Memory":
        from memsim.memory.base import meta_bytes

        mems = [m for v in system._records.mem.values() for m in v.values()]  # type: ignore[attr-defined]
        return len(mems), sum(meta_bytes(m) for m in mems)
    if name == "FullContextMemory":
        held = [it for v in system._items.values() for it in v]  # type: ignore[attr-defined]
        return len(held), sum(len(it[0]) + len(it[4]) + 16 for it in held)
    raise AssertionError(f"no recount for {name}")


@pytest.mark.parametrize(
    "name, args",
    [
        ("neuroplastic", {}),
        ("neuroplastic", {"gate": "none", "link_after": 1}),
        ("neuroplastic-daily-decay", {}),
        ("bm25", {}),
        ("fullcontext", {}),
    ],
)
def test_running_totals_match_a_full_recount(name: str, args: dict) -> None:
    rng = np.random.default_rng(3)
    system = build_memory(name, args, resources=Resources(rng=np.random.default_rng(0), embedder_factory=HashEmbedder))
    users = ["u1", "u2", "u3"]
    now = T0
    turn_no = 0
    held: dict[str, list[str]] = {u: [] for u in users}
    served: dict[str, list[str]] = {}
    for step in range(90):
        now += timedelta(hours=5)
        user = users[int(rng.integers(len(users)))]
        op = step % 6
        if op in (0, 1):
            turns = []
            for _ in range(int(rng.integers(1, 5))):
                turn_no += 1
                text = " ".join(rng.choice(WORDS, size=5))
                turns.append(Turn(f"t{turn_no}", user, "user", f"I {text}.", now, f"s{step}"))
                held[user].append(f"t{turn_no}")
            system.ingest(turns, user_id=user, now=now)
        elif op == 2:
            served[user] = [m.memory_id for m in system.retrieve("where does she live", user_id=user, now=now, k=4)]
        elif op == 3:
            system.feedback(f"q{step}", served.get(user, []), True, user_id=user, now=now)
        elif op == 4:
            system.maintain(now=now)
        elif held[user]:
            gone = held[user][: 2]
            held[user] = held[user][2:]
            system.forget(gone, user_id=user, now=now)
        stats = system.stats()
        assert (stats.items, stats.metadata_bytes) == recount(system), f"step {step} ({name} {args})"
    assert system.stats().items > 0


def test_tally_recounts_only_touched_users_and_drops_gone_ones() -> None:
    states = {"a": [1, 2], "b": [3]}
    counted: list[str] = []

    def count(state: list[int]) -> int:
        counted.append(str(state))
        return len(state)

    tally = PerUserTally()
    tally.touch_all(states)
    assert tally.total(states, count) == 3
    counted.clear()
    states["a"].append(4)
    assert tally.total(states, count) == 3  # not touched: the kept figure stands
    tally.touch("a")
    assert tally.total(states, count) == 4
    assert counted == [str([1, 2, 4])]
    del states["b"]
    tally.touch("b")
    assert tally.total(states, count) == 3


def test_dense_index_and_vector_store_counts_match_their_partitions() -> None:
    from memsim.memory.dense import DenseIndex
    from memsim.memory.base import Memory

    rng = np.random.default_rng(5)
    index = DenseIndex(4)
    ids: dict[str, list[int]] = {"a": [], "b": []}
    for step in range(40):
        user = "a" if step % 3 else "b"
        if step % 4 == 3 and ids[user]:
            gone = ids[user][:3]
            ids[user] = ids[user][3:]
            index.remove(user, gone + [10**6])  # an unknown id is ignored
        else:
            n = int(rng.integers(1, 4))
            vecs = rng.normal(size=(n, 4)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            mems = [Memory("", f"text {step} {j}", T0 + timedelta(minutes=step), (f"t{step}.{j}",)) for j in range(n)]
            ids[user] += index.add(user, mems, vecs, partition="x" if step % 2 else "")
        per_user = sum(index.count(u) for u in ("a", "b"))
        assert index.count() == per_user == len(ids["a"]) + len(ids["b"])
        assert index.store.count() == sum(index.store.count(key) for key in index.store.users()) == per_user
        assert index.stats().vector_bytes == per_user * 4 * 4
