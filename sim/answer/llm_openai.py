"""The client of OpenAI's chat API and of any server that speaks it (vLLM, the llama.cpp server, Ollama).

``OpenAICompatibleLLM`` sends each request through the openai SDK, with one
deadline per attempt, a limit on requests in flight and the SDK's own bounded
retries; its replies are read by ``memsim.sim.answer.llm_replies``.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from memsim.core.errors import UserError
from memsim.sim.answer.llm_api import (
    MAX_REPLY_BYTES, Completion, LLMReplyError, LLMRequestError, LLMUnavailableError, Messages,
)
from memsim.sim.answer.llm_local import chat_prompt_tokens, llama_class
from memsim.sim.answer.llm_replies import completion_text, gave_up, reported_count, short_error

__all__ = ["MAX_RETRIES", "MAX_TIMEOUT_S", "OPENAI_URL", "OpenAICompatibleLLM", "openai_base_url"]

OPENAI_URL = "https://api.openai.com/v1"
"""The endpoint used when neither ``base_url`` nor ``OPENAI_BASE_URL`` is set."""

_CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    # Longest prefix wins; figures from the providers' model pages.
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
)
_DEFAULT_CONTEXT_WINDOW = 8_192
MAX_RETRIES = 20
"""Most retries of one call (``--llm-retries``): past it a failing endpoint would hold a run for hours."""
MAX_TIMEOUT_S = 3600.0
"""Longest deadline of one attempt (``--llm-timeout``, seconds)."""
# Status codes worth another try: timeouts, conflicts, rate limits, server errors.
_RETRY_STATUS = frozenset({408, 409, 429})


def _known_context_window(model: str) -> int:
    best = ""
    window = _DEFAULT_CONTEXT_WINDOW
    for prefix, size in _CONTEXT_WINDOWS:
        if model.startswith(prefix) and len(prefix) > len(best):
            best, window = prefix, size
    return window


def openai_base_url(base_url: str | None = None) -> str:
    """The API root a client uses: ``base_url``, else ``$OPENAI_BASE_URL``, else OpenAI's."""
    return (base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL).rstrip("/")


def _is_openai_host(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return host == "api.openai.com" or host.endswith(".openai.com")


class OpenAICompatibleLLM:
    """A chat model behind the OpenAI API or any server compatible with it.

    Every attempt has one deadline, ``timeout_s``, for all of it: connecting,
    the first byte and the whole body (``memsim.core.deadline``), so a
    server that drips its reply is cut off; a body past ``MAX_REPLY_BYTES``
    is refused while it is read. A reply that is not a valid completion
    (damaged JSON, no choices, no content) raises ``LLMReplyError``. Safe to
    share between threads: at most ``concurrency`` requests are in flight at
    once. Rate limits, server errors, timeouts and refused
    connections are retried ``max_retries`` times by the openai SDK itself
    (exponential backoff from 0.5 s with jitter, capped at 8 s, or what the
    server asks for with ``Retry-After`` up to a minute; each retry is
    logged by the ``openai`` logger, shown with ``memsim -v``); after that
    the call raises ``LLMUnavailableError`` naming the endpoint and model.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        concurrency: int = 4,
        context_window: int | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        """Configure the client; nothing is sent until the first call.

        Args:
            model: model name as the endpoint knows it.
            base_url: API root (``.../v1``); default ``$OPENAI_BASE_URL``, else OpenAI's.
            api_key: default ``$OPENAI_API_KEY``; required for OpenAI's own endpoint,
                a placeholder is sent to other endpoints when none is set.
            timeout_s: the deadline of each attempt, connect to last byte (a failed attempt is retried).
            max_retries: further attempts after the first failed one (the SDK's ``max_retries``).
            concurrency: requests in flight at most, across threads.
            context_window: tokens the model accepts; default from a table of known
                models, else 8192.
            tokenizer_path: a GGUF file whose tokenizer counts tokens exactly (use the
                file the server runs); otherwise counts are an upper estimate.
            extra_body: extra JSON fields sent with every request (server-specific
                sampling settings, for example).

        Raises:
            UserError: no API key for OpenAI's endpoint, or a bad setting.
        """
        if not model:
            raise UserError("--llm-model: the openai client needs a model name")
        if not (0 <= max_retries <= MAX_RETRIES and 0 < timeout_s <= MAX_TIMEOUT_S and 1 <= concurrency <= 1024):
            raise UserError(f"openai client: need 0 <= --llm-retries <= {MAX_RETRIES}, 0 < --llm-timeout <= "
                            f"{MAX_TIMEOUT_S:g} and 1 <= concurrency <= 1024, got {max_retries}, {timeout_s:g}, {concurrency}")
        url = openai_base_url(base_url)
        if urlparse(url).scheme not in ("http", "https"):
            raise UserError(f"--llm-base-url: {url!r} is not an http(s) URL")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if _is_openai_host(url):
                raise UserError(
                    f"no API key for {url}: set OPENAI_API_KEY, or point --llm-base-url "
                    "at another OpenAI-compatible server"
                )
            key = "unused"  # local servers ignore the key but the client requires one
        self.model = model
        self.endpoint = url
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.concurrency = int(concurrency)
        self.context_window = int(context_window or _known_context_window(model))
        self.extra_body = dict(extra_body or {})
        self._key = key
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._tokenizer: Any = None
        self.tokenizer_path = Path(tokenizer_path).expanduser() if tokenizer_path else None
        if self.tokenizer_path is not None:
            self._tokenizer = _load_tokenizer(self.tokenizer_path)

    def _api(self) -> Any:
        with self._client_lock:
            if self._client is None:
                import httpx
                import openai

                from memsim.core.deadline import deadline_transport

                # The SDK's own timeout bounds each read only; the transport bounds the whole attempt.
                # A proxy named by the environment is still used, as the SDK's own client would (through
                # httpx's proxy transport, whose timeouts bound each read only).
                http = httpx.Client(transport=deadline_transport(self.timeout_s, MAX_REPLY_BYTES), timeout=self.timeout_s,
                                    follow_redirects=True)
                self._client = openai.OpenAI(
                    api_key=self._key,
                    base_url=self.endpoint,
                    timeout=self.timeout_s,
                    max_retries=self.max_retries,
                    http_client=http,
                )
            return self._client

    @staticmethod
    def served_models(base_url: str | None = None, api_key: str | None = None, timeout_s: float = 10.0) -> list[str]:
        """The model ids an endpoint lists at ``GET /models``.

        Raises:
            LLMUnavailableError: the endpoint cannot be reached or does not list models.
        """
        import openai

        url = openai_base_url(base_url)
        key = api_key or os.environ.get("OPENAI_API_KEY") or "unused"
        try:
            client = openai.OpenAI(api_key=key, base_url=url, timeout=timeout_s, max_retries=1)
            return [m.id for m in client.models.list()]
        except openai.OpenAIError as exc:
            raise LLMUnavailableError(
                f"LLM endpoint {url}: cannot list its models ({short_error(exc)}); name one with --llm-model"
            ) from None

    def count_tokens(self, text: str) -> int:
        """Exact with a GGUF tokenizer; otherwise one token per 3 bytes, rounded up.

        English text runs about 4 bytes per token in OpenAI's tokenizers, so
        the estimate errs on the side of fitting the context window.
        """
        if self._tokenizer is not None:
            return len(self._tokenizer.tokenize(text.encode("utf-8"), add_bos=False, special=False))
        return math.ceil(len(text.encode("utf-8")) / 3)

    def count_prompt_tokens(self, messages: Messages) -> tuple[int, bool]:
        """Prompt tokens of ``messages`` and whether the count is exact.

        Exact with the GGUF file the server runs (its chat template); otherwise
        ``count_tokens`` of each message plus a few tokens of chat markup each
        (an estimate).
        """
        if self._tokenizer is not None:
            return chat_prompt_tokens(self._tokenizer, messages), True
        return sum(self.count_tokens(m["content"]) + 4 for m in messages) + 3, False

    def chat(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, seed: int = 0, json_mode: bool = False
    ) -> Completion:
        """Send one chat request; the SDK retries transient failures.

        Raises:
            LLMUnavailableError: the endpoint kept failing or could not be reached.
            LLMRequestError: the endpoint refused the request (key, model, input).
        """
        import openai

        api = self._api()
        try:
            # A request keeps its slot through the SDK's waits between retries: an endpoint
            # that is failing gets no more requests in flight than a healthy one.
            with self._slots:
                start = time.perf_counter()
                resp = api.chat.completions.create(
                    model=self.model,
                    messages=[dict(m) for m in messages],
                    max_tokens=max_tokens,
                    temperature=temperature,
                    seed=seed,
                    extra_body=self.extra_body or None,
                    **({"response_format": {"type": "json_object"}} if json_mode else {}),
                )
                latency = time.perf_counter() - start
        except openai.APIStatusError as exc:
            if exc.status_code in _RETRY_STATUS or exc.status_code >= 500:
                raise self._gave_up(exc) from None
            raise LLMRequestError(
                f"LLM endpoint {self.endpoint} refused the request for model {self.model!r} "
                f"(HTTP {exc.status_code}): {short_error(exc)}"
            ) from None
        except openai.APIConnectionError as exc:
            raise self._gave_up(exc) from None
        except openai.OpenAIError as exc:  # a reply the SDK could not read as a completion
            raise LLMReplyError(f"LLM endpoint {self.endpoint}: not a valid completion ({short_error(exc)})") from None
        except ValueError as exc:  # damaged JSON (the SDK parses the body after its retries)
            raise LLMReplyError(f"LLM endpoint {self.endpoint}: reply is not valid JSON ({short_error(exc)})") from None
        text = completion_text(resp, self._where())
        usage = getattr(resp, "usage", None)
        prompt_tokens = reported_count(getattr(usage, "prompt_tokens", None))
        completion_tokens = reported_count(getattr(usage, "completion_tokens", None))
        if prompt_tokens is None:
            prompt_tokens = sum(self.count_tokens(m.get("content", "")) for m in messages)
        if completion_tokens is None:
            completion_tokens = self.count_tokens(text)
        return Completion(text, int(prompt_tokens), int(completion_tokens), latency)

    def _where(self) -> str:
        return f"LLM endpoint {self.endpoint} (model {self.model!r})"

    def _gave_up(self, exc: Exception) -> LLMUnavailableError:
        """The error once the SDK has stopped retrying (``memsim.sim.answer.llm_replies.gave_up``)."""
        return gave_up(exc, self._where(), max_retries=self.max_retries, timeout_s=self.timeout_s)

    def request_settings(self) -> dict[str, Any]:
        """Settings besides the request that shape replies (part of cache keys)."""
        return {"extra_body": dict(self.extra_body)} if self.extra_body else {}

    def describe(self) -> dict[str, Any]:
        """What a run's spec records about this client (never the key)."""
        return {
            "kind": self.name,
            "model": self.model,
            "endpoint": self.endpoint,
            "context_window": self.context_window,
            "tokenizer": self.tokenizer_path.name if self.tokenizer_path else "estimate",
            "max_retries": self.max_retries,
            "timeout_s": self.timeout_s,
            "concurrency": self.concurrency,
            "extra_body": dict(self.extra_body),
        }


def _load_tokenizer(path: Path) -> Any:
    if not path.is_file():
        raise UserError(f"--llm-model-path: GGUF file {path} does not exist")
    Llama = llama_class("counting tokens with a GGUF file needs llama-cpp-python")
    try:
        return Llama(model_path=str(path), vocab_only=True, verbose=False)
    except (ValueError, RuntimeError) as exc:
        raise UserError(f"--llm-model-path: cannot read the tokenizer of {path}: {exc}") from None
