"""An HTTP transport whose every request has one deadline for all of it: connect, first byte, whole body.

httpx's timeouts bound each network operation on its own, so a server that
sends one byte a second (in its headers or its body) is never cut off by
them. ``deadline_transport`` gives every request a deadline, fixed when the
request starts: each connect, write and read may take only the time left
before it (an operation started past it fails at once as a timeout), and
the body is refused past ``max_bytes`` while it is read, before memory
grows. It is an ``httpx`` transport, so a client (the openai SDK's among
them) keeps its own retries: a request cut off is one failed attempt.

The deadline lives with the thread that sends the request, which is the
thread that then reads the body (the synchronous clients do both in one
thread), so connections shared between threads keep their own callers'
deadlines. Only this module imports httpcore; it is imported when a client
is built, never by ``import memsim``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpcore
import httpx

__all__ = ["deadline_transport", "DeadlineTransport", "BodyTooLarge"]

_CALL = threading.local()


class BodyTooLarge(httpx.ReadError):
    """A response body went past the transport's ``max_bytes`` while it was read."""


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """The time a network operation may take: ``timeout``, cut to what is left of the request's deadline."""
    deadline = getattr(_CALL, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error(f"past the request's deadline of {_CALL.seconds:g} s for the whole exchange")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    """A network stream whose every operation ends by the request's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """The synchronous socket backend, its connections wrapped in ``_Stream``."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_tcp(host, port, _left(timeout, httpcore.ConnectTimeout), local_address,
                                               socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, _left(timeout, httpcore.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


@contextlib.contextmanager
def _as_httpx() -> Iterator[None]:
    """httpcore's errors as httpx's of the same name, which clients (and their retries) know."""
    try:
        yield
    except httpcore.TimeoutException as exc:
        raise getattr(httpx, type(exc).__name__, httpx.TimeoutException)(str(exc)) from exc
    except httpcore.NetworkError as exc:
        raise getattr(httpx, type(exc).__name__, httpx.NetworkError)(str(exc)) from exc
    except (httpcore.ProtocolError, httpcore.UnsupportedProtocol, httpcore.ProxyError) as exc:
        raise getattr(httpx, type(exc).__name__, httpx.TransportError)(str(exc)) from exc


class _Body(httpx.SyncByteStream):
    """A response body read by the request's deadline and refused past ``max_bytes``."""

    def __init__(self, response: httpcore.Response, max_bytes: int, deadline: float, seconds: float) -> None:
        self._response = response
        self._max = max_bytes
        self._deadline = deadline
        self._seconds = seconds

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        # The body may be read after the call that sent the request returned: its deadline comes along.
        _CALL.deadline, _CALL.seconds = self._deadline, self._seconds
        with _as_httpx():
            for chunk in self._response.stream:  # type: ignore[union-attr]
                seen += len(chunk)
                if seen > self._max:
                    raise BodyTooLarge(f"response body over {self._max:,} bytes, the most this client reads")
                if time.monotonic() > self._deadline:
                    raise httpx.ReadTimeout(f"response body not complete within the {self._seconds:g} s deadline")
                yield chunk

    def close(self) -> None:
        self._response.close()


class DeadlineTransport(httpx.BaseTransport):
    """An httpx transport: every request ends within ``seconds`` (connect, headers, body) and ``max_bytes``.

    It connects straight to the server. A client that also trusts the
    environment's proxy settings sends proxied URLs through httpx's own
    proxy transport instead, whose timeouts bound each read only.
    """

    def __init__(self, seconds: float, max_bytes: int, *, max_connections: int = 16) -> None:
        """Args:
        seconds: the deadline of each request, from its start to its last byte.
        max_bytes: the largest response body read.
        max_connections: connections kept open at most.
        """
        if not seconds > 0 or max_bytes < 1:
            raise ValueError(f"need seconds > 0 and max_bytes >= 1, got {seconds}, {max_bytes}")
        self.seconds = float(seconds)
        self.max_bytes = int(max_bytes)
        self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(), max_connections=max_connections,
                                             network_backend=_Backend())

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; its deadline starts now and covers the body read later in this thread."""
        deadline = time.monotonic() + self.seconds
        _CALL.deadline, _CALL.seconds = deadline, self.seconds
        req = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=request.url.raw_scheme, host=request.url.raw_host, port=request.url.port,
                             target=request.url.raw_path),
            headers=request.headers.raw,
            content=request.stream,  # type: ignore[arg-type]
            extensions=request.extensions,
        )
        with _as_httpx():
            resp = self._pool.handle_request(req)
        return httpx.Response(status_code=resp.status, headers=resp.headers,
                              stream=_Body(resp, self.max_bytes, deadline, self.seconds), extensions=resp.extensions)

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()


def deadline_transport(seconds: float, max_bytes: int) -> DeadlineTransport:
    """A ``DeadlineTransport`` (see the module docstring)."""
    return DeadlineTransport(seconds, max_bytes)
