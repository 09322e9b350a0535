"""Many users at once against one instance of each system: isolation and per-user accuracy."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from helpers import replay, run_stream

from memsim.analysis.summary import per_user
from memsim.memory.base import MemoryStats, Retrieved, Turn
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources
from memsim.scenarios.base import ScenarioStream
from memsim.scenarios.registry import build_scenario
from memsim.sim.events import Event, Question, Session, sort_events

QUIRKS = Path(__file__).parent / "fixtures" / "locomo_quirks.json"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def clone_users(stream: ScenarioStream, copies: int) -> ScenarioStream:
    """``copies`` users per user of ``stream`` with identical texts and times, ids suffixed ``~n``.

    Identical texts make the sharpest isolation test: a system that looked
    past the asker's id would find another user's copy as close as its own.
    """
    events: list[Event] = []
    for n in range(copies):
        def rid(x: str, n: int = n) -> str:
            return x if n == 0 else f"{x}~{n}"

        for e in stream.events:
            if isinstance(e, Session):
                turns = tuple(replace(t, turn_id=rid(t.turn_id), user_id=rid(t.user_id), session_id=rid(t.session_id)) for t in e.turns)
                events.append(replace(e, session_id=rid(e.session_id), user_id=rid(e.user_id), turns=turns))
            elif isinstance(e, Question):
                events.append(
                    replace(e, question_id=rid(e.question_id), user_id=rid(e.user_id), evidence=tuple(rid(t) for t in e.evidence))
                )
    return ScenarioStream(start=stream.start, end=stream.end, events=tuple(sort_events(events)), meta=stream.meta)


@pytest.fixture(scope="module")
def crowd() -> ScenarioStream:
    base = build_scenario("locomo_stream", {"data": str(QUIRKS), "reask_rate": 0.5}).generate(np.random.default_rng(0))
    return clone_users(base, 4)


SYSTEMS = ("naive", "bm25", "hybrid", "recency", "surprise", "multisignal", "neuroplastic", "fullcontext")


def test_clones_share_texts_but_not_ids(crowd: ScenarioStream) -> None:
    assert len(crowd.users) == 8
    turns = [t for e in crowd.events if isinstance(e, Session) for t in e.turns]
    owner = {t.turn_id: t.user_id for t in turns}
    text = {t.turn_id: t.text for t in turns}
    assert len(set(text.values())) * 4 == len(text)
    assert all(owner[t].split("~")[0] in t and (("~" in t) == ("~" in owner[t])) for t in owner)


@pytest.mark.slow
def test_registered_systems_serve_many_users_without_leaks(crowd: ScenarioStream, tmp_path: Path) -> None:
    emb = HashEmbedder(64)
    result, summary = run_stream(crowd, SYSTEMS, resources=Resources(embedder_factory=lambda: emb), k=5, n_boot=200)
    assert result.failures == []
    probes = result.probes
    owner = {t.turn_id: t.user_id for e in crowd.events if isinstance(e, Session) for t in e.turns}
    for r in probes.iter_rows(named=True):
        for sources in r["retrieved_sources"]:
            assert all(owner[t] == r["user_id"] for t in sources), (r["system"], r["question_id"])
    assert summary.metrics["isolation_failures"] == 0
    n_questions = sum(isinstance(e, Question) for e in crowd.events)
    for name in SYSTEMS:
        users = summary.metrics["systems"][name]["per_user"]
        assert set(users) == set(crowd.users)
        assert sum(u["questions"] for u in users.values()) == n_questions
        assert all(u["isolation_failures"] == 0 for u in users.values())
    # Clones asked the same questions of the same texts: a deterministic system scores them alike.
    naive = summary.metrics["systems"]["naive"]["per_user"]
    assert naive["conv-a"]["mean"] == naive["conv-a~3"]["mean"]


@pytest.mark.slow
def test_same_seed_same_rows_and_no_leaks_with_many_users(crowd: ScenarioStream, tmp_path: Path) -> None:
    def once(out: str) -> pl.DataFrame:
        emb = HashEmbedder(64)
        resources = Resources(rng=np.random.default_rng(3), embedder_factory=lambda: emb)
        res, summary = run_stream(
            crowd, ("naive", "neuroplastic"), resources=resources, out_dir=tmp_path / out, k=5, seed=3, n_boot=200
        )
        assert res.probes["user_id"].n_unique() == 8
        assert summary.metrics["isolation_failures"] == 0
        return res.probes.drop("retrieve_ms", "embed_ms")

    assert once("a").equals(once("b"))


# --- per-user accuracy and isolation counting, with fakes ------------------------------------------


class Store:
    """Keeps every user's turns; returns the asker's newest first. ``dark`` users get nothing after ``dark_after``."""

    def __init__(self, dark: str | None = None, dark_after: datetime | None = None, promiscuous: bool = False) -> None:
        self.turns: dict[str, list[Turn]] = {}
        self.dark, self.dark_after, self.promiscuous = dark, dark_after, promiscuous

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        self.turns.setdefault(user_id, []).extend(turns)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        if user_id == self.dark and self.dark_after is not None and now > self.dark_after:
            return []
        pool = [t for ts in self.turns.values() for t in ts] if self.promiscuous else self.turns.get(user_id, [])
        pool = sorted((t for t in pool if t.created_at <= now), key=lambda t: t.created_at, reverse=True)
        return [Retrieved(t.turn_id, t.text, 1.0, t.created_at, (t.turn_id,)) for t in pool[:k]]

    probe = retrieve

    def feedback(self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime) -> None:
        pass

    def maintain(self, *, now: datetime) -> None:
        pass

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        pass

    def stats(self) -> MemoryStats:
        return MemoryStats(items=sum(len(v) for v in self.turns.values()))


def _two_users(heavy_questions: int = 30, light_questions: int = 6) -> ScenarioStream:
    """A heavy user asking many questions and a light one, both about one fact told on day 0."""
    events: list[Event] = []
    for uid, n in (("heavy", heavy_questions), ("light", light_questions)):
        turn = Turn(f"{uid}-t1", uid, "user", f"{uid} lives in Oslo.", T0, f"{uid}-s1")
        events.append(Session(f"{uid}-s1", uid, T0, (turn,)))
        for i in range(n):
            when = T0 + timedelta(days=1 + 20 * i / n)
            events.append(Question(f"{uid}-q{i}", uid, when, "Where do I live?", "Oslo", "current", (turn.turn_id,)))
    return ScenarioStream(start=T0, end=T0 + timedelta(days=22), events=tuple(sort_events(events)))


def _replay(stream: ScenarioStream, system) -> pl.DataFrame:
    return replay(stream, {"x": system}, k=1, every_s=0).probes


def test_per_user_accuracy_shows_a_light_users_decline() -> None:
    probes = _replay(_two_users(), Store(dark="light", dark_after=T0 + timedelta(days=10)))
    users = per_user(probes, "recall_all@1")
    # Overall the system still looks good: the heavy user hides the light user's decline ...
    assert probes["recall_all@1"].mean() > 0.8
    # ... which per-user accuracy shows.
    assert users["heavy"]["mean"] == 1.0 and users["heavy"]["diff"] == 0.0
    assert users["light"]["first_half"] == 1.0 and users["light"]["second_half"] == 0.0
    assert users["light"]["questions"] == 6 and users["heavy"]["questions"] == 30


def test_isolation_failures_are_counted_per_user_and_in_total(tmp_path: Path) -> None:
    probes = _replay(_two_users(), Store(promiscuous=True))
    users = per_user(probes, "recall_all@1")
    # Both facts are told at the same time; the store lists the heavy user's first, so k=1
    # hands the light user the heavy user's memory on every question.
    assert users["light"]["isolation_failures"] == 6 and users["heavy"]["isolation_failures"] == 0
    total = int(probes["isolation_failures"].sum())
    assert sum(u["isolation_failures"] for u in users.values()) == total
    clean = _replay(_two_users(), Store())
    assert int(clean["isolation_failures"].sum()) == 0
