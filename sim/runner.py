"""``iter_run(spec)``: wire scenario, systems, reader and recorder; replay; write the run folder.

The stream of checkpoints (one per simulated day) is the primitive; ``run``
is a thin wrapper that consumes it. A run folder holds the resolved spec,
``probes.parquet`` (one row per question per system), ``timeline.parquet``
(sessions, ticks and deletions per system) and ``metrics.json``, whose every
figure can be recomputed from the parquet files and the seed.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import simpy

from memory.registry import Resources, SystemSpec, build_memory
from scenarios.base import ScenarioStream, build_scenario
from sim.engine import EngineConfig, Harness, SystemUnderTest, start_processes, turn_maps
from sim.errors import UserError
from sim.recorder import Recorder

__all__ = ["RunSpec", "Checkpoint", "RunResult", "iter_run", "run", "default_out_dir", "summarise", "per_user"]


@dataclass(frozen=True, slots=True)
class RunSpec:
    """Everything that defines a longitudinal run; written to ``spec.json``."""

    scenario: str
    """Registered scenario name."""
    scenario_args: Mapping[str, Any]
    """Scenario arguments as given (resolved defaults are recorded separately)."""
    systems: tuple[SystemSpec, ...]
    """Systems under test."""
    seed: int = 0
    """Seed of the run's one random generator."""
    k: int = 10
    """Memories retrieved per question."""
    control: str = "naive"
    """Label of the static control system."""
    feedback_delay_hours: float = 1.0
    """Delay between a question and its feedback."""
    feedback_from: str = "evidence"
    """``evidence`` or ``answer``."""
    maintenance_every_hours: float = 24.0
    """Hours between maintenance ticks (0 = none)."""
    n_boot: int = 2000
    """Bootstrap resamples per interval in the summary."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Progress after a simulated day (the last one carries the result)."""

    day: int
    """Simulated days done."""
    total_days: int
    """Simulated days in the run."""
    probes: int
    """Probe rows recorded so far."""
    result: RunResult | None = None
    """Set on the final checkpoint."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a finished run produced."""

    out_dir: Path
    probes: pl.DataFrame
    timeline: pl.DataFrame
    metrics: dict[str, Any]
    summary: pl.DataFrame | None
    failures: list[dict[str, Any]] = field(default_factory=list)


def default_out_dir(prefix: str) -> Path:
    """``runs/<prefix>-<UTC timestamp>`` under the working directory."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{prefix}-{stamp}"


def iter_run(
    spec: RunSpec,
    *,
    out_dir: Path,
    resources: Resources | None = None,
    answer_setup: Any | None = None,
    stream: ScenarioStream | None = None,
) -> Iterator[Checkpoint]:
    """Replay the scenario against every system, yielding a checkpoint per simulated day.

    Args:
        spec: the run's definition.
        out_dir: run folder to write (created; files are overwritten).
        resources: shared run resources (embedder); default made from the seed.
        answer_setup: optional reader + judges (``sim.answer.AnswerSetup``).
        stream: a pre-generated stream (tests); default generated from the seed.
    """
    rng = np.random.default_rng(spec.seed)
    scenario = build_scenario(spec.scenario, spec.scenario_args)
    scenario_rng, system_rng, stats_rng = rng.spawn(3)
    if stream is None:
        stream = scenario.generate(scenario_rng)
    labels = [s.display for s in spec.systems]
    if len(set(labels)) != len(labels):
        raise UserError(f"the same system is listed twice: {labels}")
    if resources is None:
        resources = Resources(rng=system_rng)

    recorder = Recorder()
    suts: list[SystemUnderTest] = []
    for s in spec.systems:
        try:
            suts.append(SystemUnderTest(s, build_memory(s.name, s.args, resources=resources)))
        except (ValueError, ImportError) as exc:
            raise UserError(f"cannot build system {s.display!r}: {exc}") from None

    env = simpy.Environment()
    owner, text = turn_maps(stream.events)
    config = EngineConfig(
        start=stream.start,
        k=spec.k,
        feedback_delay_s=spec.feedback_delay_hours * 3600.0,
        feedback_from=spec.feedback_from,
        maintenance_every_s=spec.maintenance_every_hours * 3600.0,
    )
    harness = Harness(
        env=env,
        systems=suts,
        recorder=recorder,
        config=config,
        turn_owner=owner,
        turn_text=text,
        answer=answer_setup.answer_and_judge if answer_setup is not None else None,
        judge_keys=tuple(f"answer_{j.name}" for j in answer_setup.judges) if answer_setup is not None else (),
        # Systems that embed made the shared embedder when they were built.
        prepare=resources.made_embedder.encode if resources.made_embedder is not None else None,
    )
    start_processes(env, harness, stream.events)

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec_json = _spec_json(spec, scenario.spec_args(), stream, resources, answer_setup)
    (out_dir / "spec.json").write_text(json.dumps(spec_json, indent=2, default=str) + "\n")

    span = (stream.end - stream.start).total_seconds()
    total_days = max(1, math.ceil(span / 86400.0))
    t0 = time.perf_counter()
    try:
        for day in range(1, total_days + 1):
            env.run(until=min(day * 86400.0, span) if day < total_days else span + 1e-6)
            yield Checkpoint(day=day, total_days=total_days, probes=recorder.n_probes)
        # Feedback still in flight at the end is delivered so systems end in a defined state.
        env.run(until=span + config.feedback_delay_s + 1.0)
    finally:
        # Whatever was recorded is written, also when the run is interrupted.
        probes = recorder.probes_frame()
        timeline = recorder.timeline_frame()
        probes.write_parquet(out_dir / "probes.parquet")
        timeline.write_parquet(out_dir / "timeline.parquet")
    wall = time.perf_counter() - t0
    summary, metrics = summarise(probes, timeline, spec=spec_json, rng=stats_rng)
    metrics["wall_seconds"] = round(wall, 3)
    # A discrete-event run does not wait out simulated time: this is how many
    # simulated seconds each wall second replayed (the run's time compression).
    metrics["time_compression"] = round(span / wall, 1) if wall > 0 else None
    metrics["failures"] = recorder.failures
    metrics["totals"] = stream.totals()
    reports = {s.label: s.system.report() for s in suts if callable(getattr(s.system, "report", None))}
    if reports:
        metrics["system_reports"] = reports
    if answer_setup is not None and hasattr(answer_setup, "meter"):
        metrics["llm"] = answer_setup.meter.summary() if hasattr(answer_setup.meter, "summary") else str(answer_setup.meter)
    (out_dir / "metrics.json").write_text(json.dumps(_clean(metrics), indent=2, default=_json_default) + "\n")
    result = RunResult(out_dir, probes, timeline, metrics, summary, recorder.failures)
    yield Checkpoint(day=total_days, total_days=total_days, probes=recorder.n_probes, result=result)


def run(spec: RunSpec, **kwargs: Any) -> RunResult:
    """Run to the end and return the result."""
    result = None
    for cp in iter_run(spec, **kwargs):
        result = cp.result
    assert result is not None
    return result


def summarise(
    probes: pl.DataFrame, timeline: pl.DataFrame, *, spec: Mapping[str, Any], rng: np.random.Generator
) -> tuple[pl.DataFrame | None, dict[str, Any]]:
    """The learning-through-use summary and per-system figures, from the run's rows.

    Recomputable from a run folder: ``summarise(probes, timeline, spec=spec,
    rng=np.random.default_rng(spec["seed"]).spawn(3)[2])``.
    """
    from analysis.power import mde_from_interval
    from analysis.stats import learning_summary

    metric = spec.get("metric", "evidence")
    control = spec.get("control")
    metrics: dict[str, Any] = {"metric": metric, "control": control, "k": spec.get("k")}
    scored = probes.filter(pl.col("error").is_null()) if probes.height else probes
    if scored.height == 0:
        return None, {**metrics, "systems": {}}
    systems = list(dict.fromkeys(scored["system"].to_list()))
    if control not in systems:
        control = None
        metrics["control"] = None
    summary = learning_summary(scored, metric=metric, control=control, rng=rng, n_boot=int(spec.get("n_boot", 2000)))
    per_system: dict[str, Any] = {}
    for row in summary.iter_rows(named=True):
        name = row["system"]
        rows = scored.filter(pl.col("system") == name)
        tl = timeline.filter(pl.col("system") == name) if timeline.height else timeline
        lat = rows["retrieve_ms"].to_numpy()
        per_system[name] = {
            **{k: v for k, v in row.items() if k != "system"},
            # Smallest DiD this run could detect at 80% power, next to the measured one.
            "did_mde": mde_from_interval(row["did_lo"], row["did_hi"]) if row.get("did_lo") is not None else None,
            "questions": rows.height,
            "mean": _nanmean(rows[metric]),
            "stale_above_current": _nanmean(rows["stale_above_current"]),
            "isolation_failures": int(rows["isolation_failures"].sum()),
            "deleted_leaks": int(rows["deleted_leaks"].sum()),
            "retrieve_ms_p50": float(np.percentile(lat, 50)) if lat.size else None,
            "retrieve_ms_p95": float(np.percentile(lat, 95)) if lat.size else None,
            "final_items": int(tl["items"].tail(1)[0]) if tl.height else None,
            "final_bytes": int(tl["bytes"].tail(1)[0]) if tl.height else None,
            "ingest_ms_total": float(tl["ingest_ms"].fill_null(0).sum()) if tl.height else None,
            "forget_probe_leaks": int(tl["leaked"].fill_null(0).sum()) if tl.height else 0,
        }
        for col in rows.columns:
            if col.startswith("answer_") and rows[col].dtype.is_numeric():
                per_system[name][col] = _nanmean(rows[col])
        per_system[name]["per_user"] = per_user(rows, metric)
    metrics["systems"] = per_system
    metrics["isolation_failures"] = int(scored["isolation_failures"].sum())
    return summary, metrics


def per_user(rows: pl.DataFrame, metric: str) -> dict[str, dict[str, Any]]:
    """One system's accuracy per user, whole and by halves of that user's own questions.

    A user's halves split at the median ``q_index`` of their scored questions
    (as ``analysis.stats.halves`` splits the whole stream), so a heavy user
    cannot hide another's decline. Answer-judge columns get a mean per user
    too. NaN scores are left out; a user with none scored gets nulls.
    """
    out: dict[str, dict[str, Any]] = {}
    answer_cols = [c for c in rows.columns if c.startswith("answer_") and rows[c].dtype.is_numeric()]
    for user in dict.fromkeys(rows["user_id"].to_list()):
        part = rows.filter(pl.col("user_id") == user).sort("q_index")
        x = part[metric].cast(pl.Float64).to_numpy()
        q = part["q_index"].to_numpy()
        ok = ~np.isnan(x)
        x, q = x[ok], q[ok]
        second = q >= np.median(q) if q.size else np.zeros(0, dtype=bool)
        first_mean = float(x[~second].mean()) if (~second).any() else None
        second_mean = float(x[second].mean()) if second.any() else None
        entry: dict[str, Any] = {
            "questions": part.height,
            "scored": int(x.size),
            "mean": float(x.mean()) if x.size else None,
            "first_half": first_mean,
            "second_half": second_mean,
            "diff": None if first_mean is None or second_mean is None else second_mean - first_mean,
            "isolation_failures": int(part["isolation_failures"].sum()),
        }
        for col in answer_cols:
            entry[col] = _nanmean(part[col])
        out[str(user)] = entry
    return out


def _nanmean(s: pl.Series) -> float | None:
    v = s.cast(pl.Float64).to_numpy()
    v = v[~np.isnan(v)]
    return float(v.mean()) if v.size else None


def _spec_json(
    spec: RunSpec, scenario_args: Mapping[str, Any], stream: ScenarioStream, resources: Resources, answer_setup: Any
) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("memsim")
    except PackageNotFoundError:  # running from a source tree
        ver = "0+unknown"
    embedder = resources.made_embedder
    return {
        "kind": "longitudinal",
        "seed": spec.seed,
        "k": spec.k,
        "metric": "evidence",
        "metric_definition": f"recall_all@{spec.k}",
        "control": spec.control,
        "feedback_delay_hours": spec.feedback_delay_hours,
        "feedback_from": spec.feedback_from,
        "maintenance_every_hours": spec.maintenance_every_hours,
        "n_boot": spec.n_boot,
        "scenario": {"name": spec.scenario, "args": dict(scenario_args)},
        "systems": [s.to_json() for s in spec.systems],
        "totals": stream.totals(),
        "reader": answer_setup.describe() if answer_setup is not None else None,
        "embedder": getattr(embedder, "model_id", None),
        "memsim_version": ver,
    }


def _clean(o: Any) -> Any:
    """NaN -> null (JSON has no NaN), recursively."""
    if isinstance(o, float) and math.isnan(o):
        return None
    if isinstance(o, Mapping):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and math.isnan(o):
        return None
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    return str(o)


def spec_from_config(config: Any, *, systems: Sequence[SystemSpec] = (), **overrides: Any) -> RunSpec:
    """A ``RunSpec`` from a loaded config, with command-line overrides."""
    from memory.registry import parse_system

    run_cfg = config.run
    chosen = tuple(systems) or tuple(parse_system(s) for s in run_cfg.systems)
    values = {
        "seed": run_cfg.seed,
        "k": run_cfg.k,
        "control": run_cfg.control,
        "feedback_delay_hours": run_cfg.feedback_delay_hours,
        "feedback_from": run_cfg.feedback_from,
        "maintenance_every_hours": run_cfg.maintenance_every_hours,
        "n_boot": run_cfg.n_boot,
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    scen = dict(config.scenario)
    name = scen.pop("name")
    return RunSpec(scenario=name, scenario_args=scen, systems=chosen, **values)
