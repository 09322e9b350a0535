"""Silence is never a pass (issue 38, item 3): a judge reply with no readable verdict is a wrong answer.

Adversarial replies go through every LLM judge with each prompt it can send (memsim's paraphrase, Mem0's
JSON template, LongMemEval's templates), each with its expected score and whether a verdict was read.
Then whole runs against a scripted OpenAI-compatible endpoint on loopback whose judge never gives a
verdict: a reader that always says "not mentioned" scores 0 on every answerable question under every
protocol, and the unreadable count is in ``metrics.json``, printed, and fails the run above 5%.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
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
from memsim.sim.answer import ScriptedLLM
from memsim.sim.answer.judges import (
    MAX_VERDICT_CHARS,
    UNREADABLE_LIMIT,
    judge_verdict,
    make_judge,
    too_many_unreadable,
)
from memsim.sim.answer.official import load_official_prompts
from memsim.sim.answer.options import AnswerOptions
from memsim.core.errors import UserError

FIXTURES = Path(__file__).parent / "fixtures" / "judge_prompts"

LONG = ("Let me weigh whether this is correct, yes, against the reference. " * 200)[:10_000]
assert len(LONG) == 10_000 > MAX_VERDICT_CHARS

# Judges by the prompt they send: the column order of EXPECTED.
JUDGES = ("locomo_memsim", "locomo_mem0", "lme_memsim", "lme_official")

# reply -> (score, readable) under each judge of JUDGES; score 0.0 whenever nothing could be read.
EXPECTED: dict[str, tuple[tuple[float, bool], ...]] = {
    "The generated answer is not correct. WRONG": ((0.0, True), (0.0, False), (0.0, False), (0.0, False)),
    "CORRECT? No.": ((0.0, False), (0.0, False), (0.0, True), (0.0, True)),
    "I'd say it's correct... actually WRONG": ((0.0, True), (0.0, False), (0.0, False), (0.0, False)),
    "": ((0.0, False), (0.0, False), (0.0, False), (0.0, False)),
    LONG: ((0.0, False), (0.0, False), (0.0, False), (0.0, False)),
    '{"label": "WRONG"}': ((0.0, True), (0.0, True), (0.0, False), (0.0, False)),
    '{"label": "CORRECT"}': ((1.0, True), (1.0, True), (0.0, False), (0.0, False)),
    "correct": ((1.0, True), (0.0, False), (0.0, False), (0.0, False)),
    "The answer is not correct": ((0.0, True), (0.0, False), (0.0, False), (0.0, False)),
    "The reference says 7 May 2023 and the answer names the same day in another format. CORRECT":
        ((1.0, True), (0.0, False), (0.0, False), (0.0, False)),
    "The answer names a different month than the reference, so it is not the same. WRONG.":
        ((0.0, True), (0.0, False), (0.0, False), (0.0, False)),
    "Both say 7 May 2023, so the answer is right: yes": ((0.0, False), (0.0, False), (1.0, True), (1.0, True)),
    "The answer gives another date; no": ((0.0, False), (0.0, False), (0.0, True), (0.0, True)),
}


class _Verbatim(ScriptedLLM):
    """A scripted client that returns its reply whole, as a server that ignores the token budget does."""

    def chat(self, messages: Any, *, max_tokens: int, **kw: Any) -> Any:
        return super().chat(messages, max_tokens=10**6, **kw)


def _judge(kind: str, reply: str) -> Any:
    llm = _Verbatim(reply)
    if kind == "locomo_memsim":
        return make_judge("llm_locomo", llm)
    if kind == "locomo_mem0":
        return make_judge("llm_locomo", llm, templates=load_official_prompts(FIXTURES / "mem0_prompts.py").templates)
    if kind == "lme_memsim":
        return make_judge("llm_longmemeval", llm)
    return make_judge("llm_longmemeval", llm, templates=load_official_prompts(FIXTURES / "evaluate_qa.py").templates)


@pytest.mark.parametrize("category", [None, "temporal-reasoning", "2"])
@pytest.mark.parametrize("kind", JUDGES)
@pytest.mark.parametrize("reply", list(EXPECTED), ids=lambda r: (r[:30] or "empty") if len(r) < 100 else "10k chars")
def test_adversarial_reply_gets_its_verdict(reply: str, kind: str, category: str | None) -> None:
    judge = _judge(kind, reply)
    score, readable = EXPECTED[reply][JUDGES.index(kind)]
    got = judge_verdict(judge, question="When did she move?", gold="7 May 2023", answer="7 May 2023",
                        category=category, question_id="q1")
    assert (got.score, got.readable) == (score, readable)
    assert judge.calls == 1 and judge.unreadable == (0 if readable else 1)


def test_unreadable_counts_add_up_over_calls() -> None:
    judge = _judge("locomo_memsim", "hmm")
    for _ in range(3):
        assert judge.score(question="q", gold="g", answer="a") == 0.0
    assert (judge.calls, judge.unreadable) == (3, 3)


def test_too_many_unreadable_names_the_judge_and_the_share() -> None:
    def metrics(unreadable: int) -> dict[str, Any]:
        return {"systems": {"naive": {"answers": {"judges": {"answer_llm_locomo": {"questions": 200,
                                                                                    "unreadable": unreadable}}}}}}

    assert too_many_unreadable(metrics(int(200 * UNREADABLE_LIMIT))) == ""  # 5.0% is not above 5%
    text = too_many_unreadable(metrics(11))
    assert "llm_locomo on naive: 11 of 200 (5.5%)" in text and "--allow-unreadable-verdicts" in text
    assert too_many_unreadable({"systems": {"naive": {"failed": "boom"}}}) == ""


# ---------------------------------------------------------------- whole runs against a loopback endpoint


class _SilentJudgeEndpoint(ChatEndpoint):
    """An OpenAI-compatible server on loopback: the reader always gets "not mentioned", a judge never a verdict."""

    def __init__(self, judge_reply: str) -> None:
        self.reader_calls = 0
        self.judge_calls = 0

        def reply(text: str, body: dict[str, Any]) -> str:
            if "Answer to grade" in text or "Rubric for a good answer" in text:
                self.judge_calls += 1
                return judge_reply
            self.reader_calls += 1
            return "not mentioned"

        super().__init__(reply)


@pytest.fixture
def silent_endpoint() -> Iterator[Callable[[str], _SilentJudgeEndpoint]]:
    made: list[_SilentJudgeEndpoint] = []

    def make(judge_reply: str = "Hard to say without more context.") -> _SilentJudgeEndpoint:
        made.append(_SilentJudgeEndpoint(judge_reply))
        return made[-1]

    yield make
    for ep in made:
        ep.stop()


def _options(url: str, judge: str, **extra: Any) -> AnswerOptions:
    return AnswerOptions(reader="short", llm="openai", llm_model="reader-model", llm_base_url=url,
                         judge=(judge,), judge_model="judge-model", judge_check=0, no_cache=True,
                         llm_retries=0, **extra)


def _run(name: str, options: dict[str, Any], data: Path, answer: AnswerOptions, out: Path | None = None) -> Any:
    run = static_protocol(name).plan(options, systems=(parse_system("naive"),), data=str(data), k=5, answer=answer)
    spec = make_spec("static", name, run.scenario_args, run.systems, **run.settings(), n_boot=100, control=None,
                     answer=answer)
    resources = Resources(rng=np.random.default_rng(0), embedder_factory=lambda: HashEmbedder(256))
    return execute(spec, out_dir=out, resources=resources, default_judges=static_protocol(name).judges)


@pytest.mark.parametrize(("protocol", "right", "questions"), [("locomo", 47, 199), ("mem0", 0, 152)])
def test_a_silent_judge_passes_nothing_under_the_locomo_protocols(
    locomo_path: Path, silent_endpoint: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    protocol: str, right: int, questions: int,
) -> None:
    from memsim.analysis.cli.run import print_static

    ep = silent_endpoint()
    options = {"protocol": protocol, "limit_conversations": 1}
    with pytest.raises(UserError, match=r"llm_locomo on naive: 152 of \d+ .*--allow-unreadable-verdicts"):
        _run("locomo", options, locomo_path, _options(ep.url, "llm_locomo"), out=tmp_path / "refused")
    # The figures were written before the run failed, silence scored wrong.
    m = json.loads((tmp_path / "refused" / "metrics.json").read_text())
    assert m["systems"]["naive"]["answers"]["judges"]["answer_llm_locomo"]["unreadable"] == 152

    outcome = _run("locomo", options, locomo_path, _options(ep.url, "llm_locomo", allow_unreadable_verdicts=True))
    assert ep.judge_calls == 2 * 152  # category 5 is scored by its rule, with no call
    table = outcome.summary.metrics["systems"]["naive"]["answers"]["judges"]["answer_llm_locomo"]
    assert table["questions"] == questions and table["judged"] == questions
    assert table["accuracy"] == pytest.approx(right / questions)  # 47/199 under locomo, never 1.000
    assert table["unreadable"] == 152
    rows = outcome.result.probes
    answerable = rows.filter(rows["excluded"].fill_null("") != "adversarial")
    assert answerable.height == 152
    assert answerable["answer_llm_locomo"].to_list() == [0.0] * 152
    assert answerable["unreadable_llm_locomo"].to_list() == [True] * 152
    print_static(outcome)
    out = capsys.readouterr().out
    assert f"unreadable by llm_locomo: 152 of {questions} replies had no verdict" in out


@pytest.mark.parametrize("protocol", ["official", "seed"])
def test_a_silent_judge_passes_nothing_under_the_longmemeval_protocols(
    longmemeval_oracle_path: Path, silent_endpoint: Any, capsys: pytest.CaptureFixture[str], protocol: str
) -> None:
    from memsim.analysis.cli.run import print_static

    ep = silent_endpoint("I would need to see more of the history to decide.")
    options = {"protocol": protocol, "sample": 12}
    answer = _options(ep.url, "llm_longmemeval", allow_unreadable_verdicts=True)
    outcome = _run("longmemeval", options, longmemeval_oracle_path, answer)
    rows = outcome.result.probes
    assert rows.height == 12 and ep.judge_calls == 12
    assert rows["answer_llm_longmemeval"].to_list() == [0.0] * 12  # abstention questions too: no verdict, no pass
    table = outcome.summary.metrics["systems"]["naive"]["answers"]["judges"]["answer_llm_longmemeval"]
    assert table["accuracy"] == 0.0 and table["unreadable"] == 12
    # The headline is the judge's accuracy: its own line carries the count and the unreliable mark (no check ran).
    print_static(outcome)
    out = capsys.readouterr().out
    headline = [line for line in out.splitlines() if line.startswith("answer_llm_longmemeval: overall 0.000")]
    assert len(headline) == 1, out
    assert "12 replies without a verdict scored wrong" in headline[0] and "unreliable (no check)" in headline[0]


def test_feedback_is_not_told_from_a_reply_without_a_verdict() -> None:
    from memsim.sim.engine import verdict_of

    keys = ("answer_llm_locomo", "answer_contains")
    silent = {"answer_llm_locomo": 0.0, "unreadable_llm_locomo": True, "recall_all@10": 1.0}
    wrong = {"answer_llm_locomo": 0.0, "unreadable_llm_locomo": False, "recall_all@10": 1.0}
    assert verdict_of(silent, channel="answer", metric="recall_all@10", judge_keys=keys) is None
    assert verdict_of(wrong, channel="answer", metric="recall_all@10", judge_keys=keys) is False
    # The evidence channel reads the headline metric: the judge's silence does not matter there.
    assert verdict_of(silent, channel="evidence", metric="recall_all@10", judge_keys=keys) is True
