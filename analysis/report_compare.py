"""Comparing run folders: the summary per run, the mean across runs (seeds) and a Friedman ranking.

``compare_runs(run_dirs, out_dir)`` writes ``compare.html`` and ``compare.md``; every per-run figure
comes from that run's ``metrics.json``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from memsim.analysis import curves as cv
from memsim.analysis import plots
from memsim.analysis.load import RunData
from memsim.analysis.report_figures import DEFAULT_FADING, DEFAULT_WINDOW, Figure
from memsim.analysis.report_page import render_page, spec_summary
from memsim.analysis.report_tables import Table, load_run, percent, points, scored_count, scored_probes, scored_rows
from memsim.analysis.stats import (
    critical_difference_plot,
    friedman_ranking,
    summarise_seeds,
)
from memsim.core.errors import UserError

__all__ = ["compare_runs"]


def _run_label(run: RunData, others: Sequence[RunData]) -> str:
    names = [r.path.name for r in others]
    return run.path.name if names.count(run.path.name) == 1 else str(run.path)


_COMPARED = ("overall", "first", "second", "gain_second", "did_control")
"""The per-run figures of ``compare_runs``, each from the run's ``metrics.json``."""


def _per_run_rows(run: RunData, label: str) -> list[dict[str, Any]]:
    """One row per system of a run, the figures from its ``metrics.json``.

    ``overall``: the metric over the run; for longitudinal runs ``first`` and ``second`` (the halves of each
    user's questions), ``gain_second`` (gain over the twin in the second half; None for a system without a
    twin) and ``did_control`` (difference in differences against the static control).
    """
    rows = scored_rows(run)
    out = []
    for system in run.systems:
        e = run.entry(system)
        score = e.get("overall", {}).get("scores", {}).get(run.metric) or {}
        out.append({
            "run": label, "system": system, "metric": run.metric,
            "n": scored_count(rows.filter(pl.col("system") == system), run.metric),
            "overall": score.get("mean"),
            **{key: e.get(key) for key in _COMPARED[1:]},
        })
    return out


def compare_runs(
    run_dirs: Sequence[str | Path],
    out_dir: str | Path,
    *,
    window: int = DEFAULT_WINDOW,
    fading: float = DEFAULT_FADING,
) -> Path:
    """Compare several run folders; write ``compare.html`` and ``compare.md`` into ``out_dir``.

    Shows, per run and system, figures of the run's ``metrics.json``: the
    headline metric and, for longitudinal runs, the halves, the gain over the
    twin in the second half and the difference in differences against the
    static control; across runs (seeds), the mean and 95% t-interval of each
    figure per system; and, with at least three systems in at least two runs, a
    Friedman ranking with Nemenyi post-hoc tests and a critical-difference
    diagram (runs as datasets).

    Returns:
        Path of ``compare.html``.

    Raises:
        UserError: no runs, a folder is not a readable run, or the runs score different metrics.
    """
    runs = _load_runs(run_dirs)
    metric = runs[0].metric
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    curve_parts = []
    for run in runs:
        label = _run_label(run, runs)
        rows.extend(_per_run_rows(run, label))
        if run.longitudinal and run.probes.height:
            acc = cv.accuracy_curves(scored_probes(run), metric=metric, window=window, fading=fading)
            curve_parts.append(acc.with_columns((pl.lit(label + " / ") + pl.col("system")).alias("system")))
    table = pl.DataFrame(rows, schema={"run": pl.Utf8, "system": pl.Utf8, "metric": pl.Utf8, "n": pl.Int64,
                                       **{key: pl.Float64 for key in _COMPARED}})
    per_run = _per_run_table(table, runs)
    across = _across_table(table)
    ranking = _ranking(table, metric)
    sections: list[tuple[str, str, list[tuple[str, Any]]]] = [
        ("runs", "Runs", [("list", [f"{r.path}: {spec_summary(r)}" for r in runs])]),
        ("summary", "Summary per run", [("table", per_run)]),
        ("seeds", "Across runs", [("table", across)]),
    ]
    if ranking:
        sections.append(("ranking", "Ranking", ranking))
    if curve_parts:
        alt = "accuracy over question index, all runs"
        svg = plots.accuracy_figure(pl.concat(curve_parts), x="q_index", window=window, fading=fading, metric=metric)
        sections.append(("curves", "Learning curves", [("figure", Figure("curves", alt, alt, svg))]))
    path = out / "compare.html"
    path.write_text(render_page("memsim comparison", "", sections), encoding="utf-8")
    md = ["# memsim comparison", "", "## Summary per run", "", per_run.markdown(), "", "## Across runs", "", across.markdown()]
    if ranking:  # the ranking's tables, or the sentence saying why there is none
        md += ["", "## Ranking", "", "\n\n".join(v.markdown() if k == "table" else v for k, v in ranking if k != "figure")]
    (out / "compare.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    return path


def _load_runs(run_dirs: Sequence[str | Path]) -> list[RunData]:
    """The runs, read; they must score one metric.

    Raises:
        UserError: no runs, a folder is not a readable run, or the runs score different metrics.
    """
    if not run_dirs:
        raise UserError("compare: give at least one run folder")
    runs = [load_run(d) for d in run_dirs]
    metrics = dict.fromkeys(r.metric for r in runs)
    if len(metrics) > 1:
        named = ", ".join(f"{r.path}: {r.metric}" for r in runs)
        raise UserError(f"compare: the runs have different metrics (spec.json metric: {named}); compare runs of one metric")
    return runs


_PERCENT = ("overall", "first", "second")
"""The figures of ``_COMPARED`` shown in percent; the others are differences in percentage points."""
_HEADERS = ("overall (%)", "1st half (%)", "2nd half (%)", "gain over twin, 2nd half (pp)", "DiD vs static control (pp)")
"""Column headings of the figures of ``_COMPARED``."""


def _per_run_table(table: pl.DataFrame, runs: Sequence[RunData]) -> Table:
    """The figures of every run and system, one row each."""
    controls = list(dict.fromkeys(r.control for r in runs if r.control is not None))
    return Table(
        ("run", "system", "metric", "n", *_HEADERS),
        tuple(
            (r["run"], r["system"], r["metric"], str(r["n"]),
             *((percent if key in _PERCENT else points)(r[key]) for key in _COMPARED))
            for r in table.iter_rows(named=True)
        ),
        ("every figure comes from the run's metrics.json: overall = the metric over the run; halves = each user's "
         "questions split at that user's own median; gain over twin = system minus its twin (the same system with "
         "feedback withheld) in the 2nd half, — for a system without a twin; DiD vs static control "
         f"({', '.join(controls) or 'none'}) = (2nd - 1st)_system - (2nd - 1st)_control",
         "n = questions scored on the metric"),
    )


def _across_table(table: pl.DataFrame) -> Table:
    """Each system's figures across runs (seeds): mean with a 95% t-interval."""
    seed_rows = []
    for system in dict.fromkeys(table["system"].to_list()):
        part = table.filter(pl.col("system") == system)
        cells = [system]
        for col in _COMPARED:
            s = summarise_seeds(part[col].cast(pl.Float64).fill_null(math.nan).to_numpy(),
                                bounds=(0.0, 1.0) if col in _PERCENT else (-1.0, 1.0))
            fmt = percent if col in _PERCENT else points
            cells.append("—" if s.n == 0 else f"{fmt(s.mean)} [{fmt(s.ci[0])}, {fmt(s.ci[1])}] (n={s.n})")
        seed_rows.append(tuple(cells))
    return Table(
        ("system", *_HEADERS),
        tuple(seed_rows),
        ("mean across runs with a 95% Student t interval; n = runs with a value (an interval needs n >= 2)",),
    )


def _ranking(table: pl.DataFrame, metric: str) -> list[tuple[str, Any]]:
    """The ranking's blocks (ranks, Nemenyi pairs, diagram), the sentence saying why there is none, or nothing.

    Nothing with fewer than three systems or two runs.
    """
    wide = table.pivot(on="run", index="system", values="overall", aggregate_function="first")
    if wide.height < 3 or wide.width - 1 < 2:
        return []
    complete = wide.drop_nulls()
    shared = complete["system"].to_list()
    if len(shared) < 3:  # said "needs at least 3 systems, got 1" of runs with five systems between them
        return [("p", f"No ranking: a Friedman ranking needs at least 3 systems scored in every run; "
                      f"{wide.height} systems across {wide.width - 1} runs, {len(shared)} in all of them"
                      + (f" ({', '.join(shared)})" if shared else ""))]
    try:
        fr = friedman_ranking(complete)
    except UserError as exc:
        return [("p", f"No ranking: {exc}")]
    ranks = Table(
        ("system", "mean rank (1 = best)"),
        tuple((s, f"{r:.2f}") for s, r in sorted(zip(fr.systems, fr.mean_ranks), key=lambda t: t[1])),
        (
            f"{fr.test}: chi2 = {fr.statistic:.2f}, p = {fr.p_value:.3g}, N = {fr.n_datasets} runs, "
            f"k = {fr.k} systems, effect size Kendall's W = {fr.kendall_w:.2f}; "
            f"Nemenyi critical difference at alpha {fr.alpha:g} = {fr.cd:.2f}",
            f"ranked on {metric}",
        ),
    )
    pairs = Table(
        ("system A", "system B", "Nemenyi p", "mean rank difference"),
        tuple(
            (a, b, f"{p:.3g}", f"{fr.mean_ranks[fr.systems.index(a)] - fr.mean_ranks[fr.systems.index(b)]:+.2f}")
            for a, b, p in fr.pairwise_p
        ),
        (f"Nemenyi post-hoc (studentized range), N = {fr.n_datasets} runs; effect = difference in mean rank",),
    )
    cd = "critical-difference diagram"
    return [("table", ranks), ("table", pairs), ("figure", Figure("ranking", cd, cd, critical_difference_plot(fr)))]
