"""What a run embeds: every text it uses, and not the questions nothing reads."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

from memsim.memory.base import Turn, render_turn
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources
from memsim.sim.events import Episode, Question, Session
from memsim.sim.runner import run
from memsim.sim.spec import RunSpec, ScenarioEntry, SystemEntry

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


class RecordingEmbedder(HashEmbedder):
    """A hash embedder that keeps every text it was asked for."""

    def __init__(self) -> None:
        super().__init__(dim=32)
        self.seen: list[str] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.extend(texts)
        return super().encode(texts)


class FakeAnswer:
    """A reader and judge that answer every question with its gold and score it 1."""

    score_columns = ("answer_fake",)

    def answer_and_judge(self, question: str, when: Any, memories: Any, gold: str, category: str, qid: str) -> dict[str, Any]:
        return {"answer": gold, "answer_fake": 1.0}


def _episode() -> Episode:
    turns = tuple(
        Turn(turn_id=f"a:D{i}", user_id="a", speaker="Ann", text=text, created_at=T0, session_id="a:S1")
        for i, text in enumerate(("I adopted a beagle", "pottery class is fun"), start=1)
    )
    ask = T0 + timedelta(days=1)
    return Episode("a", (
        Session("a:S1", "a", T0, turns),
        Question("a:q0", "a", ask, "which dog did I adopt", "beagle", "single-hop", ("a:D1",)),
        Question("a:q1", "a", ask, "did Bob adopt a cat", "", "adversarial", ("a:D1",), excluded="adversarial"),
        Question("a:q2", "a", ask, "would Ann like clay", "yes", "open-domain", (), excluded="no_usable_evidence"),
    ))


def _spec() -> RunSpec:
    return RunSpec(kind="static", scenario=ScenarioEntry(name="given"), systems=(SystemEntry(name="naive"),),
                   k=2, retrieve_k=5, scorers=("evidence",), control=None, n_boot=100)


def _run(answer: Any = None) -> tuple[RecordingEmbedder, Any]:
    embedder = RecordingEmbedder()
    result = run(_spec(), [_episode()], resources=Resources(embedder_factory=lambda: embedder), answer=answer)
    return embedder, result


def test_retrieval_only_run_does_not_embed_excluded_questions() -> None:
    embedder, result = _run()
    seen = set(embedder.seen)
    assert "which dog did I adopt" in seen
    assert {render_turn(t) for t in _episode().events[0].turns} <= seen  # type: ignore[union-attr]
    assert not seen & {"did Bob adopt a cat", "would Ann like clay"}
    # They are still recorded and counted as excluded, with nothing retrieved.
    rows = {r["question_id"]: r for r in result.probes.iter_rows(named=True)}
    assert rows["a:q1"]["excluded"] == "adversarial" and rows["a:q1"]["retrieved_ids"] == []
    assert rows["a:q2"]["excluded"] == "no_usable_evidence" and rows["a:q2"]["n_retrieved"] == 0
    assert rows["a:q0"]["n_retrieved"] == 2
    assert result.info["embedding"]["texts"] == 3


def test_a_reader_gets_excluded_questions_retrieved_and_embedded() -> None:
    embedder, result = _run(FakeAnswer())
    assert {"did Bob adopt a cat", "would Ann like clay"} <= set(embedder.seen)
    rows = {r["question_id"]: r for r in result.probes.iter_rows(named=True)}
    assert rows["a:q1"]["n_retrieved"] == 2 and rows["a:q1"]["answer_fake"] == 1.0
    assert result.info["embedding"]["texts"] == 5

