"""Learning curves and timelines on hand-built rows."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from memsim.analysis.curves import (
    accuracy_curves,
    answer_metrics,
    cost_curves,
    fading_mean,
    latency_curves,
    rolling_mean,
    storage_timeline,
)
from memsim.core.errors import UserError

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


def _paired(users: int, per_user: int) -> pl.DataFrame:
    """A system and its twin on the same questions; the system wins every question of days 14 and later."""
    rows = []
    for u in range(users):
        for q in range(per_user):
            t = float(q * 28 // per_user)
            for system, score in (("s", 1.0 if t >= 14 else float(q % 2)), ("s~twin", 0.0 if t >= 14 else 0.5)):
                rows.append({"system": system, "question_id": f"u{u}q{q}", "user_id": f"u{u}", "thread_id": f"u{u}q{q}",
                             "t_days": t, "error": None, METRIC: score})
    return pl.DataFrame(rows)


def test_gain_curve_band_matches_the_point_curve_and_resamples_users() -> None:
    from memsim.analysis.learning import MIN_USERS, gain_curve, gain_curve_band

    probes = _paired(MIN_USERS, 8)
    band = gain_curve_band(probes, metric=METRIC, system="s", twin="s~twin", window_days=14.0,
                           rng=np.random.default_rng(0), n_boot=300)
    point = gain_curve(probes, metric=METRIC, system="s", twin="s~twin", window_days=14.0)
    assert [(b["t_days"], b["gain"], b["n"]) for b in band] == [(p["t_days"], p["gain"], p["n"]) for p in point]
    assert [b["unit"] for b in band] == ["user", "user"] and band[0]["units"] == MIN_USERS
    # Window 1: every user gains exactly 1, so the band has no width; window 0 varies by user only through q % 2.
    assert band[1]["lo"] == band[1]["hi"] == band[1]["gain"] == 1.0
    assert band[0]["lo"] <= band[0]["gain"] <= band[0]["hi"]
    # Fewer users than MIN_USERS: question threads are resampled (the band is conditional on the users).
    few = gain_curve_band(_paired(3, 8), metric=METRIC, system="s", twin="s~twin", window_days=14.0,
                          rng=np.random.default_rng(0), n_boot=300)
    assert {b["unit"] for b in few} == {"thread"} and few[0]["units"] == 12
    assert gain_curve_band(probes, metric=METRIC, system="s", twin="nope", rng=np.random.default_rng(0)) == []


def test_system_styles_never_repeat_a_colour_and_style_pair() -> None:
    from memsim.analysis.plots import PALETTE, system_styles

    bases = [f"sys{i}" for i in range(2 * len(PALETTE) + 3)]
    labels = [x for b in bases for x in (b, f"{b}~twin", f"{b}~placebo")]
    styles = system_styles(labels)
    pairs = {(s["color"], str(s["linestyle"])) for s in styles.values()}
    assert len(pairs) == len(labels)
    # A twin keeps its system's colour so a family reads as one.
    assert styles["sys3~twin"]["color"] == styles["sys3"]["color"] != styles["sys4"]["color"]
    assert styles["sys3~twin"]["linestyle"] != styles["sys3"]["linestyle"]
    # "a~twin" without "a" among the labels is a system of its own.
    assert system_styles(["x~twin"])["x~twin"]["linestyle"] == "solid"
