"""Design-based power and minimum detectable effect (MDE) of a paired contrast, and the effect's spread.

``Design`` holds the reference arm of one contrast in one half;
``design_power`` redraws it with an injected effect and tests each
replicate with the headline's sign-flip test (``memsim.analysis.signflip``);
``design_mdes`` searches the smallest gain and loss that reach the target
power. ``effect_spread`` estimates how much the effect varies between units.
Re-exported by ``memsim.analysis.stats``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memsim.analysis.signflip import sign_flip_p, sign_flips

__all__ = ["effect_spread", "Design", "MdeSearch", "design_power", "design_mdes", "design_mde",
           "MDE_STEP", "MDE_REPLICATES", "MDE_METHOD"]

MDE_REPLICATES = 1000
"""Synthetic replicates behind each design-based power figure.

At 1,000 the MDE of a 30-user design (130 questions per user and half, a
spread of 3 points) has a standard deviation of 0.05 to 0.06 point across
sets of draws (0.09 at 200; 16 sets each), so its printed tenth of a point
is a property of the design rather than of the draws.
"""

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
