"""Statistics over per-question rows: halves, intervals, sign-flip tests, DiD, rankings, design-based MDE.

Every function takes its random generator from the caller (``rng``), so the
same seed gives the same numbers. NaN in a metric means *unscored* and is
dropped before any statistic, never counted as zero.

Conventions shared by every halves figure (the learning table, ``halves``,
``diff_in_diff``, power, the A/A check and sensitivity):

- **One halves rule** (``user_halves``): each user's questions are split at
  that user's own median ``q_index`` (at or above it: second half), over
  every question the rows hold, scored or not, so a heavy user cannot move
  another user's split and every metric of a run shares one split.
- **The unit** of inference is the whole user when there are at least
  ``MIN_USER_CLUSTERS`` (30) users, so that questions about the same person,
  which are not independent, move together; with fewer users it is the
  question thread (a question and its re-asks), and the inference is
  conditional on those users.
- **Paired differences** (``diff_in_diff``, the learning contrasts) are tested
  by flipping whole units' signs (``sign_flips``, ``FlipTest``), and their 95%
  interval is the set of shifts that test does not reject, so an interval
  excludes 0 exactly when p < 0.05. One system's own halves (``halves``) keep
  a percentile bootstrap that resamples the same units.
- Every p-value comes with the test's name, its n and an effect size.

This module holds the halves, the difference in differences and the
summary across seeds; the other families live in their own modules and are
re-exported here: the bootstrap (``memsim.analysis.bootstrap``), the
sign-flip test (``memsim.analysis.signflip``), the design-based power and MDE
(``memsim.analysis.mde``) and the Friedman ranking (``memsim.analysis.ranking``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from memsim.analysis.bootstrap import bootstrap_ci, check_boot, halves_boot, percentile_interval
from memsim.analysis.mde import (
    MDE_METHOD,
    MDE_REPLICATES,
    MDE_STEP,
    Design,
    MdeSearch,
    design_mde,
    design_mdes,
    design_power,
    effect_spread,
)
from memsim.analysis.ranking import FRIEDMAN_TEST, FriedmanResult, critical_difference_plot, friedman_ranking
from memsim.analysis.signflip import FlipTest, sign_flip_p, sign_flips
from memsim.core.errors import UserError

__all__ = [
    "FRIEDMAN_TEST",
    "HalvesResult",
    "DiDResult",
    "SeedSummary",
    "FriedmanResult",
    "bootstrap_ci",
    "percentile_interval",
    "halves",
    "diff_in_diff",
    "summarise_seeds",
    "friedman_ranking",
    "critical_difference_plot",
    "cluster_labels",
    "user_halves",
    "inference_unit",
    "MIN_USER_CLUSTERS",
    "did_parts",
    "sign_flips",
    "sign_flip_p",
    "FlipTest",
    "Design",
    "effect_spread",
    "design_power",
    "design_mde",
    "design_mdes",
    "MdeSearch",
    "MDE_STEP",
    "MDE_REPLICATES",
    "MDE_METHOD",
]


# ---------------------------------------------------------------------------
# Result records
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HalvesResult:
    """First half vs second half of one system's question stream."""

    n_first: int
    """Scored questions in the first half."""
    n_second: int
    """Scored questions in the second half."""
    first: float
    """Mean metric over the first half."""
    second: float
    """Mean metric over the second half."""
    diff: float
    """``second - first``."""
    diff_ci: tuple[float, float]
    """Bootstrap interval of ``diff``."""
    first_ci: tuple[float, float]
    """Bootstrap interval of ``first``."""
    second_ci: tuple[float, float]
    """Bootstrap interval of ``second``."""


@dataclass(frozen=True, slots=True)
class DiDResult:
    """Difference in differences of one system against a control."""

    did: float
    """``(second - first)_system - (second - first)_control``."""
    ci: tuple[float, float]
    """95% interval of ``did``: the shifts the sign-flip test does not reject (``FlipTest``)."""
    n: int
    """Questions both systems scored (the paired set)."""
    n_first: int = 0
    """Paired questions in the first half."""
    n_second: int = 0
    """Paired questions in the second half."""
    p: float = math.nan
    """Two-sided sign-flip p of ``did = 0`` (whole units flipped); below alpha exactly when ``ci`` excludes 0."""
    units: int = 0
    """Units whose signs are flipped (users, question threads or questions)."""


@dataclass(frozen=True, slots=True)
class SeedSummary:
    """Mean of one figure across seeds with a Student t interval."""

    mean: float
    """Mean across seeds."""
    ci: tuple[float, float]
    """95% t-interval (NaN bounds when fewer than two seeds)."""
    n: int
    """Seeds with a value."""



# ---------------------------------------------------------------------------
# Halves and difference in differences
# ---------------------------------------------------------------------------


def _require(df: pl.DataFrame, metric: str, systems: Sequence[str]) -> None:
    """Raise ``UserError`` naming the valid choices for a bad metric or system."""
    needed = {"system", "q_index", "question_id"}
    missing = needed - set(df.columns)
    if missing:
        raise UserError(f"probes: missing column(s) {', '.join(sorted(missing))}")
    if metric not in df.columns:
        numeric = [c for c, t in df.schema.items() if t.is_numeric() and c not in ("q_index",)]
        raise UserError(f"probes: unknown metric {metric!r}; valid: {', '.join(numeric)}")
    known = sorted(df["system"].unique().to_list())
    for s in systems:
        if s not in known:
            raise UserError(f"probes: unknown system {s!r}; valid: {', '.join(known)}")


def user_halves(rows: pl.DataFrame) -> pl.DataFrame:
    """The one halves rule: ``question_id -> user_id, thread_id, q_index, kind, half`` (0 first, 1 second).

    Each user's questions are split at that user's own median ``q_index``:
    at or above it, the second half. Every question the rows hold counts,
    whichever arm asked it and whether or not it was scored, so the split
    does not depend on the metric or on which arms are compared. Rows without
    ``user_id`` are one user; ``thread_id`` defaults to the question and
    ``kind`` to ``""`` where the rows lack them.
    """
    extra = []
    if "user_id" not in rows.columns:
        extra.append(pl.lit("").alias("user_id"))
    if "thread_id" not in rows.columns:
        extra.append(pl.col("question_id").alias("thread_id"))
    if "kind" not in rows.columns:
        extra.append(pl.lit("").alias("kind"))
    qs = (
        rows.with_columns(extra).select("question_id", "user_id", "thread_id", "q_index", "kind")
        .unique("question_id", keep="first", maintain_order=True).sort("q_index")
    )
    med = qs.group_by("user_id").agg(pl.col("q_index").median().alias("_median"))
    return qs.join(med, on="user_id").with_columns(
        (pl.col("q_index") >= pl.col("_median")).cast(pl.Int8).alias("half")
    ).drop("_median")


MIN_USER_CLUSTERS = 30
"""Fewest users for users to be the unit of inference; below it, question threads are.

A cluster bootstrap over a handful of users gives intervals that are too
narrow (an A/A check with 3 to 12 users covered 0 in only 87-90% of runs).
With fewer users the unit is the question thread: a question and every later
re-ask of it (``thread_id``), which keeps the strongest dependence in the
stream (asking the same thing again) inside one unit, and the inference is
conditional on those users.
"""


def inference_unit(users: int) -> tuple[str, str]:
    """``("user" | "thread", reason)`` for a design of ``users`` users (``MIN_USER_CLUSTERS``).

    Decided from the design (the users the stream plays), not from the rows
    that survive, so a run that loses a user does not change its unit.
    """
    if users >= MIN_USER_CLUSTERS:
        return "user", f"{users} users in the design, at least {MIN_USER_CLUSTERS}: whole users"
    return "thread", (f"{users} users in the design, fewer than {MIN_USER_CLUSTERS}: question threads, "
                      "conditional on these users")


def cluster_labels(frame: pl.DataFrame, *, user_col: str = "user_id", unit: str | None = None) -> np.ndarray | None:
    """Unit per row: users when there are many (or ``unit="user"``), else question threads, else None (rows)."""
    if user_col in frame.columns:
        users = frame[user_col].cast(pl.Utf8).to_numpy()
        if unit == "user" or (unit is None and len(set(users.tolist())) >= MIN_USER_CLUSTERS):
            return users
    if "thread_id" in frame.columns and frame["thread_id"].null_count() < frame.height:
        threads = frame["thread_id"].cast(pl.Utf8).fill_null(frame["question_id"].cast(pl.Utf8)).to_numpy()
        return threads
    return None


def _scored(df: pl.DataFrame, metric: str, system: str) -> pl.DataFrame:
    return (
        df.filter(pl.col("system") == system)
        .filter(pl.col(metric).is_not_null() & pl.col(metric).cast(pl.Float64).is_not_nan())
        .sort("q_index")
    )


def _error_free(df: pl.DataFrame) -> pl.DataFrame:
    return df.filter(pl.col("error").is_null()) if "error" in df.columns else df


def halves(
    df: pl.DataFrame,
    *,
    metric: str,
    system: str,
    rng: np.random.Generator,
    n_boot: int = 2000,
    alpha: float = 0.05,
) -> HalvesResult:
    """First half vs second half of one system's scored questions.

    Args:
        df: probe rows (columns ``system``, ``question_id``, ``q_index``,
            ``user_id`` and the metric).
        metric: the metric column (a run's ``spec.metric``).
        system: the system's display label.
        rng: the run's random generator.
        n_boot: bootstrap resamples.
        alpha: 1 - coverage of the intervals.

    Returns:
        Means, their difference and bootstrap intervals. Halves follow
        ``user_halves`` over every question of ``df``; resampling is
        clustered by user when there are many users, else by thread.

    Raises:
        UserError: unknown metric or system.
    """
    check_boot(n_boot, alpha)
    _require(df, metric, [system])
    split = user_halves(_error_free(df)).select("question_id", "half")
    rows = _scored(df, metric, system).join(split, on="question_id")
    x = rows[metric].cast(pl.Float64).to_numpy()
    second = rows["half"].to_numpy() == 1
    users = cluster_labels(rows)
    n1, n2 = int((~second).sum()), int(second.sum())
    m1 = float(x[~second].mean()) if n1 else math.nan
    m2 = float(x[second].mean()) if n2 else math.nan
    if x.size == 0:
        nan2 = (math.nan, math.nan)
        return HalvesResult(0, 0, math.nan, math.nan, math.nan, nan2, nan2, nan2)
    ci1, ci2, cid = halves_boot(x, second, users, n_boot=n_boot, alpha=alpha, rng=rng)
    return HalvesResult(
        n_first=n1,
        n_second=n2,
        first=m1,
        second=m2,
        diff=m2 - m1,
        diff_ci=cid,
        first_ci=ci1,
        second_ci=ci2,
    )


def _paired(df: pl.DataFrame, metric: str, system: str, control: str) -> pl.DataFrame:
    """Questions both systems scored: one row per question with ``x`` (system), ``y`` (control) and ``half``."""
    keys = ["question_id", "user_id"] if "user_id" in df.columns else ["question_id"]
    split = user_halves(_error_free(df)).select("question_id", "thread_id", "half")
    a = _scored(_error_free(df), metric, system).select([*keys, "q_index", pl.col(metric).cast(pl.Float64).alias("x")])
    b = _scored(_error_free(df), metric, control).select([*keys, pl.col(metric).cast(pl.Float64).alias("y")])
    return a.join(b, on=keys, how="inner").join(split, on="question_id").sort("q_index")


def did_parts(s1: np.ndarray, n1: np.ndarray, s2: np.ndarray, n2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each unit's share of a DiD of weighted means, and its share of a shift of the DiD.

    With per-unit sums ``s`` and weights ``n`` of each half, the DiD
    ``sum(s2)/sum(n2) - sum(s1)/sum(n1)`` is the sum of the first array;
    shifting every second-half difference by ``+delta/2`` and every
    first-half one by ``-delta/2`` shifts it by ``delta`` times the sum of the
    second (which is 1), so ``FlipTest(x, w)`` tests and inverts the DiD.
    """
    t1, t2 = float(n1.sum()), float(n2.sum())
    x = (s2 / t2 if t2 else 0 * s2) - (s1 / t1 if t1 else 0 * s1)
    w = ((n2 / t2 if t2 else 0 * n2) + (n1 / t1 if t1 else 0 * n1)) / 2
    return x, w


def diff_in_diff(
    df: pl.DataFrame,
    *,
    metric: str,
    system: str,
    control: str = "naive",
    rng: np.random.Generator,
    n_boot: int = 2000,
    alpha: float = 0.05,
    unit: str | None = None,
) -> DiDResult:
    """Difference in differences of a system against a control on paired questions.

    Only questions both systems scored count; the halves are ``user_halves``
    over every question of ``df`` (the learning table's rule). Per question
    the paired difference ``d = x_system - x_control`` gives ``DiD =
    mean(d | second half) - mean(d | first half)``, the learning table's DiD.
    Its p is the sign-flip test of that statistic with whole units flipped
    (users, or question threads below ``MIN_USER_CLUSTERS`` users, or
    questions without either), and its interval the shifts that test does
    not reject at ``alpha`` (``FlipTest``), so the interval excludes 0
    exactly when ``p < alpha``.

    Args:
        df: probe rows of both systems.
        metric: the metric column.
        system: the system's label.
        control: the control's label.
        rng: draws the sign patterns when there are more than 16 units.
        n_boot: random sign patterns (more than 16 units).
        alpha: 1 - coverage of the interval.
        unit: ``"user"`` or ``"thread"`` as the design decided
            (``inference_unit``); None: from the users in ``df``.

    Raises:
        UserError: unknown metric or system.
    """
    check_boot(n_boot, alpha)
    _require(df, metric, [system, control])
    pairs = _paired(df, metric, system, control)
    n = pairs.height
    if n == 0:
        return DiDResult(math.nan, (math.nan, math.nan), 0, 0, 0)
    second = pairs["half"].to_numpy() == 1
    n1, n2 = int((~second).sum()), int(second.sum())
    if n1 == 0 or n2 == 0:
        return DiDResult(math.nan, (math.nan, math.nan), n, n1, n2)
    d = (pairs["x"] - pairs["y"]).to_numpy()
    labels = cluster_labels(pairs, unit=unit)
    labels = pairs["question_id"].cast(pl.Utf8).to_numpy() if labels is None else labels
    _, codes = np.unique(labels.astype(str), return_inverse=True)
    k = int(codes.max()) + 1
    s1 = np.bincount(codes[~second], weights=d[~second], minlength=k)
    c1 = np.bincount(codes[~second], minlength=k).astype(float)
    s2 = np.bincount(codes[second], weights=d[second], minlength=k)
    c2 = np.bincount(codes[second], minlength=k).astype(float)
    x, w = did_parts(s1, c1, s2, c2)
    test = FlipTest(x, w, sign_flips(k, rng, n_boot))
    did = float(d[second].mean() - d[~second].mean())
    return DiDResult(did=did, ci=test.interval(alpha, bounds=(-2.0, 2.0)), n=n, n_first=n1, n_second=n2,
                     p=test.p(0.0), units=k)


# ---------------------------------------------------------------------------
# Across seeds
# ---------------------------------------------------------------------------


def summarise_seeds(
    values: Sequence[float] | np.ndarray, *, alpha: float = 0.05, bounds: tuple[float, float] | None = None
) -> SeedSummary:
    """Mean across seeds with a Student t interval (NaN seeds dropped), clipped to ``bounds`` when given.

    A proportion's t interval can pass 0 or 1 (91.3% [79.4, 103.1]); ``bounds=(0, 1)`` for a proportion
    and ``(-1, 1)`` for a difference of two keep it to values the figure can take.
    """
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    n = int(v.size)
    if n == 0:
        return SeedSummary(math.nan, (math.nan, math.nan), 0)
    mean = float(v.mean())
    if n < 2:
        return SeedSummary(mean, (math.nan, math.nan), n)
    # scipy.stats takes seconds to import; only the few functions that need it pay for it.
    from scipy import stats as sps

    half = float(sps.t.ppf(1 - alpha / 2, n - 1) * v.std(ddof=1) / math.sqrt(n))
    lo, hi = mean - half, mean + half
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return SeedSummary(mean, (lo, hi), n)
