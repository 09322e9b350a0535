"""A longitudinal run's units on worker processes and on Dask: the same bytes as one process, and a dead worker."""

from __future__ import annotations

import functools
import json
import os
import signal
from pathlib import Path

import polars as pl
import pytest

from memsim.analysis.pipeline import execute, make_spec
from memsim.memory.embed import Embedder
from memsim.memory.naive import NaiveMemory
from memsim.memory.registry import SystemSpec
from memsim.core.errors import UserError
from memsim.sim.workers import Workers, parse_scheduler

PARENT_PID = "MEMSIM_TEST_WORKERS_PARENT"


class DiesOnce(NaiveMemory):
    """Naive RAG whose worker process ends at its first ingest while ``marker`` exists: killed (SIGKILL), or
    ``os._exit(0)`` (``how="exit"``)."""

    def __init__(self, *, resources, marker: str = "", how: str = "kill") -> None:
        super().__init__(resources=resources)
        self.marker = marker
        self.how = how

    def ingest(self, turns, *, user_id, now) -> None:
        if self.marker and os.path.exists(self.marker) and str(os.getpid()) != os.environ.get(PARENT_PID):
            os.unlink(self.marker)
            if self.how == "exit":
                os._exit(0)
            os.kill(os.getpid(), signal.SIGKILL)
        super().ingest(turns, user_id=user_id, now=now)


def _spec(*systems: SystemSpec):
    return make_spec("longitudinal", "life", {"users": 4, "months": 2}, list(systems), seed=0, n_boot=200)


def _rows(out: Path, name: str) -> pl.DataFrame:
    frame = pl.read_parquet(out / name)
    return frame.select([c for c in frame.columns if not c.endswith("_ms")])  # wall-clock measurements


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embedding-cache")


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> Path:
    out = tmp_path_factory.mktemp("serial") / "run"
    outcome = execute(_spec(SystemSpec("naive"), SystemSpec("neuroplastic")), out_dir=out,
                      embedder_factory=functools.partial(Embedder, cache_dir=cache), workers=0)
    assert outcome.result.info["units"]["workers"] == {"mode": "serial"}
    assert outcome.result.info["units"]["count"] == 6  # naive, neuroplastic and its twin, placebo, ~false, ~true
    return out


@pytest.mark.slow
@pytest.mark.parametrize("workers, scheduler", [(1, None), (2, None), (3, None), (2, "local")])
def test_any_worker_count_and_dask_give_the_bytes_of_one_process(serial: Path, cache: Path, tmp_path: Path,
                                                                   workers: int, scheduler: str | None) -> None:
    out = tmp_path / "run"
    outcome = execute(_spec(SystemSpec("naive"), SystemSpec("neuroplastic")), out_dir=out,
                      embedder_factory=functools.partial(Embedder, cache_dir=cache), workers=workers,
                      scheduler=scheduler)
    how = outcome.result.info["units"]["workers"]
    assert how["mode"] == ("dask" if scheduler else "processes") and how["processes"] == workers
    where = {t["where"] for t in outcome.result.info["units"]["timing"].values()}
    assert all(w.startswith("pid ") and w != f"pid {os.getpid()}" for w in where) and len(where) >= min(workers, 2)
    assert (out / "metrics.json").read_bytes() == (serial / "metrics.json").read_bytes()
    for name in ("probes.parquet", "timeline.parquet"):
        assert _rows(out, name).equals(_rows(serial, name)), name
    # The placebo read its system's committed rows: it is dosed as in the serial run.
    info = json.loads((out / "run.json").read_text())
    assert info["feedback_told"] == json.loads((serial / "run.json").read_text())["feedback_told"]


def test_a_killed_worker_fails_the_run_naming_its_unit_and_the_rerun_resumes_to_the_same_bytes(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "kill-me"
    spec = _spec(SystemSpec("naive"), SystemSpec(f"{__name__}:DiesOnce", {"marker": str(marker)}))
    factory = functools.partial(Embedder, cache_dir=cache)
    monkeypatch.setenv(PARENT_PID, str(os.getpid()))
    execute(spec, out_dir=tmp_path / "whole", embedder_factory=factory, workers=0)
    marker.write_text("")
    out = tmp_path / "killed"
    with pytest.raises(UserError) as caught:
        execute(spec, out_dir=out, embedder_factory=factory, workers=2)
    message = str(caught.value)
    assert "worker process died" in message and "DiesOnce" in message and "a0-0001" in message
    assert "rerun the same command to resume" in message
    assert caught.value.exit_code == 1  # an incomplete run, like a failed system: not bad input (exit 2)
    assert not marker.exists() and not (out / "metrics.json").exists()
    resumed = execute(spec, out_dir=out, embedder_factory=factory, workers=2)
    assert resumed.result.info["units"]["played"] >= 1
    assert (out / "metrics.json").read_bytes() == (tmp_path / "whole" / "metrics.json").read_bytes()
    for name in ("probes.parquet", "timeline.parquet"):
        assert _rows(out, name).equals(_rows(tmp_path / "whole", name)), name


def test_a_system_that_calls_os_exit_in_a_worker_fails_as_a_system_and_the_worker_lives(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``os._exit(0)`` inside a system's call is refused: the system is failed with the call named, the run
    goes on to its end, and it is not complete (it never exits 0 with no figures)."""
    marker = tmp_path / "exit"
    marker.write_text("")
    spec = _spec(SystemSpec(f"{__name__}:DiesOnce", {"marker": str(marker), "how": "exit"}))
    monkeypatch.setenv(PARENT_PID, str(os.getpid()))
    result = execute(spec, out_dir=tmp_path / "run", embedder_factory=functools.partial(Embedder, cache_dir=cache),
                     workers=1).result
    assert not marker.exists()
    (why,) = result.info["failed_systems"].values()
    assert "ingest raised ExitRefused(os._exit(0) called)" in why and result.info["complete"] is False


class Stubborn(NaiveMemory):
    """Naive RAG whose retrieve sleeps and swallows every interruption, its deadline's included."""

    def retrieve(self, query, *, user_id, now, k):
        import time

        while True:
            try:
                time.sleep(60)
            except BaseException:  # noqa: BLE001, S110 - the hostile part
                pass


def test_a_call_that_defeats_its_deadline_ends_its_worker_and_fails_the_run(cache: Path, tmp_path: Path,
                                                                           capfd: pytest.CaptureFixture[str]) -> None:
    """The interval timer interrupts the call and the system swallows it: the worker's watchdog ends the
    worker at twice the deadline (at least five seconds past it), and the run fails naming the unit."""
    import time

    spec = make_spec("longitudinal", "life", {"users": 2, "months": 1}, [SystemSpec(f"{__name__}:Stubborn")], seed=0,
                     n_boot=100, call_deadline_s=1.0)
    t0 = time.perf_counter()
    with pytest.raises(UserError, match=r"worker process died .* unit a0-0000 \(.*Stubborn"):
        execute(spec, out_dir=tmp_path / "run", embedder_factory=functools.partial(Embedder, cache_dir=cache),
                workers=1)
    assert time.perf_counter() - t0 < 120
    err = capfd.readouterr().err
    assert "Stubborn: retrieve has run" in err, err[-2000:]
    assert "past its 1 s deadline, and kept running when interrupted; ending this process (exit 3)" in err


def test_a_run_given_ready_made_parts_plays_here_and_says_why() -> None:
    assert Workers(count=4).mode(6) == "serial"  # no recipe: nothing to rebuild a run in a worker from
    assert "played here" in Workers(count=4).describe(6)["note"]


@pytest.mark.parametrize("text, want", [("local", "local"), ("dask://10.0.0.2:8786", "tcp://10.0.0.2:8786"),
                                         ("tcp://h:1", "tcp://h:1"), (None, None)])
def test_schedulers_parse(text, want) -> None:
    assert parse_scheduler(text) == want


@pytest.mark.parametrize("text", ["dask://nohost", "http://h:1", "cluster"])
def test_a_bad_scheduler_is_one_clear_error(text: str) -> None:
    with pytest.raises(UserError, match="--scheduler"):
        parse_scheduler(text)


def test_a_negative_worker_count_is_refused() -> None:
    with pytest.raises(UserError, match="--workers -1"):
        Workers(count=-1)


@pytest.mark.slow
def test_entities_are_recognised_once_up_front_and_deleted_turns_purged_after_the_play(tmp_path: Path) -> None:
    spec = make_spec("longitudinal", "life", {"users": 3, "months": 1, "deletion_rate": 3.0},
                     [SystemSpec("multisignal"), SystemSpec("neuroplastic")], seed=0, n_boot=100)
    cache = tmp_path / "cache"
    runs = []
    for name in ("cold", "warm"):
        execute(spec, out_dir=tmp_path / name, embedder_factory=functools.partial(Embedder, cache_dir=cache), workers=2)
        runs.append(json.loads((tmp_path / name / "run.json").read_text()))
    cold, warm = (r["entities"] for r in runs)
    assert cold["texts"] == warm["texts"] == cold["recognised"] > 0
    erased = runs[1]["erasure"]
    assert erased and all(e["held_after"]["entity_cache"] == 0 for e in erased)
    assert sum(e["purged"]["entity_cache"] for e in erased) > 0
    # The warm run recognises only what the cold run's purge took away: the deleted turns.
    assert 0 < warm["recognised"] <= sum(e["purged"]["entity_cache"] for e in runs[0]["erasure"])
    assert (tmp_path / "cold" / "metrics.json").read_bytes() == (tmp_path / "warm" / "metrics.json").read_bytes()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads children from /proc (Linux)")
def test_a_worker_ends_when_the_run_s_process_is_killed(cache: Path, tmp_path: Path) -> None:
    """SIGKILL to the run's process leaves no worker behind: the worker's watchdog sees its parent gone."""
    import subprocess
    import sys
    import time

    script = (
        "import functools, sys; sys.path.insert(0, %r)\n"
        "from memsim.analysis.pipeline import execute, make_spec\n"
        "from memsim.memory.embed import Embedder\n"
        "from memsim.memory.registry import SystemSpec\n"
        "if __name__ == '__main__':\n"
        "    spec = make_spec('longitudinal', 'life', {'users': 2, 'months': 1}, [SystemSpec('test_workers:Stubborn')],\n"
        "                     seed=0, n_boot=100, call_deadline_s=600.0)\n"
        "    execute(spec, out_dir=%r, embedder_factory=functools.partial(Embedder, cache_dir=%r), workers=1)\n"
    ) % (str(Path(__file__).parent), str(tmp_path / "run"), str(cache))
    (tmp_path / "go.py").write_text(script)
    parent = subprocess.Popen([sys.executable, str(tmp_path / "go.py")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    children: list[int] = []
    try:
        for _ in range(240):  # until a worker is playing (it sleeps in Stubborn.retrieve)
            time.sleep(0.5)
            listed = Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split()
            children = [int(c) for c in listed if _playing(int(c))]
            if children:
                break
        assert children, "no worker started"
        time.sleep(8)  # past the worker's start: it is building the world or playing
        parent.kill()
        parent.wait()
        time.sleep(5)
        assert not [c for c in children if Path(f"/proc/{c}").exists() and _state(c) != "Z"]
    finally:
        parent.kill()
        for c in children:
            try:
                os.kill(c, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _playing(pid: int) -> bool:
    try:
        return b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()  # a worker of the pool
    except OSError:
        return False
