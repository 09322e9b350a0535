"""Statistics against hand-computed and textbook cases, and coverage simulations."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps

from memsim.analysis.stats import (
    bootstrap_ci,
    critical_difference_plot,
    diff_in_diff,
    friedman_ranking,
    halves,
    summarise_seeds,
)
from memsim.core.errors import UserError

METRIC = "recall_all@10"
"""The headline column of the hand-made rows (callers always name the metric)."""


def _rows(system: str, values: list[float], *, users: list[str] | None = None, start: int = 0) -> list[dict]:
    return [
        {
            "system": system,
            "user_id": users[i] if users else "u0",
            "question_id": f"q{start + i}",
            "q_index": start + i,
            METRIC: v,
        }
        for i, v in enumerate(values)
    ]


# --- bootstrap ----------------------------------------------------------------


def test_bootstrap_ci_covers_true_mean_at_about_nominal_rate() -> None:
    rng = np.random.default_rng(1)
    sims, hits = 300, 0
    for _ in range(sims):
        x = rng.normal(2.0, 1.0, size=80)
        lo, hi = bootstrap_ci(x, n_boot=800, rng=rng)
        hits += lo <= 2.0 <= hi
    coverage = hits / sims
    assert 0.90 <= coverage <= 0.98, coverage


def test_halves_interval_covers_known_learning_effect_at_about_nominal_rate() -> None:
    # First half succeeds with p=0.4, second with p=0.6: true change +0.2.
    rng = np.random.default_rng(2)
    sims, hits = 300, 0
    for _ in range(sims):
        vals = np.concatenate([rng.random(100) < 0.4, rng.random(100) < 0.6]).astype(float)
        h = halves(pl.DataFrame(_rows("s", vals.tolist())), metric=METRIC, system="s", rng=rng, n_boot=800)
        hits += h.diff_ci[0] <= 0.2 <= h.diff_ci[1]
    coverage = hits / sims
    assert 0.90 <= coverage <= 0.98, coverage


def test_cluster_bootstrap_keeps_coverage_where_iid_resampling_undercovers() -> None:
    # Strong per-user effect: questions of one user are correlated.
    rng = np.random.default_rng(3)
    sims, n_users, per_user = 200, 30, 12
    hits_cluster = hits_iid = 0
    labels = np.repeat(np.arange(n_users), per_user)
    for _ in range(sims):
        x = np.repeat(rng.normal(0.0, 1.0, n_users), per_user) + rng.normal(0.0, 0.5, labels.size)
        lo, hi = bootstrap_ci(x, n_boot=600, rng=rng, clusters=labels)
        hits_cluster += lo <= 0.0 <= hi
        lo, hi = bootstrap_ci(x, n_boot=600, rng=rng)
        hits_iid += lo <= 0.0 <= hi
    assert 0.88 <= hits_cluster / sims <= 0.99, hits_cluster / sims
    assert hits_iid / sims < 0.75, hits_iid / sims


def test_bootstrap_ci_drops_nan_and_accepts_other_statistics() -> None:
    rng = np.random.default_rng(0)
    lo, hi = bootstrap_ci([1.0, 1.0, math.nan, 1.0], rng=rng, n_boot=50)
    assert (lo, hi) == (1.0, 1.0)
    assert all(math.isnan(v) for v in bootstrap_ci([math.nan], rng=rng))
    lo, hi = bootstrap_ci(np.arange(101.0), stat=np.median, rng=rng, n_boot=300)
    assert lo < 50 < hi


def test_same_seed_same_interval() -> None:
    x = np.random.default_rng(9).random(50)
    a = bootstrap_ci(x, rng=np.random.default_rng(5), clusters=np.arange(50) % 4)
    b = bootstrap_ci(x, rng=np.random.default_rng(5), clusters=np.arange(50) % 4)
    assert a == b


# --- halves --------------------------------------------------------------------


def test_halves_splits_at_median_q_index_and_excludes_unscored() -> None:
    # 7 scored rows; NaN row is dropped; median q_index of scored rows is 3.
    vals = [0.0, 0.0, 1.0, math.nan, 1.0, 1.0, 1.0, 0.0]
    h = halves(pl.DataFrame(_rows("s", vals)), metric=METRIC, system="s", rng=np.random.default_rng(0), n_boot=200)
    # scored q_index: 0,1,2,4,5,6,7 -> median 4 -> first = {0,1,2}, second = {4,5,6,7}
    assert (h.n_first, h.n_second) == (3, 4)
    assert h.first == pytest.approx(1 / 3)
    assert h.second == pytest.approx(3 / 4)
    assert h.diff == pytest.approx(3 / 4 - 1 / 3)
    assert h.first_ci[0] <= h.first <= h.first_ci[1]
    assert h.diff_ci[0] <= h.diff <= h.diff_ci[1]


def test_halves_clusters_by_user_when_many_users_else_by_thread() -> None:
    from memsim.analysis.stats import MIN_USER_CLUSTERS

    n_users = MIN_USER_CLUSTERS
    users = [f"u{i % n_users}" for i in range(4 * n_users)]
    vals = [float((i % n_users) % 2) for i in range(4 * n_users)]  # odd users always right, even always wrong
    iid = halves(pl.DataFrame(_rows("s", vals)), metric=METRIC, system="s", rng=np.random.default_rng(4), n_boot=500)
    many = halves(pl.DataFrame(_rows("s", vals, users=users)), metric=METRIC, system="s",
                  rng=np.random.default_rng(4), n_boot=500)
    assert iid.first == many.first == 0.5
    # whole users resampled: the between-user spread widens the interval
    assert (many.first_ci[1] - many.first_ci[0]) > (iid.first_ci[1] - iid.first_ci[0])

    # two users only: too few clusters; re-ask threads are the resampled unit
    few_users = [f"u{i % 2}" for i in range(40)]
    threads = [f"t{i % 5}" for i in range(40)]  # 5 threads, each always right or always wrong
    vals2 = [float(i % 5 < 2) for i in range(40)]
    rows = _rows("s", vals2, users=few_users)
    for r, t in zip(rows, threads):
        r["thread_id"] = t
    by_thread = halves(pl.DataFrame(rows), metric=METRIC, system="s", rng=np.random.default_rng(4), n_boot=500)
    plain = halves(pl.DataFrame(_rows("s", vals2, users=few_users)), metric=METRIC, system="s",
                   rng=np.random.default_rng(4), n_boot=500)
    assert (by_thread.first_ci[1] - by_thread.first_ci[0]) > (plain.first_ci[1] - plain.first_ci[0])


def test_halves_rejects_unknown_system_and_metric() -> None:
    df = pl.DataFrame(_rows("naive", [1.0, 0.0]))
    with pytest.raises(UserError, match="unknown system 'x'; valid: naive"):
        halves(df, metric=METRIC, system="x", rng=np.random.default_rng(0))
    with pytest.raises(UserError, match="unknown metric 'bogus'; valid: .*recall_all@10"):
        halves(df, metric="bogus", system="naive", rng=np.random.default_rng(0))


# --- difference in differences -------------------------------------------------


def test_diff_in_diff_on_constructed_rows() -> None:
    # 8 questions. Control: 1st half 2/4, 2nd half 3/4 (+0.25).
    # System: 1st half 1/4, 2nd half 4/4 (+0.75). DiD = +0.5.
    control = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    system = [0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    rows = _rows("naive", control) + _rows("gated", system)
    # A question only the system scored, and one the control left unscored: both excluded.
    rows += _rows("gated", [1.0], start=8)
    rows += _rows("gated", [0.0], start=9) + _rows("naive", [math.nan], start=9)
    df = pl.DataFrame(rows)
    d = diff_in_diff(df, metric=METRIC, system="gated", control="naive", rng=np.random.default_rng(0), n_boot=500)
    assert d.n == 8
    # The halves are the user's ten questions split at their median (4.5), scored or not, as every table splits
    # them: the first half pairs q0-q4 (d = -1, 0, 0, 0, 0), the second q5-q7 (d = 0, 0, +1).
    assert (d.n_first, d.n_second) == (5, 3)
    assert d.did == pytest.approx(1 / 3 + 1 / 5)
    assert d.ci[0] <= d.did <= d.ci[1]
    # Eight question units, every sign pattern: two differing questions cannot reach p < 0.05, and the interval
    # inverted from the same test covers 0.
    assert d.units == 8 and d.p >= 0.05 and d.ci[0] <= 0.0
    # Against itself the DiD is exactly zero with a degenerate interval.
    z = diff_in_diff(df, metric=METRIC, system="naive", control="naive", rng=np.random.default_rng(0), n_boot=50)
    assert z.did == 0.0 and z.ci == (0.0, 0.0)


def test_diff_in_diff_interval_covers_known_effect() -> None:
    # Control flat at 0.5; system 0.4 -> 0.7: true DiD +0.3, paired on the same questions.
    rng = np.random.default_rng(6)
    sims, hits = 200, 0
    for _ in range(sims):
        ctrl = (rng.random(200) < 0.5).astype(float)
        sys_ = np.concatenate([rng.random(100) < 0.4, rng.random(100) < 0.7]).astype(float)
        df = pl.DataFrame(_rows("naive", ctrl.tolist()) + _rows("x", sys_.tolist()))
        d = diff_in_diff(df, metric=METRIC, system="x", control="naive", rng=rng, n_boot=600)
        hits += d.ci[0] <= 0.3 <= d.ci[1]
    assert 0.89 <= hits / sims <= 0.99, hits / sims


# --- across seeds and systems --------------------------------------------------


def test_summarise_seeds_t_interval() -> None:
    s = summarise_seeds([1.0, 2.0, 3.0, math.nan])
    assert s.n == 3 and s.mean == 2.0
    half = 4.302652729749464 / math.sqrt(3)  # t(0.975, 2) * sd / sqrt(n), sd = 1
    assert s.ci == pytest.approx((2.0 - half, 2.0 + half))
    single = summarise_seeds([0.5])
    assert single.n == 1 and math.isnan(single.ci[0])


def test_friedman_ranking_hand_computed_and_nemenyi_cd() -> None:
    table = {
        "a": [0.9, 0.8, 0.7, 0.9],
        "b": [0.5, 0.6, 0.4, 0.5],
        "c": [0.7, 0.5, 0.6, 0.7],
        "d": [0.1, 0.2, 0.3, 0.1],
    }
    r = friedman_ranking(table)
    # ranks per dataset: a 1,1,1,1; b 3,2,3,3; c 2,3,2,2; d 4,4,4,4
    assert r.mean_ranks == pytest.approx((1.0, 2.75, 2.25, 4.0))
    # chi2 = 12N/(k(k+1)) * sum(R^2) - 3N(k+1) = 2.4 * 29.625 - 60 = 11.1
    assert r.statistic == pytest.approx(11.1)
    assert r.p_value == pytest.approx(sps.chi2.sf(11.1, 3))
    assert r.kendall_w == pytest.approx(11.1 / (4 * 3))
    # Demsar (2006) Table 5: q_0.05 = 2.569 for k = 4.
    assert r.cd == pytest.approx(2.569 * math.sqrt(4 * 5 / (6 * 4)), abs=1e-3)
    pairs = {(i, j): p for i, j, p in r.pairwise_p}
    assert pairs[("a", "d")] < 0.05 < pairs[("b", "c")]


def test_friedman_accepts_frame_and_rejects_too_few_systems() -> None:
    frame = pl.DataFrame({"system": ["x", "y", "z"], "d1": [1.0, 2.0, 3.0], "d2": [1.0, 3.0, 2.0], "d3": [0.0, 1.0, math.nan]})
    r = friedman_ranking(frame)
    assert r.n_datasets == 2  # the dataset with a NaN is dropped
    assert r.mean_ranks == pytest.approx((3.0, 1.5, 1.5))
    assert r.cd == pytest.approx(2.343 * math.sqrt(3 * 4 / (6 * 2)), abs=1e-3)
    with pytest.raises(UserError, match="at least 3 systems"):
        friedman_ranking({"a": [1.0, 2.0], "b": [2.0, 1.0]})


def test_critical_difference_plot_is_svg_naming_every_system() -> None:
    r = friedman_ranking({"alpha": [3, 3, 2], "beta": [2, 1, 3], "gamma": [1, 2, 1]})
    svg = critical_difference_plot(r)
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and svg.rstrip().endswith("</svg>")
    # Matplotlib renders text as paths by default; labels appear in the id/comments.
    for name in ("alpha", "beta", "gamma"):
        assert name in svg
