"""The answer options of a run: reader, LLM, judges and prices (``RunSpec.answer``).

Kept apart from ``memsim.sim.answer.setup`` (which builds the clients) so that
reading a spec imports no client code.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

__all__ = ["AnswerOptions", "DEFAULT_LOCAL_CONTEXT", "answer_choices"]

DEFAULT_LOCAL_CONTEXT = 2048
"""Context window of the local model unless ``llm_context_window`` says otherwise."""


class AnswerOptions(BaseModel):
    """How a run answers and judges its questions: ``RunSpec.answer``, a sweep's ``[answer]`` table, the answer flags.

    Each field is one command-line flag of the same name (``llm_model`` is ``--llm-model``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    reader: str = Field("none", description="answer prompt: none (retrieval only), short or cot")
    llm: str = Field("local", description="LLM client: local (llama.cpp in process) or openai (any OpenAI-compatible endpoint)")
    llm_model: str | None = Field(None, description="model at the endpoint (default: gpt-4o-mini at OpenAI, else the first it lists)")
    llm_base_url: str | None = Field(None, description="OpenAI-compatible API root (default: $OPENAI_BASE_URL or OpenAI)")
    llm_model_path: str | None = Field(None, description="GGUF model of the local client (default: the packaged SmolLM2-135M); "
                                       "for openai, the file the server runs, to count tokens exactly")
    llm_context_window: int | None = Field(None, description=f"context window in tokens (default: {DEFAULT_LOCAL_CONTEXT} for a "
                                           "GGUF model, else from the model's name)")
    llm_threads: int | None = Field(None, description="CPU threads of the local model (default: llama.cpp's choice)")
    llm_timeout: float = Field(60.0, description="seconds per request to an openai endpoint")
    llm_retries: int = Field(4, description="retries of a failed request to an openai endpoint")
    max_answer_tokens: int | None = Field(None, description="tokens reserved for an answer (default: the reader's own)")
    no_cache: bool = Field(False, description="neither read nor write the LLM response cache")
    judge: tuple[str, ...] | None = Field(None, description="judges that score answers, see memsim list judges (default: the benchmark's)")
    judge_model: str | None = Field(None, description="model of the LLM judges on the reader's endpoint (a GGUF path for the "
                                    "local client; default: the reader's, which needs allow_self_judging)")
    allow_self_judging: bool = Field(False, description="let an LLM judge use the reader's own model (its figures are marked)")
    allow_unreadable_verdicts: bool = Field(False, description="finish a run whose LLM judge gave no readable verdict in "
                                            "more than 5% of its replies (they are scored wrong either way)")
    judge_prompts: tuple[str, ...] | None = Field(None, description="official judge templates from your own copy: LongMemEval's "
                                                  "evaluate_qa.py or a Mem0 prompt file (default: memsim's paraphrase)")
    prompts: tuple[str, ...] | None = Field(None, description="reader and judge templates from your own copy: the seed's "
                                            "prompts.py, Mem0's prompts.py or LongMemEval's evaluate_qa.py, parsed, "
                                            "never run (default: memsim paraphrase)")
    dry_run: bool = Field(False, description="count the LLM calls, tokens and cost the run would make, print them, call no model")
    prices: str | None = Field(None, description="JSON or TOML price table overriding the default prices")
    judge_check: int | None = Field(None, ge=0, description="labelled items each LLM judge is checked on before the run, "
                                    "drawn from memsim judge-check's set; 0: no check (the judge is then marked unreliable) "
                                    "(default: the whole set, 456 items with the LoCoMo file, 265 without)")
    judge_check_from: str | None = Field(None, description="reuse the LLM judges' check from an earlier memsim judge-check "
                                         "(its folder or judge_check.json) instead of checking before the run")
    judge_checks: dict[str, Any] = Field(default_factory=dict, description="each LLM judge's check result (filled by the run)")

    @field_validator("reader", "llm", "judge")
    @classmethod
    def _known(cls, v: Any, info: ValidationInfo) -> Any:
        known = answer_choices()[info.field_name]
        for value in (v,) if isinstance(v, str) else v or ():
            if value not in known:
                raise ValueError(f"{value!r} is not one of {', '.join(known)}")
        return v

    @property
    def enabled(self) -> bool:
        """Whether questions are answered (a reader other than ``none``)."""
        return self.reader != "none"


def answer_choices() -> dict[str, tuple[str, ...]]:
    """The known values of ``reader``, ``llm`` and ``judge``, from the modules that implement them (imported now)."""
    from memsim.sim.answer.judges import JUDGE_NAMES
    from memsim.sim.answer.llm import LLM_KINDS
    from memsim.sim.answer.readers import READER_VARIANTS

    return {"reader": ("none", *READER_VARIANTS), "llm": LLM_KINDS, "judge": JUDGE_NAMES}
