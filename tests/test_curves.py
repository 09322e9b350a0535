"""Learning curves and timelines on hand-built rows."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from analysis.curves import (
    accuracy_curves,
    answer_metrics,
    cost_curves,
    fading_mean,
    latency_curves,
    rolling_mean,
    storage_timeline,
)
from sim.errors import UserError

METRIC = "recall_all@10"
"""The headline column of the hand-made rows."""


def _probes() -> pl.DataFrame:
    # System "a": 0,1,NaN,1,1 at days 0,1,2,10,11; system "b": all ones.
    vals = [0.0, 1.0, math.nan, 1.0, 1.0]
    days = [0.0, 1.0, 2.0, 10.0, 11.0]
    rows = []
    for i, (v, t) in enumerate(zip(vals, days)):
        rows.append({"system": "a", "q_index": i, "t_days": t, METRIC: v, "retrieve_ms": float(i + 1),
                     "answer": "x", "answer_f1": 0.5, "prompt_tokens": 10, "completion_tokens": 2})
        rows.append({"system": "b", "q_index": i, "t_days": t, METRIC: 1.0, "retrieve_ms": 10.0,
                     "answer": "y", "answer_f1": 1.0, "prompt_tokens": 20, "completion_tokens": None})
    return pl.DataFrame(rows)


def test_rolling_and_fading_means_hand_computed() -> None:
    x = np.array([1.0, 0.0, 1.0, 1.0])
    assert rolling_mean(x, 2).tolist() == [1.0, 0.5, 0.5, 1.0]
    # a = 0.5: S = 1, 0.5, 1.25, 1.625; N = 1, 1.5, 1.75, 1.875
    assert fading_mean(x, 0.5) == pytest.approx([1.0, 0.5 / 1.5, 1.25 / 1.75, 1.625 / 1.875])
    # A fading factor of 1 is the cumulative mean.
    assert fading_mean(x, 1.0) == pytest.approx(np.cumsum(x) / np.arange(1, 5))
    with pytest.raises(UserError, match="fading factor"):
        fading_mean(x, 0.0)
    with pytest.raises(UserError, match="window"):
        rolling_mean(x, 0)


def test_accuracy_curves_skip_unscored_and_follow_stream_order() -> None:
    c = accuracy_curves(_probes().reverse(), metric=METRIC, window=2, window_days=5.0, fading=0.5)
    a = c.filter(pl.col("system") == "a")
    assert a["q_index"].to_list() == [0, 1, 3, 4]  # NaN question skipped, sorted
    assert a["n"].to_list() == [1, 2, 3, 4]
    assert a["cumulative"].to_list() == pytest.approx([0.0, 0.5, 2 / 3, 0.75])
    assert a["windowed"].to_list() == pytest.approx([0.0, 0.5, 1.0, 1.0])
    # Day window of 5: at day 10 only itself, at day 11 days 10 and 11.
    assert a["windowed_days"].to_list() == pytest.approx([0.0, 0.5, 1.0, 1.0])
    assert a["fading"].to_list() == pytest.approx(list(fading_mean(np.array([0.0, 1.0, 1.0, 1.0]), 0.5)))
    assert c.filter(pl.col("system") == "b")["cumulative"].to_list() == [1.0] * 5
    with pytest.raises(UserError, match="no metric column 'nope'"):
        accuracy_curves(_probes(), metric="nope")


def test_answer_metrics_lists_judge_scores_only() -> None:
    assert answer_metrics(_probes()) == ["answer_f1"]


def test_latency_curves_rolling_median_and_p95() -> None:
    lat = latency_curves(_probes(), window=3)
    a = lat.filter(pl.col("system") == "a")
    assert a["median_ms"].to_list() == pytest.approx([1.0, 1.5, 2.0, 3.0, 4.0])
    assert a["p95_ms"][2] == pytest.approx(np.percentile([1.0, 2.0, 3.0], 95))
    assert set(lat["column"].to_list()) == {"retrieve_ms"}


def test_storage_timeline_takes_last_state_per_time_and_accumulates_ingest() -> None:
    tl = pl.DataFrame(
        {
            "system": ["a", "a", "a", "b"],
            "user_id": ["u0", "u1", "u0", "u0"],
            "t_days": [0.0, 0.0, 1.0, 0.0],
            "items": [1, 2, 5, 7],
            "bytes": [10, 20, 50, 70],
            "tokens": [0, 3, 9, 0],
            "ingest_ms": [1.0, 2.0, 4.0, 8.0],
        }
    )
    s = storage_timeline(tl)
    a = s.filter(pl.col("system") == "a")
    assert a["t_days"].to_list() == [0.0, 1.0]
    assert a["items"].to_list() == [2, 5]
    assert a["ingest_ms"].to_list() == [3.0, 4.0]
    assert a["cum_ingest_ms"].to_list() == [3.0, 7.0]
    assert s["system"].to_list() == ["a", "a", "b"]


def test_cost_curves_accumulate_reader_tokens_per_system() -> None:
    c = cost_curves(_probes())
    a = c.filter(pl.col("system") == "a")
    assert a["cum_prompt_tokens"].to_list() == [10, 20, 30, 40, 50]
    b = c.filter(pl.col("system") == "b")
    assert b["cum_completion_tokens"].to_list() == [0.0] * 5  # nulls count as zero
    assert cost_curves(_probes().drop("prompt_tokens", "completion_tokens")).height == 0
