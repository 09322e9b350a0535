"""NaiveMemory: stores every turn, exact top-k, hides the future, forgets by provenance."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from memsim.memory.base import MemorySystem, Turn, render_turn, text_bytes
from memsim.memory.embed import Embedder, HashEmbedder
from memsim.memory.naive import TIMESTAMP_BYTES, VECTOR_ID_BYTES, NaiveMemory
from memsim.memory.registry import Resources, build_memory

LATER = datetime(2030, 1, 1, tzinfo=timezone.utc)

FACTS = [
    "I adopted a grey cat named Miso last week",
    "My sister lives in Lisbon and works as an architect",
    "We are planning a hiking trip to the Alps in July",
    "I started learning the cello at the community school",
    "My favourite food is mushroom risotto with parmesan",
    "The car broke down again on the way to work",
    "I'm reading a novel about lighthouse keepers",
    "My cat Miso hates the vacuum cleaner",
]

MakeTurn = Callable[..., Turn]


@pytest.fixture
def turns(make_turn: MakeTurn) -> list[Turn]:
    return [make_turn(text, i=i) for i, text in enumerate(FACTS)]


@pytest.fixture
def memory(hash_embedder: HashEmbedder, turns: list[Turn]) -> NaiveMemory:
    m = NaiveMemory(resources=Resources(), embedder=hash_embedder)
    m.ingest(turns, user_id="u1", now=turns[-1].created_at)
    return m


def test_satisfies_protocol_and_registry(hash_embedder: HashEmbedder) -> None:
    direct = NaiveMemory(resources=Resources(), embedder=hash_embedder)
    assert isinstance(direct, MemorySystem)
    built = build_memory("naive", resources=Resources(embedder_factory=lambda: HashEmbedder(32)))
    assert isinstance(built, NaiveMemory) and built.embedder.dim == 32


def test_stores_every_turn_verbatim_with_provenance(memory: NaiveMemory, turns: list[Turn]) -> None:
    held = memory.memories("u1")
    assert [m.memory_id for m in held] == [t.turn_id for t in turns]
    for m, t in zip(held, turns, strict=True):
        assert m.text == render_turn(t)
        assert m.source_turn_ids == (t.turn_id,)
        assert m.created_at == t.created_at
    assert memory.stats().items == len(turns)


def test_reingest_is_idempotent(memory: NaiveMemory, turns: list[Turn], hash_embedder: HashEmbedder) -> None:
    before, embedded = memory.stats(), hash_embedder.stats.requested
    memory.ingest(turns[:3] + turns[:3], user_id="u1", now=LATER)
    assert memory.stats() == before
    assert hash_embedder.stats.requested == embedded  # nothing was even embedded


def test_ingest_embeds_in_one_batch(hash_embedder: HashEmbedder, turns: list[Turn]) -> None:
    calls: list[int] = []
    real = hash_embedder.encode

    def counting(texts):
        calls.append(len(texts))
        return real(texts)

    hash_embedder.encode = counting  # type: ignore[method-assign]
    m = NaiveMemory(resources=Resources(), embedder=hash_embedder)
    m.ingest(turns, user_id="u1", now=LATER)
    assert calls == [len(turns)]


def test_top_k_is_exact_cosine_order(memory: NaiveMemory, hash_embedder: HashEmbedder) -> None:
    query = "cat Miso"
    got = memory.retrieve(query, user_id="u1", now=LATER, k=4)
    held = memory.memories("u1")
    vectors = hash_embedder.encode([m.text for m in held])
    scores = vectors @ hash_embedder.encode_one(query)
    expected = [held[j].memory_id for j in np.argsort(-scores, kind="stable")[:4]]
    assert [r.memory_id for r in got] == expected
    assert {got[0].memory_id, got[1].memory_id} == {"u1:t0", "u1:t7"}  # the two cat turns
    assert [r.score for r in got] == sorted((r.score for r in got), reverse=True)
    np.testing.assert_allclose([r.score for r in got], np.sort(scores)[::-1][:4], atol=1e-5)
    assert len(memory.retrieve(query, user_id="u1", now=LATER, k=100)) == len(FACTS)


def test_bad_k_and_other_users(memory: NaiveMemory, make_turn: MakeTurn) -> None:
    with pytest.raises(ValueError, match="k must be"):
        memory.retrieve("cat", user_id="u1", now=LATER, k=0)
    assert memory.retrieve("cat", user_id="u2", now=LATER, k=3) == []
    memory.ingest([make_turn("my dog is called Rex", i=0, user="u2")], user_id="u2", now=LATER)
    got = memory.retrieve("cat named Miso", user_id="u2", now=LATER, k=5)
    assert [r.memory_id for r in got] == ["u2:t0"]
    with pytest.raises(ValueError, match="belongs to user"):
        memory.ingest([make_turn("x", i=99, user="u3")], user_id="u2", now=LATER)


def test_future_memories_are_hidden_even_when_most_are_future(
    hash_embedder: HashEmbedder, make_turn: MakeTurn
) -> None:
    now = datetime(2024, 6, 1, tzinfo=timezone.utc)
    past = [make_turn(f"old note {i} about cats", i=i, at=now - timedelta(days=i + 1)) for i in range(3)]
    # The future turns match the query better than the past ones.
    future = [
        make_turn(f"cats cats cats {i}", i=100 + i, at=now + timedelta(minutes=i + 1)) for i in range(200)
    ]
    m = NaiveMemory(resources=Resources(), embedder=hash_embedder)
    m.ingest(past + future, user_id="u1", now=now)
    got = m.retrieve("cats", user_id="u1", now=now, k=5)
    assert sorted(r.memory_id for r in got) == sorted(t.turn_id for t in past)
    assert all(r.created_at <= now for r in got)
    at_edge = m.retrieve("cats", user_id="u1", now=now + timedelta(minutes=1), k=5)
    assert "u1:t100" in {r.memory_id for r in at_edge}  # created exactly at now is visible
    assert all(r.created_at <= now + timedelta(minutes=1) for r in at_edge)


def test_forget_removes_by_provenance(memory: NaiveMemory, turns: list[Turn]) -> None:
    before = memory.stats()
    memory.forget(["u1:t0", "u1:t7", "no-such-turn"], user_id="u1", now=LATER)
    got = memory.retrieve("cat named Miso", user_id="u1", now=LATER, k=100)
    assert {r.memory_id for r in got} == {t.turn_id for t in turns[1:7]}
    assert not any({"u1:t0", "u1:t7"} & set(r.source_turn_ids) for r in got)
    after = memory.stats()
    assert after.items == before.items - 2
    assert after.text_bytes == before.text_bytes - text_bytes(render_turn(turns[0])) - text_bytes(
        render_turn(turns[7])
    )
    # forgetting for another user touches nothing of u1
    memory.forget(["u1:t1"], user_id="u2", now=LATER)
    assert memory.stats() == after
    # a forgotten turn that arrives again is a new arrival
    memory.ingest([turns[0]], user_id="u1", now=LATER)
    assert memory.retrieve("cat named Miso", user_id="u1", now=LATER, k=1)[0].memory_id == "u1:t0"


def test_stats_match_what_is_stored(hash_embedder: HashEmbedder, make_turn: MakeTurn) -> None:
    m = NaiveMemory(resources=Resources(), embedder=hash_embedder)
    assert m.stats().items == 0 and m.stats().bytes == 0
    a = [make_turn(f"fact {i} ünïcode", i=i, user="a") for i in range(5)]
    b = [make_turn(f"other {i}", i=i, user="b") for i in range(3)]
    m.ingest(a, user_id="a", now=LATER)
    m.ingest(b, user_id="b", now=LATER)
    m.forget(["a:t2"], user_id="a", now=LATER)
    kept = [t for t in a if t.turn_id != "a:t2"] + b
    stats = m.stats()
    assert stats.items == len(kept) == 7
    assert stats.vector_bytes == 7 * hash_embedder.dim * 4
    assert stats.text_bytes == sum(len(render_turn(t).encode()) for t in kept)
    assert stats.metadata_bytes == sum(
        2 * len(t.turn_id.encode()) + TIMESTAMP_BYTES + VECTOR_ID_BYTES for t in kept
    )
    assert stats.llm_calls == 0 and stats.tokens == 0
    m.forget([t.turn_id for t in b], user_id="b", now=LATER)
    m.forget([t.turn_id for t in a], user_id="a", now=LATER)
    assert m.stats().bytes == 0 and m.stats().items == 0


def test_feedback_and_maintain_change_nothing(memory: NaiveMemory) -> None:
    query = "hiking in the mountains"
    before = memory.retrieve(query, user_id="u1", now=LATER, k=3)
    memory.feedback("q1", [r.memory_id for r in before], False, user_id="u1", now=LATER)
    memory.maintain(now=LATER)
    assert memory.retrieve(query, user_id="u1", now=LATER, k=3) == before


@pytest.mark.slow
def test_real_embedder_finds_the_answer(minilm: Embedder, turns: list[Turn]) -> None:
    m = NaiveMemory(resources=Resources(embedder_factory=lambda: minilm))
    m.ingest(turns, user_id="u1", now=LATER)
    top = m.retrieve("Which musical instrument is she learning?", user_id="u1", now=LATER, k=1)
    assert top[0].memory_id == "u1:t3"
    top = m.retrieve("Where does her sister live?", user_id="u1", now=LATER, k=1)
    assert top[0].memory_id == "u1:t1"
