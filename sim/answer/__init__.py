"""Answering services: LLM clients, the response cache, the meter, readers, judges, prompts.

A run turns retrieved memories into an answer with a ``Reader`` (a prompt
template from ``prompts`` sent to an ``LLMClient``) and scores it with
judges (``Judge``); ``AnswerSetup`` bundles them with the ``Meter`` that counts
what they spend. Importing this package loads no model library: llama.cpp
and ``openai`` are imported when a client first needs them.
"""

from __future__ import annotations

from sim.answer.bench import BenchResult, bench_llm, bench_questions, format_bench
from sim.answer.cache import CachedLLM
from sim.answer.judges import (
    JUDGE_NAMES,
    LLM_JUDGES,
    Bleu1Judge,
    ContainsJudge,
    Judge,
    LocomoF1Judge,
    LocomoLLMJudge,
    LongMemEvalLLMJudge,
    Mem0F1Judge,
    bleu1,
    locomo_f1,
    make_judge,
    mem0_f1,
    normalize,
    says_not_available,
)
from sim.answer.llm import (
    LLM_KINDS,
    OPENAI_URL,
    SERVER_SAMPLING,
    ClientWrapper,
    Completion,
    LLMClient,
    LLMRequestError,
    LLMUnavailableError,
    LocalLLM,
    OpenAICompatibleLLM,
    ScriptedLLM,
    default_model_path,
    endpoint_of,
    make_llm,
    openai_base_url,
)
from sim.answer.meter import DEFAULT_PRICES, Meter, MeteredLLM, PriceTable
from sim.answer.prompts import (
    FINAL_ANSWER_MARK,
    JUDGE_LOCOMO,
    JUDGE_LONGMEMEVAL,
    JUDGE_LONGMEMEVAL_TYPES,
    NO_MEMORIES,
    READER_COT,
    READER_SHORT,
    READER_TEMPLATES,
    PromptTemplate,
)
from sim.answer.readers import (
    DEFAULT_ANSWER_TOKENS,
    READER_VARIANTS,
    Answer,
    Reader,
    extract_answer,
    format_memory,
    format_question_date,
)
from sim.answer.setup import (
    DEFAULT_JUDGES,
    AnswerSetup,
    add_answer_arguments,
    answer_setup_from_args,
    build_llm,
    format_cost,
)

__all__ = [
    # clients
    "Completion",
    "LLMClient",
    "LLMUnavailableError",
    "LLMRequestError",
    "LocalLLM",
    "OpenAICompatibleLLM",
    "ScriptedLLM",
    "ClientWrapper",
    "LLM_KINDS",
    "OPENAI_URL",
    "SERVER_SAMPLING",
    "make_llm",
    "default_model_path",
    "endpoint_of",
    "openai_base_url",
    # cache and meter
    "CachedLLM",
    "MeteredLLM",
    "Meter",
    "PriceTable",
    "DEFAULT_PRICES",
    # prompts
    "PromptTemplate",
    "READER_SHORT",
    "READER_COT",
    "READER_TEMPLATES",
    "JUDGE_LOCOMO",
    "JUDGE_LONGMEMEVAL",
    "JUDGE_LONGMEMEVAL_TYPES",
    "FINAL_ANSWER_MARK",
    "NO_MEMORIES",
    # readers
    "Answer",
    "Reader",
    "READER_VARIANTS",
    "DEFAULT_ANSWER_TOKENS",
    "format_memory",
    "format_question_date",
    "extract_answer",
    # judges
    "Judge",
    "ContainsJudge",
    "LocomoF1Judge",
    "Mem0F1Judge",
    "Bleu1Judge",
    "LocomoLLMJudge",
    "LongMemEvalLLMJudge",
    "JUDGE_NAMES",
    "LLM_JUDGES",
    "make_judge",
    "normalize",
    "locomo_f1",
    "mem0_f1",
    "bleu1",
    "says_not_available",
    # a run's answer settings
    "AnswerSetup",
    "DEFAULT_JUDGES",
    "add_answer_arguments",
    "answer_setup_from_args",
    "build_llm",
    "format_cost",
    # speed benchmark
    "BenchResult",
    "bench_llm",
    "bench_questions",
    "format_bench",
]
