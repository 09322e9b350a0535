"""The system guard without a thread hop: calls run on the caller's thread, the deadline is an interval timer.

``memsim.memory.guard.GuardedSystem`` runs every call of an in-process
system on a thread of its own and waits for it with a deadline. A run plays
about a hundred thousand calls, and each hop between threads costs about a
tenth of a millisecond, so a run on the main thread of its process uses
``InlineGuardedSystem`` instead: the same contract (a deadline per call,
anything raised a ``SystemCallFailed`` naming the system, the method and the
error, return values checked), with the deadline kept by ``SIGALRM``. The
timer interrupts a call that hangs in Python code or in a sleep; a call stuck
inside native code that never returns to Python is not interrupted (the
thread-hop guard, used off the main thread, ends such a wait too).
``inline_possible`` says whether this process can use it.

A system can still defeat the timer: catch the interruption in a loop,
cancel the timer or claim ``SIGALRM``. ``watch`` starts a last resort, a
watchdog thread that ends the process (exit status 3, one line on standard
error naming the system and the call) once a call has run twice its
deadline (at least five seconds past it): a hang becomes a failure. In a
worker process it also ends the worker once the run's process is gone.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from memsim.memory.base import MemorySystem
from memsim.memory.guard import GuardedSystem, SystemCallFailed, refusing_exit

__all__ = ["InlineGuardedSystem", "inline_possible", "watch", "OVERRUN_EXIT"]

OVERRUN_EXIT = 3
"""The exit status of a process the watchdog ends."""

_END = os._exit  # as imported: ``refusing_exit`` swaps ``os._exit`` while a system's call runs
_CALL: list[tuple[str, str, float, float] | None] = [None]
"""The call being guarded on this process's main thread: (label, method, started, deadline), or None."""
_WATCHING: list[int | None] = []


def _overdue(started: float, deadline: float, now: float) -> bool:
    return now - started > deadline + max(5.0, deadline)


def _watch(parent: int | None, period: float) -> None:
    while True:
        time.sleep(period)
        if parent is not None and os.getppid() != parent:
            _END(1)  # the run's process is gone: nobody will read this worker's rows
        call = _CALL[0]
        if call is not None and _overdue(call[2], call[3], time.monotonic()):
            label, method, started, deadline = call
            sys.stderr.write(f"memsim: system {label}: {method} has run {time.monotonic() - started:.0f} s, past its "
                             f"{deadline:g} s deadline, and kept running when interrupted; ending this process "
                             f"(exit {OVERRUN_EXIT})\n")
            sys.stderr.flush()
            _END(OVERRUN_EXIT)


def watch(*, parent_pid: int | None = None, period: float = 0.5) -> None:
    """Start this process's watchdog (once; later calls do nothing): see the module docstring.

    Args:
        parent_pid: in a worker, the run's process: the worker ends when it is gone.
        period: seconds between looks.
    """
    if _WATCHING:
        return
    _WATCHING.append(parent_pid)
    threading.Thread(target=_watch, args=(parent_pid, period), name="memsim-watchdog", daemon=True).start()


def _guarded(label: str, method: str, fn: Callable[[], Any], seconds: float) -> Any:
    """``_timed`` with the call recorded for the watchdog."""
    _CALL[0] = (label, method, time.monotonic(), seconds)
    try:
        return _timed(fn, seconds)
    finally:
        _CALL[0] = None


class _Deadline(BaseException):
    """Raised into a call by the interval timer (a ``BaseException``: a system's ``except Exception`` keeps it)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Deadline()


def inline_possible() -> bool:
    """Whether calls can be guarded inline here: the main thread, an interval timer, ``SIGALRM`` unclaimed."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return False
    return signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)


def _said(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}({text[:200]})" if text else type(exc).__name__


def _timed(fn: Callable[[], Any], seconds: float) -> Any:
    """``fn()`` with ``_Deadline`` raised into it after ``seconds``; the timer and handler are restored after."""
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        with refusing_exit():
            return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class InlineGuardedSystem(GuardedSystem):
    """``GuardedSystem``'s contract with calls on the calling thread (see the module docstring)."""

    def __init__(self, system: MemorySystem, *, label: str, deadline_s: float) -> None:
        """Wrap a system built on this thread.

        Args:
            system: the system.
            label: how messages name it (the run's label).
            deadline_s: seconds each call may take.
        """
        if not deadline_s > 0:
            raise ValueError(f"deadline_s must be > 0, got {deadline_s}")
        self.inner = system
        self.label = label
        self.deadline_s = float(deadline_s)
        self._hung: str | None = None

    @classmethod
    def build(cls, factory: Callable[[], MemorySystem], *, label: str, deadline_s: float = 600.0) -> InlineGuardedSystem:
        """Build a system with ``factory`` on this thread, held to the deadline like every call.

        Raises:
            SystemCallFailed: the constructor raised anything or took past the deadline.
        """
        watch()
        try:
            system = _guarded(label, "building it", factory, deadline_s)
        except _Deadline:
            raise SystemCallFailed(f"system {label}: building it took longer than its {deadline_s:g} s deadline") from None
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - sys.exit and GeneratorExit in a constructor too
            raise SystemCallFailed(f"system {label}: building it raised {_said(exc)}") from None
        return cls(system, label=label, deadline_s=deadline_s)

    def _call(self, method: str, fn: Callable[[], Any]) -> Any:
        if self._hung is not None:
            raise SystemCallFailed(f"system {self.label}: {method} not called: an earlier {self._hung} never returned")
        try:
            return _guarded(self.label, method, fn, self.deadline_s)
        except _Deadline:
            # The call was cut off in the middle: what the system holds is unknown, so it is spent.
            self._hung = f"{method} (deadline {self.deadline_s:g} s)"
            raise SystemCallFailed(
                f"system {self.label}: {method} took longer than its {self.deadline_s:g} s deadline") from None
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - sys.exit and GeneratorExit too: the system failed, not the run
            raise SystemCallFailed(f"system {self.label}: {method} raised {_said(exc)}") from None
