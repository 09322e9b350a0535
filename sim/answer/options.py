"""The answer options of a run: reader, LLM, judges and prices (``RunSpec.answer``).

Kept apart from ``memsim.sim.answer.setup`` (which builds the clients) so that
reading a spec imports no client code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["AnswerOptions", "DEFAULT_LOCAL_CONTEXT"]

DEFAULT_LOCAL_CONTEXT = 2048
"""Context window of the local model unless ``llm_context_window`` says otherwise."""


class AnswerOptions(BaseModel):
    """How a run answers and judges its questions: ``RunSpec.answer``, a sweep's ``[answer]`` table, the answer flags.

    Each field is one command-line flag of the same name (``llm_model`` is ``--llm-model``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    reader: str = Field("none", description="answer prompt: none (retrieval only), short or cot")
    llm: str = Field("local", description="LLM client: local (llama.cpp in process) or openai (any OpenAI-compatible endpoint)")
    llm_model: str | None = Field(None, description="model name at the endpoint (default: gpt-4o-mini at OpenAI, "
                                  "else the first model the endpoint lists)")
    llm_base_url: str | None = Field(None, description="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1 "
                                     "(default: $OPENAI_BASE_URL or OpenAI)")
    llm_model_path: str | None = Field(None, description="GGUF model for the local client (default: packaged "
                                       "SmolLM2-135M-Instruct); for openai, the file the server runs, to count tokens exactly")
    llm_context_window: int | None = Field(None, description=f"context window in tokens (default: {DEFAULT_LOCAL_CONTEXT} "
                                           "for a GGUF model, else from the model's name)")
    llm_threads: int | None = Field(None, description="CPU threads of the local model (default: llama.cpp's choice)")
    llm_timeout: float = Field(60.0, description="seconds per request to an openai endpoint")
    llm_retries: int = Field(4, description="retries of a failed request to an openai endpoint")
    max_answer_tokens: int | None = Field(None, description="tokens reserved for an answer (default: the reader's own)")
    no_cache: bool = Field(False, description="neither read nor write the LLM response cache")
    judge: tuple[str, ...] | None = Field(None, description="judges that score answers, see memsim list "
                                          "judges (default: the benchmark's)")
    judge_model: str | None = Field(None, description="model of the LLM judges on the reader's endpoint (a GGUF path for "
                                    "the local client; default: the reader's, which needs allow_self_judging)")
    allow_self_judging: bool = Field(False, description="let an LLM judge use the reader's own model (its figures are "
                                     "marked self-judging)")
    judge_prompts: tuple[str, ...] | None = Field(None, description="official judge templates from your own copy: "
                                                  "LongMemEval's evaluate_qa.py (or its checkout) or a Mem0 evaluation "
                                                  "prompt file (default: memsim's paraphrase)")
    dry_run: bool = Field(False, description="count the LLM calls, tokens and cost the run would make, print them and "
                          "exit (no model is called)")
    prices: str | None = Field(None, description="JSON or TOML price table overriding the default prices")
    judge_checks: dict[str, Any] = Field(default_factory=dict, description="the judge check result of every LLM judge "
                                         "(filled before the run, not set by hand)")

    # The choices live beside their implementations, imported only when a value is checked.
    @field_validator("reader")
    @classmethod
    def _reader(cls, v: str) -> str:
        from memsim.sim.answer.readers import READER_VARIANTS

        return _one_of(v, ("none", *READER_VARIANTS))

    @field_validator("llm")
    @classmethod
    def _llm(cls, v: str) -> str:
        from memsim.sim.answer.llm import LLM_KINDS

        return _one_of(v, LLM_KINDS)

    @field_validator("judge")
    @classmethod
    def _judge(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        from memsim.sim.answer.judges import JUDGE_NAMES

        for name in v or ():
            _one_of(name, JUDGE_NAMES)
        return v

    @property
    def enabled(self) -> bool:
        """Whether questions are answered (a reader other than ``none``)."""
        return self.reader != "none"


def _one_of(value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ValueError(f"{value!r} is not one of {', '.join(choices)}")
    return value
