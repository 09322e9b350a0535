"""Matplotlib figures of curves and timelines, returned as SVG text.

Every function draws on its own figure with the Agg backend and returns the
SVG as a string, so reports can embed it without touching the network or
the file system. Text stays text (``svg.fonttype = none``) and ids and dates
are fixed, so the same rows give byte-identical figures.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import polars as pl

__all__ = ["accuracy_figure", "latency_figure", "storage_figure", "cost_figure", "bar_figure"]

_RC = {
    "svg.fonttype": "none",
    "svg.hashsalt": "memsim",
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
}

_X_LABELS = {"q_index": "question index (stream order)", "t_days": "simulated days since start"}


@contextmanager
def _figure(ncols: int, *, width: float = 4.2, height: float = 3.2) -> Iterator[tuple[Any, Any]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context(_RC):
        fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False, layout="constrained")
        try:
            yield fig, axes[0]
        finally:
            plt.close(fig)


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def _systems(frame: pl.DataFrame) -> list[str]:
    return list(dict.fromkeys(frame["system"].to_list())) if frame.height else []


def _legend(fig: Any, axes: Sequence[Any]) -> None:
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 5), frameon=False)


def accuracy_figure(curves: pl.DataFrame, *, metric: str, x: str = "q_index", window: int | None = None, window_days: float | None = None, fading: float | None = None) -> str:
    """Windowed, cumulative and fading-factor accuracy per system (three panels).

    Args:
        curves: output of ``analysis.curves.accuracy_curves``.
        metric: the metric the curves follow (axis label), e.g. a run's ``spec.metric``.
        x: ``"q_index"`` or ``"t_days"``.
        window, window_days, fading: parameters, shown in panel titles.
    """
    windowed = "windowed_days" if x == "t_days" else "windowed"
    win_label = (
        f"windowed ({window_days:g} days)" if x == "t_days" and window_days else
        f"windowed ({window} questions)" if window else "windowed"
    )
    panels = [
        (windowed, win_label),
        ("cumulative", "cumulative (prequential)"),
        ("fading", f"fading factor {fading:g}" if fading else "fading factor"),
    ]
    with _figure(3) as (fig, axes):
        for ax, (col, title) in zip(axes, panels):
            for system in _systems(curves):
                part = curves.filter(pl.col("system") == system)
                ax.plot(part[x].to_numpy(), 100 * part[col].to_numpy(), lw=1.4, label=system)
            ax.set_title(title)
            ax.set_xlabel(_X_LABELS.get(x, x))
            ax.set_ylim(-2, 102)
        axes[0].set_ylabel(f"{metric} (%)")
        _legend(fig, axes)
        return _svg(fig)


def latency_figure(lat: pl.DataFrame, *, x: str = "q_index") -> str:
    """Rolling median and p95 latency per system, one panel per latency column."""
    columns = list(dict.fromkeys(lat["column"].to_list())) if lat.height else ["retrieve_ms"]
    with _figure(len(columns)) as (fig, axes):
        for ax, col in zip(axes, columns):
            part = lat.filter(pl.col("column") == col)
            for i, system in enumerate(_systems(part)):
                s = part.filter(pl.col("system") == system)
                color = f"C{i}"
                ax.plot(s[x].to_numpy(), s["median_ms"].to_numpy(), color=color, lw=1.4, label=f"{system}")
                ax.plot(s[x].to_numpy(), s["p95_ms"].to_numpy(), color=color, lw=0.8, ls="--")
            ax.set_title(f"{col.removesuffix('_ms')} latency: median (solid), p95 (dashed)")
            ax.set_xlabel(_X_LABELS.get(x, x))
            ax.set_ylabel("milliseconds")
        _legend(fig, axes)
        return _svg(fig)


_STORAGE_PANELS = (
    ("items", "memories stored", 1.0, "items"),
    ("bytes", "storage", 1 / 2**20, "MiB"),
    ("tokens", "system LLM tokens (cumulative)", 1.0, "tokens"),
    ("cum_ingest_ms", "ingest time (cumulative)", 1e-3, "seconds"),
)


def storage_figure(storage: pl.DataFrame) -> str:
    """Storage, system LLM tokens and ingest time over simulated days, per system."""
    panels = [p for p in _STORAGE_PANELS if p[0] in storage.columns]
    with _figure(max(1, len(panels))) as (fig, axes):
        for ax, (col, title, scale, unit) in zip(axes, panels):
            for system in _systems(storage):
                s = storage.filter(pl.col("system") == system)
                ax.step(s["t_days"].to_numpy(), s[col].cast(pl.Float64).to_numpy() * scale, where="post", lw=1.4, label=system)
            ax.set_title(title)
            ax.set_xlabel(_X_LABELS["t_days"])
            ax.set_ylabel(unit)
        _legend(fig, axes)
        return _svg(fig)


def cost_figure(cost: pl.DataFrame, *, x: str = "q_index") -> str:
    """Cumulative reader tokens and reader LLM time per system."""
    panels = [
        (c, t, s, u)
        for c, t, s, u in (
            ("cum_prompt_tokens", "reader prompt tokens (cumulative)", 1.0, "tokens"),
            ("cum_completion_tokens", "reader completion tokens (cumulative)", 1.0, "tokens"),
            ("cum_llm_latency_ms", "reader LLM time (cumulative)", 1e-3, "seconds"),
        )
        if c in cost.columns
    ]
    with _figure(max(1, len(panels))) as (fig, axes):
        for ax, (col, title, scale, unit) in zip(axes, panels):
            for system in _systems(cost):
                s = cost.filter(pl.col("system") == system)
                ax.plot(s[x].to_numpy(), s[col].to_numpy() * scale, lw=1.4, label=system)
            ax.set_title(title)
            ax.set_xlabel(_X_LABELS.get(x, x))
            ax.set_ylabel(unit)
        _legend(fig, axes)
        return _svg(fig)


def bar_figure(table: pl.DataFrame, *, group: str, value: str, lo: str | None = None, hi: str | None = None, ylabel: str = "") -> str:
    """Grouped bars: one group per ``group`` value, one bar per system, optional error bars."""
    import numpy as np

    groups = list(dict.fromkeys(table[group].to_list()))
    systems = _systems(table)
    width = 0.8 / max(1, len(systems))
    with _figure(1, width=max(5.0, 0.9 * len(groups) * max(1, len(systems)) * 0.6 + 2)) as (fig, axes):
        ax = axes[0]
        for i, system in enumerate(systems):
            s = table.filter(pl.col("system") == system)
            lookup = {g: r for g, r in zip(s[group].to_list(), s.iter_rows(named=True))}
            xs = np.arange(len(groups)) + i * width - 0.4 + width / 2
            vals = np.array([100 * (lookup[g][value] if g in lookup and lookup[g][value] is not None else np.nan) for g in groups])
            err = None
            if lo and hi:
                los = np.array([100 * (lookup[g][lo] if g in lookup and lookup[g][lo] is not None else np.nan) for g in groups])
                his = np.array([100 * (lookup[g][hi] if g in lookup and lookup[g][hi] is not None else np.nan) for g in groups])
                err = np.nan_to_num(np.vstack([vals - los, his - vals]), nan=0.0).clip(min=0)
            ax.bar(xs, vals, width=width, yerr=err, capsize=2, label=system)
        ax.set_xticks(np.arange(len(groups)), [str(g) for g in groups], rotation=20, ha="right")
        ax.set_ylabel(ylabel)
        _legend(fig, axes)
        return _svg(fig)
