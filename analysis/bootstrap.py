"""Bootstrap intervals: percentile intervals of a mean (or any statistic), resampling rows or whole clusters.

The resamples are drawn as count matrices in chunks (``_CHUNK`` rows at a
time), so a mean's bootstrap is a matrix product and memory stays bounded
however many resamples are asked for. Every function takes its random
generator from the caller. Re-exported by ``memsim.analysis.stats``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["bootstrap_ci", "percentile_interval", "check_boot", "halves_boot"]

# Rows of bootstrap weights drawn at a time: bounds memory at
# _CHUNK x n_units integers however many resamples are asked for.
_CHUNK = 256


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


def check_boot(n_boot: int, alpha: float) -> None:
    """Raise ``ValueError`` for a non-positive ``n_boot`` or an ``alpha`` outside (0, 1)."""
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
    check_boot(n_boot, alpha)
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


def halves_boot(
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
