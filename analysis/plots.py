"""Matplotlib figures of curves and timelines, returned as SVG text.

Every function draws on its own figure with the Agg backend and returns the
SVG as a string, so reports can embed it without touching the network or
the file system. Text stays text (``svg.fonttype = none``) and ids and dates
are fixed, so the same rows give byte-identical figures.

Three rules keep a figure readable at a glance:

- every system keeps one colour and line style across all figures
  (``system_styles``): a twin or placebo shares its system's colour with a
  line style of its own, so no two labels ever share a colour+style pair;
- the legend lists every system, sits outside the panels on the right and is
  saved inside the picture (``bbox_inches="tight"``), so it is never cut off;
- a panel without data (no LLM calls, no reader) is not drawn; the caller
  says so in words (``panels_with_data``).

Data artists carry the SVG id ``series-N`` and the legend the id ``legend``,
so tests can check a figure's panels and legend in the SVG itself.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import polars as pl

from memsim.analysis.curves import systems_in
from memsim.analysis.load import label_arms

__all__ = [
    "PALETTE",
    "system_styles",
    "panels_with_data",
    "STORAGE_PANELS",
    "COST_PANELS",
    "gain_figure",
    "accuracy_figure",
    "latency_figure",
    "storage_figure",
    "cost_figure",
]

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

PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
)
"""Ten colours that stay apart on screen and in print (matplotlib's tab10, reordered so neighbours contrast)."""

# Line styles by role; the n-th pass through the palette adds dots so a style never repeats with a colour.
_ROLE_DASH = {"system": (), "twin": (5.0, 2.0), "placebo": (1.0, 1.5), "always_false": (3.0, 1.0, 1.0, 1.0),
              "always_true": (6.0, 1.5, 1.0, 1.5)}
_OTHER_ARM_DASH = (2.0, 2.0)
"""The line of an arm of a role not named above (a future arm still gets a line of its own, never a KeyError)."""
_MAX_COLS = 3
_PANEL_W = 3.9
_PANEL_H = 2.9
BURN_IN = 10
"""Scored questions a system's curve needs before it is drawn: a mean of the first one or two questions is 0 or
100% and would start every curve with a vertical spike."""


def _preferred(name: str) -> int:
    """A system's own palette slot, from its name alone (the same in every run and report)."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "big") % len(PALETTE)


def system_styles(
    labels: Sequence[str], arms: Mapping[str, tuple[str, str]] | None = None
) -> dict[str, dict[str, Any]]:
    """Colour and line style of every label, each colour+style pair used once.

    A system's colour follows from its name alone (``_preferred``), so it
    keeps its colour in every figure of every report. Two systems of one
    run whose names give the same colour are told apart by the line: the
    first in name order is solid, the next adds a dash-dot pattern, and so
    on (the set of systems decides, never their order in the run). Twins,
    placebos and the constant arms take their system's colour (so the
    family reads as one) with a dashed or dotted line of their role.
    ``arms``: every label's ``(system, arm)`` (``memsim.analysis.load.label_arms``
    of the run); default: from the labels alone.

    Returns:
        label -> keyword arguments for ``Axes.plot`` (``color``, ``linestyle``).
    """
    labels = list(dict.fromkeys(labels))
    arms = arms if arms is not None else label_arms(labels)
    passes: dict[str, int] = {}
    taken: dict[int, int] = {}
    for base in sorted({arms[lab][0] for lab in labels}):
        colour = _preferred(base)
        passes[base] = taken.get(colour, 0)
        taken[colour] = passes[base] + 1
    out: dict[str, dict[str, Any]] = {}
    for label in labels:
        base, role = arms[label]
        dash = _ROLE_DASH.get(role, _OTHER_ARM_DASH) + (1.0, 2.0, 6.0, 2.0) * passes[base]
        out[label] = {"color": PALETTE[_preferred(base)], "linestyle": (0, dash) if dash else "solid"}
    return out


def panels_with_data(frame: pl.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns of ``frame`` with at least one finite non-zero value (an all-zero panel says nothing)."""
    keep = []
    for col in columns:
        if col not in frame.columns or frame.height == 0:
            continue
        v = frame[col].cast(pl.Float64).to_numpy()
        v = v[np.isfinite(v)]
        if v.size and np.any(v != 0):
            keep.append(col)
    return keep


@contextmanager
def _figure(n_panels: int, *, width: float = _PANEL_W, height: float = _PANEL_H,
            sharey: bool = False) -> Iterator[tuple[Any, list[Any]]]:
    """A figure with ``n_panels`` panels, at most three per row; yields the figure and the used axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(1, n_panels)
    ncols = min(n, _MAX_COLS)
    nrows = math.ceil(n / ncols)
    with matplotlib.rc_context(_RC):
        fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                                 layout="constrained", sharey=sharey)
        flat = list(axes.ravel())
        for ax in flat[n:]:
            # An unused slot of the last row is removed, not left as an empty frame.
            ax.remove()
        try:
            yield fig, flat[:n]
        finally:
            plt.close(fig)


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    # "tight" grows the picture to hold every artist, the outside legend included.
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight", pad_inches=0.12)
    return buf.getvalue()


class _Series:
    """Numbers the data artists of one figure (SVG ids ``series-N``)."""

    def __init__(self) -> None:
        self.n = 0

    def gid(self) -> str:
        self.n += 1
        return f"series-{self.n}"


def _legend(fig: Any, entries: Sequence[tuple[str, Mapping[str, Any]]], *, title: str | None = None) -> None:
    """One legend for the whole figure, right of the panels, one entry per label (never truncated)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if not entries:
        return
    handles = []
    for _, kw in entries:
        if kw.get("patch"):
            handles.append(Patch(facecolor=kw["color"], alpha=kw.get("alpha", 1.0), edgecolor="none"))
        else:
            handles.append(Line2D([], [], color=kw["color"], linestyle=kw.get("linestyle", "solid"), lw=1.6,
                                  marker=kw.get("marker")))
    legend = fig.legend(handles, [label for label, _ in entries], loc="outside right upper", frameon=False,
                        title=title, handlelength=3.2)
    legend.set_gid("legend")
    # The legend's room is added to the figure rather than taken from the panels, which would
    # otherwise shrink (or collapse) when labels are long and panels few.
    extent = legend.get_window_extent(fig.canvas.get_renderer())
    fig.set_figwidth(fig.get_figwidth() + extent.width / fig.dpi)


def _system_legend(fig: Any, systems: Sequence[str], styles: Mapping[str, Mapping[str, Any]]) -> None:
    _legend(fig, [(s, styles[s]) for s in systems], title="system")


def gain_figure(
    curves: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    metric: str,
    window_days: float,
    styles: Mapping[str, Mapping[str, Any]],
    placebos: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    band_label: str = "95% band",
) -> str:
    """Gain over the twin per learning system over simulated time, one panel each, with its band.

    Args:
        curves: system -> windows (``memsim.analysis.learning.gain_curve_band``: ``t_days, gain, lo, hi, n``).
        metric: the metric (axis label).
        window_days: width of a window (axis label).
        styles: ``system_styles`` of the run.
        placebos: system -> its placebo's windows (placebo minus twin), drawn in the same panel.
        band_label: legend text of the band (what it resamples).
    """
    placebos = placebos or {}
    systems = list(curves)
    series = _Series()
    with _figure(len(systems), sharey=True) as (fig, axes):
        entries: list[tuple[str, Mapping[str, Any]]] = []
        for ax, system in zip(axes, systems):
            style = styles[system]
            pts = curves[system]
            t = np.array([p["t_days"] for p in pts], dtype=float)
            g = 100 * np.array([p["gain"] for p in pts], dtype=float)
            lo = 100 * np.array([np.nan if p.get("lo") is None else p["lo"] for p in pts], dtype=float)
            hi = 100 * np.array([np.nan if p.get("hi") is None else p["hi"] for p in pts], dtype=float)
            ax.axhline(0.0, color="#444", lw=0.8, zorder=1)
            ax.fill_between(t, lo, hi, color=style["color"], alpha=0.18, lw=0, gid=series.gid())
            ax.plot(t, g, color=style["color"], linestyle=style["linestyle"], lw=1.8, marker="o", ms=3.5,
                    gid=series.gid())
            entries.append((f"{system} − twin", {**style, "marker": "o"}))
            if system in placebos:
                pp = placebos[system]
                ax.plot([p["t_days"] for p in pp], [100 * p["gain"] for p in pp], color="#555",
                        linestyle=(0, (1.0, 1.5)), lw=1.4, gid=series.gid())
                entries.append((f"{system}~placebo − twin", {"color": "#555", "linestyle": (0, (1.0, 1.5))}))
            ax.set_title(system)
            ax.set_xlabel(f"simulated days (windows of {window_days:g} days)")
        axes[0].set_ylabel(f"gain over twin, {metric} (pp)")
        entries.append((band_label, {"color": "#888", "patch": True, "alpha": 0.3}))
        _legend(fig, entries)
        return _svg(fig)


def accuracy_figure(
    curves: pl.DataFrame,
    *,
    metric: str,
    x: str = "q_index",
    window: int | None = None,
    window_days: float | None = None,
    fading: float | None = None,
    styles: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """Windowed, cumulative and fading-factor means of ``metric`` per system (three panels).

    Each curve starts at its system's ``BURN_IN``-th scored question.

    Args:
        curves: output of ``memsim.analysis.curves.accuracy_curves``.
        metric: the metric the curves follow (axis label), e.g. a run's ``spec.metric``.
        x: ``"q_index"`` or ``"t_days"``.
        window, window_days, fading: parameters, shown in panel titles.
        styles: ``system_styles`` of the run (default: of the systems in ``curves``).
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
    systems = systems_in(curves)
    styles = styles or system_styles(systems)
    series = _Series()
    with _figure(3, sharey=True) as (fig, axes):
        for ax, (col, title) in zip(axes, panels):
            for system in systems:
                part = curves.filter(pl.col("system") == system)
                if "n" in part.columns:  # from the BURN_IN-th question on: no spike from a mean of one question
                    part = part.filter(pl.col("n") >= BURN_IN)
                ax.plot(part[x].to_numpy(), 100 * part[col].to_numpy(), lw=1.4, gid=series.gid(), **styles[system])
            ax.set_title(title)
            ax.set_xlabel(_X_LABELS.get(x, x))
            ax.set_ylim(-2, 102)
        axes[0].set_ylabel(f"{metric} (%)")
        _system_legend(fig, systems, styles)
        return _svg(fig)


def latency_figure(lat: pl.DataFrame, *, x: str = "q_index", styles: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """Rolling median and p95 latency per system: one panel per latency column and statistic.

    The median and the 95th percentile get panels of their own, so a line's
    style stays the system's and never doubles as "which statistic".
    """
    columns = list(dict.fromkeys(lat["column"].to_list())) if lat.height else []
    systems = systems_in(lat)
    styles = styles or system_styles(systems)
    panels = [(col, stat) for col in columns for stat in ("median_ms", "p95_ms")]
    series = _Series()
    with _figure(len(panels)) as (fig, axes):
        for ax, (col, stat) in zip(axes, panels):
            part = lat.filter(pl.col("column") == col)
            for system in systems_in(part):
                s = part.filter(pl.col("system") == system)
                ax.plot(s[x].to_numpy(), s[stat].to_numpy(), lw=1.4, gid=series.gid(), **styles[system])
            name = col.removesuffix("_ms").replace("_", " ")
            ax.set_title(f"{name}: {'median' if stat == 'median_ms' else '95th percentile'}")
            ax.set_xlabel(_X_LABELS.get(x, x))
            ax.set_ylabel("milliseconds")
        _system_legend(fig, systems, styles)
        return _svg(fig)


STORAGE_PANELS = (
    ("items", "memories stored", 1.0, "items"),
    ("bytes", "storage", 1 / 2**20, "MiB"),
    ("tokens", "system LLM tokens (cumulative)", 1.0, "tokens"),
    ("cum_ingest_ms", "ingest time (cumulative)", 1e-3, "seconds"),
)
"""``(column, title, scale, unit)`` of the storage figure's panels."""

COST_PANELS = (
    ("cum_prompt_tokens", "reader prompt tokens (cumulative)", 1.0, "tokens"),
    ("cum_completion_tokens", "reader completion tokens (cumulative)", 1.0, "tokens"),
    ("cum_llm_latency_ms", "reader LLM time (cumulative)", 1e-3, "seconds"),
)
"""``(column, title, scale, unit)`` of the reader cost figure's panels."""


def _timeline_figure(frame: pl.DataFrame, panels: Sequence[tuple[str, str, float, str]], *, x: str, step: bool,
                     styles: Mapping[str, Mapping[str, Any]] | None) -> str | None:
    keep = set(panels_with_data(frame, [p[0] for p in panels]))
    shown = [p for p in panels if p[0] in keep]
    if not shown:
        return None
    systems = systems_in(frame)
    styles = styles or system_styles(systems)
    series = _Series()
    with _figure(len(shown)) as (fig, axes):
        for ax, (col, title, scale, unit) in zip(axes, shown):
            for system in systems:
                s = frame.filter(pl.col("system") == system)
                xs, ys = s[x].to_numpy(), s[col].cast(pl.Float64).to_numpy() * scale
                if step:
                    ax.step(xs, ys, where="post", lw=1.4, gid=series.gid(), **styles[system])
                else:
                    ax.plot(xs, ys, lw=1.4, gid=series.gid(), **styles[system])
            ax.set_title(title)
            ax.set_xlabel(_X_LABELS.get(x, x))
            ax.set_ylabel(unit)
        _system_legend(fig, systems, styles)
        return _svg(fig)


def storage_figure(storage: pl.DataFrame, *, styles: Mapping[str, Mapping[str, Any]] | None = None) -> str | None:
    """Storage, system LLM tokens and ingest time over simulated days, per system.

    Returns:
        The SVG, without the panels that have no data (``panels_with_data``); None when none has.
    """
    return _timeline_figure(storage, STORAGE_PANELS, x="t_days", step=True, styles=styles)


def cost_figure(cost: pl.DataFrame, *, x: str = "q_index", styles: Mapping[str, Mapping[str, Any]] | None = None) -> str | None:
    """Cumulative reader tokens and reader LLM time per system (None when no reader spent anything)."""
    return _timeline_figure(cost, COST_PANELS, x=x, step=False, styles=styles)
