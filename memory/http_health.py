"""One health check of the HTTP systems a command will use, before it does anything else.

A memory server that is down is said once, in one line
(``http:url=http://127.0.0.1:9000 is not answering: connection refused``),
before a run folder is created or a conformance check is started, instead
of once per system built (each check, each arm, each retry).
"""

from __future__ import annotations

import errno
from collections.abc import Iterable
from typing import Any

from memsim.core.errors import UserError

__all__ = ["HEALTH_TIMEOUT", "check_answering", "check_http_systems"]

HEALTH_TIMEOUT = 10.0
"""Seconds the health check waits for an answer, at most (less when the system's own ``timeout`` is shorter)."""


def _reason(exc: BaseException) -> str:
    """Why a connection failed, in a few plain words (``connection refused``, ``host not found``, ...)."""
    seen: BaseException | None = exc
    while seen is not None:  # httpx wraps the socket's error: the errno says what happened
        if isinstance(seen, OSError) and seen.errno is not None:
            if seen.errno == errno.ECONNREFUSED:
                return "connection refused"
            if seen.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
                return "host unreachable"
            return seen.strerror or str(seen)
        seen = seen.__cause__ or seen.__context__
    text = str(exc)
    if "refused" in text.lower():
        return "connection refused"
    if "name or service not known" in text.lower() or "nodename nor servname" in text.lower():
        return "host not found"
    return text or type(exc).__name__


def check_answering(url: str, *, timeout: float = HEALTH_TIMEOUT) -> None:
    """Ask ``GET {url}/v1/health`` once; a ``UserError`` in one line when the server does not answer as memsim's.

    Raises:
        UserError: ``http:url=URL is not answering: REASON`` (refused, unreachable, no answer in time), or
            ``http:url=URL answers, but not as a memsim memory server: ...`` (an error status, not JSON,
            another protocol).
    """
    import httpx

    from memsim.memory.http import PROTOCOL, checked_url

    url = checked_url(url)  # a malformed URL (a port that is no number) is one line, not a traceback
    where = f"http:url={url}"
    try:
        resp = httpx.get(f"{url}/v1/health", timeout=timeout, trust_env=False)
    except httpx.InvalidURL as exc:
        raise UserError(f"{where}: not a valid URL ({exc})") from None
    except httpx.TimeoutException:
        raise UserError(f"{where} is not answering: no answer within {timeout:g} s") from None
    except httpx.TransportError as exc:
        raise UserError(f"{where} is not answering: {_reason(exc)}") from None
    if resp.status_code >= 400:
        raise UserError(f"{where} answers, but not as a memsim memory server: GET /v1/health gave HTTP {resp.status_code}")
    try:
        protocol = resp.json().get("protocol")
    except (ValueError, AttributeError):
        raise UserError(f"{where} answers, but not as a memsim memory server: /v1/health is not a JSON object") from None
    if protocol != PROTOCOL:
        raise UserError(f"{where} answers, but speaks {protocol!r}; memsim speaks {PROTOCOL!r}")


def check_http_systems(systems: Iterable[Any]) -> None:
    """``check_answering`` for every ``http`` system among ``systems`` (``SystemSpec`` or spec entries), each URL once.

    Raises:
        UserError: the first URL that does not answer.
    """
    seen: set[str] = set()
    for s in systems:
        if getattr(s, "name", None) != "http":
            continue
        args = dict(getattr(s, "args", {}) or {})
        url = str(args.get("url", "")).rstrip("/")
        if not url or url in seen:
            continue  # a missing url is the system's own argument error, said where it is built
        seen.add(url)
        try:
            limit = min(HEALTH_TIMEOUT, float(args.get("timeout", HEALTH_TIMEOUT)))
        except (TypeError, ValueError):
            limit = HEALTH_TIMEOUT
        check_answering(url, timeout=limit if limit > 0 else HEALTH_TIMEOUT)
