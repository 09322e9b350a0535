"""Orchestration of one run: spec -> scenario episodes -> runner -> summary -> report.

Everything that runs memsim (the ``run``, ``demo``, ``static`` and
``rerun`` commands, power, sensitivity, sweeps) goes through ``execute``,
which ``resolve``s the spec once (scenario stream, scorers, answer setup,
named random streams) and hands the pieces to the runner; a run folder can
be played again from its ``spec.json`` alone (``rerun``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memsim import __version__
from memsim.analysis.summary import Summary, summarise, write_summary
from memsim.memory.registry import Resources, SystemSpec
from memsim.scenarios.registry import build_scenario, static_protocol
from memsim.sim.answer.options import AnswerOptions
from memsim.core.errors import UserError
from memsim.core.streams import Streams, streams
from memsim.core.validate import validate_args
from memsim.sim.runner import Checkpoint, RunResult, iter_run
from memsim.sim.scorers import build_scorer
from memsim.sim.spec import RunSpec, ScenarioEntry, read_spec, system_entries

__all__ = ["Outcome", "ResolvedRun", "make_spec", "spec_from_config", "resolve", "execute", "rerun", "default_out_dir",
           "answer_options", "scenario_for", "scenario_stream"]

_BUILT: dict[str, Any] = {}
"""The scenarios built in this process, by name and arguments (the last few: a static one holds its data file)."""
_KEEP_BUILT = 4


def scenario_for(name: str, args: Mapping[str, Any] | None = None, *, source: str = "") -> Any:
    """Scenario ``name`` built with ``args``: the one place a run's scenario is constructed.

    A spec's scenario is built when the spec is made (to resolve its arguments and hash its data) and
    reused when the spec is resolved, under the arguments given and the resolved ones alike, so a
    data file is read once per process.

    Raises:
        UserError: an unknown scenario, bad arguments (naming ``source``), a missing file.
    """
    import json

    key = json.dumps([name, dict(args or {})], sort_keys=True, default=str)
    built = _BUILT.get(key)
    if built is None:
        built = build_scenario(name, args, source=source)
        _remember(key, built)
        _remember(json.dumps([name, built.spec_args()], sort_keys=True, default=str), built)
    return built


def _remember(key: str, built: Any) -> None:
    _BUILT.pop(key, None)
    _BUILT[key] = built
    while len(_BUILT) > _KEEP_BUILT * 2:
        _BUILT.pop(next(iter(_BUILT)))


def scenario_stream(name: str, args: Mapping[str, Any] | None, seed: int, *, source: str = "") -> Any:
    """The stream a run with this seed plays: scenario ``name`` generated from the seed's ``scenario`` stream."""
    return scenario_for(name, args, source=source).generate(streams(seed)["scenario"])


@dataclass(frozen=True, slots=True)
class Outcome:
    """A finished run: its rows and its summary."""

    spec: RunSpec
    result: RunResult
    summary: Summary

    @property
    def out_dir(self) -> Path | None:
        """The run folder."""
        return self.result.out_dir


def default_out_dir(prefix: str) -> Path:
    """``runs/<prefix>-<UTC timestamp>`` under the working directory."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{prefix}-{stamp}"


def answer_options(args: Any) -> AnswerOptions | None:
    """The answer options of parsed command-line flags (each flag is the field of its name), with the judges' checks.

    Returns None for reader ``none``. Every LLM judge is checked (or its cached
    check reused) before the run, and the spec records the result.
    """
    from memsim.sim.answer.options import AnswerOptions

    options = AnswerOptions(**{f: getattr(args, f) for f in AnswerOptions.model_fields if hasattr(args, f)})
    if options.prices is not None:
        from memsim.sim.answer.meter import PriceTable

        PriceTable.load(options.prices)  # a missing or bad --prices file is an error even when no reader runs
    if not options.enabled:
        if options.dry_run:  # nothing to count: say so at once instead of playing the whole run
            from memsim.sim.answer.dryrun import DryRunFinished

            raise DryRunFinished("dry run: reader none makes no LLM calls (0 calls, 0 tokens, $0); nothing was run "
                                 "or written. Give --reader short or cot to count what a reader and its judges would spend.")
        return None
    from memsim.analysis.judge_check import judge_check_estimate, judge_checks_for_run, stderr_progress

    # The check set is the same for every run (LoCoMo items where its file is found, persona items),
    # so one cached check serves every run with the same judge, model and prompts.
    data, benchmark = getattr(args, "data", None), getattr(args, "benchmark", None)
    locomo = data if benchmark is not None and static_protocol(benchmark).checks_judges else None
    if locomo is None:
        from memsim.scenarios.locomo_stream import default_locomo_path

        locomo = default_locomo_path() if default_locomo_path().is_file() else None
    if options.dry_run:  # the check is counted, not run; execute prints it with the run's estimate
        estimate = judge_check_estimate(options, default_judges=(), locomo=locomo)
        return options.model_copy(update={"judge_checks": {"dry_run": estimate}}) if estimate else options
    checks = judge_checks_for_run(options, default_judges=(), locomo=locomo, progress=stderr_progress)
    return options.model_copy(update={"judge_checks": checks}) if checks else options


def make_spec(
    kind: str,
    scenario: str,
    scenario_args: Mapping[str, Any],
    systems: Sequence[SystemSpec],
    *,
    source: str = "",
    **settings: Any,
) -> RunSpec:
    """A validated spec with the scenario's resolved arguments (and, for a data file, its hash).

    Raises:
        UserError: unknown scenario, bad arguments or settings, a missing file.
    """
    from memsim.memory.registry import check_system_args

    for system in systems:  # typed and known arguments, before any work
        try:
            check_system_args(system.name, system.args)
        except ValueError as exc:
            where = f" ({source})" if source else ""
            raise UserError(f"bad system{where}: {exc}") from None
    built = scenario_for(scenario, scenario_args, source=source)
    meta = built.meta() if callable(getattr(built, "meta", None)) else {}
    values = {k: v for k, v in settings.items() if v is not None}
    return validate_args(RunSpec, {  # type: ignore[return-value]
        "kind": kind, "scenario": ScenarioEntry(name=scenario, args=built.spec_args()), "systems": system_entries(systems),
        "scenario_meta": meta, "memsim_version": __version__, **values,
    }, what="run", source=source)


def spec_from_config(config: Any, *, systems: Sequence[SystemSpec] = (), **overrides: Any) -> RunSpec:
    """A longitudinal spec from a loaded config file, with command-line overrides."""
    from memsim.memory.registry import parse_system

    chosen = tuple(systems) or tuple(parse_system(s) for s in config.run.systems)
    values = config.run.model_dump(exclude={"systems", "workers", "scheduler"}, exclude_unset=True)
    values.update({k: v for k, v in overrides.items() if v is not None})
    if getattr(config, "load", None) is not None:
        values.setdefault("load", config.load)
    scen = dict(config.scenario)
    name = scen.pop("name")
    return make_spec("longitudinal", name, scen, chosen, source=config.source, **values)


@dataclass(frozen=True, slots=True)
class ResolvedRun:
    """A spec built into what the runner plays, each piece exactly once (``resolve``)."""

    spec: RunSpec
    streams: Streams
    """The run's named random streams (``memsim.core.streams``)."""
    stream: Any
    """The scenario's generated stream (``episodes()``, ``start``, ``end``)."""
    resources: Resources
    """What the system factories share: the ``systems`` stream and the embedder."""
    scorers: tuple[Any, ...]
    """The spec's scorers, built."""
    answer: Any | None
    """Reader and judges (``memsim.sim.answer.AnswerSetup``), or None."""

    @property
    def score_columns(self) -> list[str]:
        """The score columns the run fills: each scorer's, then each judge's."""
        cols = [c for s in self.scorers for c in s.columns(self.spec.ks)]
        return [*cols, *(self.answer.score_columns if self.answer is not None else ())]

    def play(self, out_dir: Path | None, workers: Any = None) -> Iterator[Checkpoint]:
        """The runner's checkpoints over this run (``memsim.sim.runner.iter_run``; ``workers``: ``memsim.sim.workers.Workers``)."""
        return iter_run(self.spec, self.stream.episodes(), out_dir=out_dir, start=self.stream.start, end=self.stream.end,
                        resources=self.resources, answer=self.answer, scorers=self.scorers, workers=workers)


def worker_parts(spec: RunSpec, default_judges: tuple[str, ...], embedder_factory: Callable[[], Any] | None) -> tuple:
    """What a worker process rebuilds of a run from its spec: (spec, episodes, resources, scorers, answer)."""
    run = resolve(spec, default_judges=default_judges, embedder_factory=embedder_factory)
    return spec, list(run.stream.episodes()), run.resources, list(run.scorers), run.answer


def _workers(spec: RunSpec, count: int, scheduler: str | None, *, rebuildable: bool,
             default_judges: Sequence[str], embedder_factory: Callable[[], Any] | None) -> Any:
    """How the run's units are played: ``count`` workers (or a Dask scheduler) when a worker can rebuild the run.

    A worker rebuilds the run from its spec; a run given ready-made resources or answer objects, or one
    that answers questions (the reader's and judges' costs are metered in the run's process), plays here.
    """
    import functools

    from memsim.sim.workers import WorkerRecipe, Workers, recipe_token

    recipe = None
    answers = spec.answer is not None and spec.answer.enabled
    if rebuildable and not answers and not spec.fresh_per_episode:
        judges = tuple(default_judges)
        recipe = WorkerRecipe(functools.partial(worker_parts, spec, judges, embedder_factory),
                              recipe_token(spec.model_dump_json() if hasattr(spec, "model_dump_json") else repr(spec),
                                           judges, repr(embedder_factory)))
    why = ("a run that answers questions plays in one process, where its reader's and judges' costs are metered"
           if answers else "the run's parts were given as objects, not as a spec")
    return Workers(count=count, scheduler=scheduler, recipe=recipe, why_here=why)


def resolve(
    spec: RunSpec,
    resources: Resources | None = None,
    *,
    answer: Any | None = None,
    default_judges: Sequence[str] = ("contains", "f1_locomo"),
    embedder_factory: Callable[[], Any] | None = None,
) -> ResolvedRun:
    """Build a spec's scenario stream, scorers, answer setup and random streams, once.

    Args:
        spec: the run.
        resources: shared embedder and rng (default: the ``systems`` stream, with ``embedder_factory``).
        answer: a ready reader + judges; default built from ``spec.answer``.
        default_judges: judges when the spec's options name none.
        embedder_factory: the shared embedder's factory when ``resources`` is not given.

    Raises:
        UserError: the scenario's data is not what the spec recorded, an unknown scorer, bad answer options.
    """
    rngs = streams(spec.seed)
    scenario = scenario_for(spec.scenario.name, spec.scenario.args)
    meta = scenario.meta() if callable(getattr(scenario, "meta", None)) else {}
    if meta != spec.scenario_meta:
        raise UserError(
            f"scenario {spec.scenario.name}: its data is not what the spec recorded "
            f"(sha256 {meta.get('sha256', '?')[:12]} vs {spec.scenario_meta.get('sha256', '?')[:12]})"
        )
    scorers = tuple(build_scorer(name) for name in spec.scorers)
    if answer is None:
        from memsim.sim.answer.setup import answer_setup  # the LLM clients load only for a run that answers

        answer = answer_setup(spec.answer, default_judges=default_judges)
    if resources is None:
        resources = Resources(rng=rngs["systems"], embedder_factory=embedder_factory)
    return ResolvedRun(spec, rngs, scenario.generate(rngs["scenario"]), resources, scorers, answer)


def execute(
    spec: RunSpec,
    *,
    out_dir: Path | None,
    resources: Resources | None = None,
    answer: Any | None = None,
    default_judges: Sequence[str] = ("contains", "f1_locomo"),
    progress: Callable[[Checkpoint], None] | None = None,
    report: bool = False,
    embedder_factory: Callable[[], Any] | None = None,
    workers: int = 0,
    scheduler: str | None = None,
) -> Outcome:
    """Resolve the spec, play it, summarise, and write the run folder.

    Args:
        spec: the run.
        out_dir: run folder (None: in memory); an existing folder of the same spec is resumed.
        resources: shared embedder and rng (default: from the seed's ``systems`` stream).
        answer: a ready reader + judges; default built from ``spec.answer``.
        default_judges: judges when the spec's options name none.
        progress: called with every checkpoint.
        report: also write ``report.html`` / ``report.md``.
        embedder_factory: the shared embedder's factory when ``resources`` is not given (picklable, such as a
            ``functools.partial`` of ``Embedder``, for ``workers`` > 1).
        workers: worker processes that play a longitudinal run's units (arms), or 0: one after another in
            this process; the figures are the same.
        scheduler: ``local`` or ``tcp://HOST:PORT``: play the units on Dask (``memsim.sim.workers``).
    """
    rebuildable = resources is None and answer is None
    run = resolve(spec, resources, answer=answer, default_judges=default_judges, embedder_factory=embedder_factory)
    pool = _workers(spec, workers, scheduler, rebuildable=rebuildable, default_judges=default_judges,
                    embedder_factory=embedder_factory)
    answer = run.answer
    dry_run = bool(getattr(answer, "dry_run", False))
    if dry_run:
        out_dir = None  # a dry run writes no run folder
    result = None
    try:
        for cp in run.play(out_dir, pool):
            if progress is not None:
                progress(cp)
            result = cp.result
    finally:
        if answer is not None and hasattr(answer, "close"):
            answer.close()
    if dry_run:
        from memsim.analysis.judge_check import format_check_estimate
        from memsim.sim.answer.dryrun import DryRunFinished

        check = format_check_estimate((spec.answer.judge_checks if spec.answer else {}).get("dry_run"))
        raise DryRunFinished("\n".join(filter(None, [answer.dry_run_report(), check])))
    assert result is not None
    t0 = time.perf_counter()
    summary = summarise(spec, result.probes, result.timeline, result.info)
    phases = {"statistics": time.perf_counter() - t0}
    if out_dir is not None:
        write_summary(Path(out_dir), summary, wall_seconds=result.wall_seconds, phases=phases)
        if report:
            from memsim.analysis.report import write_report

            t0 = time.perf_counter()
            write_report(Path(out_dir))
            phases["report"] = time.perf_counter() - t0
            write_summary(Path(out_dir), summary, wall_seconds=result.wall_seconds, phases=phases)
    if spec.answer is not None and not spec.answer.allow_unreadable_verdicts:
        from memsim.sim.answer.judges import too_many_unreadable

        # The figures are written first (unreadable replies scored wrong), so the failure can be looked into.
        problem = too_many_unreadable(summary.metrics)
        if problem:
            where = f" (figures in {out_dir})" if out_dir is not None else ""
            raise UserError(problem + where)
    return Outcome(spec, result, summary)


def rerun(run_dir: str | Path, *, out_dir: Path, progress: Callable[[Checkpoint], None] | None = None) -> Outcome:
    """Play a run again from its ``spec.json`` into ``out_dir`` (same seed, same numbers)."""
    spec = read_spec(run_dir)
    if Path(out_dir).resolve() == Path(run_dir).resolve():
        raise UserError(f"--out {out_dir}: choose a folder other than the run being replayed")
    return execute(spec, out_dir=out_dir, progress=progress)

