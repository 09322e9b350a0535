"""Statistics over per-question rows: intervals, halves, DiD, rankings.

Every function takes its random generator from the caller (``rng``), so the
same seed gives the same numbers. NaN in a metric means *unscored* and is
dropped before any statistic, never counted as zero.

Conventions shared by the halves and difference-in-differences figures:

- Here the question stream is split at the median ``q_index`` of the rows
  being compared: rows with ``q_index`` below the median form the first
  half, the rest the second half. (The learning figures split each user's
  questions at that user's own median instead: ``memsim.analysis.learning``.)
- Intervals are percentile bootstrap intervals. The unit resampled
  (``cluster_labels``) is the whole user when there are at least
  ``MIN_USER_CLUSTERS`` (30) users, so that questions about the same person, which
  are not independent, move together; with fewer users it is the question
  thread (a question and its re-asks), and the interval is conditional on
  those users; with neither, questions are resampled within each half (the
  half sizes stay fixed).
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

from memsim.sim.core.errors import UserError

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
    "sign_flips",
    "sign_flip_p",
    "Design",
    "design_power",
    "design_mde",
    "MDE_REPLICATES",
    "MDE_METHOD",
]

FRIEDMAN_TEST = "Friedman chi-square, Nemenyi post-hoc"

MDE_REPLICATES = 200
"""Synthetic replicates behind each design-based power figure."""

_EXACT_FLIPS = 16  # units up to which every sign pattern is enumerated
_N_FLIPS = 2000  # random sign patterns above that
_MDE_FLIPS = 500  # per synthetic replicate: enough to place p against 0.05, a quarter of the cost

MDE_METHOD = (
    "MDE: design-based, the smallest effect d that the headline's test (sign-flip p < 0.05 of the "
    f"question-weighted difference, whole units flipped; {_MDE_FLIPS} patterns) detects in 80% of "
    f"{MDE_REPLICATES} replicates, each redrawing every question of the reference arm as Bernoulli(its user's "
    "base rate in that half + d); it ignores the pairing of the arms (conservative)"
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
    """Paired bootstrap interval of ``did``."""
    n: int
    """Questions both systems scored (the paired set)."""
    n_first: int = 0
    """Paired questions in the first half."""
    n_second: int = 0
    """Paired questions in the second half."""


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


def _split(q_index: np.ndarray) -> np.ndarray:
    """Boolean mask of the second half: ``q_index`` at or above the median."""
    if q_index.size == 0:
        return np.zeros(0, dtype=bool)
    return q_index >= np.median(q_index)


MIN_USER_CLUSTERS = 30
"""Fewest users for resampling whole users; below it, question threads are resampled.

A cluster bootstrap over a handful of users gives intervals that are too
narrow (an A/A check with 3 to 12 users covered 0 in only 87-90% of runs).
With fewer users, the unit resampled is the question thread: a question and
every later re-ask of it (``thread_id``), which keeps the strongest
dependence in the stream (asking the same thing again) inside one unit.
"""


def cluster_labels(frame: pl.DataFrame, *, user_col: str = "user_id") -> np.ndarray | None:
    """Bootstrap unit per row: users when there are many, else question threads, else None (rows)."""
    if user_col in frame.columns:
        users = frame[user_col].cast(pl.Utf8).to_numpy()
        if len(set(users.tolist())) >= MIN_USER_CLUSTERS:
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
        Means, their difference and bootstrap intervals. Halves split at the
        median ``q_index`` of this system's scored rows; resampling is
        clustered by user when there are several users.

    Raises:
        UserError: unknown metric or system.
    """
    _check_boot(n_boot, alpha)
    _require(df, metric, [system])
    rows = _scored(df, metric, system)
    x = rows[metric].cast(pl.Float64).to_numpy()
    second = _split(rows["q_index"].to_numpy())
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
    """Questions both systems scored: one row per question with ``x`` (system) and ``y`` (control)."""
    keys = ["question_id", "user_id"] if "user_id" in df.columns else ["question_id"]
    extra = [c for c in ("thread_id",) if c in df.columns]
    a = _scored(df, metric, system).select([*keys, *extra, "q_index", pl.col(metric).cast(pl.Float64).alias("x")])
    b = _scored(df, metric, control).select([*keys, pl.col(metric).cast(pl.Float64).alias("y")])
    return a.join(b, on=keys, how="inner").sort("q_index")


def diff_in_diff(
    df: pl.DataFrame,
    *,
    metric: str,
    system: str,
    control: str = "naive",
    rng: np.random.Generator,
    n_boot: int = 2000,
    alpha: float = 0.05,
) -> DiDResult:
    """Difference in differences of a system against a control on paired questions.

    Only questions both systems scored count. The halves split at the median
    ``q_index`` of that paired set, so both systems are compared on the same
    questions. Per question the paired difference ``d = x_system - x_control``
    gives ``DiD = mean(d | second half) - mean(d | first half)``; resampling
    draws question ids (or whole users when there are several), keeping each
    question's two values together.

    Raises:
        UserError: unknown metric or system.
    """
    _check_boot(n_boot, alpha)
    _require(df, metric, [system, control])
    pairs = _paired(df, metric, system, control)
    n = pairs.height
    if n == 0:
        return DiDResult(math.nan, (math.nan, math.nan), 0, 0, 0)
    d = (pairs["x"] - pairs["y"]).to_numpy()
    second = _split(pairs["q_index"].to_numpy())
    n1, n2 = int((~second).sum()), int(second.sum())
    if n1 == 0 or n2 == 0:
        return DiDResult(math.nan, (math.nan, math.nan), n, n1, n2)
    did = float(d[second].mean() - d[~second].mean())
    _, _, ci = _halves_boot(d, second, cluster_labels(pairs), n_boot=n_boot, alpha=alpha, rng=rng)
    return DiDResult(did=did, ci=ci, n=n, n_first=n1, n_second=n2)


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
# Sign-flip test of a weighted difference, and the design-based MDE
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
    extreme = (flipped >= observed[:, None] - 1e-12).sum(axis=1)
    p = extreme / signs.shape[0] if exact else (extreme + 1) / (signs.shape[0] + 1)
    p = np.where(np.abs(x).sum(axis=1) < 1e-12, 1.0, p)
    return p if np.ndim(sums) > 1 else p[:1]


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

    @classmethod
    def from_rows(cls, base: np.ndarray, users: np.ndarray, units: np.ndarray, weight: np.ndarray | None = None) -> Design:
        """A design from one half's paired rows: reference scores, user and resampled unit per row."""
        base = np.asarray(base, dtype=float)
        weight = np.ones_like(base) if weight is None else np.asarray(weight, dtype=float)
        _, user_idx = np.unique(np.asarray(users), return_inverse=True)
        rate = (np.bincount(user_idx, base) / np.bincount(user_idx))[user_idx]
        order = np.argsort(np.asarray(units), kind="stable")
        unit_sorted = np.asarray(units)[order]
        starts = np.flatnonzero(np.r_[True, unit_sorted[1:] != unit_sorted[:-1]]) if unit_sorted.size else np.zeros(0, int)
        return cls(base[order], rate[order], weight[order], starts)

    @property
    def units(self) -> int:
        """Resampled units."""
        return int(self.starts.size)


class _Injector:
    """Common random numbers for one design: the same uniforms and sign patterns for every effect.

    With them the rejection rate rises with the effect replicate by replicate,
    so the curve is smooth and the MDE a well-defined crossing.
    """

    def __init__(self, design: Design, rng: np.random.Generator, replicates: int) -> None:
        self.design = design
        self.uniform = rng.random((replicates, design.base.size))
        self.flips = sign_flips(design.units, rng, _MDE_FLIPS)

    def power(self, effect: float, alpha: float) -> float:
        d = self.design
        drawn = (self.uniform < np.clip(d.rate + effect, 0.0, 1.0)).astype(float)
        # Against the reference's expectation (its user's rate), not its realised scores: where units are
        # users the two are the same sums, but where a user holds several units (threads) the realised
        # scores would add each unit's fixed distance from its user's rate to every sign pattern, and the
        # test would reject far less than alpha at effect 0.
        sums = np.add.reduceat((drawn - d.rate) * d.weight, d.starts, axis=1)
        return float((sign_flip_p(sums, self.flips) < alpha).mean())


def design_power(
    design: Design, effects: Sequence[float], *, rng: np.random.Generator, replicates: int = MDE_REPLICATES,
    alpha: float = 0.05,
) -> list[float]:
    """Share of synthetic replicates whose sign-flip p is below ``alpha``, per effect.

    A replicate redraws each reference question as ``Bernoulli(clip(rate + effect, 0, 1))``
    (its user's base rate plus the effect, independently per question: hits are
    lost as well as misses fixed) and tests synthetic minus the reference's
    expectation (its users' base rates) with the headline's test. Where users
    are the units that is the same statistic as synthetic minus reference; where
    they are threads it leaves out each thread's fixed distance from its user's
    rate. At effect 0 the rejection rate is near ``alpha``.
    """
    if design.units < 2:
        return [math.nan for _ in effects]
    inj = _Injector(design, rng, replicates)
    return [inj.power(float(e), alpha) for e in effects]


def design_mde(
    design: Design, *, rng: np.random.Generator, replicates: int = MDE_REPLICATES, power: float = 0.8,
    alpha: float = 0.05, tol: float = 1e-3,
) -> float | None:
    """Smallest effect whose ``design_power`` reaches ``power`` (bisection); None when no effect does.

    Draws the same common random numbers as ``design_power`` with the same
    ``rng`` state, so the MDE is the crossing of that curve. It never reads an
    observed gap: two identical arms get the MDE their design could detect.
    """
    if design.units < 2:
        return None
    inj = _Injector(design, rng, replicates)
    lo, hi = 0.0, 1.0
    if inj.power(hi, alpha) < power:
        return None
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if inj.power(mid, alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi
