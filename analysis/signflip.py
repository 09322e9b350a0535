"""The sign-flip test of a weighted difference and its interval: whole units' signs flipped.

Up to ``_EXACT_FLIPS`` units every sign pattern is enumerated (an exact
test); above, random patterns are drawn from the caller's generator.
``FlipTest`` inverts the test into the interval of shifts it does not
reject. Re-exported by ``memsim.analysis.stats``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["sign_flips", "sign_flip_p", "FlipTest"]

_EXACT_FLIPS = 16  # units up to which every sign pattern is enumerated
_N_FLIPS = 2000  # random sign patterns above that


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
