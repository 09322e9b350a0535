"""Static LongMemEval on the real oracle file (issue 38, item 2): loader, keys, abstention, answers and judges.

The file is LongMemEval's ``longmemeval_oracle.json`` (all 500 questions); it is found through
``$MEMSIM_LONGMEMEVAL_ORACLE``, the data folder or ``../shared`` (``tests/lme_data.py``). Runs use the
hashing embedder so that they are fast; the answers come from a scripted OpenAI-compatible endpoint on
loopback.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from http_helpers import ChatEndpoint
from lme_data import longmemeval_oracle_path  # noqa: F401 - a fixture
from memsim.analysis.pipeline import execute, make_spec
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources, parse_system
from memsim.scenarios.registry import static_protocol
from memsim.sim.answer.options import AnswerOptions
from memsim.static_benchmarks import longmemeval as lme

# The published composition of the 500 questions.
TYPES = {"multi-session": 133, "temporal-reasoning": 133, "knowledge-update": 78, "single-session-user": 70,
         "single-session-assistant": 56, "single-session-preference": 30}


@pytest.fixture(scope="module")
def oracle(longmemeval_oracle_path: Path) -> list[lme.Instance]:
    return lme.load_instances(longmemeval_oracle_path)


def _resources() -> Resources:
    return Resources(rng=np.random.default_rng(0), embedder_factory=lambda: HashEmbedder(256))


def _run(path: Path, options: dict[str, Any], answer: AnswerOptions | None = None, out: Path | None = None) -> Any:
    proto = static_protocol("longmemeval")
    run = proto.plan(options, systems=(parse_system("naive"),), data=str(path), k=10, answer=answer)
    spec = make_spec("static", "longmemeval", run.scenario_args, run.systems, **run.settings(), n_boot=100,
                     control=None, answer=answer)
    return execute(spec, out_dir=out, resources=_resources(), default_judges=proto.judges)


def test_the_loader_reads_all_500_with_the_published_composition(oracle: list[lme.Instance]) -> None:
    assert len(oracle) == 500
    assert len({i.question_id for i in oracle}) == 500
    assert Counter(i.question_type for i in oracle) == TYPES
    assert sum(i.is_abstention for i in oracle) == 30
    for inst in oracle:
        dates = [s.date for s in inst.sessions]
        assert dates == sorted(dates), inst.question_id
        assert inst.sessions and inst.answer.strip(), inst.question_id
        # The oracle haystack is the evidence sessions only.
        assert {s.session_id for s in inst.sessions} == set(inst.answer_session_ids), inst.question_id


def test_the_official_retrieval_keys(oracle: list[lme.Instance]) -> None:
    without_gold = Counter()
    for inst in oracle:
        keys = lme.gold_turn_keys(inst)
        by_key = {lme.turn_key(s.session_id, t.index): (s, t) for s in inst.sessions for t in s.turns}
        for key in keys:
            session, turn = by_key[key]
            assert re.fullmatch(rf"{re.escape(session.session_id)}_\d+", key)
            assert turn.role == "user" and turn.has_answer and session.is_answer
        assert lme.gold_session_ids(inst) == {lme.session_of(k) for k in keys}
        if not keys and not inst.is_abstention:
            without_gold[inst.question_type] += 1
    # Only questions whose evidence is an assistant turn lack a gold user turn (51 of the 56): they are
    # unscored in the retrieval protocol (or scored 0/1/0 with empty_gold="official").
    assert without_gold == {"single-session-assistant": 51}


def test_abstention_is_left_out_of_retrieval_and_asked_in_qa(longmemeval_oracle_path: Path) -> None:
    everything = lme.select(longmemeval_oracle_path)
    kept = list(lme.iter_episodes(longmemeval_oracle_path, everything))
    asked = list(lme.iter_episodes(longmemeval_oracle_path, everything, include_abstention=True, user_only=False))
    assert (len(kept), len(asked)) == (470, 500)
    questions = [e.events[-1] for e in asked]
    abstention = [q for q in questions if q.excluded == "abstention"]
    assert len(abstention) == 30
    assert all(q.evidence == () and q.extra["question_id"].endswith("_abs") for q in abstention)
    # No id a system sees carries the file's id or the word "answer".
    for episode in asked[:50]:
        for event in episode.events:
            seen = [event.user_id] + ([t.turn_id for t in event.turns] if hasattr(event, "turns") else [event.question_id])
            assert not any("answer" in s or "_abs" in s for s in seen)


def test_the_retrieval_protocol_runs_and_scores_what_has_gold(longmemeval_oracle_path: Path,
                                                               oracle: list[lme.Instance]) -> None:
    outcome = _run(longmemeval_oracle_path, {"sample": 60})
    rows = outcome.result.probes
    # The sample's abstention instances are left out of the retrieval protocol.
    sampled = outcome.spec.scenario_meta["selection"]
    assert rows.height == 60 - sampled["abstention"] > 40 and rows["excluded"].null_count() == rows.height
    assert not any(e.endswith("_abs") for e in rows["episode"].to_list())
    by_id = {i.question_id: i for i in oracle}
    scored = [r for r in rows.iter_rows(named=True) if not math.isnan(r["turn_recall_all@10"])]
    assert len(scored) == sum(1 for r in rows.iter_rows(named=True) if lme.gold_turn_keys(by_id[r["episode"]]))
    for r in scored:
        gold = {lme.opaque_turn_key(k) for k in lme.gold_turn_keys(by_id[r["episode"]])}
        assert r["turn_recall_all@10"] == lme.score_ranking(r["retrieved_sources"], gold)["recall_all@10"]
    # The tables' "scored" column counts scored questions only (issue 38, item 5).
    from memsim.analysis.summary import format_tables

    overall = [line for line in format_tables(outcome.summary.metrics, "naive").splitlines()
               if line.startswith("overall")]
    assert overall and all(line.split()[1:3] == [str(rows.height), str(len(scored))] for line in overall[:3])


class _GoldEndpoint(ChatEndpoint):
    """A loopback OpenAI-compatible endpoint: the reader answers with the file's gold answer, the judge says yes
    when the graded answer is the reference (memsim's and LongMemEval's prompts both show it), no otherwise."""

    def __init__(self, gold: dict[str, str]) -> None:
        self.calls = Counter()

        def reply(text: str, body: dict[str, Any]) -> str:
            if "Answer to grade:" in text:
                self.calls["judge"] += 1
                ref = re.search(r"(?:Reference answer|Rubric for a good answer|Why it cannot be answered): "
                                r"(.*?)\nAnswer to grade: (.*?)\n\n", text, re.S)
                return "yes" if ref and ref.group(1).strip() == ref.group(2).strip() else "no"
            self.calls["reader"] += 1
            return next((a for q, a in gold.items() if q in text), "not mentioned")

        super().__init__(reply)


@pytest.fixture
def gold_endpoint(oracle: list[lme.Instance]) -> Iterator[_GoldEndpoint]:
    ep = _GoldEndpoint({i.question: i.answer for i in oracle})
    yield ep
    ep.stop()


@pytest.mark.parametrize("protocol", ["official", "seed"])
def test_answers_and_judges_on_real_questions(longmemeval_oracle_path: Path, oracle: list[lme.Instance],
                                              gold_endpoint: _GoldEndpoint, protocol: str) -> None:
    answer = AnswerOptions(reader="short", llm="openai", llm_model="reader", llm_base_url=gold_endpoint.url,
                           judge=("llm_longmemeval",), judge_model="judge", judge_check=0, no_cache=True,
                           llm_retries=0)
    types = "single-session-user,knowledge-update,temporal-reasoning"
    outcome = _run(longmemeval_oracle_path, {"protocol": protocol, "types": types, "sample": 24}, answer)
    rows = outcome.result.probes
    assert rows.height == 24 and gold_endpoint.calls == {"reader": 24, "judge": 24}
    by_id = {i.question_id: i for i in oracle}
    for r in rows.iter_rows(named=True):
        inst = by_id[r["episode"]]
        assert r["answer"] == inst.answer  # the reader's reply is the answer, whole
        # Every judge call saw its answer as the reference: a readable yes, never silence.
        assert r["answer_llm_longmemeval"] == 1.0 and r["unreadable_llm_longmemeval"] is False
        assert (r["excluded"] == "abstention") == inst.is_abstention
    m = outcome.summary.metrics
    assert m["metric"] == "answer_llm_longmemeval"
    table = m["systems"]["naive"]["answers"]["judges"]["answer_llm_longmemeval"]
    assert table["accuracy"] == 1.0 and table["unreadable"] == 0 and table["judged"] == 24
    assert m["systems"]["naive"]["answers"]["judges"]["answer_contains"]["accuracy"] > 0.9
