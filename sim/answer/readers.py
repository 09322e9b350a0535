"""Readers: turn retrieved memories and a question into an answer.

A reader fills one of the prompt templates of ``memsim.sim.answer.prompts`` with the
memories (each with the date it was said), the question and the date it is
asked, sends it to an LLM client and extracts the final answer.

Variants (a registry, ``READERS``; a package adds its own through the
``memsim.readers`` entry points, each a ``ReaderKind``):

- ``short``: answer in a few words.
- ``cot``: reason step by step (quote the relevant memories, enumerate before
  counting, prefer the newest value of a changed fact and state its date,
  write date arithmetic out, infer preferences from behaviour), then give
  the answer on a line marked ``FINAL ANSWER:``, which the reader extracts.

Memories that do not fit the model's context window (minus the tokens
reserved for the reply) are dropped, lowest ranked first, and the answer
records that it was truncated. The memories kept are shown oldest first, so
that the last mention of a fact is also its newest value.

memsim's own templates are a paraphrase (``PROMPT_PARAPHRASE``); a template
read from the user's copy of a published prompt file (``--prompts``,
``memsim.sim.answer.official.load_prompt_file``) is used with that file's
memory layout: ``lines`` (one memory a line) or ``speakers`` (Mem0's LoCoMo
prompt: each speaker's memories apart, a JSON list of ``"<date>: <text>"``
per speaker). A date is shown only where the template has a field for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from memsim.core.registry import Registry, caller_origin
from memsim.sim.answer.prompts import FINAL_ANSWER_MARK, NO_MEMORIES, READER_COT, READER_SHORT, PromptTemplate
from memsim.core.errors import UserError

if TYPE_CHECKING:
    from memsim.memory.base import Retrieved
    from memsim.sim.answer.llm import LLMClient

__all__ = [
    "Answer",
    "Reader",
    "ReaderKind",
    "READERS",
    "READER_VARIANTS",
    "register_reader",
    "unregister_reader",
    "reader_kind",
    "format_memory",
    "format_question_date",
    "extract_answer",
    "PROMPT_PARAPHRASE",
    "LAYOUTS",
]

PROMPT_PARAPHRASE = "memsim paraphrase"
"""How tables and specs name memsim's own reader prompts (not the published wording)."""

LAYOUTS: tuple[str, ...] = ("lines", "speakers")
"""How memories fill a template: one a line (``{memories}``), or each speaker's apart (Mem0's fields)."""



@dataclass(frozen=True, slots=True)
class ReaderKind:
    """A reader variant: its prompt, the tokens its reply gets, and where the answer is in the reply."""

    template: PromptTemplate
    """The prompt (fields ``question``, ``memories`` and, where it shows it, ``question_date``)."""
    answer_tokens: int
    """Tokens reserved for the reply unless the caller says otherwise."""
    answer_on: Literal["first_line", "marked_line"] = "first_line"
    """``first_line``: the reply's first non-empty line; ``marked_line``: the last line marked ``FINAL ANSWER:``."""


READERS = Registry("reader", group="memsim.readers", ordered=True)
"""Reader variants by name (``memsim.core.registry``); ``none`` (retrieval only) is not one."""


def register_reader(name: str, kind: ReaderKind | str, *, description: str) -> None:
    """Register a reader variant: a ``ReaderKind`` or ``"module:attribute"`` naming one; a duplicate is an error."""
    if name == "none":
        raise ValueError("'none' means retrieval only and cannot name a reader")
    READERS.register(name, kind, description=description, origin=caller_origin(1))


def unregister_reader(name: str) -> None:
    """Remove a registered reader variant (a test undoes its registration with it)."""
    READERS.unregister(name)


def reader_kind(name: str) -> ReaderKind:
    """The variant ``name``; an unknown one lists the known ones (``none`` among them)."""
    if name not in READERS:
        raise UserError(f"--reader: unknown variant {name!r}; choose one of: none, {', '.join(READERS.names())}")
    got = READERS.load(name, where="--reader")
    if not isinstance(got, ReaderKind):
        raise UserError(f"reader {name!r}: {READERS.entry(name).target!r} is not a ReaderKind")
    return got


class _Names(Sequence[str]):
    """The registered variant names, read when used (a package's entry points included)."""

    def __getitem__(self, i: Any) -> Any:
        return READERS.names()[i]

    def __len__(self) -> int:
        return len(READERS.names())


READER_VARIANTS: Sequence[str] = _Names()
"""Reader variant names (a live view of the registry)."""

register_reader("short", ReaderKind(READER_SHORT, 48),
                description="answers in a few words from the retrieved memories (with their dates)")
register_reader("cot", ReaderKind(READER_COT, 512, "marked_line"),
                description="reasons step by step (relevant memories, counting, latest value, date arithmetic), "
                "answer on a marked line")

# Tokens a chat template adds around each message and before the reply
# (role markers, separators); generous so that an estimate never overflows.
_TOKENS_PER_MESSAGE = 8
_TOKENS_SAFETY = 16

# A memory already carries its date when it starts with a short dated prefix
# followed by " | " (the form of ``memsim.memory.base.render_turn``).
_DATED_PREFIX = re.compile(r"^[^|\n]{0,48}\d[^|\n]{0,48} \| ")
_FINAL_LINE = re.compile(
    r"^[\s>*_#-]*" + re.escape(FINAL_ANSWER_MARK.rstrip(":")) + r"[\s*_]*[:：][\s*_]*(?P<answer>.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_ANSWER_PREFIX = re.compile(r"^[\s*_]*(?:final\s+)?answer[\s*_]*[:：][\s*_]*", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Answer:
    """A reader's answer to one question, with what producing it cost."""

    text: str
    """The extracted final answer."""
    raw: str
    """The model's full reply."""
    prompt_id: str
    """Id of the prompt template (name and hash of its text)."""
    prompt_tokens: int
    """Prompt tokens of the call."""
    completion_tokens: int
    """Tokens generated."""
    latency_s: float
    """Wall time of the call (of the original call when the reply was cached)."""
    truncated: bool
    """True when some retrieved memories were dropped to fit the context window."""
    n_memories_used: int
    """How many retrieved memories the prompt showed."""
    cached: bool = False
    """True when the reply came from the response cache."""


def format_question_date(when: datetime | str) -> str:
    """The date a question is asked, as the prompt shows it (``Monday, 8 May 2023``)."""
    if isinstance(when, str):
        return when.strip()
    return f"{when:%A}, {when.day} {when:%B %Y}"


def format_memory(memory: Retrieved) -> str:
    """One memory on one line, starting with its date.

    A text that already starts with a date (``"8 May, 2023 | Caroline: ..."``)
    is kept as it is; otherwise ``created_at`` is put in front.
    """
    text = " ".join(memory.text.split())
    if _DATED_PREFIX.match(text):
        return f"- {text}"
    return f"- {memory.created_at:%Y-%m-%d %H:%M} | {text}"


def split_memory(memory: Retrieved) -> tuple[str, str, str]:
    """``(date, speaker, text)`` of a memory ``"<date> | <speaker>: <text>"``; else its ``created_at``, "", its text."""
    text = " ".join(memory.text.split())
    if _DATED_PREFIX.match(text):
        when, _, rest = text.partition(" | ")
        speaker, sep, said = rest.partition(": ")
        if sep:
            return when, speaker, said
        return when, "", rest
    return f"{memory.created_at:%Y-%m-%d %H:%M}", "", text


def extract_answer(raw: str, variant: str) -> str:
    """The final answer in a reply.

    A variant whose answer is on a marked line (``cot``): the text after the
    last ``FINAL ANSWER:`` marker; when the model wrote none, the last
    non-empty line. Otherwise (``short``): the first non-empty line, without an
    ``Answer:`` prefix.
    """
    text = raw.strip()
    if not text:
        return ""
    if reader_kind(variant).answer_on == "marked_line":
        found = [m.group("answer") for m in _FINAL_LINE.finditer(text)]
        line = found[-1] if found else text.splitlines()[-1]
    else:
        line = next(ln for ln in text.splitlines() if ln.strip())
    line = _ANSWER_PREFIX.sub("", line.strip())
    return line.strip().strip("*_`\"'").strip()


class Reader:
    """Answers questions from retrieved memories with an LLM client."""

    def __init__(
        self,
        llm: LLMClient,
        variant: str = "short",
        max_answer_tokens: int | None = None,
        *,
        temperature: float = 0.0,
        seed: int = 0,
        template: PromptTemplate | None = None,
        layout: str = "lines",
        prompt_source: str = "",
    ) -> None:
        """Args:
        llm: the client that writes answers.
        variant: ``short`` or ``cot``.
        max_answer_tokens: tokens reserved for the reply; default per variant
            (``ReaderKind.answer_tokens``).
        temperature: sampling temperature (0: greedy, reproducible).
        seed: sampling seed sent with every call.
        template: a template to use instead of the variant's own (fields ``question``, the
            memories of ``layout``, and ``question_date`` where it shows the date).
        layout: ``lines`` or ``speakers`` (see the module docstring).
        prompt_source: where ``template`` came from (file and sha256); empty: memsim's paraphrase.

        Raises:
            UserError: unknown variant (the message lists the known ones) or layout.
        """
        kind = reader_kind(variant)
        if layout not in LAYOUTS:
            raise UserError(f"reader layout {layout!r} unknown; valid: {', '.join(LAYOUTS)}")
        self.layout = layout
        self.prompt_source = prompt_source if template is not None and prompt_source else PROMPT_PARAPHRASE
        self.llm = llm
        self.variant = variant
        self.template = template or kind.template
        self.max_answer_tokens = int(max_answer_tokens or kind.answer_tokens)
        self.temperature = float(temperature)
        self.seed = int(seed)

    @property
    def prompt_id(self) -> str:
        """Id of the template in use."""
        return self.template.id

    def describe(self) -> dict[str, Any]:
        """What a run's spec records about this reader."""
        return {
            "variant": self.variant,
            "prompt_id": self.prompt_id,
            "prompt_source": self.prompt_source,
            "layout": self.layout,
            "max_answer_tokens": self.max_answer_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
        }

    def build_messages(
        self, question: str, question_date: datetime | str, memories: Sequence[Retrieved]
    ) -> tuple[list[dict[str, str]], int]:
        """The chat messages for a question and how many memories they show.

        Memories are taken best first while they fit the context window
        (one that does not fit is skipped, a shorter one after it may still
        fit), then shown oldest first.

        Raises:
            UserError: the prompt does not fit the context window even without memories.
        """
        date = format_question_date(question_date)
        empty = self.template.render(**self._fill([]), question=question, question_date=date)
        fixed = sum(self.llm.count_tokens(m["content"]) for m in empty)
        fixed += _TOKENS_PER_MESSAGE * len(empty) + _TOKENS_SAFETY
        budget = self.llm.context_window - self.max_answer_tokens - fixed
        if budget < 0:
            raise UserError(
                f"the {self.variant} prompt for question {question[:60]!r} needs {fixed} tokens plus "
                f"{self.max_answer_tokens} for the answer, more than the model's context window of "
                f"{self.llm.context_window}"
            )
        budget += self.llm.count_tokens(NO_MEMORIES)
        chosen: list[tuple[int, str]] = []
        for rank, memory in enumerate(memories):
            line = format_memory(memory)
            cost = self.llm.count_tokens(line) + 1  # +1: the newline
            if cost <= budget:
                chosen.append((rank, line))
                budget -= cost
        order = sorted(chosen, key=lambda c: (memories[c[0]].created_at, c[0]))
        filled = self._fill([memories[rank] for rank, _ in order], [line for _, line in order])
        messages = self.template.render(**filled, question=question, question_date=date)
        return messages, len(chosen)

    def _fill(self, memories: Sequence[Retrieved], lines: Sequence[str] = ()) -> dict[str, str]:
        """The template's memory fields for ``memories`` (oldest first; ``lines`` their formatted lines)."""
        if self.layout == "lines":
            return {"memories": "\n".join(lines) if lines else NO_MEMORIES}
        by_speaker: dict[str, list[str]] = {}
        for m in memories:
            when, speaker, text = split_memory(m)
            by_speaker.setdefault(speaker, []).append(f"{when}: {text}")
        speakers = list(by_speaker)[:2] + ["", ""]
        out: dict[str, str] = {}
        for n, speaker in enumerate(speakers[:2], start=1):
            out[f"speaker_{n}_user_id"] = speaker
            out[f"speaker_{n}_memories"] = json.dumps(by_speaker.get(speaker, []), indent=4)
        return out

    def answer(
        self, question: str, question_date: datetime | str, memories: Sequence[Retrieved]
    ) -> Answer:
        """Answer ``question`` from ``memories`` (best first).

        Raises:
            LLMUnavailableError: the model's endpoint failed (see ``memsim.sim.answer.llm``).
        """
        messages, used = self.build_messages(question, question_date, memories)
        out = self.llm.chat(
            messages, max_tokens=self.max_answer_tokens, temperature=self.temperature, seed=self.seed
        )
        return Answer(
            text=extract_answer(out.text, self.variant),
            raw=out.text,
            prompt_id=self.prompt_id,
            prompt_tokens=out.prompt_tokens,
            completion_tokens=out.completion_tokens,
            latency_s=out.latency_s,
            truncated=used < len(memories),
            n_memories_used=used,
            cached=out.cached,
        )
