"""What every language-model client shares: the reply it returns, the interface, the errors.

A client (``memsim.sim.answer.llm``) takes chat messages and returns a
``Completion``; ``LLMClient`` is the interface readers and judges use. The
errors say whether an endpoint is out of reach (``LLMUnavailableError``),
refused a request (``LLMRequestError``) or answered with something that is
not a completion (``LLMReplyError``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from memsim.core.errors import UserError

__all__ = [
    "MAX_REPLY_BYTES", "Completion", "LLMClient", "LLMReplyError", "LLMRequestError", "LLMUnavailableError",
    "Messages", "endpoint_of",
]

Messages = Sequence[Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class Completion:
    """One model reply and what it cost."""

    text: str
    """The reply text."""
    prompt_tokens: int
    """Tokens of the prompt, as the model counted them."""
    completion_tokens: int
    """Tokens generated."""
    latency_s: float
    """Wall time of the call that produced the reply (for a cached reply: of the original call)."""
    cached: bool = False
    """True when the reply came from the response cache (no model call was made)."""


@runtime_checkable
class LLMClient(Protocol):
    """What readers and judges need from a language model."""

    name: str
    """Kind of client (``local``, ``openai``, ...)."""
    model: str
    """Model name as the endpoint knows it (for ``local``: the GGUF file name)."""
    endpoint: str
    """Where the model runs: a URL, or ``local:<path>`` for an in-process model."""
    context_window: int
    """Tokens the model accepts, prompt and reply together."""

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes (exact for local models, an upper estimate otherwise)."""
        ...

    def chat(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, seed: int = 0, json_mode: bool = False
    ) -> Completion:
        """Send ``messages`` and return the reply (``json_mode``: ask for a JSON object, as a judge protocol may)."""
        ...


class LLMUnavailableError(UserError):
    """The endpoint could not be reached or kept failing after the allowed retries.

    Callers running a benchmark catch this to keep the rows already recorded.
    """


class LLMRequestError(UserError):
    """The endpoint refused a request for a reason retrying cannot fix (key, model, input)."""


class LLMReplyError(Exception):
    """The endpoint answered, but not with a valid completion (damaged JSON, no choices, no content).

    Not a ``UserError``: one bad reply fails one answer, whose row records the
    error, and the run goes on; the command counts the failed answers and
    exits non-zero when they pass a threshold
    (``memsim.analysis.cli.run.MAX_ANSWER_ERROR_SHARE``).
    """


MAX_REPLY_BYTES = 8 * 1024 * 1024
"""Largest reply body read from an OpenAI-compatible endpoint (bytes); a completion is kilobytes."""



def endpoint_of(client: Any) -> str:
    """The endpoint a client (or a wrapper around one) talks to."""
    return str(getattr(client, "endpoint", getattr(client, "name", "?")))
