"""Every prompt memsim sends to a language model, in one place.

A template is plain text with ``str.format`` fields. Its id is its name plus
a short hash of all of its text (``reader_short@3f2a9c1e``), so that any edit
to a prompt changes the id recorded with every answer and score: two runs
with the same prompt id asked the model the same thing.

Fields used by the reader templates: ``{memories}`` (one line per memory,
each starting with its date), ``{question}`` and ``{question_date}``. The
judge templates use ``{question}``, ``{gold}`` and ``{answer}``.
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "PromptTemplate",
    "READER_SHORT",
    "READER_COT",
    "JUDGE_LOCOMO",
    "JUDGE_LONGMEMEVAL",
    "JUDGE_LONGMEMEVAL_TYPES",
    "FINAL_ANSWER_MARK",
    "NO_MEMORIES",
]

FINAL_ANSWER_MARK = "FINAL ANSWER:"
"""The marker before the answer on the last line of a ``cot`` reply."""

NO_MEMORIES = "(no memories were retrieved)"
"""What the memory block says when nothing was retrieved or nothing fits."""


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """A system message and a user message, both ``str.format`` templates."""

    name: str
    """Stable name (``reader_short``); the id adds a hash of the text."""
    system: str
    """System message template."""
    user: str
    """User message template."""

    @property
    def id(self) -> str:
        """``name@hash``: changes whenever any text of the template changes."""
        digest = hashlib.sha256(f"{self.name}\0{self.system}\0{self.user}".encode()).hexdigest()
        return f"{self.name}@{digest[:8]}"

    @property
    def fields(self) -> frozenset[str]:
        """The names of the ``{fields}`` the template expects."""
        names = set()
        for text in (self.system, self.user):
            names.update(f for _, f, _, _ in string.Formatter().parse(text) if f)
        return frozenset(names)

    def render(self, **values: str) -> list[dict[str, str]]:
        """The chat messages with ``values`` filled in.

        Raises:
            KeyError: a field of the template was not given.
        """
        missing = self.fields - values.keys()
        if missing:
            raise KeyError(f"prompt {self.name} needs fields {sorted(missing)}")
        messages = []
        if self.system:
            messages.append({"role": "system", "content": self.system.format(**values)})
        messages.append({"role": "user", "content": self.user.format(**values)})
        return messages


# Readers. Memories are listed oldest first, so the last mention of a fact is
# also its newest value; each line starts with the date it was said.

READER_SHORT = PromptTemplate(
    name="reader_short",
    system=(
        "You answer questions about a person's past conversations, using only the "
        "memories you are given. Each memory starts with the date it was said."
    ),
    user=(
        "Memories (oldest first):\n{memories}\n\n"
        "Today is {question_date}.\n"
        "Question: {question}\n"
        "Reply with the answer only, in a few words. If the memories do not contain "
        "the answer, reply: not mentioned."
    ),
)

READER_COT = PromptTemplate(
    name="reader_cot",
    system=(
        "You answer questions about a person's past conversations, using only the "
        "memories you are given. Each memory starts with the date it was said. "
        "Think carefully before answering."
    ),
    user=(
        "Memories (oldest first):\n{memories}\n\n"
        "Today is {question_date}.\n"
        "Question: {question}\n\n"
        "Work through these steps, writing each one out:\n"
        "1. Quote the memories that bear on the question, with their dates.\n"
        "2. If the question asks how many, list every matching item first, then count the list.\n"
        "3. If a fact changed over time, the latest memory wins: give the newest value and "
        "the date it was stated.\n"
        "4. If the question involves dates or durations, write the date arithmetic out "
        "step by step, counting from the dates of the memories and from today.\n"
        "5. If the question asks what the person would like or prefer, infer it from what "
        "they did and said, not only from explicit statements.\n"
        "6. If the memories do not contain the answer, say it is not mentioned.\n"
        "End with one line that starts with " + FINAL_ANSWER_MARK + " followed by the "
        "answer in a few words."
    ),
)


# Judges.

JUDGE_LOCOMO = PromptTemplate(
    name="judge_locomo",
    system="You grade answers to questions about past conversations.",
    user=(
        "Question: {question}\n"
        "Reference answer: {gold}\n"
        "Answer to grade: {answer}\n\n"
        "The answer is CORRECT if it refers to the same thing as the reference answer, "
        "even if it is longer, worded differently, or gives a date in another format "
        "(for a date or period, it must point to the same time). It is WRONG if it "
        "names something else, misses the point, or says it does not know.\n"
        "Reply with one word: CORRECT or WRONG."
    ),
)

_LME_HEAD = "Question: {question}\nReference answer: {gold}\nAnswer to grade: {answer}\n\n"
_LME_TAIL = "\nReply with one word: yes or no."

JUDGE_LONGMEMEVAL: Mapping[str, PromptTemplate] = {
    "default": PromptTemplate(
        name="judge_lme_default",
        system="You grade answers to questions about a user's chat history.",
        user=_LME_HEAD
        + (
            "Is the answer correct? Say yes if it contains the reference answer or "
            "something equivalent to it, even with extra detail. Say no if it gives "
            "only part of the reference answer or something different."
        )
        + _LME_TAIL,
    ),
    "temporal-reasoning": PromptTemplate(
        name="judge_lme_temporal",
        system="You grade answers to questions about a user's chat history.",
        user=_LME_HEAD
        + (
            "Is the answer correct? Say yes if it contains the reference answer or "
            "something equivalent to it. A count of days, weeks or months that is off "
            "by one from the reference (for example 18 days where the reference says "
            "19) still counts as correct. Say no otherwise."
        )
        + _LME_TAIL,
    ),
    "knowledge-update": PromptTemplate(
        name="judge_lme_update",
        system="You grade answers to questions about a user's chat history.",
        user=_LME_HEAD
        + (
            "The reference answer is the most recent value of something that changed. "
            "Is the answer correct? Say yes if it gives this updated value, even if it "
            "also mentions older values. Say no if it gives only an older value or "
            "something different."
        )
        + _LME_TAIL,
    ),
    "single-session-preference": PromptTemplate(
        name="judge_lme_preference",
        system="You grade personalised answers against a rubric.",
        user=(
            "Question: {question}\n"
            "Rubric for a good answer: {gold}\n"
            "Answer to grade: {answer}\n\n"
            "Does the answer satisfy the rubric, using what is known about the user? "
            "It need not mention every point of the rubric, but it must use the user's "
            "own situation and preferences correctly."
        )
        + _LME_TAIL,
    ),
    "abstention": PromptTemplate(
        name="judge_lme_abstention",
        system="You grade answers to questions about a user's chat history.",
        user=(
            "Question: {question}\n"
            "Why it cannot be answered: {gold}\n"
            "Answer to grade: {answer}\n\n"
            "The chat history does not contain the information this question asks for. "
            "Say yes if the answer says that the question cannot be answered, that the "
            "information is unknown, or that it was never mentioned. Say no if it "
            "gives an answer as if the information were known."
        )
        + _LME_TAIL,
    ),
}
"""LongMemEval judge templates: one per rubric, keyed by question type."""

JUDGE_LONGMEMEVAL_TYPES: Mapping[str, str] = {
    "single-session-user": "default",
    "single-session-assistant": "default",
    "multi-session": "default",
    "temporal-reasoning": "temporal-reasoning",
    "knowledge-update": "knowledge-update",
    "single-session-preference": "single-session-preference",
}
"""LongMemEval question type -> key of ``JUDGE_LONGMEMEVAL``."""
