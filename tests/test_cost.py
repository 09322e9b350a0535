"""Cost per user per month adds up from the recorded tokens and the price table."""

from __future__ import annotations

import argparse
from collections.abc import Collection, Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import simpy

from memsim.analysis.cli.cost import cost_main
from memsim.analysis.cost import CostAssumptions, cost_table, format_cost
from memsim.memory.base import MemoryStats, Retrieved, Turn, text_bytes
from memsim.scenarios.registry import build_scenario
from memsim.sim.answer.meter import PriceTable
from memsim.sim.engine import EngineConfig, Harness, SystemUnderTest, start_processes
from memsim.core.errors import UserError
from memsim.sim.recorder import Recorder
from memsim.sim.scorers import build_scorer


class Extractor:
    """Keeps every turn and 'calls an LLM' once per session: 3 tokens per word ingested (test double)."""

    def __init__(self) -> None:
        self.turns: dict[str, list[Turn]] = {}
        self.calls = 0
        self.tokens = 0

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        self.turns.setdefault(user_id, []).extend(turns)
        self.calls += 1
        self.tokens += 3 * sum(len(t.text.split()) for t in turns)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        held = [t for t in self.turns.get(user_id, []) if t.created_at <= now][-k:]
        return [Retrieved(t.turn_id, t.text, 1.0, t.created_at, (t.turn_id,)) for t in held]

    probe = retrieve

    def feedback(self, *a: object, **kw: object) -> None:
        pass

    def maintain(self, *, now: datetime) -> None:
        pass

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        self.turns[user_id] = [t for t in self.turns.get(user_id, []) if t.turn_id not in set(turn_ids)]

    def stats(self) -> MemoryStats:
        held = [t for ts in self.turns.values() for t in ts]
        return MemoryStats(
            items=len(held), vector_bytes=len(held) * 384 * 4, text_bytes=sum(text_bytes(t.text) for t in held),
            metadata_bytes=len(held) * 16, llm_calls=self.calls, tokens=self.tokens,
        )


def _answer(question, when, memories, gold, kind, qid):
    # A reader that "spends" tokens in proportion to what it reads.
    return {"answer": "x", "prompt_tokens": 50 + sum(len(m.text) for m in memories), "completion_tokens": 7}


def _rows(months: float = 3.0) -> tuple[pl.DataFrame, pl.DataFrame]:
    stream = build_scenario("persona", {"users": 4, "months": months}).generate(np.random.default_rng(1))
    env, rec = simpy.Environment(), Recorder()
    cfg = EngineConfig(start=stream.start, k=5, ks=(5,), fetch_k=5, metric="recall_all@5", feedback_from="none")
    harness = Harness(env=env, systems=[SystemUnderTest("x", "x", Extractor())], recorder=rec, config=cfg,
                      scorers=[build_scorer("evidence")], answer=_answer)
    start_processes(env, harness, stream.episodes())
    env.run(until=(stream.end - stream.start).total_seconds() + 1)
    rec.commit("all")
    probes, timeline, _ = rec.finish({})
    return probes, timeline


def test_cost_adds_up_from_recorded_tokens_and_the_price_table():
    probes, timeline = _rows()
    prices = PriceTable({"reader-m": (2.0, 8.0), "ingest-m": (0.5, 1.0)})
    a = CostAssumptions(reader_model="reader-m", ingest_model="ingest-m", embed_usd_per_million=0.0, storage_usd_per_gb_month=0.0)
    rows = cost_table(probes, timeline, prices=prices, assumptions=a)
    assert [r["month"] for r in rows] == [1, 2, 3]
    # Question-time cost: every answered question's tokens at the reader's prices, summed over months and users.
    expected_q = (probes["prompt_tokens"].sum() * 2.0 + probes["completion_tokens"].sum() * 8.0) / 1e6
    assert sum(r["usd_question"] * r["users"] for r in rows) == pytest.approx(expected_q)
    assert sum(r["question_llm_calls"] * r["users"] for r in rows) == probes.height
    # Ingest-time cost: the system's own tokens (MemoryStats) at the ingest model's input price.
    total_tokens = int(timeline["tokens"].max())
    assert sum(r["ingest_tokens"] * r["users"] for r in rows) == total_tokens
    assert sum(r["usd_ingest"] * r["users"] for r in rows) == pytest.approx(total_tokens * 0.5 / 1e6)
    assert sum(r["ingest_llm_calls"] * r["users"] for r in rows) == timeline.filter(pl.col("event") == "session").height
    for r in rows:
        assert r["usd"] == pytest.approx(r["usd_question"] + r["usd_ingest"] + r["usd_embedding"] + r["usd_storage"])
        assert r["bytes"] == pytest.approx(r["vector_bytes"] + r["text_bytes"] + r["metadata_bytes"] + r["index_bytes"])
    # Storage: bytes held at each month's end at the storage price.
    priced = cost_table(probes, timeline, prices=prices, assumptions=CostAssumptions("reader-m", "ingest-m", 0.0, 2.0))
    for r, p in zip(rows, priced):
        assert p["usd_storage"] == pytest.approx(r["bytes"] / 1e9 * 2.0)
    assert "per user per simulated month" in format_cost(rows, a)


def test_memories_grow_and_embedding_calls_count_turns_and_questions():
    probes, timeline = _rows()
    rows = cost_table(probes, timeline)
    assert rows[0]["memories"] < rows[-1]["memories"]
    turns = int(timeline.filter(pl.col("event") == "session")["turns"].sum())
    assert sum(r["embedding_calls"] * r["users"] for r in rows) == turns + probes.height


def test_unknown_model_is_a_clear_error():
    probes, timeline = _rows(1.0)
    with pytest.raises(UserError, match="no price"):
        cost_table(probes, timeline, assumptions=CostAssumptions(reader_model="mystery-model"))


def test_cost_command_prints_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from memsim.analysis.pipeline import make_spec
    from memsim.memory.registry import SystemSpec

    probes, timeline = _rows(2.0)
    # A run folder as the recorder leaves it: the spec beside the rows (the one reader, read_run, wants it).
    make_spec("longitudinal", "persona", {"users": 4, "months": 2.0}, (SystemSpec("naive"),), k=5).write(
        tmp_path / "spec.json"
    )
    probes.write_parquet(tmp_path / "probes.parquet")
    timeline.write_parquet(tmp_path / "timeline.parquet")
    args = argparse.Namespace(
        run_dir=tmp_path, prices=None, reader_model=None, ingest_model="gpt-4o-mini", embed_usd_per_million=0.02,
        storage_usd_per_gb_month=0.25, plot=tmp_path / "cost.png", json=tmp_path / "cost.json",
    )
    assert cost_main(args) == 0
    assert (tmp_path / "cost.png").stat().st_size > 0 and (tmp_path / "cost.json").is_file()
    assert "USD" in capsys.readouterr().out
