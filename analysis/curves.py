"""Learning curves and resource timelines from a run's rows.

Curves of a score column (the run's metric, e.g. ``recall_all@10``, or a
judge's answer accuracy when a reader ran; ``accuracy_curves`` keeps its old
name) follow prequential evaluation: each question is scored when it is
asked, before any feedback about it, so the running mean over the stream is
an honest estimate of that score at that point of use. Three views:

- **windowed**: mean over the last ``window`` scored questions of the
  system (and, by simulated time, over the last ``window_days`` days);
- **cumulative**: mean over every scored question so far;
- **fading**: the fading-factor estimate ``S_i / N_i`` with
  ``S_i = x_i + a S_{i-1}`` and ``N_i = 1 + a N_{i-1}``, which forgets old
  questions smoothly (``a`` close to 1 forgets slowly).

Unscored questions (NaN) are skipped, never counted as zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import polars as pl

from memsim.core.errors import UserError

__all__ = [
    "answer_metrics",
    "systems_in",
    "accuracy_curves",
    "latency_curves",
    "storage_timeline",
    "cost_curves",
    "rolling_mean",
    "fading_mean",
]

_NUMERIC_JUDGE_TYPES = (pl.Float64, pl.Float32, pl.Int64, pl.Int32, pl.Boolean)


def answer_metrics(df: pl.DataFrame) -> list[str]:
    """Columns ``answer_<judge>`` holding a judge's numeric score (the answer text itself excluded)."""
    return [
        c
        for c, t in df.schema.items()
        if c.startswith("answer_") and (t in _NUMERIC_JUDGE_TYPES or t.is_numeric())
    ]


def rolling_mean(x: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each position (fewer at the start)."""
    if window < 1:
        raise UserError(f"window must be a positive number of questions, got {window}")
    c = np.concatenate([[0.0], np.cumsum(x, dtype=float)])
    idx = np.arange(1, x.size + 1)
    lo = np.maximum(0, idx - window)
    return (c[idx] - c[lo]) / (idx - lo)


def fading_mean(x: np.ndarray, alpha: float) -> np.ndarray:
    """Fading-factor mean ``S_i / N_i`` at each position."""
    if not 0 < alpha <= 1:
        raise UserError(f"fading factor must be in (0, 1], got {alpha}")
    out = np.empty(x.size, dtype=float)
    s = n = 0.0
    for i, v in enumerate(x):
        s = v + alpha * s
        n = 1.0 + alpha * n
        out[i] = s / n
    return out


def _time_window_mean(t: np.ndarray, x: np.ndarray, days: float) -> np.ndarray:
    """Mean of the values whose time lies in ``(t_i - days, t_i]``, for sorted ``t``."""
    c = np.concatenate([[0.0], np.cumsum(x, dtype=float)])
    hi = np.arange(1, x.size + 1)
    lo = np.searchsorted(t, t - days, side="right")
    return (c[hi] - c[lo]) / (hi - lo)


def systems_in(df: pl.DataFrame) -> list[str]:
    """The systems of a frame's rows, in order of first appearance."""
    return list(dict.fromkeys(df["system"].to_list())) if df.height else []


def _order_cols(df: pl.DataFrame) -> list[str]:
    return [c for c in ("q_index", "t_days") if c in df.columns]


def accuracy_curves(
    df: pl.DataFrame,
    *,
    metric: str,
    window: int = 50,
    window_days: float = 30.0,
    fading: float = 0.98,
) -> pl.DataFrame:
    """Prequential curves of ``metric`` per system (accuracy only when ``metric`` is a judge's column).

    Args:
        df: probe rows with ``system``, ``q_index``, ``t_days`` and ``metric``.
        metric: score column (a run's ``spec.metric`` such as ``recall_all@10``, or ``answer_f1``...).
        window: questions in the windowed mean.
        window_days: simulated days in the time-windowed mean.
        fading: fading factor of the fading-factor mean.

    Returns:
        One row per scored question per system, in stream order: ``system,
        q_index, t_days, n`` (scored so far), ``value``, ``windowed``,
        ``windowed_days``, ``cumulative``, ``fading``.

    Raises:
        UserError: missing metric or ordering column, bad window or factor.
    """
    if metric not in df.columns:
        raise UserError(f"probes: no metric column {metric!r}; valid: {', '.join(_score_like(df))}")
    if "q_index" not in df.columns:
        raise UserError("probes: no column 'q_index'; curves need the question order")
    if window_days <= 0:
        raise UserError(f"window_days must be positive, got {window_days}")
    has_t = "t_days" in df.columns
    parts = []
    for system in systems_in(df):
        rows = (
            df.filter(pl.col("system") == system)
            .with_columns(pl.col(metric).cast(pl.Float64).alias("_v"))
            .filter(pl.col("_v").is_not_null() & pl.col("_v").is_not_nan())
            .sort(_order_cols(df))
        )
        x = rows["_v"].to_numpy()
        n = np.arange(1, x.size + 1)
        t = rows["t_days"].cast(pl.Float64).to_numpy() if has_t else np.full(x.size, math.nan)
        parts.append(
            pl.DataFrame(
                {
                    "system": [system] * x.size,
                    "q_index": rows["q_index"].cast(pl.Int64),
                    "t_days": t,
                    "n": n,
                    "value": x,
                    "windowed": rolling_mean(x, window),
                    "windowed_days": _time_window_mean(t, x, window_days) if has_t else np.full(x.size, math.nan),
                    "cumulative": np.cumsum(x) / n if x.size else x,
                    "fading": fading_mean(x, fading),
                },
                schema={
                    "system": pl.Utf8,
                    "q_index": pl.Int64,
                    "t_days": pl.Float64,
                    "n": pl.Int64,
                    "value": pl.Float64,
                    "windowed": pl.Float64,
                    "windowed_days": pl.Float64,
                    "cumulative": pl.Float64,
                    "fading": pl.Float64,
                },
            )
        )
    if not parts:
        return pl.DataFrame(
            schema={
                "system": pl.Utf8,
                "q_index": pl.Int64,
                "t_days": pl.Float64,
                "n": pl.Int64,
                **{c: pl.Float64 for c in ("value", "windowed", "windowed_days", "cumulative", "fading")},
            }
        )
    return pl.concat(parts)


def _score_like(df: pl.DataFrame) -> list[str]:
    return [c for c, t in df.schema.items() if t.is_numeric() and c not in ("q_index", "t_days")]


def _rolling_percentiles(ms: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Median and 95th percentile of each value's trailing window (shorter at the start)."""
    med = np.empty(ms.size)
    p95 = np.empty(ms.size)
    for i in range(min(window - 1, ms.size)):
        med[i], p95[i] = np.percentile(ms[: i + 1], [50, 95])
    if ms.size >= window:
        full = np.percentile(np.lib.stride_tricks.sliding_window_view(ms, window), [50, 95], axis=1)
        med[window - 1 :], p95[window - 1 :] = full[0], full[1]
    return med, p95


def latency_curves(df: pl.DataFrame, *, window: int = 50, columns: Sequence[str] = ("retrieve_ms", "llm_latency_ms")) -> pl.DataFrame:
    """Rolling median and 95th percentile of per-question latencies.

    Returns:
        One row per question per system per latency column present:
        ``system, q_index, t_days, column, ms, median_ms, p95_ms`` (over the
        last ``window`` questions).
    """
    if window < 1:
        raise UserError(f"window must be a positive number of questions, got {window}")
    present = [c for c in columns if c in df.columns]
    parts = []
    for system in systems_in(df):
        rows = df.filter(pl.col("system") == system).sort(_order_cols(df))
        for col in present:
            sub = rows.filter(pl.col(col).is_not_null() & pl.col(col).cast(pl.Float64).is_not_nan())
            if sub.height == 0:
                continue
            ms = sub[col].cast(pl.Float64).to_numpy()
            med, p95 = _rolling_percentiles(ms, window)
            parts.append(
                pl.DataFrame(
                    {
                        "system": [system] * ms.size,
                        "q_index": sub["q_index"].cast(pl.Int64) if "q_index" in sub.columns else np.arange(ms.size),
                        "t_days": sub["t_days"].cast(pl.Float64) if "t_days" in sub.columns else np.full(ms.size, math.nan),
                        "column": [col] * ms.size,
                        "ms": ms,
                        "median_ms": med,
                        "p95_ms": p95,
                    }
                )
            )
    if not parts:
        return pl.DataFrame(
            schema={"system": pl.Utf8, "q_index": pl.Int64, "t_days": pl.Float64, "column": pl.Utf8,
                    "ms": pl.Float64, "median_ms": pl.Float64, "p95_ms": pl.Float64}
        )
    return pl.concat(parts, how="vertical_relaxed")


_STORAGE_COLS = ("items", "bytes", "vector_bytes", "text_bytes", "metadata_bytes", "llm_calls", "tokens")


def storage_timeline(timeline: pl.DataFrame) -> pl.DataFrame:
    """What each system held and had spent over simulated time.

    The timeline's counters are system-wide totals after each event, so at
    each time the last row of the system is its state. ``ingest_ms`` is per
    event and is summed per time point (``cum_ingest_ms`` accumulates it).

    Returns:
        ``system, t_days, items, bytes, vector_bytes, text_bytes,
        metadata_bytes, llm_calls, tokens, ingest_ms, cum_ingest_ms`` (the
        counters present in the timeline), sorted by system then time.
    """
    if timeline.height == 0 or "t_days" not in timeline.columns:
        return pl.DataFrame(schema={"system": pl.Utf8, "t_days": pl.Float64})
    counters = [c for c in _STORAGE_COLS if c in timeline.columns]
    aggs = [pl.col(c).last() for c in counters]
    if "ingest_ms" in timeline.columns:
        aggs.append(pl.col("ingest_ms").fill_nan(None).sum().alias("ingest_ms"))
    out = (
        timeline.with_row_index("_row")
        .sort(["system", "t_days", "_row"])
        .group_by(["system", "t_days"], maintain_order=True)
        .agg(aggs)
    )
    if "ingest_ms" in out.columns:
        out = out.with_columns(pl.col("ingest_ms").cum_sum().over("system").alias("cum_ingest_ms"))
    order = {s: i for i, s in enumerate(dict.fromkeys(timeline["system"].to_list()))}
    return out.sort([pl.col("system").replace_strict(order, return_dtype=pl.Int64), "t_days"])


_COST_COLS = ("prompt_tokens", "completion_tokens", "llm_latency_ms")


def cost_curves(df: pl.DataFrame) -> pl.DataFrame:
    """Cumulative reader cost per system over the question stream.

    Returns:
        ``system, q_index, t_days`` and ``cum_<col>`` for each of
        ``prompt_tokens, completion_tokens, llm_latency_ms`` present (nulls
        count as zero); empty when no reader ran.
    """
    present = [c for c in _COST_COLS if c in df.columns]
    if not present or df.height == 0:
        return pl.DataFrame(schema={"system": pl.Utf8, "q_index": pl.Int64, "t_days": pl.Float64})
    keep = ["system", *_order_cols(df)]
    return (
        df.sort(_order_cols(df))
        .select(
            *keep,
            *[
                pl.col(c).cast(pl.Float64).fill_nan(None).fill_null(0.0).cum_sum().over("system").alias(f"cum_{c}")
                for c in present
            ],
        )
    )
