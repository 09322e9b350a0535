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
from memsim.core.table import text_table
from memsim.sim.scorers import build_scorer
from memsim.sim.spec import RunSpec

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


def _left_out(rows: pl.DataFrame, answer_excluded: Collection[str]) -> np.ndarray:
    """Rows excluded for a reason the protocol leaves out of answer accuracy."""
    return np.array([e in answer_excluded for e in rows["excluded"].to_list()], dtype=bool)


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
    counted = rows.filter(~_left_out(rows, answer_excluded))
    for col in (c for c in cols if c.startswith("answer_")):
        x = counted[col].cast(pl.Float64).fill_null(math.nan).to_numpy()
        out["scores"][col] = {"mean": _mean(x), "lo": None, "hi": None, "n": int((~np.isnan(x)).sum())}
    for col in ("prompt_tokens", "completion_tokens"):
        if col in rows.columns:
            out[col] = int(rows[col].fill_null(0).sum())
    return out


def _llm_columns(spec: RunSpec) -> set[str]:
    """The answer columns of LLM judges in this run."""
    from memsim.sim.answer.judges import LLM_JUDGES

    return {f"answer_{n}" for n in LLM_JUDGES}


def judge_marks(spec: RunSpec, answer_cols: Sequence[str]) -> dict[str, Any]:
    """Per answer column: the judge, whether it is an LLM judge, its check result and its mark.

    An LLM judge's mark says whether its check passed (``unreliable`` below
    90%), whether it judges the reader's own model (``self-judging``) and
    whether its prompt is memsim's paraphrase. A run recorded before checks
    existed has no check: its LLM judges are marked unreliable (no check).
    A deterministic judge is marked unreliable when its check on the
    file-free set (``deterministic_check``) is below the bar.
    """
    from memsim.analysis.judge_check import deterministic_check, judge_mark
    from memsim.sim.answer.judges import JUDGE_NAMES, LLM_JUDGES, PARAPHRASE_NOTE

    answer = spec.answer.model_dump() if spec.answer is not None else {}
    checks = (answer.get("judge_checks") or {}).get("judges", {})
    official = bool(answer.get("judge_prompts"))
    out: dict[str, Any] = {}
    for col in answer_cols:
        name = col.removeprefix("answer_")
        if name not in LLM_JUDGES:
            found = checks.get(name) or (deterministic_check(name) if name in JUDGE_NAMES else None)
            out[col] = {"judge": name, "llm": False, "mark": judge_mark(found)}
            if found:
                out[col].update(check=dict(found), reliable=bool(found.get("reliable")))
            continue
        check = checks.get(name) or {
            "accuracy": None,
            "reliable": False,
            "self_judging": bool((answer.get("judge_checks") or {}).get("self_judging")),
            "prompts": "official" if official else "paraphrase",
        }
        out[col] = {
            "judge": name,
            "llm": True,
            "check": dict(check),
            "reliable": bool(check.get("reliable")),
            "self_judging": bool(check.get("self_judging")),
            "prompts": check.get("prompts", "paraphrase"),
            "note": "" if check.get("prompts") == "official" else PARAPHRASE_NOTE,
            "mark": judge_mark(check),
        }
    return out


def answer_table(
    rows: pl.DataFrame, cols: Sequence[str], *, llm_judges: set[str] | frozenset[str] = frozenset(),
    answer_excluded: Collection[str] = (),
) -> dict[str, Any]:
    """Every judge side by side on one system's rows: accuracy, unjudged with reasons, agreement, spread.

    Questions excluded for a reason in ``answer_excluded`` (the protocol's: Mem0's
    LoCoMo protocol leaves the adversarial category out) do not count in
    ``accuracy`` or ``judged``; they are reported in the ``abstention`` entry only.

    Every question counts: rows whose answer failed are unjudged
    (``answer error``); a NaN score is unjudged with its reason (an LLM
    judge's reply without a verdict; a deterministic judge without a gold
    answer). Agreement is over questions both judges judged, verdicts read
    at ``JUDGE_PASS``; kappa is Cohen's.
    """
    from memsim.analysis.judge_check import cohen_kappa
    from memsim.sim.answer.judges import JUDGE_PASS

    errors = rows["error"].is_not_null().to_numpy() if "error" in rows.columns else np.zeros(rows.height, bool)
    abstention = np.zeros(rows.height, dtype=bool)
    left_out = np.zeros(rows.height, dtype=bool)
    if "excluded" in rows.columns:
        abstention = rows["excluded"].is_in(["abstention", "adversarial"]).fill_null(False).to_numpy()
        left_out = _left_out(rows, answer_excluded)
    judges: dict[str, Any] = {}
    verdicts: dict[str, np.ndarray] = {}
    for col in cols:
        x = rows[col].cast(pl.Float64).fill_null(math.nan).to_numpy() if col in rows.columns else np.full(rows.height, math.nan)
        x = np.where(errors, math.nan, x)
        judged = ~np.isnan(x)
        counted = judged & ~left_out
        reasons: dict[str, int] = {}
        if (errors & ~left_out).any():
            reasons["answer error"] = int((errors & ~left_out).sum())
        blank = int((~judged & ~errors & ~left_out).sum())
        if blank:
            reasons["no verdict in the judge's reply" if col in llm_judges else "no gold answer"] = blank
        flag = "unreadable_" + col.removeprefix("answer_")
        unreadable = (rows[flag].cast(pl.Boolean).fill_null(False).to_numpy() & ~errors & ~left_out
                      if flag in rows.columns else np.zeros(rows.height, dtype=bool))
        judges[col] = {
            # LLM judge replies without a readable verdict: scored wrong (in accuracy), counted here.
            "unreadable": int(unreadable.sum()),
            "questions": int((~left_out).sum()),
            "judged": int(counted.sum()),
            "unjudged": int((~judged & ~left_out).sum()),
            "unjudged_reasons": reasons,
            "accuracy": float(x[counted].mean()) if counted.any() else None,
            "abstention": {
                "questions": int(abstention.sum()),
                "judged": int((judged & abstention).sum()),
                "accuracy": float(x[judged & abstention].mean()) if (judged & abstention).any() else None,
            },
        }
        verdicts[col] = x
    agreement = []
    for i, a in enumerate(cols):
        for b in cols[i + 1:]:
            both = ~np.isnan(verdicts[a]) & ~np.isnan(verdicts[b])
            va, vb = verdicts[a][both] >= JUDGE_PASS, verdicts[b][both] >= JUDGE_PASS
            agreement.append({
                "a": a,
                "b": b,
                "n": int(both.sum()),
                "agreement": float((va == vb).mean()) if both.any() else None,
                "kappa": cohen_kappa(va.tolist(), vb.tolist()),
            })
    accs = [j["accuracy"] for j in judges.values() if j["accuracy"] is not None]
    return {
        "judges": judges,
        "agreement": agreement,
        "spread": (max(accs) - min(accs)) if len(accs) >= 2 else None,
    }


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
    from memsim.analysis.learning import design_unit, family_arms, gain_curve, learning_table
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
    cols = score_columns(spec, probes)
    per_system: dict[str, Any] = {}
    for name in systems:
        rows = scored.filter(pl.col("system") == name)
        entry: dict[str, Any] = dict(learning.get(name, {})) if learning is not None else {}
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
                probes.filter(pl.col("system") == name), answer_cols, llm_judges=_llm_columns(spec),
                answer_excluded=answer_excluded,
            )
        per_system[name] = entry
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
            scored, timeline, score=score_column(cols, metric), deadline_s=spec.load.deadline_s
        )
        # Modelled service times come from the seeded stream (deterministic); measured ones are wall time.
        (metrics if spec.load.deterministic else timings)["load"] = table
    if info.get("llm"):
        llm = dict(info["llm"])
        timings["llm_latency_s"] = llm.pop("latency_s", None)
        metrics["llm"] = llm
    return Summary(learning, _clean(metrics), _clean(timings))


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


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def format_tables(
    metrics: Mapping[str, Any], system: str, *, kind_names: Mapping[str, str] | None = None
) -> str:
    """One system's score tables (rows: kinds, then overall; one table per metric family), as text.

    The headline metric is printed again with its 95% interval (episodes resampled).
    """
    entry = metrics["systems"][system]
    names = dict(kind_names or {})
    kinds = [k for k in names if k in entry["per_kind"]] + [k for k in entry["per_kind"] if k not in names]
    groups = [(names.get(k, k), entry["per_kind"][k]) for k in kinds] + [("overall", entry["overall"])]
    cols = list(entry["overall"]["scores"])
    families: dict[str, list[str]] = {}
    for col in cols:
        fam, _, cut = col.partition("@")
        families.setdefault(fam if cut else col, []).append(col)
    for members in families.values():  # metrics.json sorts its keys as strings (@1 @10 @5): numeric order here
        members.sort(key=lambda c: int(c.partition("@")[2]) if c.partition("@")[2].isdigit() else 0)
    lines: list[str] = []
    for fam, members in families.items():
        heads = [c.partition("@")[2] and "@" + c.partition("@")[2] or c.removeprefix("answer_") for c in members]
        # "scored": the questions the family's columns scored (the most over its cut-offs), not those merely
        # left in: a question without gold keys is in the table but unscored.
        rows = [[name, g["questions"], max((g["scores"].get(c, {}).get("n", g["scored"]) for c in members),
                                           default=g["scored"]),
                 *(_num(g["scores"].get(c, {}).get("mean")) for c in members)]
                for name, g in groups]
        lines += [text_table([fam, "n", "scored", *heads], rows), ""]
    metric = metrics["metric"]
    head = entry["overall"]["scores"].get(metric, {})
    if head.get("mean") is not None and head.get("lo") is not None:
        lines.append(
            f"{metric} {head['mean']:.3f} [{head['lo']:.3f}, {head['hi']:.3f}] "
            f"(95% bootstrap interval, {entry['overall']['episodes']} episodes resampled)"
            + _judge_notes(metrics, system, metric)
        )
    excluded = entry["overall"]["excluded"]
    if excluded:
        lines.append("excluded from scores: " + ", ".join(f"{r} {n}" for r, n in excluded.items()))
    if metrics.get("protocol"):
        lines.append(f"protocol {metrics['protocol']['name']}")
    marks = [(c, j) for c, j in (metrics.get("judges") or {}).items() if j.get("mark")]
    for col, info in marks:
        lines.append(f"{col.removeprefix('answer_')}: {info['mark']}")
    return "\n".join(lines)


def _judge_notes(metrics: Mapping[str, Any], system: str, col: str) -> str:
    """What a headline judged by an LLM carries on its own line: replies without a verdict, an unreliable mark."""
    judge = ((metrics["systems"][system].get("answers") or {}).get("judges") or {}).get(col) or {}
    notes = []
    if judge.get("unreadable"):
        notes.append(f"{judge['unreadable']} of {judge['questions']} judge replies had no verdict, scored wrong")
    mark = ((metrics.get("judges") or {}).get(col) or {}).get("mark", "")
    if "unreliable" in mark:
        notes.append(mark)
    return f" [{'; '.join(notes)}]" if notes else ""


def format_compression(metrics: Mapping[str, Any], metric: str) -> str:
    """The gated systems' kept and compression beside the headline ``metric``, one row each (empty: no gate)."""
    reports = metrics.get("system_reports") or {}
    rows = [(name, reports[name]) for name in metrics["systems"] if "kept" in reports.get(name, {})]
    if not rows:
        return ""
    cells = []
    for name, report in rows:
        score = metrics["systems"][name]["overall"]["scores"].get(metric, {})
        interval = f" [{score['lo']:.3f}, {score['hi']:.3f}]" if score.get("lo") is not None else ""
        cells.append([name, f"{report['kept']:.3f}", f"{report['compression']:.3f}",
                      f"{_num(score.get('mean'))}{interval}"])
    return text_table(["system", "kept", "compression", metric], cells, align="lrrl")


def format_answer_accuracy(
    metrics: Mapping[str, Any], probes: pl.DataFrame, system: str, *, column: str
) -> str:
    """Every judge side by side, then the headline judge as LongMemEval reports it.

    One row per judge: accuracy over judged answers, judged and unjudged
    counts (with the reasons), abstention questions (judged with the
    abstention rubric) and the judge's mark (unreliable, self-judging,
    memsim paraphrase). Then pairwise agreement and kappa, the spread of
    accuracy across judges, and for ``column``: overall, task-averaged (the
    mean of the per-kind means, so a large kind does not outweigh a small
    one) and per reason of exclusion. Unjudged answers are counted, never
    scored as wrong and never dropped without a word.
    """
    entry = metrics["systems"][system]
    marks = metrics.get("judges") or {}
    lines: list[str] = []
    protocol = metrics.get("protocol")
    if protocol:
        left = ", ".join(protocol["answer_excluded"])
        lines.append(f"protocol {protocol['name']}" + (f": {left} questions left out of accuracy, "
                                                         "judged in the abstention column" if left else ""))
    prompts = metrics.get("reader_prompts")
    if prompts:
        lines.append("reader prompt: " + (prompts if isinstance(prompts, str) else "from " + ", ".join(prompts)))
    table = entry.get("answers")
    if table:
        rows = []
        for col, j in table["judges"].items():
            ab = j["abstention"]
            ab_text = "-" if not ab["questions"] else f"{_num(ab['accuracy'])} ({ab['judged']}/{ab['questions']})"
            rows.append([col.removeprefix("answer_"), _num(j["accuracy"]), j["judged"], j["unjudged"], ab_text,
                         marks.get(col, {}).get("mark", "")])
        lines.append(text_table(["judge", "accuracy", "judged", "unjudged", "abstention", "mark"], rows,
                                align="lrrrrl"))
        for col, j in table["judges"].items():
            if j.get("unreadable"):
                lines.append(f"unreadable by {col.removeprefix('answer_')}: {j['unreadable']} of {j['questions']} "
                             "replies had no verdict; scored wrong, in the accuracy above")
            if j["unjudged_reasons"]:
                reasons = ", ".join(f"{r} {n}" for r, n in j["unjudged_reasons"].items())
                lines.append(f"unjudged by {col.removeprefix('answer_')}: {reasons}")
        for pair in table["agreement"]:
            kappa = "-" if pair["kappa"] is None else f"{pair['kappa']:.3f}"
            lines.append(
                f"agreement {pair['a'].removeprefix('answer_')} vs {pair['b'].removeprefix('answer_')}: "
                f"{_num(pair['agreement'])} (kappa {kappa}, {pair['n']} answers judged by both)"
            )
        if table["spread"] is not None:
            lines.append(f"spread of accuracy across judges: {table['spread']:.3f}")
    if column.startswith("answer_"):
        lines.append(_headline_accuracy(entry, probes, system, column, marks.get(column, {}).get("mark", "")))
    return "\n".join(lines)


def _headline_accuracy(entry: Mapping[str, Any], probes: pl.DataFrame, system: str, column: str, mark: str) -> str:
    per_kind = [g["scores"].get(column, {}).get("mean") for g in entry["per_kind"].values()]
    kind_means = [v for v in per_kind if v is not None]
    overall = entry["overall"]["scores"].get(column, {})
    parts = [f"overall {_num(overall.get('mean'))} ({overall.get('n', 0)} judged)"]
    task = sum(kind_means) / len(kind_means) if kind_means else None
    parts.append(f"task-averaged {_num(task)} over {len(kind_means)} kinds")
    rows = probes.filter((pl.col("system") == system) & pl.col("excluded").is_not_null()) if probes.height else probes
    if rows.height and column in rows.columns:
        for reason in sorted(set(rows["excluded"].to_list())):
            x = rows.filter(pl.col("excluded") == reason)[column].cast(pl.Float64).fill_null(math.nan).to_numpy()
            judged = x[~np.isnan(x)]
            mean = float(judged.mean()) if judged.size else None
            parts.append(f"{reason} {_num(mean)} ({judged.size} of {x.size} judged)")
    unreadable = ((entry.get("answers") or {}).get("judges") or {}).get(column, {}).get("unreadable")
    if unreadable:
        parts.append(f"{unreadable} replies without a verdict scored wrong")
    text = f"{column}: " + ", ".join(parts)
    return f"{text} [{mark}]" if mark else text
