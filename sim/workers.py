"""Where a longitudinal run's units are played: here, one after another; in worker processes; or on Dask.

A run is split into units (``memsim.sim.runner.plan_units``: one per arm, the arms of HTTP
systems together). Each unit plays on a clock of its own with its arms rebuilt from the rng
states their builds began with, so a unit's rows are the same wherever it is played, and the
run's one writer commits them in key order: the run folder is byte-identical whatever the
worker count (timing columns, ``*_ms``, are wall-clock measurements and differ run to run).

A worker rebuilds what every unit needs (the scenario's episodes, the scorers, the reader and
judges, the shared embedder) once per process from a *recipe*: a picklable callable made by
``memsim.analysis.pipeline`` from the spec. The vectors the run embedded before the play are
read from the shared disk cache (SQLite, safe across processes), not sent to each worker.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import multiprocessing
import os
import pickle
import queue as queue_mod
import resource
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from memsim.core.errors import UserError, WorkerDied
from memsim.sim.units import Clock, Unit, UnitContext, UnitOutcome, play_serial, unit_steps

__all__ = ["Workers", "WorkerRecipe", "default_worker_count", "parse_scheduler", "recipe_token"]

_ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "TOKENIZERS_PARALLELISM": "false"}
"""Set around a pool's life: each worker uses one core, so N workers use N cores, not N x N threads."""

_POLL_S = 0.25

Event = UnitOutcome | tuple[str, int]
"""What ``Workers.play`` yields: a unit's outcome, or ``(unit key, simulated day done)``."""


def default_worker_count() -> int:
    """As many workers as this process may use cores."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_scheduler(value: str | None) -> str | None:
    """``local`` (a Dask ``LocalCluster`` here), ``dask://HOST:PORT`` or ``tcp://HOST:PORT`` (a running Dask
    scheduler), or None (worker processes on this machine).

    Raises:
        UserError: anything else.
    """
    if value is None or value == "":
        return None
    if value == "local":
        return value
    for prefix in ("dask://", "tcp://"):
        if value.startswith(prefix):
            where = value[len(prefix):]
            host, _, port = where.rpartition(":")
            if host and port.isdigit():
                return "tcp://" + where
    raise UserError(f"--scheduler {value!r}: give local (a Dask LocalCluster on this machine) or dask://HOST:PORT")


@dataclass(frozen=True)
class WorkerRecipe:
    """What a worker needs to rebuild a run's context: a picklable callable and a token naming what it makes.

    ``make()`` returns ``(spec, episodes, resources, scorers, answer)``; a worker calls it once per
    run (memoised by ``token``).
    """

    make: Callable[[], tuple[Any, Sequence[Any], Any, list[Any], Any]]
    token: str


@dataclass(frozen=True)
class Workers:
    """How many units play at once, and where.

    Args:
        count: worker processes; 0 plays every unit in the run's own process, one after another. One
            worker process is not the same as none: a system that ends its process (``os._exit``, a
            crash in native code, the kernel's out-of-memory killer) then fails the run with a message
            instead of ending it.
        scheduler: None (processes on this machine), ``local`` (a Dask ``LocalCluster`` of ``count``
            workers) or ``tcp://HOST:PORT`` (a running Dask scheduler; ``count`` is ignored).
        recipe: how a worker rebuilds the run (``WorkerRecipe``); without one, units play here.
    """

    count: int = 0
    scheduler: str | None = None
    recipe: WorkerRecipe | None = None
    why_here: str = "the run's parts were given as objects, not as a spec"
    """Why units play in the run's process though workers were asked for (no recipe), for ``run.json``."""

    def __post_init__(self) -> None:
        if self.count < 0:
            raise UserError(f"--workers {self.count}: give 1 or more (0: in the run's own process)")

    def mode(self, units: int) -> str:
        """``serial``, ``processes`` or ``dask`` for a run with ``units`` units to play."""
        if self.recipe is None or units == 0:
            return "serial"
        if self.scheduler is not None:
            return "dask"
        return "processes" if self.count > 0 else "serial"

    def play(
        self, ctx: UnitContext, units: Sequence[Unit],
        doses_for: Callable[[Unit], Mapping[tuple[str, str, int], Sequence[Any]] | None],
    ) -> Iterator[Event]:
        """Play ``units`` here or on the workers, yielding progress and each unit's outcome as it ends.

        The caller commits each outcome before asking for the next event: a unit that ``needs``
        another (a placebo dosed from its system's rows) starts only after that one is committed,
        and ``doses_for`` reads its doses then.

        Raises:
            UserError: a unit failed or a worker died; every unit that ended was yielded first.
        """
        mode = self.mode(len(units))
        if mode == "serial":
            return play_serial(ctx, units, doses_for)
        return _parallel(ctx, units, self, doses_for, mode)

    def describe(self, units: int) -> dict[str, Any]:
        """What ``run.json`` records of how the units were played."""
        mode = self.mode(units)
        out: dict[str, Any] = {"mode": mode}
        if mode == "processes":
            out["processes"] = min(self.count, units)
        elif mode == "dask":
            out["scheduler"] = self.scheduler
            if self.scheduler == "local":
                out["processes"] = min(max(self.count, 1), units)
        elif self.recipe is None and self.count > 0:
            out["note"] = f"played here: {self.why_here}"
        return out


# --------------------------------------------------------------------------- in a worker

_CONTEXTS: dict[str, tuple[Any, list[Any], Any, list[Any], Any]] = {}
_PROGRESS: Any = None


def _one_thread() -> None:
    """Keep this worker's numeric libraries on one core for its life."""
    from threadpoolctl import threadpool_limits

    for key, value in _ONE_THREAD.items():
        os.environ.setdefault(key, value)
    threadpool_limits(limits=1)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _init_worker(progress: Any) -> None:
    global _PROGRESS
    _PROGRESS = progress
    _one_thread()
    from memsim.sim.inline_guard import watch

    watch(parent_pid=os.getppid())  # a call that defeats its deadline ends the worker; so does the run's end


def _context(recipe: WorkerRecipe) -> tuple[Any, list[Any], Any, list[Any], Any]:
    got = _CONTEXTS.get(recipe.token)
    if got is None:
        spec, episodes, resources, scorers, answer = recipe.make()
        got = (spec, list(episodes), resources, list(scorers), answer)
        _CONTEXTS.clear()  # one run at a time per worker
        _CONTEXTS[recipe.token] = got
    return got


def _peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def play_task(task: Mapping[str, Any]) -> UnitOutcome:
    """Play one unit in a worker (a process of the pool, or a Dask worker) from a task ``_task`` made."""
    _one_thread()
    t0 = time.perf_counter()
    spec, episodes, resources, scorers, answer = _context(task["recipe"])
    clock = Clock(episodes, task["start"], task["span"], task["days"])
    ctx = UnitContext(spec, clock, resources, task["rngs"], scorers, answer)
    unit: Unit = task["unit"]
    steps = unit_steps(ctx, unit, task["doses"])
    progress = _PROGRESS
    while True:
        try:
            day = next(steps)
        except StopIteration as stop:
            outcome: UnitOutcome = stop.value
            break
        if progress is not None:
            progress.put((unit.key, day))
    outcome.stats = {"seconds": round(time.perf_counter() - t0, 3), "where": f"pid {os.getpid()}",
                     "peak_rss_mb": _peak_rss_mb()}
    return outcome


# --------------------------------------------------------------------------- in the run's process


def _task(ctx: UnitContext, recipe: WorkerRecipe, unit: Unit, doses: Any) -> dict[str, Any]:
    clock = ctx.clock
    return {"recipe": recipe, "start": clock.start, "span": clock.span, "days": clock.days,
            "rngs": list(ctx.rngs), "unit": unit, "doses": dict(doses) if doses else None}


@contextmanager
def _env(values: Mapping[str, str]) -> Iterator[None]:
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class _Pool:
    """A process pool on this machine, or a Dask client, behind one small surface."""

    def __init__(self, mode: str, workers: Workers, n: int) -> None:
        self.mode = mode
        self.progress: Any = None
        self._cluster: Any = None
        if mode == "processes":
            context = multiprocessing.get_context("spawn")  # no fork of a process holding threads and a model
            self.progress = context.Queue()
            self._exec: Any = cf.ProcessPoolExecutor(max_workers=n, mp_context=context, initializer=_init_worker,
                                                     initargs=(self.progress,))
        else:
            try:
                from distributed import Client, LocalCluster
            except ImportError:
                raise UserError("--scheduler needs Dask: pip install 'memsim[sweep]'") from None
            if workers.scheduler == "local":
                self._cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                                             dashboard_address=None)
                self._exec = Client(self._cluster)
            else:
                try:
                    self._exec = Client(workers.scheduler, timeout="20s")
                except OSError as exc:
                    raise UserError(f"--scheduler {workers.scheduler}: cannot reach the Dask scheduler: {exc}") from None

    def submit(self, task: Mapping[str, Any]) -> Any:
        if self.mode == "processes":
            return self._exec.submit(play_task, task)
        return self._exec.submit(play_task, task, pure=False)

    def wait(self, futures: Sequence[Any]) -> tuple[set[Any], set[Any]]:
        if self.mode == "processes":
            done, rest = cf.wait(futures, timeout=_POLL_S, return_when=cf.FIRST_COMPLETED)
            return set(done), set(rest)
        from distributed import wait as dask_wait
        from distributed.client import FIRST_COMPLETED

        try:
            done, rest = dask_wait(list(futures), timeout=_POLL_S, return_when=FIRST_COMPLETED)
        except TimeoutError:
            return set(), set(futures)
        return set(done), set(rest)

    def failed(self, future: Any) -> BaseException | None:
        if self.mode == "processes":
            return future.exception()
        return future.exception() if future.status == "error" else None

    def progress_events(self) -> Iterator[tuple[str, int]]:
        if self.progress is None:
            return
        while True:
            try:
                yield self.progress.get_nowait()
            except (queue_mod.Empty, OSError, ValueError, EOFError):
                return

    def close(self) -> None:
        if self.mode == "processes":
            self._exec.shutdown(wait=True, cancel_futures=True)
            self.progress.close()
        else:
            self._exec.close()
            if self._cluster is not None:
                self._cluster.close()


def _describe(units: Sequence[Unit]) -> str:
    return ", ".join(f"{u.key} ({' + '.join(u.labels)})" for u in units)


def _parallel(
    ctx: UnitContext, units: Sequence[Unit], workers: Workers, doses_for: Callable[[Unit], Any], mode: str
) -> Iterator[Event]:
    recipe = workers.recipe
    assert recipe is not None
    try:
        pickle.dumps(recipe)
    except Exception as exc:  # noqa: BLE001 - a factory that is a lambda or holds an open resource
        raise UserError(f"--workers {workers.count}: the run cannot be sent to a worker ({exc}); give the run as a spec (or play it in this process)") from None
    n = min(max(workers.count, 1), len(units))
    waiting = list(units)
    committed: set[str] = set()
    running: dict[Any, Unit] = {}
    errors: list[tuple[Unit, BaseException]] = []
    with _env(_ONE_THREAD):
        pool = _Pool(mode, workers, n)
    try:
        while waiting or running:
            if not errors:  # after a failure nothing new starts; what runs is let finish and committed
                for unit in [u for u in waiting if all(k in committed for k in u.needs)]:
                    waiting.remove(unit)
                    running[pool.submit(_task(ctx, recipe, unit, doses_for(unit)))] = unit
            elif not running:
                break
            done, _ = pool.wait(list(running))
            yield from pool.progress_events()
            for future in sorted(done, key=lambda f: running[f].key):
                unit = running.pop(future)
                problem = pool.failed(future)
                if problem is not None:
                    errors.append((unit, problem))
                    continue
                outcome = future.result()
                yield outcome
                committed.add(unit.key)
    finally:
        pool.close()
    if errors:
        raise _failure(errors, waiting)


def _failure(errors: Sequence[tuple[Unit, BaseException]], waiting: Sequence[Unit]) -> UserError:
    from concurrent.futures.process import BrokenProcessPool

    died = [u for u, e in errors if isinstance(e, BrokenProcessPool) or type(e).__name__ in ("KilledWorker", "CommClosedError")]
    raised = [(u, e) for u, e in errors if u not in died]
    tail = ("every unit that ended is committed; rerun the same command to resume"
            + (f" ({len(waiting)} not started)" if waiting else ""))
    if raised:
        unit, exc = raised[0]
        if isinstance(exc, UserError):
            out = UserError(f"unit {_describe([unit])}: {exc}; {tail}")
        else:
            out = UserError(f"unit {_describe([unit])} failed in a worker: {type(exc).__name__}: {exc}; {tail}")
    else:
        out = WorkerDied(f"a worker process died (killed, out of memory, or a system ended it) while playing unit "
                        f"{_describe(died)}; {tail}")
    # The rows each failed unit played before its error (``unit_steps``), kept as parts cut short.
    out.partials = [e.partial for _, e in errors if getattr(e, "partial", None) is not None]  # type: ignore[attr-defined]
    return out


def recipe_token(*parts: Any) -> str:
    """A token naming a recipe's product (a hash of its pickled parts)."""
    return hashlib.sha256(pickle.dumps(parts)).hexdigest()[:16]
