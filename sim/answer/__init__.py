"""Answering services: LLM clients, the response cache, the meter, readers, judges, prompts.

A run turns retrieved memories into an answer with a ``Reader`` (a prompt
template from ``prompts`` sent to an ``LLMClient``) and scores it with
judges (``Judge``); ``AnswerSetup`` bundles them with the ``Meter`` that counts
what they spend. Importing this package loads no model library: llama.cpp
and ``openai`` are imported when a client first needs them.

Names are imported from their modules on first use.
"""

from __future__ import annotations

from memsim.core.lazy import lazy_exports

_MODULES: dict[str, tuple[str, ...]] = {
    "__future__": (
        "annotations",
    ),
    "memsim.sim.answer.bench": (
        "BenchResult", "bench_llm", "bench_questions", "format_bench",
    ),
    "memsim.sim.answer.cache": (
        "CachedLLM",
    ),
    "memsim.sim.answer.dryrun": (
        "DryRunFinished",
    ),
    "memsim.sim.answer.judges": (
        "JUDGE_NAMES", "JUDGE_PASS", "LLM_JUDGES", "PARAPHRASE_NOTE", "Bleu1Judge", "ContainsJudge", "Judge",
        "LocomoF1Judge", "LocomoLLMJudge", "LongMemEvalLLMJudge", "Mem0F1Judge", "abstains", "bleu1",
        "is_abstention_question", "locomo_f1", "make_judge", "mem0_f1", "normalize", "says_not_available",
        "build_judge", "judge_names", "register_judge",
    ),
    "memsim.sim.answer.llm": (
        "LLM_KINDS", "OPENAI_URL", "SERVER_SAMPLING", "ClientWrapper", "Completion", "LLMClient",
        "LLMRequestError", "LLMUnavailableError", "LocalLLM", "OpenAICompatibleLLM", "ScriptedLLM",
        "default_model_path", "endpoint_of", "make_llm", "openai_base_url",
    ),
    "memsim.sim.answer.meter": (
        "DEFAULT_PRICES", "DryRunLLM", "Meter", "MeteredLLM", "PriceTable",
    ),
    "memsim.sim.answer.official": (
        "LONGMEMEVAL_SCRIPT", "OfficialPrompts", "load_official_prompts",
    ),
    "memsim.sim.answer.options": ("AnswerOptions", "DEFAULT_LOCAL_CONTEXT", "answer_choices"),
    "memsim.sim.answer.prompts": (
        "FINAL_ANSWER_MARK", "JUDGE_LOCOMO", "JUDGE_LONGMEMEVAL", "JUDGE_LONGMEMEVAL_TYPES",
        "NO_MEMORIES", "READER_COT", "READER_SHORT", "PromptTemplate",
    ),
    "memsim.sim.answer.readers": (
        "READERS", "READER_VARIANTS", "Answer", "Reader", "ReaderKind", "extract_answer", "reader_kind",
        "register_reader", "unregister_reader",
        "format_memory", "format_question_date",
    ),
    "memsim.sim.answer.setup": (
        "AnswerSetup", "answer_setup",
        "build_llm", "format_cost", "format_dry_run", "judge_client", "official_templates", "same_model",
    ),
}
__all__, __getattr__ = lazy_exports(__name__, _MODULES)
