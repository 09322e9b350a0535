"""In-process systems held to the contract HTTP systems are held to: a deadline per call, any exception a failure.

``GuardedSystem`` wraps a memory system built in this process (a registered
one or a plugin). Every call runs on the wrapper's own worker thread, built
there too (``GuardedSystem.build``), so that a system keeps one thread for
its whole life; the caller waits at most ``deadline_s`` for it:

- a call past its deadline raises ``SystemCallFailed`` and the wrapper is
  spent: the call may never return (a plugin sleeping forever), so every
  later call fails at once, naming the one that hung;
- anything the system raises, ``BaseException`` subclasses included
  (``sys.exit``, ``GeneratorExit``), becomes ``SystemCallFailed`` naming
  the system, the method and the error, never a traceback and never the
  end of the run (``KeyboardInterrupt`` never reaches a worker thread);
- what ``retrieve``, ``probe`` and ``stats`` return is checked
  (``memsim.memory.checks.check_results``, ``check_stats``).

``SystemCallFailed`` is an ``Exception``, so a caller that marks a system
failed on any exception (the engine does) marks it failed with this
message. ``os._exit`` called from a system's code while the wrapper waits
for it raises ``ExitRefused`` there instead of ending memsim's process (a
plugin that "exits 0" would otherwise end a run with no figures and status
0); native code that ends the process is caught only by running systems in
worker processes. Attributes the wrapper does not define
(``held_texts``, ``learns``, a system's own reports) are the inner
system's.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Any

from memsim.memory.base import MemoryStats, MemorySystem, Retrieved, Turn
from memsim.memory.checks import ContractError, check_results, check_stats

__all__ = ["GuardedSystem", "SystemCallFailed", "ExitRefused", "refusing_exit", "DEFAULT_DEADLINE_S"]

DEFAULT_DEADLINE_S = 600.0
"""Seconds one call may take by default: generous (a system may call an LLM), yet a hang ends."""


class SystemCallFailed(Exception):
    """A call to an in-process system raised, hung past its deadline or returned what the protocol forbids."""


class ExitRefused(BaseException):
    """Raised in place of ``os._exit`` inside a system's call: a system may not end memsim's process."""


def _refused_exit(code: int = 0) -> None:
    raise ExitRefused(f"os._exit({code}) called")


@contextlib.contextmanager
def refusing_exit() -> Any:
    """``os._exit`` raises ``ExitRefused`` while the block runs (nested blocks restore what was there)."""
    before = os._exit
    os._exit = _refused_exit
    try:
        yield
    finally:
        os._exit = before


def _said(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}({text[:200]})" if text else type(exc).__name__


class _Worker:
    """One daemon thread running submitted calls in order (a daemon: a call that hangs cannot block exit)."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event]] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def _loop(self) -> None:
        while True:
            fn, box, done = self._jobs.get()
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - sys.exit and GeneratorExit too: the caller decides
                box["error"] = exc
            finally:
                done.set()

    def run(self, fn: Callable[[], Any], seconds: float) -> tuple[bool, dict[str, Any]]:
        """(finished in time, {"value": ...} or {"error": ...})."""
        box: dict[str, Any] = {}
        done = threading.Event()
        self._jobs.put((fn, box, done))
        return done.wait(seconds), box


class GuardedSystem:
    """A memory system whose calls have a deadline, whose failures of any kind are ``SystemCallFailed``,
    and whose return values are checked (see the module docstring)."""

    def __init__(self, system: MemorySystem, *, label: str, deadline_s: float = DEFAULT_DEADLINE_S,
                 worker: _Worker | None = None) -> None:
        """Wrap a system already built (it is then called from the wrapper's thread, not the one that built it).

        Args:
            system: the system.
            label: how messages name it (the run's label).
            deadline_s: seconds each call may take.
            worker: the thread to call it on (``build`` passes the one it built the system on).
        """
        if not deadline_s > 0:
            raise ValueError(f"deadline_s must be > 0, got {deadline_s}")
        self.inner = system
        self.label = label
        self.deadline_s = float(deadline_s)
        self._worker = worker or _Worker(f"memsim-system-{label}")
        self._hung: str | None = None

    @classmethod
    def build(cls, factory: Callable[[], MemorySystem], *, label: str,
              deadline_s: float = DEFAULT_DEADLINE_S) -> GuardedSystem:
        """Build a system with ``factory`` on a worker thread of its own, held to the deadline like every call.

        Raises:
            SystemCallFailed: the constructor raised anything or took past the deadline.
        """
        worker = _Worker(f"memsim-system-{label}")
        with refusing_exit():
            finished, box = worker.run(factory, deadline_s)
        if not finished:
            raise SystemCallFailed(f"system {label}: building it took longer than its {deadline_s:g} s deadline")
        if "error" in box:
            raise SystemCallFailed(f"system {label}: building it raised {_said(box['error'])}") from None
        return cls(box["value"], label=label, deadline_s=deadline_s, worker=worker)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names this class does not define: optional extras of the inner system.
        return getattr(self.inner, name)

    def _call(self, method: str, fn: Callable[[], Any]) -> Any:
        if self._hung is not None:
            raise SystemCallFailed(f"system {self.label}: {method} not called: an earlier {self._hung} never returned")
        with refusing_exit():
            finished, box = self._worker.run(fn, self.deadline_s)
        if not finished:
            self._hung = f"{method} (deadline {self.deadline_s:g} s)"
            raise SystemCallFailed(f"system {self.label}: {method} took longer than its {self.deadline_s:g} s deadline")
        if "error" in box:
            raise SystemCallFailed(f"system {self.label}: {method} raised {_said(box['error'])}") from None
        return box["value"]

    def _checked(self, check: Callable[[Any], Any], value: Any) -> Any:
        try:
            return check(value)
        except ContractError as exc:
            raise SystemCallFailed(f"system {self.label}: {exc}") from None

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """The inner ``ingest``, on the worker thread, by the deadline."""
        self._call("ingest", lambda: self.inner.ingest(turns, user_id=user_id, now=now))

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The inner ``retrieve``, by the deadline; its results checked (at most ``k``, of the protocol's types)."""
        got = self._call("retrieve", lambda: self.inner.retrieve(query, user_id=user_id, now=now, k=k))
        return self._checked(lambda g: check_results(g, k=k, method="retrieve", now=now), got)

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The inner ``probe`` (read-only retrieval), by the deadline; its results checked."""
        got = self._call("probe", lambda: self.inner.probe(query, user_id=user_id, now=now, k=k))
        return self._checked(lambda g: check_results(g, k=k, method="probe", now=now), got)

    def feedback(self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str,
                 now: datetime) -> None:
        """The inner ``feedback``, by the deadline."""
        self._call("feedback", lambda: self.inner.feedback(question_id, retrieved, correct, user_id=user_id, now=now))

    def maintain(self, *, now: datetime) -> None:
        """The inner ``maintain``, by the deadline."""
        self._call("maintain", lambda: self.inner.maintain(now=now))

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """The inner ``forget``, by the deadline."""
        self._call("forget", lambda: self.inner.forget(turn_ids, user_id=user_id, now=now))

    def stats(self) -> MemoryStats:
        """The inner ``stats``, by the deadline; a ``MemoryStats`` of non-negative integers."""
        got = self._call("stats", lambda: self.inner.stats())
        return self._checked(check_stats, got)
