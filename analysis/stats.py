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
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

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

FRIEDMAN_TEST = "Friedman chi-square, Nemenyi post-hoc"

MDE_REPLICATES = 1000
"""Synthetic replicates behind each design-based power figure.

At 1,000 the MDE of a 30-user design (130 questions per user and half, a
spread of 3 points) has a standard deviation of 0.05 to 0.06 point across
sets of draws (0.09 at 200; 16 sets each), so its printed tenth of a point
is a property of the design rather than of the draws.
"""

_EXACT_FLIPS = 16  # units up to which every sign pattern is enumerated
_N_FLIPS = 2000  # random sign patterns above that
_MDE_FLIPS = 500  # per synthetic replicate: enough to place p against 0.05, a quarter of the cost

MDE_METHOD = (
    "MDE: design-based, the smallest effect d, gain or loss, on a 0.1-point grid, that the headline's test "
    f"(sign-flip p < 0.05 of the question-weighted difference, whole units flipped; {_MDE_FLIPS} patterns) "
    f"detects in 80% of {MDE_REPLICATES} replicates, each redrawing every question of the reference arm as "
    "Bernoulli(its user's base rate in that half + d + its unit's own deviation), the deviations normal with the "
    "spread between units that contrast shows (beyond within-unit noise); the smaller of the gain and the loss "
    "is printed; it ignores the pairing of the arms (conservative)"
)
"""The design-based MDE in one sentence, for every table's footnote."""

# Rows of bootstrap weights drawn at a time: bounds memory at
# _CHUNK x n_units integers however many resamples are asked for.
_CHUNK = 256


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


@dataclass(frozen=True, slots=True)
class FriedmanResult:
    """Ranking of systems over datasets with Friedman and Nemenyi tests."""

    systems: tuple[str, ...]
    """System names, in the order of ``mean_ranks``."""
    mean_ranks: tuple[float, ...]
    """Mean rank per system (1 = best; higher metric is better)."""
    statistic: float
    """Friedman chi-square."""
    p_value: float
    """p-value of the Friedman test."""
    n_datasets: int
    """Datasets (blocks) N."""
    kendall_w: float
    """Effect size: Kendall's coefficient of concordance, ``chi2 / (N (k - 1))``."""
    cd: float
    """Nemenyi critical difference of mean ranks at ``alpha``."""
    alpha: float
    """Significance level of ``cd``."""
    pairwise_p: tuple[tuple[str, str, float], ...]
    """Nemenyi p-value for each pair of systems."""
    test: str = FRIEDMAN_TEST
    """Name of the tests."""

    @property
    def k(self) -> int:
        """Number of systems."""
        return len(self.systems)


# ---------------------------------------------------------------------------
# Bootstrap machinery
# ---------------------------------------------------------------------------


def _weights(n_units: int, n_boot: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Bootstrap count matrices (rows: resamples, columns: units), in chunks.

    Drawing indices and counting them is the same resampling as indexing
    with replacement; counts let sum-based statistics be a matrix product.
    """
    done = 0
    while done < n_boot:
        rows = min(_CHUNK, n_boot - done)
        idx = rng.integers(0, n_units, size=(rows, n_units))
        flat = (idx + (np.arange(rows) * n_units)[:, None]).ravel()
        yield np.bincount(flat, minlength=rows * n_units).reshape(rows, n_units).astype(float)
        done += rows


def percentile_interval(samples: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """The central ``1 - alpha`` percentile interval of the finite samples; NaNs when there are none."""
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return (math.nan, math.nan)
    lo, hi = np.quantile(samples, [alpha / 2, 1 - alpha / 2])
    return (float(lo), float(hi))


def _check_boot(n_boot: int, alpha: float) -> None:
    if n_boot < 1:
        raise ValueError(f"n_boot must be positive, got {n_boot}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    stat: Callable[[np.ndarray], float] = np.mean,
    n_boot: int = 2000,
    alpha: float = 0.05,
    rng: np.random.Generator,
    clusters: Sequence[Any] | np.ndarray | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat(values)``.

    Args:
        values: one value per observation; NaN (unscored) is dropped.
        stat: statistic of a 1-d array.
        n_boot: resamples.
        alpha: 1 - coverage (0.05 gives a 95% interval).
        rng: the run's random generator.
        clusters: optional cluster label per value (e.g. user ids). When
            given, whole clusters are resampled with replacement and their
            values pooled, which keeps correlated observations together.

    Returns:
        ``(lo, hi)``; ``(nan, nan)`` when no value is scored.
    """
    _check_boot(n_boot, alpha)
    x = np.asarray(values, dtype=float)
    keep = ~np.isnan(x)
    labels = None if clusters is None else np.asarray(clusters, dtype=object)
    if labels is not None and labels.shape != x.shape:
        raise ValueError(f"clusters has {labels.shape[0]} labels for {x.shape[0]} values")
    x = x[keep]
    if x.size == 0:
        return (math.nan, math.nan)
    is_mean = stat is np.mean
    if labels is None:
        if is_mean:
            boots = np.concatenate([w @ x / x.size for w in _weights(x.size, n_boot, rng)])
        else:
            idx = rng.integers(0, x.size, size=(n_boot, x.size))
            boots = np.array([stat(x[row]) for row in idx], dtype=float)
        return percentile_interval(boots, alpha)
    labels = labels[keep]
    _, codes = np.unique(labels.astype(str), return_inverse=True)
    n_clusters = int(codes.max()) + 1
    if is_mean:
        sums = np.bincount(codes, weights=x, minlength=n_clusters)
        counts = np.bincount(codes, minlength=n_clusters).astype(float)
        parts = []
        for w in _weights(n_clusters, n_boot, rng):
            parts.append((w @ sums) / (w @ counts))
        boots = np.concatenate(parts)
    else:
        members = [x[codes == c] for c in range(n_clusters)]
        idx = rng.integers(0, n_clusters, size=(n_boot, n_clusters))
        boots = np.array([stat(np.concatenate([members[c] for c in row])) for row in idx], dtype=float)
    return percentile_interval(boots, alpha)


def _halves_boot(
    x: np.ndarray,
    second: np.ndarray,
    users: np.ndarray | None,
    *,
    n_boot: int,
    alpha: float,
    rng: np.random.Generator,
) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
    """Bootstrap intervals of (first mean, second mean, second - first).

    One user: resample within each half (stratified). Several users:
    resample users, pooling each drawn user's first-half and second-half rows.
    """
    first = ~second
    if users is None:
        x1, x2 = x[first], x[second]
        b1 = (
            np.concatenate([w @ x1 / x1.size for w in _weights(x1.size, n_boot, rng)])
            if x1.size
            else np.full(n_boot, math.nan)
        )
        b2 = (
            np.concatenate([w @ x2 / x2.size for w in _weights(x2.size, n_boot, rng)])
            if x2.size
            else np.full(n_boot, math.nan)
        )
    else:
        _, codes = np.unique(users.astype(str), return_inverse=True)
        c = int(codes.max()) + 1
        s1 = np.bincount(codes[first], weights=x[first], minlength=c)
        n1 = np.bincount(codes[first], minlength=c).astype(float)
        s2 = np.bincount(codes[second], weights=x[second], minlength=c)
        n2 = np.bincount(codes[second], minlength=c).astype(float)
        p1, p2 = [], []
        with np.errstate(invalid="ignore", divide="ignore"):
            for w in _weights(c, n_boot, rng):
                p1.append((w @ s1) / (w @ n1))
                p2.append((w @ s2) / (w @ n2))
        b1, b2 = np.concatenate(p1), np.concatenate(p2)
    return percentile_interval(b1, alpha), percentile_interval(b2, alpha), percentile_interval(b2 - b1, alpha)


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
    _check_boot(n_boot, alpha)
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
    ci1, ci2, cid = _halves_boot(x, second, users, n_boot=n_boot, alpha=alpha, rng=rng)
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
    _check_boot(n_boot, alpha)
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
# Across seeds, across systems
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


def _table_to_matrix(
    table: pl.DataFrame | Mapping[str, Sequence[float]],
) -> tuple[list[str], np.ndarray]:
    """Systems and a (systems x datasets) matrix from a frame or a mapping."""
    if isinstance(table, pl.DataFrame):
        if "system" in table.columns:
            name_col = "system"
        else:
            strings = [c for c, t in table.schema.items() if t == pl.Utf8]
            if not strings:
                raise UserError("ranking table: needs a 'system' column naming the rows")
            name_col = strings[0]
        names = [str(s) for s in table[name_col].to_list()]
        data = table.drop(name_col)
        matrix = data.cast({c: pl.Float64 for c in data.columns}).to_numpy()
    else:
        names = [str(s) for s in table]
        rows = [np.asarray(table[s], dtype=float) for s in table]
        lengths = {r.size for r in rows}
        if len(lengths) != 1:
            raise UserError("ranking table: every system needs a value for every dataset")
        matrix = np.vstack(rows)
    return names, np.asarray(matrix, dtype=float)


def friedman_ranking(
    table: pl.DataFrame | Mapping[str, Sequence[float]],
    *,
    alpha: float = 0.05,
) -> FriedmanResult:
    """Rank systems over datasets; Friedman test with Nemenyi post-hoc.

    Args:
        table: systems x datasets (or scenarios). Either a polars frame with
            a ``system`` column and one numeric column per dataset, or a
            mapping ``system -> values``. Higher is better. Datasets where a
            system has NaN are dropped.
        alpha: level of the Nemenyi critical difference.

    Returns:
        Mean ranks (1 = best, ties share the average rank), the Friedman
        chi-square and p-value with Kendall's W as effect size, the Nemenyi
        critical difference and pairwise Nemenyi p-values.

    Raises:
        UserError: fewer than three systems or two complete datasets.
    """
    names, m = _table_to_matrix(table)
    if len(names) < 3:
        raise UserError(f"ranking table: needs at least 3 systems, got {len(names)}")
    m = m[:, ~np.isnan(m).any(axis=0)]
    n = m.shape[1]
    if n < 2:
        raise UserError(f"ranking table: needs at least 2 datasets scored by every system, got {n}")
    k = len(names)
    from scipy import stats as sps

    # Rank within each dataset, best (highest) = 1.
    ranks = np.apply_along_axis(lambda col: sps.rankdata(-col), 0, m)
    mean_ranks = ranks.mean(axis=1)
    if np.all(np.ptp(m, axis=0) == 0):
        chi2, p = 0.0, 1.0
    else:
        res = sps.friedmanchisquare(*m)
        chi2, p = float(res.statistic), float(res.pvalue)
    w = chi2 / (n * (k - 1))
    se = math.sqrt(k * (k + 1) / (6.0 * n))
    q = float(sps.studentized_range.ppf(1 - alpha, k, math.inf)) / math.sqrt(2)
    pairwise = []
    for i in range(k):
        for j in range(i + 1, k):
            z = abs(mean_ranks[i] - mean_ranks[j]) / se
            pij = float(sps.studentized_range.sf(z * math.sqrt(2), k, math.inf))
            pairwise.append((names[i], names[j], min(1.0, max(0.0, pij))))
    return FriedmanResult(
        systems=tuple(names),
        mean_ranks=tuple(float(r) for r in mean_ranks),
        statistic=chi2,
        p_value=p,
        n_datasets=n,
        kendall_w=float(w),
        cd=q * se,
        alpha=alpha,
        pairwise_p=tuple(pairwise),
    )


def _cliques(ranks: np.ndarray, cd: float) -> list[tuple[int, int]]:
    """Maximal runs (by sorted rank) whose spread is within the critical difference."""
    order_ranks = np.sort(ranks)
    spans = []
    for i in range(len(order_ranks)):
        j = i
        while j + 1 < len(order_ranks) and order_ranks[j + 1] - order_ranks[i] <= cd:
            j += 1
        if j > i:
            spans.append((i, j))
    # Drop runs contained in an earlier, longer one.
    return [s for s in spans if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in spans)]


def critical_difference_plot(result: FriedmanResult, *, title: str | None = None) -> str:
    """Critical-difference diagram (Demšar 2006 style) as SVG text.

    Systems sit on an axis of mean rank (best on the left); a bar shows the
    Nemenyi critical difference and thick lines join systems whose mean
    ranks differ by less than it.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = result.k
    ranks = np.asarray(result.mean_ranks)
    order = np.argsort(ranks, kind="stable")
    height = 1.6 + 0.3 * k
    fig, ax = plt.subplots(figsize=(7.5, height))
    ax.set_xlim(0.5, k + 0.5)
    ax.set_ylim(-(k + 2) * 0.5, 1.6)
    ax.axis("off")
    ax.hlines(0, 1, k, color="black", lw=1)
    for r in range(1, k + 1):
        ax.vlines(r, 0, 0.12, color="black", lw=1)
        ax.text(r, 0.2, str(r), ha="center", va="bottom", fontsize=9)
    ax.hlines(1.0, 1, 1 + result.cd, color="black", lw=2)
    ax.text(1 + result.cd / 2, 1.1, f"CD = {result.cd:.2f}", ha="center", va="bottom", fontsize=9)
    half = (k + 1) // 2
    for pos, idx in enumerate(order):
        r = ranks[idx]
        left = pos < half
        y = -0.45 * (pos + 1) if left else -0.45 * (k - pos)
        x_text = 0.6 if left else k + 0.4
        ax.plot([r, r, x_text], [0, y, y], color="black", lw=0.8)
        ax.text(
            x_text,
            y,
            f"{result.systems[idx]} ({r:.2f})",
            ha="left" if left else "right",
            va="bottom",
            fontsize=9,
        )
    sorted_ranks = ranks[order]
    for level, (i, j) in enumerate(_cliques(ranks, result.cd)):
        y = -0.15 - 0.12 * level
        ax.hlines(y, sorted_ranks[i] - 0.03, sorted_ranks[j] + 0.03, color="tab:red", lw=3)
    heading = title or f"Mean rank over {result.n_datasets} datasets"
    ax.set_title(
        f"{heading}\nFriedman chi2 = {result.statistic:.2f}, p = {result.p_value:.3g}, "
        f"N = {result.n_datasets}, Kendall's W = {result.kendall_w:.2f}",
        fontsize=9,
    )
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


# ---------------------------------------------------------------------------
# Sign-flip test of a weighted difference, its interval, and the design-based MDE
# ---------------------------------------------------------------------------


def sign_flips(k: int, rng: np.random.Generator, n_flips: int = _N_FLIPS) -> tuple[np.ndarray, bool]:
    """Sign patterns over ``k`` units, shape ``(patterns, k)``, and whether they are all ``2**k`` of them.

    Up to 16 units every pattern is enumerated (an exact test); above, ``n_flips`` are drawn.
    """
    if k <= _EXACT_FLIPS:
        return (((np.arange(2**k)[:, None] >> np.arange(k)) & 1) * 2 - 1).astype(float), True
    return rng.choice(np.array([-1.0, 1.0]), size=(n_flips, k)), False


def sign_flip_p(sums: np.ndarray, flips: tuple[np.ndarray, bool]) -> np.ndarray:
    """Two-sided sign-flip p of ``sum(sums) = 0``, per row of ``sums`` (units in the last axis).

    ``sums`` are per-unit sums of weighted differences divided by nothing: a
    question-weighted mean is their total over the (fixed) total weight, so
    flipping whole units' signs tests exactly that mean. A row of zeros gets
    ``p = 1``.
    """
    signs, exact = flips
    x = np.atleast_2d(np.asarray(sums, dtype=float))
    observed = np.abs(x.sum(axis=1))
    flipped = np.abs(x @ signs.T)
    extreme = (flipped >= observed[:, None] - _TIE).sum(axis=1)
    p = extreme / signs.shape[0] if exact else (extreme + 1) / (signs.shape[0] + 1)
    p = np.where(np.abs(x).sum(axis=1) < _TIE, 1.0, p)
    return p if np.ndim(sums) > 1 else p[:1]


_TIE = 1e-12  # flipped sums this close to the observed one count as at least as extreme


class FlipTest:
    """The sign-flip test of ``sum(x - delta * w) = 0`` for every shift ``delta``, on one set of sign patterns.

    ``x`` are per-unit sums of a weighted difference and ``w`` (>= 0) the
    per-unit weights, so the estimate is ``sum(x) / sum(w)`` and shifting
    every difference by ``delta`` moves each unit's sum by ``delta * w``.
    ``p(delta)`` flips whole units' signs of the shifted sums; ``p(0)`` is
    ``sign_flip_p(x)``. Every pattern's "at least as extreme" set of shifts is
    an interval around the estimate (its weight sum is at most ``sum(w)``), so
    ``p`` never decreases towards the estimate and never increases away from
    it: the shifts not rejected at ``alpha`` form one interval, found by
    bisection on the same patterns (``interval``).
    """

    def __init__(self, x: np.ndarray, w: np.ndarray, flips: tuple[np.ndarray, bool]) -> None:
        signs, self.exact = flips
        self.x, self.w = np.asarray(x, dtype=float), np.asarray(w, dtype=float)
        self.patterns = signs.shape[0]
        self._a, self._b = signs @ self.x, signs @ self.w
        self._s, self._t = float(self.x.sum()), float(self.w.sum())

    @property
    def estimate(self) -> float:
        """``sum(x) / sum(w)``; NaN when the weights are all zero."""
        return self._s / self._t if self._t else math.nan

    def p(self, delta: float) -> float:
        """Two-sided p of ``estimate = delta``."""
        if np.abs(self.x - delta * self.w).sum() < _TIE:
            return 1.0
        observed = abs(self._s - delta * self._t)
        extreme = int((np.abs(self._a - delta * self._b) >= observed - _TIE).sum())
        return extreme / self.patterns if self.exact else (extreme + 1) / (self.patterns + 1)

    def interval(self, alpha: float = 0.05, *, bounds: tuple[float, float] = (-1.0, 1.0),
                 tol: float = 1e-6) -> tuple[float, float]:
        """The shifts in ``bounds`` whose ``p`` is at least ``alpha``: ``(lo, hi)``.

        ``bounds`` is the range the figure can take (a difference of two scores
        in [0, 1] lies in [-1, 1]); a side the test never rejects within it ends
        at the bound. The bisection is told 0's verdict first, so the interval
        excludes 0 exactly when ``p(0) < alpha``.
        """
        theta = self.estimate
        if math.isnan(theta):
            return (math.nan, math.nan)
        theta = min(max(theta, bounds[0]), bounds[1])
        return (self._edge(theta, bounds[0], alpha, tol), self._edge(theta, bounds[1], alpha, tol))

    def _edge(self, theta: float, far: float, alpha: float, tol: float) -> float:
        if self.p(far) >= alpha:
            return far
        inner, outer = theta, far
        if min(theta, far) < 0.0 < max(theta, far):
            if self.p(0.0) >= alpha:
                inner = 0.0
            else:
                outer = 0.0
        while abs(outer - inner) > tol:
            mid = (inner + outer) / 2
            if self.p(mid) >= alpha:
                inner = mid
            else:
                outer = mid
        return inner


def effect_spread(diff: np.ndarray, units: np.ndarray) -> float:
    """Between-unit standard deviation of the mean paired difference, beyond what within-unit noise explains.

    The one-way random-effects (ANOVA) estimate: ``tau^2 = max(0, (MSB - MSW) / n0)``
    with ``MSB`` the between-unit and ``MSW`` the within-unit mean square of
    the per-question differences and ``n0`` the effective questions per unit.
    0 when there are fewer than two units or no unit has two questions (no
    within-unit noise to subtract). Two identical arms get 0.
    """
    d = np.asarray(diff, dtype=float)
    if d.size == 0:
        return 0.0
    _, codes = np.unique(np.asarray(units).astype(str), return_inverse=True)
    k = int(codes.max()) + 1
    n = np.bincount(codes, minlength=k).astype(float)
    total = float(n.sum())
    if k < 2 or total <= k:
        return 0.0
    means = np.bincount(codes, weights=d, minlength=k) / n
    grand = float(d.mean())
    msb = float((n * (means - grand) ** 2).sum()) / (k - 1)
    msw = float(((d - means[codes]) ** 2).sum()) / (total - k)
    n0 = (total - float((n**2).sum()) / total) / (k - 1)
    return math.sqrt(max(0.0, (msb - msw) / n0)) if n0 > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Design:
    """The reference arm of one contrast in one half: what a synthetic arm is redrawn from.

    Rows are sorted by unit (``starts`` marks where each unit's rows begin).
    """

    base: np.ndarray
    """The reference arm's score per question (0/1)."""
    rate: np.ndarray
    """Per question, its user's base rate in the reference arm in this half."""
    weight: np.ndarray
    """Per question, its weight in the headline's mean (1 unless halves are balanced by kind)."""
    starts: np.ndarray
    """Index of each unit's first row."""
    spread: float = 0.0
    """Standard deviation across units of the injected effect (``effect_spread`` of the contrast, or declared)."""

    @classmethod
    def from_rows(cls, base: np.ndarray, users: np.ndarray, units: np.ndarray, weight: np.ndarray | None = None,
                  *, spread: float = 0.0) -> Design:
        """A design from one half's paired rows: reference scores, user and unit per row, the effect's spread."""
        base = np.asarray(base, dtype=float)
        weight = np.ones_like(base) if weight is None else np.asarray(weight, dtype=float)
        _, user_idx = np.unique(np.asarray(users), return_inverse=True)
        rate = (np.bincount(user_idx, base) / np.bincount(user_idx))[user_idx]
        order = np.argsort(np.asarray(units), kind="stable")
        unit_sorted = np.asarray(units)[order]
        starts = np.flatnonzero(np.r_[True, unit_sorted[1:] != unit_sorted[:-1]]) if unit_sorted.size else np.zeros(0, int)
        return cls(base[order], rate[order], weight[order], starts, float(spread))

    @property
    def units(self) -> int:
        """Units whose signs the test flips."""
        return int(self.starts.size)


class _Injector:
    """Common random numbers for one design: the same draws for every effect and both signs.

    With them the rejection rate moves with the effect replicate by replicate,
    so the curve is smooth and the MDE a well-defined crossing.

    A question is a hit when its uniform falls below its rate. Within a unit
    every question shares one rate (a unit lies within one user, and the
    injected deviation is the unit's), so the uniforms are laid out as
    replicate x unit x position (padded past a unit's last question with 2,
    which no rate reaches) and one comparison per effect counts every unit's
    hits.
    """

    def __init__(self, design: Design, rng: np.random.Generator, replicates: int) -> None:
        self.design = design
        n, k = design.base.size, design.units
        uniform = rng.random((replicates, n))
        self.flips = sign_flips(k, rng, _MDE_FLIPS)
        # Each unit's own deviation from the effect, cut symmetrically to the room its rate leaves on both
        # sides: at effect 0 every unit's injected effect is then symmetric about 0, as the test assumes.
        self.unit_rate = design.rate[design.starts]
        room = np.minimum(self.unit_rate, 1.0 - self.unit_rate)
        self.deviation = np.clip(design.spread * rng.standard_normal((replicates, k)), -room, room)
        lengths = np.diff(np.r_[design.starts, n])
        unit_of = np.repeat(np.arange(k), lengths)
        if not np.allclose(design.rate, self.unit_rate[unit_of]):
            raise ValueError("design: a unit's questions must share one base rate (a unit lies within one user)")
        width = int(lengths.max())
        slot = unit_of * width + (np.arange(n) - design.starts[unit_of])
        padded = np.full((replicates, k * width), 2.0)
        padded[:, slot] = uniform
        self.uniform = padded.reshape(replicates, k, width)
        weight = np.zeros(k * width)
        weight[slot] = design.weight
        self.weight = weight.reshape(k, width)
        # With one weight per unit (the usual case: halves not balanced by kind) hits are counts times it.
        self.unit_weight = self.weight[:, 0] if np.allclose(self.weight, self.weight[:, :1] * (self.weight > 0)) \
            else None
        self.expected = np.add.reduceat(design.rate * design.weight, design.starts)

    def power(self, effect: float, alpha: float) -> float:
        threshold = np.clip(self.unit_rate + self.deviation + effect, 0.0, 1.0)
        below = self.uniform < threshold[:, :, None]
        if self.unit_weight is not None:
            hits = below.sum(axis=2) * self.unit_weight
        else:
            hits = (below * self.weight).sum(axis=2)
        # Against the reference's expectation (its user's rate), not its realised scores: where units are
        # users the two are the same sums, but where a user holds several units (threads) the realised
        # scores would add each unit's fixed distance from its user's rate to every sign pattern, and the
        # test would reject far less than alpha at effect 0.
        sums = hits - self.expected
        return float((sign_flip_p(sums, self.flips) < alpha).mean())


MDE_STEP = 0.001
"""Resolution of the MDE search: 0.1 point, the digit the tables print."""


@dataclass(frozen=True, slots=True)
class MdeSearch:
    """The smallest gain and the smallest loss a design detects (magnitudes; None: out of reach)."""

    gain: float | None
    """Smallest positive effect with power at least the target."""
    loss: float | None
    """Magnitude of the smallest negative effect with power at least the target."""

    @property
    def mde(self) -> float | None:
        """The smaller of the two magnitudes (what the tables print); None when neither is reached."""
        found = [v for v in (self.gain, self.loss) if v is not None]
        return min(found) if found else None


def design_power(
    design: Design, effects: Sequence[float], *, rng: np.random.Generator, replicates: int = MDE_REPLICATES,
    alpha: float = 0.05,
) -> list[float]:
    """Share of synthetic replicates whose sign-flip p is below ``alpha``, per effect (negative: a loss).

    A replicate redraws each reference question as ``Bernoulli(clip(rate +
    u + effect, 0, 1))``: its user's base rate, its unit's own deviation ``u``
    (normal with the design's ``spread``, cut symmetrically to the room the
    rate leaves), and the effect, independently per question, so hits are
    lost as well as misses fixed. It then tests synthetic minus the
    reference's expectation (its users' base rates) with the headline's test.
    Where users are the units that is the same statistic as synthetic minus
    reference; where they are threads it leaves out each thread's fixed
    distance from its user's rate. At effect 0 the rejection rate is near
    ``alpha``.
    """
    if design.units < 2:
        return [math.nan for _ in effects]
    inj = _Injector(design, rng, replicates)
    return [inj.power(float(e), alpha) for e in effects]


def design_mdes(
    design: Design, *, rng: np.random.Generator, replicates: int = MDE_REPLICATES, power: float = 0.8,
    alpha: float = 0.05,
) -> MdeSearch:
    """Smallest gain and smallest loss whose ``design_power`` reaches ``power``, on a 0.1-point grid.

    Both searches use the same common random numbers as ``design_power`` with
    the same ``rng`` state, so each is a crossing of that curve: the smallest
    multiple of ``MDE_STEP`` (bisection over the grid) at or above the target.
    It never reads an observed gap: two identical arms get the MDE their
    design could detect.
    """
    if design.units < 2:
        return MdeSearch(None, None)
    inj = _Injector(design, rng, replicates)
    steps = int(round(1.0 / MDE_STEP))

    def smallest(sign: float) -> float | None:
        if inj.power(sign * steps * MDE_STEP, alpha) < power:
            return None
        lo, hi = 0, steps
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if inj.power(sign * mid * MDE_STEP, alpha) >= power:
                hi = mid
            else:
                lo = mid
        return round(hi * MDE_STEP, 6)

    return MdeSearch(smallest(1.0), smallest(-1.0))


def design_mde(
    design: Design, *, rng: np.random.Generator, replicates: int = MDE_REPLICATES, power: float = 0.8,
    alpha: float = 0.05,
) -> float | None:
    """The smaller magnitude of ``design_mdes``'s gain and loss; None when neither is reached."""
    return design_mdes(design, rng=rng, replicates=replicates, power=power, alpha=alpha).mde
