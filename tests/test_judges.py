"""Judges on hand-made cases, LoCoMo's quirks included."""

from __future__ import annotations

import math

import pytest

from memsim.sim.answer import (
    JUDGE_LONGMEMEVAL,
    JUDGE_NAMES,
    LongMemEvalLLMJudge,
    ScriptedLLM,
    bleu1,
    locomo_f1,
    make_judge,
    mem0_f1,
    normalize,
    says_not_available,
)
from memsim.core.errors import UserError


def score(name: str, gold, answer: str, category=None, question_id=None, llm=None) -> float:
    return make_judge(name, llm).score(
        question="q?", gold=gold, answer=answer, category=category, question_id=question_id
    )


# ---------------------------------------------------------------- contains


def test_normalize_drops_case_punctuation_and_articles() -> None:
    assert normalize("The  Eiffel-Tower, in PARIS!") == "eiffeltower in paris"
    assert normalize(2022) == "2022"


@pytest.mark.parametrize(
    ("gold", "answer", "expected"),
    [
        ("Paris", "She moved to paris last year.", 1.0),
        ("the blue bike", "A blue bike", 1.0),
        ("Paris", "She moved to Lyon.", 0.0),
        ("5", "It took 15 days", 0.0),  # whole words only: 5 is not in 15
        (5, "It took 5 days", 1.0),  # integer gold answers are read as text
        ("New York", "new york city", 1.0),
    ],
)
def test_contains(gold, answer, expected) -> None:
    assert score("contains", gold, answer) == expected


def test_contains_without_gold_is_unscored() -> None:
    assert math.isnan(score("contains", "", "anything"))
    assert math.isnan(score("contains", None, "anything"))


# ---------------------------------------------------------------- LoCoMo F1


def test_locomo_f1_exact_and_partial() -> None:
    assert locomo_f1("Paris", "Paris") == 1.0
    # gold {pari, franc}, answer {pari}: P=1, R=1/2 -> F1 = 2/3
    assert locomo_f1("Paris", "Paris, France", category=2) == pytest.approx(2 / 3)
    assert locomo_f1("London", "Paris") == 0.0


def test_locomo_f1_stems_and_drops_articles_and_and() -> None:
    # "running" and "runs" share the stem "run"; "the" and "and" are dropped.
    assert locomo_f1("the running and", "runs", category=4) == 1.0


def test_locomo_f1_integer_gold() -> None:
    assert locomo_f1("2022", 2022, category=2) == 1.0
    assert make_judge("f1_locomo").score(question="q", gold=2022, answer="in 2022", category=2) == pytest.approx(
        2 / 3
    )


def test_locomo_f1_multihop_splits_on_commas() -> None:
    # gold parts "pottery", "painting"; answer parts "painting", "pottery class":
    # pottery -> best 2/3 (vs "pottery class"), painting -> 1; mean 5/6.
    assert locomo_f1("painting, pottery class", "pottery, painting", category=1) == pytest.approx(5 / 6)
    # without the split, the same strings score as one bag of tokens
    assert locomo_f1("painting, pottery class", "pottery, painting", category=4) == pytest.approx(0.8)


def test_locomo_f1_open_domain_cuts_gold_at_semicolon() -> None:
    gold = "Likely yes; she enjoys hiking and camping"
    assert locomo_f1("likely yes", gold, category=3) == 1.0
    # uncut: 2 of 6 gold tokens (likely yes she enjoy hike camp) -> F1 = 1/2
    assert locomo_f1("likely yes", gold, category=4) == pytest.approx(0.5)
    assert locomo_f1("likely yes", gold, category="3") == 1.0  # categories may arrive as text


def test_locomo_f1_adversarial_scores_abstention() -> None:
    assert locomo_f1("Not mentioned in the conversation.", "", category=5) == 1.0
    assert locomo_f1("No information available", "irrelevant", category=5) == 1.0
    assert locomo_f1("She went to Paris", "Paris", category=5) == 0.0
    # the judge scores category 5 even though it has no gold answer
    assert score("f1_locomo", "", "not mentioned", category=5) == 1.0
    assert math.isnan(score("f1_locomo", "", "Paris", category=2))


def test_says_not_available() -> None:
    assert says_not_available("That is NOT MENTIONED anywhere")
    assert not says_not_available("I don't know")


# ---------------------------------------------------------------- Mem0 F1 and BLEU-1


def test_mem0_f1_is_set_based_without_stemming() -> None:
    assert mem0_f1("Paris. Paris!", "paris") == 1.0  # sets: repeats do not count
    assert mem0_f1("running", "runs") == 0.0  # no stemming
    # pred {she, lives, in, paris}, gold {paris}: P=1/4, R=1 -> 0.4
    assert mem0_f1("She lives in Paris", "Paris") == pytest.approx(0.4)
    assert mem0_f1("", "Paris") == 0.0
    assert math.isnan(score("f1_mem0", "", "x"))


def test_bleu1_precision_and_brevity_penalty() -> None:
    assert bleu1("the cat sat", "the cat sat") == 1.0
    # 2 of 4 answer tokens match; answer longer than gold -> no penalty
    assert bleu1("a cat on mat", "the cat on") == pytest.approx(0.5)
    # 1 matching token, answer 1 token vs gold 3: precision 1, penalty exp(1 - 3)
    assert bleu1("cat", "the cat sat") == pytest.approx(math.exp(-2))
    # clipping: "cat" appears once in gold, so only one of the three counts
    assert bleu1("cat cat cat", "the cat sat") == pytest.approx(1 / 3)


# ---------------------------------------------------------------- LLM judges


def test_llm_locomo_reads_verdict_and_records_model() -> None:
    llm = ScriptedLLM(lambda m: "CORRECT" if "Paris" in m[-1]["content"].split("Answer to grade:")[1] else "WRONG")
    judge = make_judge("llm_locomo", llm)
    assert judge.score(question="Where?", gold="Paris", answer="In Paris.") == 1.0
    assert judge.score(question="Where?", gold="Paris", answer="Lyon") == 0.0
    assert llm.calls[0]["temperature"] == 0.0
    desc = judge.describe()
    assert desc["model"] == "scripted" and desc["temperature"] == 0.0
    assert desc["prompt_ids"][0].startswith("judge_locomo@")


def test_llm_locomo_incorrect_is_wrong_and_no_verdict_is_wrong_and_counted() -> None:
    judge = make_judge("llm_locomo", ScriptedLLM("Incorrect."))
    assert judge.score(question="q", gold="x", answer="y") == 0.0
    assert judge.unreadable == 0
    judge = make_judge("llm_locomo", ScriptedLLM("I cannot decide"))
    assert judge.score(question="q", gold="x", answer="y") == 0.0
    assert judge.unreadable == 1 and judge.calls == 1


def test_llm_locomo_adversarial_needs_no_call() -> None:
    llm = ScriptedLLM("CORRECT")
    judge = make_judge("llm_locomo", llm)
    assert judge.score(question="q", gold="", answer="not mentioned", category=5) == 1.0
    assert judge.score(question="q", gold="", answer="Paris", category=5) == 0.0
    assert llm.calls == []


@pytest.mark.parametrize(
    ("category", "question_id", "rubric"),
    [
        ("temporal-reasoning", "q1", "temporal-reasoning"),
        ("knowledge-update", "q2", "knowledge-update"),
        ("single-session-preference", "q3", "single-session-preference"),
        ("multi-session", "q4", "default"),
        ("knowledge-update", "q5_abs", "abstention"),
        (None, None, "default"),
    ],
)
def test_llm_longmemeval_picks_rubric(category, question_id, rubric) -> None:
    llm = ScriptedLLM("Yes.")
    judge = make_judge("llm_longmemeval", llm)
    assert isinstance(judge, LongMemEvalLLMJudge)
    assert judge.template_for(category, question_id) is JUDGE_LONGMEMEVAL[rubric]
    assert judge.score(question="q", gold="g", answer="a", category=category, question_id=question_id) == 1.0
    sent = llm.calls[0]["messages"][-1]["content"]
    expected = JUDGE_LONGMEMEVAL[rubric].render(question="q", gold="g", answer="a")[-1]["content"]
    assert sent == expected


def test_llm_longmemeval_no() -> None:
    assert make_judge("llm_longmemeval", ScriptedLLM("no")).score(question="q", gold="g", answer="a") == 0.0


def test_make_judge_errors() -> None:
    with pytest.raises(UserError, match="choose from: contains, f1_locomo"):
        make_judge("exact")
    with pytest.raises(UserError, match="needs an LLM"):
        make_judge("llm_locomo")
    assert set(JUDGE_NAMES) == {"contains", "f1_locomo", "f1_mem0", "bleu1", "llm_locomo", "llm_longmemeval"}


# ---------------------------------------------------------------- registry


class _ShoutJudge:
    name = "shout"

    def score(self, *, question: str, gold, answer: str, category=None, question_id=None) -> float:
        return 1.0 if answer.isupper() else 0.0

    def describe(self) -> dict:
        return {"name": self.name}


def test_register_judge_builds_by_name_and_is_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    from memsim.sim.answer import judges

    monkeypatch.setattr(judges.JUDGES, "_entries", dict(judges.JUDGES._entries))  # the registration stays inside this test
    judges.register_judge("shout", _ShoutJudge, description="1.0 for an answer in capitals")
    assert "shout" in JUDGE_NAMES and "shout" not in judges.LLM_JUDGES
    assert judges.judge_names()[-1] == "shout"
    assert judges.judge_description("shout") == "1.0 for an answer in capitals"
    assert make_judge("shout").score(question="q", gold="g", answer="YES") == 1.0
    with pytest.raises(ValueError, match="already registered"):
        judges.register_judge("contains", _ShoutJudge, description="again")
    with pytest.raises(ValueError, match="module:attribute"):
        judges.register_judge("lazy", "no_colon", description="bad target")
    with pytest.raises(UserError, match="unknown judge 'nope'; choose from: contains, .*shout"):
        judges.judge_description("nope")


def test_judge_registry_takes_lazy_targets_and_llm_factories(monkeypatch: pytest.MonkeyPatch) -> None:
    from memsim.sim.answer import judges

    monkeypatch.setattr(judges.JUDGES, "_entries", dict(judges.JUDGES._entries))
    judges.register_judge("lazy_contains", "memsim.sim.answer.judges:ContainsJudge", description="contains, lazily")
    judges.register_judge("llm_again", "memsim.sim.answer.judges:LocomoLLMJudge", description="llm", llm=True)
    assert make_judge("lazy_contains").score(question="q", gold="Paris", answer="in Paris") == 1.0
    assert "llm_again" in judges.LLM_JUDGES
    assert make_judge("llm_again", ScriptedLLM("CORRECT")).score(question="q", gold="g", answer="a") == 1.0
    with pytest.raises(UserError, match="needs an LLM"):
        make_judge("llm_again")


def test_memsim_list_shows_the_registered_judges(capsys: pytest.CaptureFixture[str]) -> None:
    from memsim.analysis.cli import main

    assert main(["list", "judges"]) == 0
    out = capsys.readouterr().out
    assert "llm_longmemeval" in out and "Unigram BLEU" in out
