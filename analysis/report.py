"""Reports of run folders: one self-contained HTML page (``report.html.j2``) and a Markdown summary.

``write_report(run_dir)`` renders what the summariser computed (``metrics.json``,
``memsim.analysis.summary``; a folder without it is summarised in memory) and
computes no statistics of its own. A longitudinal run's report leads with
learning through use: the contrasts of every feedback-using system
(learning from feedback against the best content-ignoring arm, then against
each arm; per half with interval, p and design-based MDE, the DiD, the
stale>cur contrast), each
arm's halves of the metric and of stale>cur (one pair of tables per answer
judge) and the gain over the twin over simulated time with its 95% band. Then
come the overall scores, the metric's curves, storage/latency/cost timelines, one
table of systems x question kinds shaded by value, and the worst questions.
Latencies come from ``perf.json`` (wall-clock). ``compare_runs(run_dirs,
out_dir)`` does the same across runs: summary per run, mean and t-interval
across seeds, and a Friedman ranking with a critical-difference diagram.

The pieces live beside it: ``report_tables`` (the run as read, the tables), ``report_learning``
(the learning tables), ``report_figures`` (figures and the curves' defaults), ``report_page`` (the
HTML page and Markdown pieces) and ``report_compare`` (``compare_runs``); this module builds a run's
report from them and writes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsim.analysis import plots
from memsim.analysis.learning import format_learning, has_learners, learning_title
from memsim.analysis.load import RunData, label_arms
from memsim.analysis.report_compare import compare_runs
from memsim.analysis.report_figures import (
    DEFAULT_FADING,
    DEFAULT_WINDOW,
    DEFAULT_WINDOW_DAYS,
    Figure,
    curve_figures,
    gain_figure,
    timeline_figures,
)
from memsim.analysis.report_learning import twin_tables
from memsim.analysis.report_page import render_page, spec_summary, worst_markdown
from memsim.analysis.report_tables import (
    HeatTable,
    Table,
    answers_table,
    category_table,
    family_order,
    load_run,
    overview_table,
    run_placebos,
    scored_probes,
    worst_questions,
)
from memsim.analysis.summary import format_tables

__all__ = [
    "RunData",
    "load_run",
    "scored_probes",
    "summary_text",
    "write_report",
    "compare_runs",
    "DEFAULT_WINDOW",
    "DEFAULT_WINDOW_DAYS",
    "DEFAULT_FADING",
]


@dataclass(frozen=True, slots=True)
class _Built:
    """Everything a report shows, computed once."""

    learning: tuple[tuple[str, Table], ...]
    overview: Table
    categories: HeatTable | None
    worst: dict[str, list[dict[str, Any]]]
    figures: tuple[Figure, ...]


def _build(run: RunData, *, window: int, window_days: float, fading: float) -> _Built:
    figures: list[Figure] = []
    df = scored_probes(run)
    styles = plots.system_styles(family_order(run), label_arms(run.systems, run.info))
    learning: list[tuple[str, Table]] = []
    if run.longitudinal and df.height:
        learning = twin_tables(run)
        figures.append(gain_figure(run, styles))
        figures += curve_figures(run, df, styles, window=window, window_days=window_days, fading=fading)
        figures += timeline_figures(run, df, styles, window)
    return _Built(tuple(learning), overview_table(run), category_table(run), worst_questions(run), tuple(figures))


def summary_text(run: RunData) -> str:
    """The run's headline tables as plain text: the twin table (longitudinal) or the per-kind tables (static)."""
    if run.longitudinal and run.metrics.get("systems"):
        table = {s: run.entry(s) for s in family_order(run)}
        return format_learning(table, metric=run.metric, control=run.control, placebos=run_placebos(run))

    return "\n\n".join(f"{system}\n{format_tables(run.metrics, system)}" for system in run.systems)


def _ranked_systems(run: RunData) -> list[str]:
    """The run's systems without their twins and placebos (arms of the same system)."""
    arms = label_arms(run.systems, run.info)
    return [s for s in run.systems if arms[s][1] == "system"]


def write_report(
    run_dir: str | Path | RunData,
    *,
    window: int = DEFAULT_WINDOW,
    window_days: float = DEFAULT_WINDOW_DAYS,
    fading: float = DEFAULT_FADING,
) -> Path:
    """Write ``report.html`` and ``report.md`` into a run folder: it renders ``metrics.json``, computing no statistics.

    Args:
        run_dir: a run folder (``memsim run``, ``demo``, ``static``, ``rerun``), or one already loaded.
        window: questions in the windowed accuracy curve.
        window_days: simulated days in the time-windowed curve.
        fading: fading factor of the fading-factor curve.

    Returns:
        Path of ``report.html``.

    Raises:
        UserError: the folder is not a readable run.
    """
    run = run_dir if isinstance(run_dir, RunData) else load_run(run_dir)
    built = _build(run, window=window, window_days=window_days, fading=fading)
    title = f"memsim report: {run.path.name}"
    sections: list[tuple[str, str, list[tuple[str, Any]]]] = []
    entries = {s: run.entry(s) for s in run.systems}
    through = learning_title(entries).split(" (")[0] if built.learning else ""
    summary = ("summary", "Overall", [("table", built.overview)])
    if not has_learners(entries):
        sections.append(summary)  # nothing learns: the overall figures lead, the change through use follows
    if built.learning:
        lead: list[tuple[str, Any]] = []
        for heading, table in built.learning:
            lead += [("h3", heading), ("table", table)]
        lead += [("figure", f) for f in built.figures if f.section == "learning"]
        sections.append(("learning", f"{through}: {run.metric}", lead))
    if has_learners(entries):
        sections.append(summary)
    answers = answers_table(run)
    if answers is not None:
        sections.append(("answers", "Answers and judges", [("table", answers)]))
    for sid, title_s in (("curves", "Learning curves"), ("timelines", "Storage, latency and cost timelines")):
        figs = [("figure", f) for f in built.figures if f.section == sid]
        if figs:
            sections.append((sid, title_s, figs))
    if built.categories is not None:
        sections.append(("categories", f"Per question kind: {run.metric}", [("heat", built.categories)]))
    from memsim.analysis.missed import as_block, missed_markdown, missed_questions

    missed = missed_questions(run.probes, metric=run.metric, systems=_ranked_systems(run))
    sections.append(("missed", "Questions most systems miss", [("missed", as_block(missed, run.metric))]))
    sections.append(("worst", "Worst questions per system", [("worst", (built.worst, run.metric))]))
    sections.append(("spec", "Spec", [("spec", json.dumps(run.spec.to_json(), indent=2, sort_keys=True))]))
    out = run.path / "report.html"
    out.write_text(render_page(title, spec_summary(run), sections), encoding="utf-8")

    md = [f"# {title}", "", spec_summary(run), ""]
    overall = ["## Overall", "", built.overview.markdown(), ""]
    if not has_learners(entries):
        md += overall
    for metric, table in built.learning:
        md += [f"## {through}: {metric}", "", table.markdown(), ""]
    for f in built.figures:
        if f.svg is None:
            md += [f"_{f.caption}_", ""]
    if has_learners(entries):
        md += overall
    if answers is not None:
        md += ["## Answers and judges", "", answers.markdown(), ""]
    if built.categories is not None:
        md += ["## Per question kind", "", built.categories.markdown(), ""]
    md += ["## Questions most systems miss", "", missed_markdown(missed, run.metric), ""]
    md += ["## Worst questions", "", worst_markdown(built.worst, run.metric)]
    (run.path / "report.md").write_text("\n".join(md).rstrip() + "\n", encoding="utf-8")
    return out
