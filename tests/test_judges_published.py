"""Verdicts and BLEU-1 as the published protocols compute them (issue #27, defects 3 and 4)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from memsim.sim.answer import ScriptedLLM, make_judge
from memsim.sim.answer.judges import bleu1, nltk_tokens
from memsim.sim.answer.official import load_official_prompts

FIXTURES = Path(__file__).parent / "fixtures"


def _locomo(reply: str, templates=None):
    judge = make_judge("llm_locomo", ScriptedLLM(reply), templates=templates)
    return judge, judge.score(question="When?", gold="7 May 2023", answer="May 2023")


def test_a_wrong_verdict_after_the_word_correct_is_never_read_as_correct() -> None:
    judge, value = _locomo("The generated answer is not correct. WRONG")
    assert value == 0.0 and judge.unreadable == 0  # the last word is the verdict
    assert "json_mode" not in judge.llm.calls[0]  # memsim's prompt asks for one word, not JSON


@pytest.mark.parametrize(("reply", "expected"), [("CORRECT", 1.0), ("wrong.", 0.0), (" Correct ", 1.0)])
def test_memsim_prompt_takes_one_word(reply: str, expected: float) -> None:
    assert _locomo(reply)[1] == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [('{"label": "CORRECT"}', 1.0), ('{"reasoning": "dates differ", "label": "WRONG"}', 0.0),
     ("The generated answer is not correct. WRONG", math.nan), ('{"label": "maybe"}', math.nan),
     ("CORRECT", math.nan), ("[1]", math.nan), ('{"label": "correct"}', math.nan)],
)
def test_mem0_prompt_reads_the_json_label(reply: str, expected: float) -> None:
    official = load_official_prompts(FIXTURES / "judge_prompts" / "mem0_prompts.py")
    judge, value = _locomo(reply, templates=official.templates)
    assert judge.llm.calls[0]["json_mode"] is True  # asked in JSON mode, as Mem0 asks
    # NaN here: no readable verdict (Mem0's code raises), scored wrong and counted.
    if math.isnan(expected):
        assert value == 0.0 and judge.unreadable == 1
    else:
        assert value == expected and judge.unreadable == 0


@pytest.mark.parametrize(("reply", "expected", "readable"),
                         [("Yes.", 1.0, True), ("no", 0.0, True), ("The answer is correct: yes", 1.0, True),
                          ("I would say yes and no", 1.0, True), ("Not really.", 0.0, False)])
def test_longmemeval_official_verdict_is_yes_in_reply(reply: str, expected: float, readable: bool) -> None:
    official = load_official_prompts(FIXTURES / "judge_prompts" / "evaluate_qa.py")
    judge = make_judge("llm_longmemeval", ScriptedLLM(reply), templates=official.templates)
    assert judge.score(question="q", gold="g", answer="a", category="multi-session") == expected
    assert judge.unreadable == (0 if readable else 1)


@pytest.mark.parametrize(("reply", "expected", "readable"),
                         [("Yes.", 1.0, True), ("no", 0.0, True), ("The answer is correct: yes", 1.0, True),
                          ("I would say yes and no", 0.0, True), ("Not really.", 0.0, False)])
def test_longmemeval_paraphrase_reads_the_last_word(reply: str, expected: float, readable: bool) -> None:
    judge = make_judge("llm_longmemeval", ScriptedLLM(reply))
    assert judge.score(question="q", gold="g", answer="a", category="multi-session") == expected
    assert judge.unreadable == (0 if readable else 1)


# The rows of the issue, with the published figures (NLTK word_tokenize, sentence_bleu, method1).
@pytest.mark.parametrize(
    ("answer", "gold", "published"),
    [("January 2023", "January, 2023", 0.6065), ("22 January 2023", "19 January, 2023", 0.478),
     ("28 January, 2023", "28 January 2023", 0.750), ("Paris and Rome.", "Paris, Rome", 0.500)],
)
def test_bleu1_matches_the_published_rows(answer: str, gold: str, published: float) -> None:
    assert bleu1(answer, gold) == pytest.approx(published, abs=5e-4)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("January, 2023", ["january", ",", "2023"]), ("Paris and Rome.", ["paris", "and", "rome", "."]),
     ("She moved. Then she left!", ["she", "moved", ".", "then", "she", "left", "!"]),
     ("It's Caroline's \"new\" job", ["it", "'s", "caroline", "'s", "``", "new", "''", "job"])],
)
def test_tokens_are_nltk_word_tokenize(text: str, tokens: list[str]) -> None:
    # What nltk.word_tokenize(text.lower()) returns for these texts (punkt splits them at the same places).
    assert nltk_tokens(text) == tokens


def _bleu1_by_hand(pred: list[str], ref: list[str]) -> float:
    """The published formula: clipped unigram precision (method 1: 0.1 matches when none) times the brevity penalty."""
    from collections import Counter

    matches = sum((Counter(pred) & Counter(ref)).values()) or 0.1
    brevity = 1.0 if len(pred) > len(ref) else math.exp(1 - len(ref) / len(pred))
    return brevity * matches / len(pred)


# nltk.word_tokenize(text.lower()) on NLTK's English punkt tables: a period after an abbreviation, an
# initial or a number followed by a lowercase word does not end a sentence, so it stays on its token.
PUNKT_PAIRS = [
    ("Dr. Smith went to the U.S. in 2020. Then he left.", "Smith went to the U.S. in 2020.",
     ["dr.", "smith", "went", "to", "the", "u.s.", "in", "2020.", "then", "he", "left", "."],
     ["smith", "went", "to", "the", "u.s.", "in", "2020", "."]),
    ("Tupac and Dr. Dre", "Dr. Dre", ["tupac", "and", "dr.", "dre"], ["dr.", "dre"]),
    ("J.K. Rowling", "J. K. Rowling", ["j.k.", "rowling"], ["j.", "k.", "rowling"]),
    ("On 5 Jan. 2023 at 3 p.m. she left.", "5 January 2023",
     ["on", "5", "jan.", "2023", "at", "3", "p.m.", "she", "left", "."], ["5", "january", "2023"]),
    ("It cost $1,500.50 in Feb. 2022.", "$1,500.50", ["it", "cost", "$", "1,500.50", "in", "feb.", "2022", "."],
     ["$", "1,500.50"]),
    ("May 7, 2023. She moved.", "7 May 2023", ["may", "7", ",", "2023.", "she", "moved", "."], ["7", "may", "2023"]),
    ("The meeting is at 10 a.m. Mr. Lee will come.", "10 a.m.",
     ["the", "meeting", "is", "at", "10", "a.m.", "mr.", "lee", "will", "come", "."], ["10", "a.m", "."]),
]


@pytest.mark.parametrize(("answer", "gold", "answer_tokens", "gold_tokens"), PUNKT_PAIRS,
                         ids=[p[0][:24] for p in PUNKT_PAIRS])
def test_bleu1_tokenises_with_punkt_as_published(answer: str, gold: str, answer_tokens: list[str],
                                                  gold_tokens: list[str]) -> None:
    assert nltk_tokens(answer) == answer_tokens
    assert nltk_tokens(gold) == gold_tokens
    assert bleu1(answer, gold) == pytest.approx(_bleu1_by_hand(answer_tokens, gold_tokens), abs=1e-12)


def test_punkt_tables_are_nltks_english_ones() -> None:
    from punkt.data import english

    # NLTK's punkt_tab/english: 156 abbreviations, 37 collocations, 39 sentence starters, 20,366 ortho entries.
    assert (len(english.ABBREV_TYPES), len(english.COLLOCATIONS), len(english.SENT_STARTERS),
            len(english.ORTHO_CONTEXT)) == (156, 37, 39, 20366)
    assert {"dr", "u.s", "jan", "p.m", "mr"} <= set(english.ABBREV_TYPES)
    assert english.SOURCE == "punkt_tab:english"


def test_a_sentence_end_still_splits() -> None:
    from memsim.sim.answer.judges import nltk_sentences

    assert nltk_sentences("she moved to lisbon. then she left!") == ["she moved to lisbon.", "then she left!"]
