"""The one summariser: a run folder's rows become its tables and ``metrics.json``.

Every run kind goes through ``summarise``. What it computes:

- per system and per question kind: the mean of every score column the
  run's scorers declare (and of every answer judge), with a 95% percentile
  bootstrap interval that resamples whole episodes (a static benchmark's
  conversations or instances, a longitudinal run's users), and the questions
  left out of scores, by reason;
- for longitudinal runs, the learning-through-use table
  (``memsim.analysis.learning``): per feedback-using system its contrasts
  against the arms that ignore content (the headline: system minus the best
  of them, per half), per half with intervals inverted from their sign-flip
  tests and design-based MDEs, stale>cur per half, per-user halves, and the
  unit of inference decided from the design (``inference_unit``);
- storage, safety counts (isolation failures, deletion leaks) and the
  systems' own reports.

``metrics.json`` holds only what the rows and the seed determine, so the
same run (resumed or not) gives the same bytes. Wall-clock measurements
(latencies, wall time) go to ``perf.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from memsim.analysis.load import RunData, load_table, read_run, score_column, twins_and_placebos
from memsim.core.errors import UserError
from memsim.sim.scorers import build_scorer
from memsim.sim.spec import RunSpec
from memsim.analysis.summary_text import format_answer_accuracy, format_compression, format_tables
from memsim.analysis.answer_tables import answer_table, judge_marks, left_out_mask, llm_columns

__all__ = [
    "Summary",
    "summarise",
    "summarise_folder",
    "with_metrics",
    "write_summary",
    "per_user",
    "score_columns",
    "format_tables",
    "format_answer_accuracy",
    "answer_table",
    "judge_marks",
    "format_compression",
]


@dataclass(frozen=True, slots=True)
class Summary:
    """What ``summarise`` returns."""

    learning: dict[str, dict[str, Any]] | None
    """The learning-through-use table per system (``memsim.analysis.learning``); None for static runs."""
    metrics: dict[str, Any]
    """``metrics.json``: deterministic figures only."""
    timings: dict[str, Any]
    """``perf.json``: wall-clock figures."""


def _forgotten_in_words(rows: pl.DataFrame) -> dict[str, Any] | None:
    """Questions asked after the user asked in their own words to forget a topic, and how many still retrieved
    a turn that told it (``forgotten_leaks``: by provenance, in the top k the system returned); None where no
    question came after such a request (or the run predates the columns)."""
    if "forgotten_turns" not in rows.columns:
        return None
    after = rows.filter(pl.col("forgotten_turns").fill_null(0) > 0)
    if not after.height:
        return None
    kept = int((after["forgotten_leaks"].fill_null(0) > 0).sum())
    return {"questions": after.height, "retrieving": kept, "share": kept / after.height}


def score_columns(spec: RunSpec, probes: pl.DataFrame) -> list[str]:
    """Numeric score columns of a run: its scorers' columns, then its answer judges'."""
    cols: list[str] = []
    for name in spec.scorers:
        cols.extend(c for c in build_scorer(name).columns(spec.ks) if c in probes.columns)
    cols.extend(c for c in probes.columns if c.startswith("answer_") and probes[c].dtype.is_numeric())
    return list(dict.fromkeys(cols))


def _mean(values: np.ndarray) -> float | None:
    v = values[~np.isnan(values)]
    return float(v.mean()) if v.size else None


def _table(
    rows: pl.DataFrame, cols: Sequence[str], *, rng: np.random.Generator, n_boot: int,
    answer_excluded: Collection[str] = (),
) -> dict[str, Any]:
    """Means with episode-resampled intervals; excluded questions counted, not scored.

    Answer columns count every question except those whose reason of exclusion the
    protocol leaves out of answer accuracy (``answer_excluded``, e.g. LoCoMo's adversarial).
    """
    from memsim.analysis.stats import bootstrap_ci

    scored = rows.filter(pl.col("excluded").is_null())
    excluded = rows.filter(pl.col("excluded").is_not_null()).group_by("excluded").len().sort("excluded").rows()
    clusters = scored["episode"].to_numpy()
    scores: dict[str, Any] = {}
    for col in cols:
        x = scored[col].cast(pl.Float64).fill_null(math.nan).to_numpy()
        mean = _mean(x)
        lo, hi = bootstrap_ci(x, rng=rng, n_boot=n_boot, clusters=clusters) if mean is not None else (None, None)
        # n: the questions this column scored (an unexcluded question can still be unscored: NaN).
        scores[col] = {"mean": mean, "lo": lo, "hi": hi, "n": int((~np.isnan(x)).sum())}
    out: dict[str, Any] = {
        "questions": rows.height,
        "scored": scored.height,
        "episodes": scored["episode"].n_unique(),
        "excluded": {reason: n for reason, n in excluded},
        "scores": scores,
    }
    # Judges score every question the protocol counts (LoCoMo's adversarial ones only under
    # its own protocol); NaN = unscored.
    counted = rows.filter(~left_out_mask(rows, answer_excluded))
    for col in (c for c in cols if c.startswith("answer_")):
        x = counted[col].cast(pl.Float64).fill_null(math.nan).to_numpy()
        out["scores"][col] = {"mean": _mean(x), "lo": None, "hi": None, "n": int((~np.isnan(x)).sum())}
    for col in ("prompt_tokens", "completion_tokens"):
        if col in rows.columns:
            out[col] = int(rows[col].fill_null(0).sum())
    return out


def _kind_order(kinds: Sequence[str]) -> list[str]:
    return sorted(kinds, key=lambda k: (k == "", k))


def per_user(rows: pl.DataFrame, metric: str) -> dict[str, dict[str, Any]]:
    """One system's accuracy per user, whole and by halves of that user's own questions.

    A user's halves are the tables' (``memsim.analysis.stats.user_halves``: the
    user's questions, scored or not, split at their median ``q_index``), so a
    heavy user cannot hide another's decline. Answer-judge columns get a mean
    per user too. NaN scores are left out; a user with none scored gets nulls.
    """
    from memsim.analysis.stats import user_halves

    out: dict[str, dict[str, Any]] = {}
    answer_cols = [c for c in rows.columns if c.startswith("answer_") and rows[c].dtype.is_numeric()]
    if rows.height:
        rows = rows.join(user_halves(rows).select("question_id", "half"), on="question_id", how="left")
    # One pass splits the rows by user (a filter per user would read every row once per user).
    for (user,), part in rows.partition_by("user_id", maintain_order=True, as_dict=True).items():
        part = part.sort("q_index")
        x = part[metric].cast(pl.Float64).fill_null(math.nan).to_numpy()
        ok = ~np.isnan(x)
        second = (part["half"].to_numpy() == 1)[ok]
        x = x[ok]
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
            entry[col] = _mean(part[col].cast(pl.Float64).fill_null(math.nan).to_numpy())
        out[str(user)] = entry
    return out


def _system_llm(spec: RunSpec, tl: pl.DataFrame) -> dict[str, int]:
    """The system's own LLM calls and tokens over the run (``{}`` when it made none)."""
    if tl.height == 0:
        return {}
    # Fresh systems per episode: counters restart, so each episode's last row adds up.
    last = tl.group_by("episode", maintain_order=True).last() if spec.fresh_per_episode else tl.tail(1)
    calls, tokens = int(last["llm_calls"].fill_null(0).sum()), int(last["tokens"].fill_null(0).sum())
    return {"system_llm_calls": calls, "system_llm_tokens": tokens} if calls or tokens else {}


def _storage(spec: RunSpec, timeline: pl.DataFrame, info: Mapping[str, Any], system: str) -> dict[str, Any]:
    tl = timeline.filter(pl.col("system") == system) if timeline.height else timeline
    if spec.fresh_per_episode:
        # Fresh systems per episode: the footprint is the sum of every episode's final store.
        finals = [p.get("stats", {}).get(system) for p in info.get("parts", [])]
        finals = [f for f in finals if f]
        return {
            **_system_llm(spec, tl),
            "final_items": sum(f["items"] for f in finals) if finals else None,
            "final_bytes": sum(f["bytes"] for f in finals) if finals else None,
        }
    return {
        **_system_llm(spec, tl),
        "final_items": int(tl["items"].tail(1)[0]) if tl.height else None,
        "final_bytes": int(tl["bytes"].tail(1)[0]) if tl.height else None,
        "forget_probe_leaks": int(tl["leaked"].fill_null(0).sum()) if tl.height else 0,
    }


def _system_reports(spec: RunSpec, info: Mapping[str, Any]) -> dict[str, Any]:
    """The systems' own reports; for static runs summed over episodes (e.g. a gate's compression)."""
    if not spec.fresh_per_episode:
        return dict(info.get("system_reports") or {})
    out: dict[str, Any] = {}
    for part in info.get("parts", []):
        for system, report in (part.get("reports") or {}).items():
            entry = out.setdefault(system, {"per_episode": {}})
            entry["per_episode"][part.get("episode", part["key"])] = report
    for entry in out.values():
        # A gated system reports its own counts; one that sits on a gate (neuroplastic) reports the gate's.
        def count(key: str) -> int:
            return sum(r.get(key, r.get(f"gate_{key}", 0)) for r in entry["per_episode"].values())

        seen, stored = count("turns_seen"), count("turns_stored")
        if seen:
            entry.update(turns_seen=seen, turns_stored=stored, kept=stored / seen, compression=1.0 - stored / seen)
    return out


def _latency(values: pl.Series) -> dict[str, float | None]:
    v = values.drop_nulls().to_numpy().astype(float)
    if v.size == 0:
        return {"p50": None, "p95": None, "mean": None}
    return {"p50": float(np.percentile(v, 50)), "p95": float(np.percentile(v, 95)), "mean": float(v.mean())}


def summarise(
    spec: RunSpec, probes: pl.DataFrame, timeline: pl.DataFrame, info: Mapping[str, Any]
) -> Summary:
    """Tables and metrics of a run from its rows (``probes``, ``timeline``) and ``run.json``.

    The bootstrap draws from the run's ``stats`` stream (``memsim.core.streams.streams``),
    so the figures are a function of the folder alone.
    """
    from memsim.core.streams import streams

    rng = streams(spec.seed)["stats"]
    metric = spec.metric
    metrics: dict[str, Any] = {
        "kind": spec.kind,
        "metric": metric,
        "k": spec.k,
        "ks": list(spec.ks),
        "control": spec.control,
        "totals": info.get("totals", {}),
        "span_days": info.get("span_days"),
    }
    # A static protocol records its name and what it leaves out of answer accuracy in its scenario's arguments.
    protocol = spec.scenario.args.get("protocol")
    answer_excluded = tuple(spec.scenario.args.get("answer_excluded") or ())
    if protocol:
        metrics["protocol"] = {"name": protocol, "answer_excluded": list(answer_excluded)}
    if spec.answer is not None:
        from memsim.sim.answer.readers import PROMPT_PARAPHRASE

        metrics["reader_prompts"] = list(spec.answer.prompts or ()) or PROMPT_PARAPHRASE
    timings: dict[str, Any] = {"systems": {}}
    scored = probes.filter(pl.col("error").is_null()) if probes.height else probes
    # A system that failed mid-run has rows for part of the questions only: no table is computed from them.
    failed = dict(info.get("failed_systems") or {})
    if failed and scored.height:
        scored = scored.filter(~pl.col("system").is_in(list(failed)))
    if probes.height and metric not in probes.columns:
        raise UserError(f"the rows have no column {metric!r} (the run's metric); scorers: {', '.join(spec.scorers)}")
    systems = list(dict.fromkeys(scored["system"].to_list())) if scored.height else []
    learning = None
    if spec.kind == "longitudinal" and scored.height:
        learning = _learning(spec, probes, scored, info, systems, metrics, rng)
    cols = score_columns(spec, probes)
    per_system: dict[str, Any] = {}
    for name in systems:
        rows = scored.filter(pl.col("system") == name)
        entry: dict[str, Any] = dict(learning.get(name, {})) if learning is not None else {}
        per_system[name] = _system_entry(spec, name, rows, probes, timeline, info, cols, entry, rng, answer_excluded)
        tl = timeline.filter(pl.col("system") == name) if timeline.height else timeline
        timings["systems"][name] = {
            "retrieve_ms": _latency(rows["retrieve_ms"]),
            "ingest_ms_total": float(tl["ingest_ms"].fill_null(0).sum()) if tl.height else None,
        }
    for name, why in failed.items():
        per_system[name] = {"failed": why, "questions": probes.filter(pl.col("system") == name).height}
    metrics["systems"] = per_system
    if failed:
        metrics["failed_systems"] = failed
    _run_wide(spec, scored, timeline, info, cols, metrics, timings)
    return Summary(learning, _clean(metrics), _clean(timings))


def _learning(spec: RunSpec, probes: pl.DataFrame, scored: pl.DataFrame, info: Mapping[str, Any],
              systems: Sequence[str], metrics: dict[str, Any], rng: np.random.Generator) -> dict[str, dict[str, Any]]:
    """A longitudinal run's learning table and figures (into ``metrics``): the arms, the unit, the contrasts."""
    from memsim.analysis.learning import design_unit, family_arms, gain_curve, learning_table

    metric = spec.metric
    control = spec.control if spec.control in systems else None
    metrics["control"] = control
    if spec.control and control is None:
        metrics["control_missing"] = spec.control
    metrics["feedback"] = spec.feedback_from
    twins, placebos = twins_and_placebos(systems, info)
    arms = family_arms(systems, info)
    # The unit is the design's (the users the stream plays, failures included), decided once for every table.
    unit, users, reason = design_unit(info, probes)
    metrics["inference_unit"] = {"unit": unit, "users": users, "reason": reason}
    learning = learning_table(
        scored, metric=metric, twins=twins, placebos=placebos, control=control, rng=rng, n_boot=spec.n_boot,
        balance_kinds=spec.balance_kinds, seed=spec.seed, arms=arms, unit=unit, unit_reason=reason,
        channel=spec.feedback_from,
    )
    metrics["balance_kinds"] = spec.balance_kinds
    metrics["twins"] = twins
    metrics["placebos"] = placebos
    metrics["arms"] = arms
    metrics["gain_curves"] = {s: gain_curve(scored, metric=metric, system=s, twin=t) for s, t in twins.items()}
    metrics.update(_report_figures(spec, scored, twins, placebos, control, arms=arms, unit=(unit, reason)))
    return learning


def _system_entry(spec: RunSpec, name: str, rows: pl.DataFrame, probes: pl.DataFrame, timeline: pl.DataFrame,
                  info: Mapping[str, Any], cols: Sequence[str], entry: dict[str, Any], rng: np.random.Generator,
                  answer_excluded: Collection[str]) -> dict[str, Any]:
    """One system's entry of ``metrics.json``: its tables overall and per kind, safety counts, storage, answers."""
    metric = spec.metric
    overall = _table(rows, cols, rng=rng, n_boot=spec.n_boot, answer_excluded=answer_excluded)
    entry.update(
        questions=rows.height,
        mean=overall["scores"].get(metric, {}).get("mean"),
        overall=overall,
        per_kind={
            kind: _table(rows.filter(pl.col("kind") == kind), cols, rng=rng, n_boot=spec.n_boot,
                         answer_excluded=answer_excluded)
            for kind in _kind_order(list(dict.fromkeys(rows["kind"].to_list())))
        },
        stale_above_current=overall["scores"].get("stale_above_current", {}).get("mean"),
        isolation_failures=int(rows["isolation_failures"].sum()),
        deleted_leaks=int(rows["deleted_leaks"].sum()),
        **_storage(spec, timeline, info, name),
    )
    in_words = _forgotten_in_words(rows)
    if in_words:  # only a world with forget requests in the user's words has the figure
        entry["forgotten_in_words"] = in_words
    for col in cols:
        if col.startswith("answer_"):
            entry[col] = overall["scores"][col]["mean"]
    if spec.kind == "longitudinal":
        entry["per_user"] = per_user(rows, metric)
    answer_cols = [c for c in cols if c.startswith("answer_")]
    if answer_cols:
        entry["answers"] = answer_table(
            probes.filter(pl.col("system") == name), answer_cols, llm_judges=llm_columns(spec),
            answer_excluded=answer_excluded,
        )
    return entry


def _run_wide(spec: RunSpec, scored: pl.DataFrame, timeline: pl.DataFrame, info: Mapping[str, Any],
              cols: Sequence[str], metrics: dict[str, Any], timings: dict[str, Any]) -> None:
    """What the run as a whole adds to ``metrics`` and ``timings``: judges, failures, feedback, load, LLM use."""
    judges = judge_marks(spec, [c for c in cols if c.startswith("answer_")])
    if judges:
        metrics["judges"] = judges
    metrics["isolation_failures"] = int(scored["isolation_failures"].sum()) if scored.height else 0
    metrics["failures"] = list(info.get("failures", []))
    metrics["feedback_unscored"] = dict(info.get("feedback_unscored", {}))
    metrics["feedback_told"] = dict(info.get("feedback_told", {}))
    reports = _system_reports(spec, info)
    if reports:
        metrics["system_reports"] = reports
    if spec.load is not None:
        table = load_table(
            scored, timeline, score=score_column(cols, spec.metric), deadline_s=spec.load.deadline_s
        )
        # Modelled service times come from the seeded stream (deterministic); measured ones are wall time.
        (metrics if spec.load.deterministic else timings)["load"] = table
    if info.get("llm"):
        llm = dict(info["llm"])
        timings["llm_latency_s"] = llm.pop("latency_s", None)
        metrics["llm"] = llm


GAIN_WINDOW_DAYS = 14.0
"""Simulated days per window of ``gain_bands`` (the report's lead figure)."""


def _report_figures(
    spec: RunSpec, scored: pl.DataFrame, twins: Mapping[str, str], placebos: Mapping[str, str], control: str | None,
    *, arms: Mapping[str, Mapping[str, str]] | None = None, unit: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The report's figures beside the headline table: each judge's twin table and the gain bands over time.

    ``answer_learning``: the learning table of every scored answer judge but the
    headline. ``gain_bands`` / ``placebo_bands``: gain over the twin per window
    with its 95% band, per learning system (a placebo keyed by its system).
    Each draws from a fresh copy of the ``stats`` stream, so adding one changes
    no other figure.
    """
    from memsim.analysis.curves import answer_metrics
    from memsim.analysis.learning import gain_curve_band, learning_table
    from memsim.core.streams import streams

    judged = [
        c for c in answer_metrics(scored)
        if c != spec.metric and scored[c].cast(pl.Float64).drop_nulls().drop_nans().len()
    ]
    answer_learning = {
        col: learning_table(scored, metric=col, twins=twins, placebos=placebos, control=control,
                            rng=streams(spec.seed)["stats"], n_boot=spec.n_boot, seed=spec.seed, arms=arms,
                            unit=unit[0] if unit else None, unit_reason=unit[1] if unit else None,
                            channel=spec.feedback_from)
        for col in judged
    }
    rng = streams(spec.seed)["stats"]

    def band(system: str, twin: str) -> list[dict[str, Any]]:
        return gain_curve_band(scored, metric=spec.metric, system=system, twin=twin, window_days=GAIN_WINDOW_DAYS,
                               rng=rng, n_boot=spec.n_boot, unit=unit[0] if unit else None)

    bands = {s: band(s, t) for s, t in twins.items()}
    system_of_twin = {t: s for s, t in twins.items()}
    placebo_bands = {system_of_twin[t]: band(p, t) for p, t in placebos.items() if t in system_of_twin}
    out = {
        "answer_learning": answer_learning,
        "gain_bands": {s: b for s, b in bands.items() if b},
        "placebo_bands": {s: b for s, b in placebo_bands.items() if b},
    }
    return {k: v for k, v in out.items() if v}  # a run without them keeps the metrics.json it had


def summarise_folder(run_dir: str | Path) -> Summary:
    """``summarise`` a finished run folder (read by ``memsim.analysis.load.read_run``)."""
    run = read_run(run_dir, require=("run.json", "timeline.parquet"))
    return summarise(run.spec, run.probes, run.timeline, run.info)


def with_metrics(run: RunData) -> RunData:
    """``run`` with its ``metrics.json``; a folder without one is summarised in memory (nothing is written).

    Raises:
        UserError: ``metrics.json`` was made for another metric, or the folder has neither it nor ``run.json``.
    """
    if run.metrics is not None:
        if run.metrics.get("metric") != run.spec.metric:
            raise UserError(
                f"{run.path / 'metrics.json'}: metric {run.metrics.get('metric')!r} is not the metric of spec.json "
                f"({run.spec.metric!r}); remove metrics.json to have it recomputed from the rows"
            )
        return run
    if not (run.path / "run.json").is_file():
        raise UserError(f"{run.path}: missing metrics.json and run.json (not a finished run folder)")
    summary = summarise(run.spec, run.probes, run.timeline, run.info)
    return replace(run, metrics=summary.metrics, perf=run.perf or summary.timings)


def write_summary(run_dir: Path, summary: Summary, *, wall_seconds: float | None = None,
                  phases: Mapping[str, float] | None = None) -> None:
    """Write ``metrics.json`` (deterministic) and ``perf.json`` (wall-clock figures; ``phases``: seconds by phase)."""
    (run_dir / "metrics.json").write_text(
        json.dumps(summary.metrics, indent=2, sort_keys=True, default=_json_default) + "\n", encoding="utf-8"
    )
    timings = dict(summary.timings)
    if wall_seconds is not None:
        timings["wall_seconds"] = round(wall_seconds, 3)
        span = summary.metrics.get("span_days")
        if span and wall_seconds > 0 and summary.metrics.get("kind") == "longitudinal":
            # A discrete-event run does not wait out simulated time: simulated seconds per wall second.
            timings["time_compression"] = round(span * 86400.0 / wall_seconds, 1)
    if phases:
        timings["phases_s"] = {k: round(float(v), 3) for k, v in phases.items()}
    (run_dir / "perf.json").write_text(json.dumps(timings, indent=2, sort_keys=True, default=_json_default) + "\n")


def _clean(o: Any) -> Any:
    """NaN -> null (JSON has no NaN), recursively."""
    if isinstance(o, float) and math.isnan(o):
        return None
    if isinstance(o, Mapping):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return _clean(float(o))
    return o


def _json_default(o: Any) -> Any:
    return str(o)

