"""Reading an OpenAI-compatible endpoint's reply: its text, its token counts, and the errors that name it.

A reply that is not a valid completion (no choices, no content) raises
``LLMReplyError``; an endpoint that kept failing is an
``LLMUnavailableError`` that says how many attempts were made and the last
error. Every message names the endpoint and the model.
"""

from __future__ import annotations

from typing import Any

from memsim.sim.answer.llm_api import LLMReplyError, LLMUnavailableError

__all__ = ["completion_text", "gave_up", "reported_count", "short_error"]


def completion_text(resp: Any, where: str) -> str:
    """The text of a completion; ``LLMReplyError`` when the reply is not one (no choices, no content).

    ``where`` names the endpoint and the model in the error.
    """
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


def gave_up(exc: Exception, where: str, *, max_retries: int, timeout_s: float) -> LLMUnavailableError:
    """The error once the SDK has stopped retrying: the attempts it made, and the last error (with its cause)."""
    request = getattr(exc, "request", None)
    try:
        # The SDK numbers its retries in this header of every request it sends.
        attempts = int(request.headers["x-stainless-retry-count"]) + 1  # type: ignore[union-attr]
    except (AttributeError, KeyError, TypeError, ValueError):
        attempts = max_retries + 1
    cause = exc.__cause__
    why = f" ({short_error(cause)})" if cause is not None and str(cause) else ""
    return LLMUnavailableError(
        f"{where} failed {attempts} "
        f"time(s) in a row, each attempt with a {timeout_s:g} s deadline; last error: {short_error(exc)}{why}"
    )


def short_error(exc: BaseException | None) -> str:
    """An error on one line: its type and the first 200 characters of its message."""
    if exc is None:
        return "none"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}"


def _short_text(value: Any) -> str:
    text = " ".join(str(value).split())
    return repr(text[:60] + ("..." if len(text) > 60 else ""))


def reported_count(value: Any) -> int | None:
    """A token count a server reported, or None when it reported none or nonsense (negative, not a number)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
