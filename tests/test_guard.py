"""In-process systems held to a deadline and to the protocol (``memory.guard.GuardedSystem``).

A plugin that exits, raises ``GeneratorExit``, sleeps forever or returns
nonsense becomes one ``SystemCallFailed`` naming the system, the method and
the error; played by the engine beside a well-behaved system, it is marked
failed and the other system's rows are all there.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from memsim.memory.base import MemoryStats, Retrieved, Turn
from memsim.memory.guard import GuardedSystem, SystemCallFailed
from tests.conftest import T0


class Rude:
    """A system whose ``retrieve`` and ``stats`` do what ``how`` says; everything else is quiet."""

    def __init__(self, how: str = "fine") -> None:
        self.how = how
        self.thread = threading.get_ident()
        self.kept: list[Turn] = []

    def ingest(self, turns: Any, *, user_id: str, now: Any) -> None:
        self.kept += list(turns)

    def retrieve(self, query: str, *, user_id: str, now: Any, k: int) -> Any:
        behaviours: dict[str, Callable[[], Any]] = {
            "fine": lambda: [Retrieved(t.turn_id, t.text, 1.0, t.created_at, (t.turn_id,)) for t in self.kept][:k],
            "exit": lambda: sys.exit(0),
            "os_exit": lambda: os._exit(0),
            "generator_exit": lambda: (_ for _ in ()).throw(GeneratorExit()),
            "base": lambda: (_ for _ in ()).throw(BaseException("deep trouble")),
            "sleep": lambda: time.sleep(3600),
            "none": lambda: None,
            "million": lambda: [Retrieved(f"m{i}", "x", 1.0, T0, ()) for i in range(10**5)],
        }
        return behaviours.get(self.how, behaviours["fine"])()

    probe = retrieve

    def feedback(self, *a: object, **kw: object) -> None:
        pass

    def maintain(self, *, now: Any) -> None:
        pass

    def forget(self, turn_ids: Any, *, user_id: str, now: Any) -> None:
        pass

    def stats(self) -> Any:
        return {"stats_none": None, "stats_negative": MemoryStats(items=-3)}.get(self.how, MemoryStats(items=len(self.kept)))


@pytest.mark.parametrize("how, says", [
    ("exit", r"system rude: retrieve raised SystemExit\(0\)"),
    ("os_exit", r"system rude: retrieve raised ExitRefused\(os._exit\(0\) called\)"),
    ("generator_exit", "system rude: retrieve raised GeneratorExit"),
    ("base", r"system rude: retrieve raised BaseException\(deep trouble\)"),
    ("none", "system rude: retrieve returned NoneType None"),
    ("million", "system rude: retrieve returned 100,000 results for k=5"),
])
def test_a_rude_retrieve_is_one_failure_naming_system_and_method(how: str, says: str) -> None:
    system = GuardedSystem.build(lambda: Rude(how), label="rude", deadline_s=30)
    with pytest.raises(SystemCallFailed, match=says) as err:
        system.retrieve("q", user_id="u", now=T0, k=5)
    assert "\n" not in str(err.value) and len(str(err.value)) < 400


@pytest.mark.parametrize("how, says", [
    ("stats_none", "stats returned NoneType None, not a MemoryStats"),
    ("stats_negative", "stats returned items=-3, not a non-negative integer"),
])
def test_bad_stats_are_one_failure(how: str, says: str) -> None:
    with pytest.raises(SystemCallFailed, match=says):
        GuardedSystem.build(lambda: Rude(how), label="rude", deadline_s=30).stats()


def test_a_call_that_hangs_is_cut_at_its_deadline_and_the_system_is_spent() -> None:
    system = GuardedSystem.build(lambda: Rude("sleep"), label="sleepy", deadline_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(SystemCallFailed, match=r"system sleepy: retrieve took longer than its 0.5 s deadline"):
        system.retrieve("q", user_id="u", now=T0, k=5)
    assert time.monotonic() - t0 < 3
    with pytest.raises(SystemCallFailed, match=r"stats not called: an earlier retrieve \(deadline 0.5 s\) never returned"):
        system.stats()


def test_a_constructor_that_raises_is_one_failure() -> None:
    def broken() -> Rude:
        raise ValueError("no config")

    with pytest.raises(SystemCallFailed, match=r"system broken: building it raised ValueError\(no config\)"):
        GuardedSystem.build(broken, label="broken")


def test_a_well_behaved_system_answers_as_unwrapped_on_its_own_thread() -> None:
    system = GuardedSystem.build(lambda: Rude("fine"), label="fine")
    turn = Turn("t1", "u", "user", "I live in Lyon", T0, "s")
    system.ingest([turn], user_id="u", now=T0)
    got = system.retrieve("Lyon", user_id="u", now=T0 + timedelta(hours=1), k=5)
    assert [r.memory_id for r in got] == ["t1"] and system.stats().items == 1
    assert system.inner.thread != threading.get_ident()  # built and called on the guard's thread
    assert system.how == "fine"  # other attributes are the inner system's


def test_the_engine_marks_a_guarded_rude_system_failed_and_plays_the_others() -> None:
    from tests.test_erasure import LeakyMemory, _play

    harness, probes, _ = _play({"clean": LeakyMemory(), "rude": GuardedSystem(Rude("exit"), label="rude")})
    failed = {s.label: s.failed for s in harness.systems}
    assert failed["clean"] is None
    # The deletion's audit probes first: the failure names that call, and the run goes on without the system.
    assert failed["rude"] is not None and "system rude: probe raised SystemExit(0)" in failed["rude"]
    assert set(probes.filter(probes["system"] == "clean")["question_id"]) == {"q1"}
