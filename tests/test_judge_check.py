"""The judge check: labelled items, metrics, marks in every table, official templates, dry runs."""

from __future__ import annotations

import argparse
import json
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memsim.analysis.judge_check import (
    CATEGORIES,
    RELIABLE_ACCURACY,
    build_check_set,
    check_judge,
    check_metrics,
    check_set_digest,
    cohen_kappa,
    format_check_table,
    judge_mark,
    write_check,
)
from memsim.sim.answer import ScriptedLLM, load_official_prompts, make_judge
from memsim.core.errors import UserError

FIXTURES = Path(__file__).parent / "fixtures"
MINI_LME = FIXTURES / "longmemeval_s_mini.json"
LME_PROMPTS = FIXTURES / "judge_prompts" / "evaluate_qa.py"
MEM0_PROMPTS = FIXTURES / "judge_prompts" / "mem0_prompts.py"


class AlwaysYes:
    """A judge that accepts every answer."""

    name = "always_yes"

    def score(self, **_: Any) -> float:
        return 1.0


@pytest.fixture(scope="module")
def items() -> list:
    return build_check_set(longmemeval=MINI_LME)


# ---------------------------------------------------------------- the check set


def test_check_set_is_deterministic_labelled_and_covers_the_categories(items) -> None:
    again = build_check_set(longmemeval=MINI_LME)
    assert [i.item_id for i in again] == [i.item_id for i in items]
    assert check_set_digest(again) == check_set_digest(items)
    cats = {i.category for i in items}
    assert {"correct", "paraphrase", "reformatted", "wrong_value", "stale_value", "other_question",
            "abstain_answerable", "abstention_declined", "abstention_answered"} <= cats
    assert all(i.label == CATEGORIES[i.category] for i in items)
    assert {i.source for i in items} == {"persona", "longmemeval"}
    # abstention items are LongMemEval's _abs questions, judged by id
    assert all(i.question_id.endswith("_abs") for i in items if i.category.startswith("abstention_"))
    # a correct item's answer is its gold; a wrong one shares no word with it
    for i in items:
        if i.category == "correct":
            assert i.answer == i.gold
        if i.category in ("other_question", "stale_value"):
            assert not set(i.answer.lower().split()) & set(i.gold.lower().split())


def test_check_set_from_real_locomo_has_several_hundred_items(locomo_path: Path) -> None:
    items = build_check_set(locomo=locomo_path, longmemeval=MINI_LME)
    assert len(items) >= 300
    locomo = [i for i in items if i.source == "locomo"]
    assert {i.kind for i in locomo} == {"1", "2", "3", "4", "5"}
    # LoCoMo's adversarial questions have no gold: both abstention categories, by category 5
    adversarial = [i for i in locomo if i.kind == "5"]
    assert adversarial and {i.category for i in adversarial} == {"abstention_declined", "abstention_answered"}
    assert any(i.category == "reformatted" and "," in i.answer for i in locomo)  # "7 May 2023" -> "May 7, 2023"


# ---------------------------------------------------------------- metrics


def test_cohen_kappa() -> None:
    assert cohen_kappa([True, False, True, False], [True, False, True, False]) == 1.0
    assert cohen_kappa([True, True, False, False], [True, False, True, False]) == 0.0
    assert cohen_kappa([], []) is None
    # constant rater against varied labels: agreement no better than chance
    assert cohen_kappa([True] * 4, [True, True, False, False]) == 0.0


def test_an_always_yes_judge_fails_the_check_and_is_marked(items, tmp_path: Path) -> None:
    result = check_judge(AlwaysYes(), items)
    n_fail = sum(not i.label for i in items)
    assert result["false_accept"] == 1.0 and result["false_reject"] == 0.0
    assert result["accuracy"] == pytest.approx(1 - n_fail / len(items))
    assert result["accuracy"] < RELIABLE_ACCURACY and result["reliable"] is False
    assert result["kappa"] == 0.0
    assert result["per_category"]["wrong_value"]["accuracy"] == 0.0
    assert result["per_category"]["correct"]["accuracy"] == 1.0
    table = format_check_table({"always_yes": result, "contains": check_judge(make_judge("contains"), items)})
    row = next(line for line in table.splitlines() if line.startswith("always_yes"))
    assert "UNRELIABLE" in row and "100.0" in row
    assert "unreliable" in judge_mark({"accuracy": result["accuracy"], "reliable": False})
    out = write_check(tmp_path / "check", items, {"always_yes": result})
    saved = json.loads((out / "judge_check.json").read_text())
    assert saved["judges"]["always_yes"]["reliable"] is False and saved["n_items"] == len(items)
    assert (out / "items.csv").read_text().count("\n") == len(items) + 1


def test_unjudged_items_count_as_misses_and_are_counted(items) -> None:
    scores = [math.nan] * len(items)
    m = check_metrics(items, scores)
    assert m["unjudged"] == len(items) and m["accuracy"] == 0.0 and m["kappa"] is None
    assert m["false_accept"] == 0.0 and m["false_reject"] == 0.0


def test_deterministic_judges_use_the_abstention_rubric() -> None:
    for name in ("contains", "f1_mem0", "bleu1", "f1_locomo"):
        judge = make_judge(name)
        gold = "You never mentioned your sister's degree."
        declined = judge.score(question="q", gold=gold, answer="I don't know, you never told me.", question_id="x_abs")
        answered = judge.score(question="q", gold=gold, answer="Business Administration", question_id="x_abs")
        assert (declined, answered) == (1.0, 0.0), name
    # LoCoMo's own rule for its adversarial category is kept by f1_locomo
    assert make_judge("f1_locomo").score(question="q", gold="", answer="I don't know", category=5) == 0.0
    assert make_judge("contains").score(question="q", gold="", answer="I don't know", category=5) == 1.0


def test_llm_judge_checks_are_cached_by_judge_model_and_prompt(items) -> None:
    small = items[:40]
    llm = ScriptedLLM("CORRECT")
    first = check_judge(make_judge("llm_locomo", llm), small)
    calls = len(llm.calls)
    assert calls > 0 and first["cached"] is False
    again = check_judge(make_judge("llm_locomo", llm), small)
    assert again["cached"] is True and len(llm.calls) == calls
    assert again["accuracy"] == first["accuracy"]
    # another model is another judge
    other = ScriptedLLM("CORRECT", model="other-model")
    assert check_judge(make_judge("llm_locomo", other), small)["cached"] is False
    # other prompts are another judge too
    mem0 = load_official_prompts(MEM0_PROMPTS)
    official = make_judge("llm_locomo", llm, templates=mem0.templates, prompt_source=mem0.source)
    assert check_judge(official, small)["cached"] is False


# ---------------------------------------------------------------- official templates


def test_longmemeval_template_parsing_on_the_fixture() -> None:
    found = load_official_prompts(LME_PROMPTS)
    assert found.judge == "llm_longmemeval"
    assert set(found.templates) == {"default", "temporal-reasoning", "knowledge-update",
                                    "single-session-preference", "abstention"}
    assert "sha256" in found.source and str(LME_PROMPTS) in found.source
    msgs = found.templates["temporal-reasoning"].render(question="Q1", gold="G1", answer="A1")
    assert msgs == [{"role": "user", "content":
                     "FIXTURE-TEMPORAL. Q: Q1 | REF: G1 | GOT: A1 | Off by one is fine. Say yes or no."}]
    # escaped braces stay literal, as the script's own format() leaves them
    abst = found.templates["abstention"].render(question="Q", gold="G", answer="A")[0]["content"]
    assert abst.endswith("Did GOT decline? {yes|no}")
    # the judge sends the parsed text verbatim and records where it came from
    llm = ScriptedLLM("yes")
    judge = make_judge("llm_longmemeval", llm, templates=found.templates, prompt_source=found.source)
    assert judge.score(question="Q", gold="G", answer="A", category="knowledge-update", question_id="x") == 1.0
    assert llm.calls[-1]["messages"][0]["content"].startswith("FIXTURE-UPDATE. Q: Q | REF: G | GOT: A")
    judge.score(question="Q", gold="G", answer="A", category="multi-session", question_id="x_abs")
    assert llm.calls[-1]["messages"][0]["content"].startswith("FIXTURE-ABSTAIN.")
    desc = judge.describe()
    assert desc["prompts"] == "official" and desc["prompt_source"] == found.source
    assert make_judge("llm_longmemeval", llm).describe()["prompts"] == "paraphrase"


def test_a_longmemeval_checkout_folder_is_found(tmp_path: Path) -> None:
    script = tmp_path / "LongMemEval" / "src" / "evaluation" / "evaluate_qa.py"
    script.parent.mkdir(parents=True)
    script.write_text(LME_PROMPTS.read_text())
    assert load_official_prompts(tmp_path / "LongMemEval").judge == "llm_longmemeval"
    with pytest.raises(UserError, match="not a LongMemEval checkout"):
        load_official_prompts(tmp_path)


def test_mem0_template_parsing_on_the_fixture() -> None:
    found = load_official_prompts(MEM0_PROMPTS)
    assert found.judge == "llm_locomo" and list(found.templates) == ["default"]
    text = found.templates["default"].render(question="Q?", gold="G", answer="A")[0]["content"]
    assert "Question asked: Q?\nReference: G\nCandidate: A" in text
    assert '{"label": "CORRECT"}' in text
    llm = ScriptedLLM('{"label": "WRONG"}')
    judge = make_judge("llm_locomo", llm, templates=found.templates, prompt_source=found.source)
    assert judge.score(question="Q?", gold="G", answer="A", category=4) == 0.0


def test_a_file_of_neither_structure_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "other.py"
    bad.write_text("PROMPT = 'no fields here'\n")
    with pytest.raises(UserError, match="found neither LongMemEval's prompt function"):
        load_official_prompts(bad)
    broken = tmp_path / "broken.py"
    broken.write_text("def get_anscheck_prompt(task, question, answer, response, abstention=False):\n    template = 'x {}'\n")
    with pytest.raises(UserError, match="format"):
        load_official_prompts(broken)
    with pytest.raises(UserError, match="no such file"):
        load_official_prompts(tmp_path / "missing.py")


# ---------------------------------------------------------------- marks in run tables


def test_unreliable_self_judging_paraphrase_marks_reach_tables_metrics_and_report(items, tmp_path: Path) -> None:
    """A run whose LLM judge failed its check: every answer table and metrics.json carry the marks."""
    from memsim.analysis.judge_check import _summary_of
    from memsim.analysis.pipeline import execute
    from memsim.analysis.report import write_report
    from memsim.analysis.summary import format_answer_accuracy, format_tables
    from memsim.analysis.pipeline import make_spec
    from memsim.memory.embed import HashEmbedder
    from memsim.memory.registry import Resources, SystemSpec

    result = check_judge(make_judge("llm_longmemeval", ScriptedLLM("yes")), items, cache=False)
    checks = {"items": result["items"], "self_judging": True,
              "judges": {"llm_longmemeval": _summary_of(result, self_judging=True)}}

    class Answers:
        score_columns = ["answer_llm_longmemeval", "answer_contains"]

        def cost(self) -> dict[str, Any]:
            return {"calls": 0}

        def answer_and_judge(self, question, when, memories, gold, category, question_id):
            verdict = math.nan if category == "single-session-preference" else 1.0
            return {"answer": "I don't know", "answer_llm_longmemeval": verdict,
                    "answer_contains": make_judge("contains").score(question=question, gold=gold, answer="I don't know",
                                                                    category=category, question_id=question_id)}

    spec = make_spec(
        "static", "longmemeval", {"data": str(MINI_LME), "user_only": False, "include_abstention": True},
        [SystemSpec("naive")], k=3, retrieve_k=10, scorers=("lme_turn",), metric="answer_llm_longmemeval",
        n_boot=200, answer={"reader": "cot", "judge": ["llm_longmemeval"], "judge_checks": checks},
    )
    resources = Resources(embedder_factory=lambda: HashEmbedder(dim=256))
    outcome = execute(spec, out_dir=tmp_path / "run", resources=resources, answer=Answers())
    m = outcome.summary.metrics
    mark = m["judges"]["answer_llm_longmemeval"]["mark"]
    assert "unreliable" in mark and "self-judging" in mark and "memsim paraphrase, not comparable" in mark
    assert m["judges"]["answer_contains"]["mark"] == ""
    answers = m["systems"]["naive"]["answers"]
    assert answers["judges"]["answer_llm_longmemeval"]["unjudged"] == 1
    assert answers["judges"]["answer_llm_longmemeval"]["unjudged_reasons"] == {"no verdict in the judge's reply": 1}
    assert answers["judges"]["answer_llm_longmemeval"]["abstention"]["questions"] == 1
    pair = answers["agreement"][0]
    assert {pair["a"], pair["b"]} == {"answer_llm_longmemeval", "answer_contains"} and pair["n"] == 6
    text = format_answer_accuracy(m, outcome.result.probes, "naive", column="answer_llm_longmemeval")
    assert "unreliable" in text and "unjudged by llm_longmemeval: no verdict in the judge's reply 1" in text
    assert "agreement llm_longmemeval vs contains" in text and "spread of accuracy across judges" in text
    assert "llm_longmemeval: unreliable" in format_tables(m, "naive")
    on_disk = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert "unreliable" in on_disk["judges"]["answer_llm_longmemeval"]["mark"]
    write_report(tmp_path / "run")
    md = (tmp_path / "run" / "report.md").read_text()
    assert "## Answers and judges" in md and "self-judging" in md


# ---------------------------------------------------------------- self-judging and dry runs


def _args(argv: list[str]) -> argparse.Namespace:
    from memsim.analysis.cli.options import add_answer_arguments

    p = argparse.ArgumentParser()
    add_answer_arguments(p)
    return p.parse_args(argv)


def _setup_of(args: argparse.Namespace, default_judges: list[str]) -> object:
    from memsim.sim.answer.options import AnswerOptions
    from memsim.sim.answer.setup import answer_setup

    return answer_setup(AnswerOptions(**vars(args)), default_judges=default_judges)


@pytest.mark.llm
@pytest.mark.slow
def test_self_judging_needs_the_flag_and_is_marked() -> None:
    pytest.importorskip("llama_cpp")
    with pytest.raises(UserError, match="--allow-self-judging"):
        _setup_of(_args(["--reader", "short", "--judge", "llm_locomo", "--no-cache"]), ["contains"])
    setup = _setup_of(
        _args(["--reader", "short", "--judge", "llm_locomo", "--allow-self-judging", "--no-cache"]), ["contains"]
    )
    assert setup.self_judging and setup.describe()["self_judging"] is True
    # the deterministic judges run beside the LLM judge
    assert [j.name for j in setup.judges] == ["llm_locomo", "contains"]
    setup.close()


@pytest.mark.llm
@pytest.mark.slow
def test_dry_run_counts_match_a_real_runs_meter() -> None:
    """Calls and reader prompt tokens are exact; completion tokens and judge prompts are upper bounds."""
    pytest.importorskip("llama_cpp")
    from memsim.memory.base import Retrieved
    t0 = datetime(2024, 5, 1, tzinfo=timezone.utc)
    memories = [
        Retrieved(f"m{i}", text, 1.0 - i / 10, t0 + timedelta(days=i), (f"t{i}",))
        for i, text in enumerate(["Ana moved to Lisbon in March.", "Ana adopted a cat named Miso.",
                                  "Ana works as a nurse at the city hospital."])
    ]
    questions = [("Where does Ana live?", "Lisbon", "4"), ("What is the cat called?", "Miso", "4"),
                 ("Is Ana's brother a pilot?", "", "5")]
    argv = ["--reader", "short", "--judge", "llm_locomo", "--allow-self-judging", "--no-cache"]
    summaries = {}
    for mode in ("real", "dry"):
        setup = _setup_of(_args(argv + (["--dry-run"] if mode == "dry" else [])), ["contains"])
        for q, gold, cat in questions:
            setup.answer_and_judge(q, t0 + timedelta(days=30), memories, gold, category=cat)
        summaries[mode] = {r["role"]: r for r in setup.cost()["by_role"]}
        if mode == "dry":
            report = setup.dry_run_report()
        setup.close()
    real, dry = summaries["real"], summaries["dry"]
    assert dry["reader"]["calls"] == real["reader"]["calls"] == 3
    assert dry["reader"]["prompt_tokens"] == real["reader"]["prompt_tokens"]
    assert dry["judge"]["calls"] == real["judge"]["calls"] == 2  # category 5 needs no call
    assert real["reader"]["completion_tokens"] <= dry["reader"]["completion_tokens"] == 3 * 48
    assert real["judge"]["prompt_tokens"] <= dry["judge"]["prompt_tokens"]
    assert "3 calls" in report and "exact" in report


def test_runs_without_llm_judges_or_dry_runs_need_no_check() -> None:
    from memsim.analysis.judge_check import judge_checks_for_run

    assert judge_checks_for_run({"reader": "short", "judge": ["contains"]}, default_judges=()) == {}
    assert judge_checks_for_run({"reader": "short", "judge": ["llm_locomo"], "dry_run": True}, default_judges=()) == {}
