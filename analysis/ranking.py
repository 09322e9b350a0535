"""Ranking systems over datasets: the Friedman test, Nemenyi post-hoc and the critical-difference diagram.

Re-exported by ``memsim.analysis.stats``.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from memsim.core.errors import UserError

__all__ = ["FRIEDMAN_TEST", "FriedmanResult", "friedman_ranking", "critical_difference_plot"]

FRIEDMAN_TEST = "Friedman chi-square, Nemenyi post-hoc"


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
