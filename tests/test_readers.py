"""Readers with a deterministic fake client: prompts, dates, truncation, extraction."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memsim.memory.base import Retrieved, Turn, render_turn
from memsim.sim.answer import (
    FINAL_ANSWER_MARK,
    NO_MEMORIES,
    READER_COT,
    READER_SHORT,
    PromptTemplate,
    Reader,
    ScriptedLLM,
    extract_answer,
    format_memory,
    format_question_date,
)
from memsim.core.errors import UserError

T0 = datetime(2023, 5, 1, 9, 30, tzinfo=timezone.utc)


def mem(i: int, text: str, days: int = 0) -> Retrieved:
    return Retrieved(f"m{i}", text, 1.0 - i / 100, T0 + timedelta(days=days), (f"t{i}",))


def user_prompt(llm: ScriptedLLM, call: int = -1) -> str:
    return llm.calls[call]["messages"][-1]["content"]


def test_format_memory_adds_the_date_unless_the_text_has_one() -> None:
    assert format_memory(mem(0, "Ana moved to Lisbon")) == "- 2023-05-01 09:30 | Ana moved to Lisbon"
    turn = Turn("c:D1:3", "u", "Caroline", "I went hiking", T0, "s1", {"date_text": "1:56 pm on 8 May, 2023"})
    dated = Retrieved("m", render_turn(turn), 1.0, T0, ("c:D1:3",))
    assert format_memory(dated) == "- 1:56 pm on 8 May, 2023 | Caroline: I went hiking"
    # a "|" later in the text is not a date prefix
    assert format_memory(mem(1, "pipes like a | b are fine")).startswith("- 2023-05-01 09:30 | pipes")
    # one memory, one line
    assert "\n" not in format_memory(mem(2, "two\nlines"))


def test_format_question_date() -> None:
    assert format_question_date(datetime(2023, 5, 8, 13, 56)) == "Monday, 8 May 2023"
    assert format_question_date("  2023/05/30 (Tue) 23:40 ") == "2023/05/30 (Tue) 23:40"


def test_short_prompt_lists_memories_oldest_first_with_question_and_date() -> None:
    llm = ScriptedLLM("Lisbon")
    reader = Reader(llm, "short")
    memories = [mem(0, "Ana lives in Lisbon now", days=30), mem(1, "Ana lives in Porto", days=0)]
    ans = reader.answer("Where does Ana live?", T0 + timedelta(days=40), memories)
    prompt = user_prompt(llm)
    assert prompt.index("Ana lives in Porto") < prompt.index("Ana lives in Lisbon now")
    assert "Question: Where does Ana live?" in prompt
    assert "Today is Saturday, 10 June 2023." in prompt
    assert ans.text == "Lisbon" and ans.raw == "Lisbon"
    assert ans.n_memories_used == 2 and not ans.truncated
    assert ans.prompt_id == READER_SHORT.id
    assert llm.calls[0]["temperature"] == 0.0 and llm.calls[0]["max_tokens"] == reader.max_answer_tokens


def test_no_memories_says_so() -> None:
    llm = ScriptedLLM("not mentioned")
    ans = Reader(llm, "short").answer("Where?", "today", [])
    assert NO_MEMORIES in user_prompt(llm)
    assert ans.n_memories_used == 0 and not ans.truncated


def test_truncation_drops_lowest_ranked_memories_to_fit() -> None:
    # ScriptedLLM counts words: find the fixed prompt size, then leave room for two memories.
    probe = ScriptedLLM("x")
    reader = Reader(probe, "short", max_answer_tokens=10)
    messages, _ = reader.build_messages("Where does Ana live?", T0, [])
    fixed = sum(len(m["content"].split()) for m in messages)
    memories = [mem(i, f"fact number {i} about Ana", days=i) for i in range(5)]
    line_cost = len(format_memory(memories[0]).split()) + 1
    window = fixed - len(NO_MEMORIES.split()) + 8 * len(messages) + 16 + 10 + 2 * line_cost
    llm = ScriptedLLM("x", context_window=window)
    ans = Reader(llm, "short", max_answer_tokens=10).answer("Where does Ana live?", T0, memories)
    assert ans.truncated and ans.n_memories_used == 2
    prompt = user_prompt(llm)
    assert "fact number 0" in prompt and "fact number 1" in prompt and "fact number 2" not in prompt
    # room for one more line fits three
    llm3 = ScriptedLLM("x", context_window=window + line_cost)
    assert Reader(llm3, "short", max_answer_tokens=10).answer("Where does Ana live?", T0, memories).n_memories_used == 3


def test_a_long_memory_is_skipped_but_shorter_ones_after_it_still_fit() -> None:
    long = mem(0, " ".join(["word"] * 500))
    short = [mem(i, f"short fact {i}") for i in range(1, 4)]
    llm = ScriptedLLM("x", context_window=400)
    ans = Reader(llm, "short", max_answer_tokens=10).answer("q?", T0, [long, *short])
    assert ans.truncated and ans.n_memories_used == 3
    assert "word word" not in user_prompt(llm)


def test_prompt_too_long_for_window_is_a_user_error() -> None:
    with pytest.raises(UserError, match="context window of 50"):
        Reader(ScriptedLLM("x", context_window=50), "cot").answer("q?", T0, [mem(0, "a")])


def test_cot_prompt_and_extraction() -> None:
    raw = (
        "1. Relevant: 2023-05-01 Ana lives in Porto; 2023-05-31 Ana lives in Lisbon.\n"
        "3. The latest value is Lisbon (stated 2023-05-31).\n"
        f"{FINAL_ANSWER_MARK} Lisbon"
    )
    llm = ScriptedLLM(raw)
    ans = Reader(llm, "cot").answer("Where does Ana live?", T0, [mem(0, "Ana lives in Lisbon")])
    assert ans.text == "Lisbon" and ans.raw == raw and ans.prompt_id == READER_COT.id
    prompt = user_prompt(llm)
    for step in ("latest memory wins", "list every matching item first", "date arithmetic", "prefer"):
        assert step in prompt
    assert FINAL_ANSWER_MARK in prompt
    assert llm.calls[0]["max_tokens"] == 512


@pytest.mark.parametrize(
    ("raw", "variant", "expected"),
    [
        ("Lisbon", "short", "Lisbon"),
        ("\n  Answer: Lisbon, Portugal\nBecause...", "short", "Lisbon, Portugal"),
        ("**Answer:** 3 times", "short", "3 times"),
        ("steps...\n**Final Answer:** 7 May 2023", "cot", "7 May 2023"),
        ("final answer: first\nmore\nFINAL ANSWER: second", "cot", "second"),
        ("reasoning\nno marker, last line wins", "cot", "no marker, last line wins"),
        ("", "cot", ""),
    ],
)
def test_extract_answer(raw: str, variant: str, expected: str) -> None:
    assert extract_answer(raw, variant) == expected


def test_prompt_id_changes_with_the_text() -> None:
    edited = PromptTemplate(READER_SHORT.name, READER_SHORT.system, READER_SHORT.user + " Be brief.")
    assert edited.id != READER_SHORT.id and edited.id.startswith("reader_short@")
    assert PromptTemplate(READER_SHORT.name, READER_SHORT.system, READER_SHORT.user).id == READER_SHORT.id
    assert READER_SHORT.fields == {"memories", "question", "question_date"}
    llm = ScriptedLLM("x")
    assert Reader(llm, "short", template=edited).answer("q", T0, []).prompt_id == edited.id


def test_unknown_variant_lists_choices() -> None:
    with pytest.raises(UserError, match="choose one of: none, short, cot"):
        Reader(ScriptedLLM("x"), "long")


def test_same_inputs_same_request() -> None:
    memories = [mem(i, f"fact {i}", days=-i) for i in range(4)]
    a, b = ScriptedLLM("x"), ScriptedLLM("x")
    Reader(a, "cot", seed=7).answer("q?", T0, memories)
    Reader(b, "cot", seed=7).answer("q?", T0, memories)
    assert a.calls == b.calls and a.calls[0]["seed"] == 7
