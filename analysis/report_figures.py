"""The report's figures: the gain over the twin, the metric's learning curves, storage, latency and cost timelines.

A figure with nothing to show is a sentence that says why (``Figure.svg`` None).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from memsim.analysis import curves as cv
from memsim.analysis import plots
from memsim.analysis.learning import MIN_USERS
from memsim.analysis.load import RunData
from memsim.analysis.report_learning import gain_bands
from memsim.analysis.report_tables import run_twins, scored_count
from memsim.analysis.summary import GAIN_WINDOW_DAYS as _GAIN_DAYS

__all__ = [
    "DEFAULT_WINDOW",
    "DEFAULT_WINDOW_DAYS",
    "DEFAULT_FADING",
    "Figure",
    "curve_figures",
    "gain_figure",
    "timeline_figures",
]

DEFAULT_WINDOW = 50
"""Questions in the windowed accuracy curve."""
DEFAULT_WINDOW_DAYS = 30.0
"""Simulated days in the time-windowed accuracy curve."""
DEFAULT_FADING = 0.98
"""Fading factor of the fading-factor accuracy curve."""


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure of the report, or the sentence that stands in for a figure with nothing to show."""

    section: str
    alt: str
    caption: str
    svg: str | None = None
    """None: no data; ``caption`` then says why in words."""
    key: str = ""
    """Short id of the figure (``data-figure`` of the sentence that stands in for it)."""


def gain_figure(run: RunData, styles: Mapping[str, Mapping[str, Any]]) -> Figure:
    """The lead figure: gain over the twin per learning system over simulated time (or why there is none)."""
    bands, placebos = gain_bands(run)
    alt = "gain over twin over simulated time"
    if not bands:
        reason = (
            "No system in this run learns from feedback (none was played with a twin), so there is no gain over a "
            "twin to draw. The table above gives each system's halves and, where a static control ran, its DiD "
            "against it."
            if not run_twins(run) else
            "The learning systems and their twins share no scored question, so there is no gain over the twin to draw."
        )
        return Figure("learning", alt, reason, key="gain-over-twin")
    unit = next(iter(bands.values()))[0]["unit"]
    users = run.probes["user_id"].n_unique()
    band = (f"95% band, {users} users resampled per window" if unit == "user"
            else f"95% band, question threads resampled (conditional on these {users} users)")
    svg = plots.gain_figure(bands, metric=run.metric, window_days=_GAIN_DAYS, styles=styles,
                            placebos=placebos, band_label=band)
    caption = (
        f"Gain over the twin (the same system with feedback withheld) in {run.metric}, percentage points, per "
        f"{_GAIN_DAYS:g}-day window of simulated time; above zero the system does better than its twin on "
        f"the same questions because it used feedback. Shaded: {band}"
        + ("." if unit == "user" else f" (fewer than {MIN_USERS} users: the band does not generalise to other users).")
    )
    return Figure("learning", alt, caption, svg, key="gain-over-twin")


def timeline_figures(run: RunData, df: pl.DataFrame, styles: Mapping[str, Mapping[str, Any]], window: int) -> list[Figure]:
    """Storage, latency and cost figures, each without panels that have no data, and sentences for those."""
    out: list[Figure] = []
    # A system that failed before its first row has no style (it is in no table): its timeline rows stay out.
    drawn = list(styles)
    timeline = run.timeline.filter(pl.col("system").is_in(drawn)) if run.timeline.height else run.timeline
    df = df.filter(pl.col("system").is_in(drawn)) if df.height else df
    if timeline.height:
        storage = cv.storage_timeline(timeline)
        shown = plots.panels_with_data(storage, [p[0] for p in plots.STORAGE_PANELS])
        svg = plots.storage_figure(storage, styles=styles)
        titles = {"items": "memories stored", "bytes": "storage size", "tokens": "the system's own LLM tokens",
                  "cum_ingest_ms": "cumulative ingest time"}
        caption = "Over simulated days: " + ", ".join(titles[c] for c in shown) + "."
        if "tokens" not in shown:
            caption += " No system made LLM calls of its own in this run, so there is no token panel."
        out.append(Figure("timelines", "storage and cost timeline", caption, svg))
    lat = cv.latency_curves(df, window=window)
    if lat.height:
        out.append(Figure("timelines", "latency timeline",
                           f"Rolling median and 95th percentile latency over the last {window} questions (wall-clock).",
                           plots.latency_figure(lat, styles=styles)))
    cost = cv.cost_curves(df)
    svg = plots.cost_figure(cost, styles=styles) if cost.height else None
    if svg is not None:
        out.append(Figure("timelines", "reader cost timeline",
                           "Cumulative reader prompt and completion tokens and reader LLM time.", svg))
    else:
        out.append(Figure("timelines", "reader cost timeline",
                           "No reader LLM calls in this run (retrieval is scored without an answer), so there is no "
                           "reader cost to draw.", key="reader-cost"))
    return out


def curve_figures(
    run: RunData, df: pl.DataFrame, styles: Mapping[str, Mapping[str, Any]], *, window: int, window_days: float,
    fading: float,
) -> list[Figure]:
    """The headline metric's and each answer judge's curves, over question index and over simulated days."""
    figures: list[Figure] = []
    for metric in [run.metric, *[m for m in cv.answer_metrics(df) if m != run.metric]]:
        if scored_count(df, metric) == 0:
            continue
        acc = cv.accuracy_curves(df, metric=metric, window=window, window_days=window_days, fading=fading)
        for x, where in (("q_index", "question index"), ("t_days", "simulated days")):
            if x == "t_days" and acc["t_days"].drop_nans().len() == 0:
                continue
            figures.append(Figure(
                "curves",
                f"{metric} over {where}",
                f"{metric} per system over {where}: windowed, cumulative prequential and fading-factor means.",
                plots.accuracy_figure(acc, x=x, metric=metric, window=window, window_days=window_days,
                                      fading=fading, styles=styles),
            ))
    return figures
