"""Orchestration of one run: spec -> scenario episodes -> runner -> summary -> report.

Everything that runs memsim (the ``run``, ``demo``, ``static`` and
``rerun`` commands, power, sensitivity) goes through ``execute``; a run
folder can be played again from its ``spec.json`` alone (``rerun``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from memsim.analysis.summary import Summary, summarise, write_summary
from memsim.memory.registry import Resources, SystemSpec
from memsim.scenarios.registry import build_scenario
from memsim.sim.core.errors import UserError
from memsim.sim.runner import Checkpoint, RunResult, iter_run, random_streams
from memsim.sim.spec import RunSettings, RunSpec, ScenarioEntry, read_spec, system_entries

__all__ = ["Outcome", "make_spec", "spec_from_config", "execute", "rerun", "default_out_dir", "answer_options"]


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


def _version() -> str:
    try:
        return version("memsim")
    except PackageNotFoundError:  # running from a source tree
        return "0+unknown"


def answer_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """The reader/judge options of a command line, as a spec records them (None: ``--reader none``)."""
    if getattr(args, "reader", "none") in (None, "none"):
        return None
    from memsim.sim.answer.setup import add_answer_arguments

    probe = argparse.ArgumentParser(add_help=False)
    add_answer_arguments(probe)
    options = {a.dest: getattr(args, a.dest, a.default) for a in probe._actions if a.dest != "help"}
    # Every LLM judge is checked (or its cached check reused) before the run; the spec records the result.
    from memsim.analysis.judge_check import judge_checks_for_run, stderr_progress

    # The check set is the same for every run (LoCoMo items where its file is found, persona items),
    # so one cached check serves every run with the same judge, model and prompts.
    data = getattr(args, "data", None)
    locomo = data if getattr(args, "benchmark", None) == "locomo" and data is not None else None
    if locomo is None:
        from memsim.scenarios.locomo_stream import default_locomo_path

        locomo = default_locomo_path() if default_locomo_path().is_file() else None
    checks = judge_checks_for_run(options, default_judges=(), locomo=locomo, progress=stderr_progress)
    if checks:
        options["judge_checks"] = checks
    return options


def _answer_setup(options: Mapping[str, Any] | None, default_judges: Sequence[str]) -> Any:
    if not options:
        return None
    from memsim.sim.answer.setup import answer_setup_from_args

    return answer_setup_from_args(argparse.Namespace(**options), default_judges=default_judges)


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
    built = build_scenario(scenario, scenario_args, source=source)
    meta = built.meta() if callable(getattr(built, "meta", None)) else {}
    try:
        return RunSpec(
            kind=kind,  # type: ignore[arg-type]
            scenario=ScenarioEntry(name=scenario, args=built.spec_args()),
            systems=system_entries(systems),
            scenario_meta=meta,
            memsim_version=_version(),
            **{k: v for k, v in settings.items() if v is not None},
        )
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        where = f" ({source})" if source else ""
        raise UserError(f"bad run settings{where}: {exc}") from None


def spec_from_config(config: Any, *, systems: Sequence[SystemSpec] = (), **overrides: Any) -> RunSpec:
    """A longitudinal spec from a loaded config file, with command-line overrides."""
    from memsim.memory.registry import parse_system

    run_cfg: RunSettings = config.run
    chosen = tuple(systems) or tuple(parse_system(s) for s in run_cfg.systems)
    values = run_cfg.model_dump(exclude={"systems"})
    values.update({k: v for k, v in overrides.items() if v is not None})
    if getattr(config, "load", None) is not None:
        values.setdefault("load", config.load)
    scen = dict(config.scenario)
    name = scen.pop("name")
    return make_spec("longitudinal", name, scen, chosen, source=config.source, **values)


def execute(
    spec: RunSpec,
    *,
    out_dir: Path | None,
    resources: Resources | None = None,
    answer: Any | None = None,
    default_judges: Sequence[str] = ("contains", "f1_locomo"),
    progress: Callable[[Checkpoint], None] | None = None,
    report: bool = False,
) -> Outcome:
    """Play the spec's scenario against its systems, summarise, and write the run folder.

    Args:
        spec: the run.
        out_dir: run folder (None: in memory); an existing folder of the same spec is resumed.
        resources: shared embedder and rng (default: from the seed).
        answer: a ready reader + judges; default built from ``spec.answer``.
        default_judges: judges when the spec's options name none.
        progress: called with every checkpoint.
        report: also write ``report.html`` / ``report.md``.
    """
    rngs = random_streams(spec.seed)
    scenario = build_scenario(spec.scenario.name, spec.scenario.args)
    meta = scenario.meta() if callable(getattr(scenario, "meta", None)) else {}
    if meta != spec.scenario_meta:
        raise UserError(
            f"scenario {spec.scenario.name}: its data is not what the spec recorded "
            f"(sha256 {meta.get('sha256', '?')[:12]} vs {spec.scenario_meta.get('sha256', '?')[:12]})"
        )
    stream = scenario.generate(rngs["scenario"])
    if answer is None:
        answer = _answer_setup(spec.answer, default_judges)
    dry_run = bool(getattr(answer, "dry_run", False))
    if dry_run:
        out_dir = None  # a dry run writes no run folder
    if resources is None:
        resources = Resources(rng=rngs["systems"])
    result = None
    try:
        for cp in iter_run(
            spec, stream.episodes(), out_dir=out_dir, start=stream.start, end=stream.end, resources=resources, answer=answer
        ):
            if progress is not None:
                progress(cp)
            result = cp.result
    finally:
        if answer is not None and hasattr(answer, "close"):
            answer.close()
    if dry_run:
        from memsim.sim.answer.dryrun import DryRunFinished

        raise DryRunFinished(answer.dry_run_report())
    assert result is not None
    summary = summarise(spec, result.probes, result.timeline, result.info)
    if out_dir is not None:
        write_summary(Path(out_dir), summary, wall_seconds=result.wall_seconds)
        if report:
            from memsim.analysis.report import write_report

            write_report(Path(out_dir))
    return Outcome(spec, result, summary)


def rerun(run_dir: str | Path, *, out_dir: Path, progress: Callable[[Checkpoint], None] | None = None) -> Outcome:
    """Play a run again from its ``spec.json`` into ``out_dir`` (same seed, same numbers)."""
    spec = read_spec(run_dir)
    if Path(out_dir).resolve() == Path(run_dir).resolve():
        raise UserError(f"--out {out_dir}: choose a folder other than the run being replayed")
    return execute(spec, out_dir=out_dir, progress=progress)

