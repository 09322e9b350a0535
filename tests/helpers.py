"""Test helpers: replay a stream through the engine, or run it through the runner and summariser."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import simpy

from memsim.analysis.summary import Summary, summarise
from memsim.memory.registry import Resources, SystemSpec
from memsim.scenarios.base import ScenarioStream
from memsim.sim.engine import EngineConfig, Harness, SystemUnderTest, placebo_doses, start_processes
from memsim.sim.recorder import Recorder
from memsim.sim.runner import RunResult, passes, run
from memsim.sim.scorers import build_scorer
from memsim.sim.spec import RunSpec, ScenarioEntry, system_entries


class Replayed:
    """The rows of a replay: ``probes``, ``timeline``, ``failures``."""

    def __init__(self, rec: Recorder) -> None:
        rec.commit("all")
        self.probes, self.timeline, info = rec.finish({})
        self.failures = info["failures"]


def replay(
    stream: ScenarioStream,
    systems: Mapping[str, Any],
    *,
    k: int = 5,
    delay_s: float = 7200.0,
    every_s: float = 86400.0,
    feedback_from: str = "evidence",
    modes: Mapping[str, str] | None = None,
    answer: Any = None,
) -> Replayed:
    """Play ``stream`` against unregistered systems (label -> object), scored on evidence and staleness at ``k``.

    ``modes`` gives a system's feedback mode (``given``, ``withheld``, ``shuffled``, ``false``, ``true``) by
    label (an arm labelled ``s~...`` is an arm of ``s``); placebos (``shuffled``) are played in a second
    pass, on their systems' told bits permuted within user and week, as the runner plays them.
    ``answer`` is the engine's answer callable (none: retrieval only).
    """
    rec = Recorder()
    cfg = EngineConfig(
        start=stream.start, k=k, ks=tuple(sorted({1, k})), fetch_k=k, metric=f"recall_all@{k}",
        feedback_delay_s=delay_s, maintenance_every_s=every_s, feedback_from=feedback_from,
    )
    modes = dict(modes or {})
    # an arm labelled "s~twin" or "s~placebo" is an arm of "s", as the runner names them
    suts = [SystemUnderTest(label, label, system, feedback=modes.get(label, "given"),
                            twin_of=label.split("~")[0] if label in modes else None)
            for label, system in systems.items()]
    doses = None
    for n, group in enumerate(passes(suts)):
        if n:
            first = rec.committed_probes(["pass0"]).iter_rows(named=True)
            doses = placebo_doses(first, {s.twin_of or s.label for s in group}, cfg)
        env = simpy.Environment()
        harness = Harness(env=env, systems=group, recorder=rec, config=cfg,
                          scorers=[build_scorer("evidence"), build_scorer("stale")], answer=answer, doses=doses or {})
        start_processes(env, harness, stream.episodes())
        env.run(until=(stream.end - stream.start).total_seconds() + delay_s + 1)
        rec.commit(f"pass{n}")
    return Replayed(rec)


def run_stream(
    stream: ScenarioStream,
    systems: Sequence[str],
    *,
    resources: Resources,
    out_dir: Any = None,
    **settings: Any,
) -> tuple[RunResult, Summary]:
    """Run a pre-made stream with registered systems through the runner, then the summariser."""
    spec = RunSpec(
        scenario=ScenarioEntry(name="given"), systems=system_entries([SystemSpec(s) for s in systems]), **settings
    )
    result = run(spec, stream.episodes(), start=stream.start, end=stream.end, out_dir=out_dir, resources=resources)
    return result, summarise(spec, result.probes, result.timeline, result.info)
