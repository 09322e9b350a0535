"""``memsim bench llm``: answers per second of a reader, per prompt variant.

A fixed, hand-made set of questions about one person, each with the same
number of dated memories (the relevant ones and filler), is answered by each
reader variant without the response cache, so the figure is the model's real
speed on this machine. The first call is a warm-up and is not timed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from memsim.memory.base import Retrieved
from memsim.sim.answer.llm import LLMClient, LocalLLM
from memsim.sim.answer.readers import READER_VARIANTS, Reader

__all__ = ["BenchResult", "bench_llm", "bench_questions", "format_bench"]

_T0 = datetime(2024, 1, 8, 9, 0, tzinfo=timezone.utc)

_FACTS: tuple[tuple[int, str], ...] = (
    # (day offset, memory text)
    (0, "Maya: I just started a new job as a nurse at St. Anne's hospital."),
    (3, "Maya: My sister Lena is visiting from Berlin next weekend."),
    (9, "Maya: I adopted a grey cat and named her Pixel."),
    (15, "Maya: I'm training for a half marathon in April."),
    (22, "Maya: We moved from Leeds to York last week."),
    (30, "Maya: I bought a second-hand blue bicycle for the commute."),
    (41, "Maya: Lena got engaged to her partner Tom!"),
    (47, "Maya: I switched to night shifts at the hospital."),
    (55, "Maya: I finished the pottery course I started in January."),
    (63, "Maya: Pixel had her first vet check-up and she is healthy."),
    (70, "Maya: I ran 18 km on Sunday, my longest run so far."),
    (78, "Maya: We are moving again, this time from York to Bristol."),
)
_FILLER = (
    "Maya: The weather has been rainy all week.",
    "Maya: I watched a documentary about octopuses.",
    "Maya: Coffee at the new cafe was too bitter.",
    "Maya: I reorganised my bookshelf by colour.",
    "Maya: Traffic was terrible this morning.",
    "Maya: I tried a new pasta recipe with spinach.",
)
_QUESTIONS: tuple[str, ...] = (
    "Where does Maya live now?",
    "What is the name of Maya's cat?",
    "What race is Maya training for?",
    "Who got engaged?",
    "Which shifts does Maya work now?",
    "How many times has Maya moved?",
    "What colour is Maya's bicycle?",
    "What is Maya's job?",
)


def bench_questions(n_questions: int, n_memories: int) -> list[tuple[str, datetime, list[Retrieved]]]:
    """The benchmark's questions, each with ``n_memories`` dated memories, best first."""
    pool = [(_T0 + timedelta(days=d), text) for d, text in _FACTS]
    pool += [(_T0 + timedelta(days=5 + 7 * i, hours=3), text) for i, text in enumerate(_FILLER)]
    asked = _T0 + timedelta(days=90)
    out = []
    for q in range(n_questions):
        question = _QUESTIONS[q % len(_QUESTIONS)]
        # rotate the pool so that questions see different memories in different order
        chosen = [pool[(q + j) % len(pool)] for j in range(min(n_memories, len(pool)))]
        while len(chosen) < n_memories:
            chosen.append(pool[len(chosen) % len(pool)])
        memories = [
            Retrieved(f"m{q}-{j}", text, 1.0 - j / (n_memories + 1), when, (f"t{j}",))
            for j, (when, text) in enumerate(chosen)
        ]
        out.append((question, asked, memories))
    return out


@dataclass(frozen=True, slots=True)
class BenchResult:
    """Speed of one reader variant."""

    variant: str
    """Reader variant (``short``, ``cot``)."""
    model: str
    """Model of the client."""
    n_questions: int
    """Questions answered (timed)."""
    n_memories: int
    """Memories given with each question."""
    seconds: float
    """Wall time of the timed answers."""
    answers_per_s: float
    """Answers per second."""
    mean_prompt_tokens: float
    """Mean prompt tokens per answer."""
    mean_completion_tokens: float
    """Mean generated tokens per answer."""
    completion_tokens_per_s: float
    """Generated tokens per second."""


def bench_llm(
    variants: Sequence[str] = READER_VARIANTS,
    *,
    llm: LLMClient | None = None,
    n_questions: int = 8,
    n_memories: int = 10,
    max_answer_tokens: int | None = None,
    model_path: str | None = None,
    n_threads: int | None = None,
) -> list[BenchResult]:
    """Time each reader variant on the benchmark's questions.

    Args:
        variants: reader variants to time.
        llm: the client; default: the local model (``model_path``, ``n_threads``).
        n_questions: timed questions per variant.
        n_memories: memories per question.
        max_answer_tokens: reply budget; default: the reader's per variant.
        model_path: GGUF file for the default local client.
        n_threads: CPU threads for the default local client.

    Returns:
        One result per variant, in order.
    """
    if n_questions < 1 or n_memories < 0:
        raise ValueError("need n_questions >= 1 and n_memories >= 0")
    client = llm if llm is not None else LocalLLM(model_path, n_threads=n_threads)
    questions = bench_questions(n_questions, n_memories)
    results = []
    for variant in variants:
        reader = Reader(client, variant, max_answer_tokens)
        reader.answer(*questions[0])  # warm-up: page in weights, fill caches
        prompt = completion = 0
        start = time.perf_counter()
        for question, asked, memories in questions:
            ans = reader.answer(question, asked, memories)
            prompt += ans.prompt_tokens
            completion += ans.completion_tokens
        seconds = time.perf_counter() - start
        results.append(
            BenchResult(
                variant=variant,
                model=client.model,
                n_questions=n_questions,
                n_memories=n_memories,
                seconds=seconds,
                answers_per_s=n_questions / seconds,
                mean_prompt_tokens=prompt / n_questions,
                mean_completion_tokens=completion / n_questions,
                completion_tokens_per_s=completion / seconds,
            )
        )
    return results


def format_bench(results: Sequence[BenchResult]) -> str:
    """A small table of the results."""
    from memsim.core.table import text_table

    rows = [[r.variant, f"{r.answers_per_s:.2f}", f"{1 / r.answers_per_s:.2f}", f"{r.mean_prompt_tokens:.0f}",
             f"{r.mean_completion_tokens:.1f}", f"{r.completion_tokens_per_s:.1f}"] for r in results]
    lines = [text_table(["variant", "answers/s", "s/answer", "prompt tok", "answer tok", "gen tok/s"], rows)]
    if results:
        lines.append(f"model {results[0].model}, {results[0].n_questions} questions x {results[0].n_memories} memories")
    return "\n".join(lines)
