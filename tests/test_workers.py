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
from memsim.sim.core.errors import UserError
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
