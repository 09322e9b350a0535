"""One contrast between two arms of a run: paired questions, a sign-flip test per half, the DiD, a design-based MDE.

``compare`` pairs two arms on the questions both scored and tests their
difference per half (``memsim.analysis.stats.FlipTest``, whole units' sums
flipped), with the design-based MDE of each half (``contrast_design``,
``mde_rng``); ``across_halves`` joins the first half of one pair with the
second of another (the headline's reference arm may differ by half). The
contrasts a run reports, and their arms' roles, are named here
(``CONTRASTS``, ``ARM_PAIRS``, ``ROLES``); ``memsim.analysis.learning``
assembles them into the learning table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from memsim.analysis.stats import (
    MIN_USER_CLUSTERS,
    Design,
    FlipTest,
    MdeSearch,
    design_mdes,
    did_parts,
    effect_spread,
    sign_flips,
)
from memsim.core.streams import substream

__all__ = ["MIN_USERS", "ROLES", "ROLE_NAMES", "CONTRASTS", "ARM_PAIRS", "STALE", "Pair", "compare", "across_halves",
           "contrast_entry", "paired_rows", "unit_column", "unit_sums", "contrast_design", "mde_rng"]


MIN_USERS = MIN_USER_CLUSTERS
"""Fewest users for users to be the unit (below: question threads, conditional on the users)."""


ROLES: tuple[str, ...] = ("twin", "placebo", "always_false", "always_true")
"""The arms that ignore the content of feedback (``run.json`` arm names), in the order that breaks ties."""


ROLE_NAMES: dict[str, str] = {
    "system": "system", "twin": "twin", "placebo": "placebo", "always_false": "always False",
    "always_true": "always True",
}
"""How tables name each arm."""


@dataclass(frozen=True, slots=True)
class Pair:
    """One paired comparison of two systems on the questions both scored."""

    first: float
    """Mean difference in the first half."""
    second: float
    """Mean difference in the second half."""
    did: float
    """``second - first``."""
    first_ci: tuple[float, float]
    """95% interval of ``first``: the shifts the sign-flip test does not reject."""
    second_ci: tuple[float, float]
    did_ci: tuple[float, float]
    second_p: float
    """Sign-flip p of the second-half difference (the question-weighted mean, whole units flipped)."""
    did_p: float
    """Sign-flip p of the DiD (the same question-weighted statistic)."""
    n: int
    """Paired questions."""
    units: int
    """Units whose signs are flipped."""
    first_p: float = math.nan
    """Sign-flip p of the first-half difference."""
    first_mde: float | None = None
    """Design-based MDE of the first-half difference: the smaller of ``first_mde_gain`` and ``first_mde_loss``."""
    second_mde: float | None = None
    """Design-based MDE of the second-half difference."""
    first_mde_gain: float | None = None
    """Smallest gain the first half's design detects (None: not asked for, or out of reach)."""
    first_mde_loss: float | None = None
    """Magnitude of the smallest loss the first half's design detects."""
    second_mde_gain: float | None = None
    second_mde_loss: float | None = None
    first_spread: float | None = None
    """Spread between units of the first-half difference (``effect_spread``), injected by its MDE."""
    second_spread: float | None = None
    sums: pl.DataFrame | None = field(default=None, repr=False, compare=False)
    """Per unit: weighted sums and weights of each half (``unit_sums``), to combine halves of two pairs."""


def mde_rng(seed: int, *, metric: str, system: str, other: str, half: int) -> np.random.Generator:
    """The generator of one design-based MDE: a child of the run's ``stats`` stream named by the contrast.

    Keyed by name rather than drawn in turn, so ``memsim power`` rebuilds the very
    draws a run's MDE used, and adding a contrast moves no other.
    """
    name = f"mde {metric} half {half}: {system} - {other}"
    return substream(seed, "stats", name)


def paired_rows(
    probes: pl.DataFrame, halves: pl.DataFrame, *, metric: str, system: str, other: str, balance_kinds: bool = False
) -> pl.DataFrame:
    """The questions both arms scored, with ``_d = system - other``, weight ``_w``, user, thread and half.

    With ``balance_kinds``, each question is weighted by its kind's share of
    all paired questions over its kind's share of its half (``compare``).
    """
    def scores(label: str) -> pl.DataFrame:
        return probes.filter((pl.col("system") == label) & pl.col("error").is_null()).select(
            "question_id", pl.col(metric).cast(pl.Float64).alias(label)
        )

    joined = (
        scores(system).join(scores(other), on="question_id").join(halves, on="question_id")
        .filter(pl.col(system).is_not_nan() & pl.col(other).is_not_nan())
        .with_columns((pl.col(system) - pl.col(other)).alias("_d"))
    )
    if joined.height and balance_kinds:
        # Only kinds asked in both halves can be balanced; the others are left out of both.
        both = joined.group_by("kind").agg(pl.col("half").n_unique().alias("_halves")).filter(pl.col("_halves") == 2)
        joined = joined.join(both.select("kind"), on="kind", how="semi")
        overall = pl.col("kind").count().over("kind") / pl.len()
        in_half = pl.col("kind").count().over(["half", "kind"]) / pl.col("kind").count().over("half")
        return joined.with_columns((overall / in_half).alias("_w"))
    return joined.with_columns(pl.lit(1.0).alias("_w"))


def unit_column(joined: pl.DataFrame, unit: str | None = None) -> str:
    """``user_id`` for ``unit="user"``, ``thread_id`` for ``"thread"``; None: users from ``MIN_USERS`` users in the rows."""
    if unit is None:
        return "user_id" if joined["user_id"].n_unique() >= MIN_USERS else "thread_id"
    if unit not in ("user", "thread"):
        raise ValueError(f"unit must be 'user' or 'thread', got {unit!r}")
    return "user_id" if unit == "user" else "thread_id"


def unit_sums(joined: pl.DataFrame, unit_col: str) -> pl.DataFrame:
    """Per unit (column ``unit``, sorted): weighted sums ``s1``/``s2`` of the differences and weights ``n1``/``n2``."""
    return joined.group_by(pl.col(unit_col).cast(pl.Utf8).alias("unit")).agg(
        (pl.col("_d") * pl.col("_w")).filter(pl.col("half") == 0).sum().alias("s1"),
        pl.col("_w").filter(pl.col("half") == 0).sum().alias("n1"),
        (pl.col("_d") * pl.col("_w")).filter(pl.col("half") == 1).sum().alias("s2"),
        pl.col("_w").filter(pl.col("half") == 1).sum().alias("n2"),
    ).sort("unit")


def contrast_design(joined: pl.DataFrame, *, other: str, half: int, unit: str | None = None,
                    spread: float | None = None) -> Design:
    """The design behind one half of a contrast: the reference arm's paired rows (``paired_rows``).

    ``spread``: the standard deviation across units of the injected effect;
    None takes the spread the contrast's own units show in that half
    (``effect_spread`` of the paired differences), 0 for identical arms.
    """
    unit_col = unit_column(joined, unit)
    rows = joined.filter(pl.col("half") == half)
    units = rows[unit_col].cast(pl.Utf8).to_numpy()
    if spread is None:
        spread = effect_spread(rows["_d"].to_numpy(), units)
    return Design.from_rows(rows[other].to_numpy(), rows["user_id"].to_numpy(), units, rows["_w"].to_numpy(),
                            spread=spread)


def _tests(sums: pl.DataFrame, rng: np.random.Generator, n_flips: int) -> dict[str, Any]:
    """Estimate, p and inverted interval of each half and of the DiD, on one set of sign patterns."""
    s1, n1 = sums["s1"].to_numpy().astype(float), sums["n1"].to_numpy().astype(float)
    s2, n2 = sums["s2"].to_numpy().astype(float), sums["n2"].to_numpy().astype(float)
    flips = sign_flips(len(sums), rng, n_flips)
    first, second = FlipTest(s1, n1, flips), FlipTest(s2, n2, flips)
    did = FlipTest(*did_parts(s1, n1, s2, n2), flips)
    return {
        "first": first.estimate, "second": second.estimate, "did": second.estimate - first.estimate,
        "first_ci": first.interval(), "second_ci": second.interval(), "did_ci": did.interval(bounds=(-2.0, 2.0)),
        "first_p": first.p(0.0), "second_p": second.p(0.0), "did_p": did.p(0.0),
    }


def compare(
    probes: pl.DataFrame,
    halves: pl.DataFrame,
    *,
    metric: str,
    system: str,
    other: str,
    rng: np.random.Generator,
    n_boot: int = 2000,
    balance_kinds: bool = False,
    mde_seed: int | None = None,
    unit: str | None = None,
) -> Pair | None:
    """``system - other`` per half on the questions both scored, with sign-flip p, inverted interval and MDE.

    The estimate of a half is the question-weighted mean difference; its p is
    a sign-flip test of that same statistic (whole units' sums flipped) and
    its 95% interval the shifts of the differences that test does not reject
    (``FlipTest``), on the same sign patterns, so the interval excludes 0
    exactly when p < 0.05. ``n_boot`` is the number of random sign patterns
    drawn when there are more than 16 units. With ``balance_kinds``, questions
    are weighted so both halves count the kinds in the same proportions
    (``paired_rows``: a shift in the kind mix between halves, such as
    "previous value" questions that only become askable after facts change,
    then moves neither half). With ``mde_seed`` (the run's seed), each half
    also gets its design-based MDE (``memsim.analysis.stats.design_mdes`` on
    ``other``'s rows, drawn from ``mde_rng``). ``unit``: ``"user"`` or
    ``"thread"`` as the design decided; None: from the rows (``unit_column``).
    """
    joined = paired_rows(probes, halves, metric=metric, system=system, other=other, balance_kinds=balance_kinds)
    if joined.height == 0:
        return None
    sums = unit_sums(joined, unit_column(joined, unit))
    t = _tests(sums, rng, n_boot)

    def mde(half: int) -> tuple[MdeSearch, float] | None:
        if mde_seed is None or not (joined["half"] == half).any():
            return None
        design = contrast_design(joined, other=other, half=half, unit=unit)
        return design_mdes(design, rng=mde_rng(mde_seed, metric=metric, system=system, other=other, half=half)), \
            design.spread

    m1, m2 = mde(0), mde(1)
    return Pair(
        first=float(t["first"]), second=float(t["second"]), did=float(t["did"]),
        first_ci=t["first_ci"], second_ci=t["second_ci"], did_ci=t["did_ci"],
        second_p=float(t["second_p"]), did_p=float(t["did_p"]), n=joined.height, units=len(sums),
        first_p=float(t["first_p"]),
        first_mde=m1[0].mde if m1 else None, second_mde=m2[0].mde if m2 else None,
        first_mde_gain=m1[0].gain if m1 else None, first_mde_loss=m1[0].loss if m1 else None,
        second_mde_gain=m2[0].gain if m2 else None, second_mde_loss=m2[0].loss if m2 else None,
        first_spread=m1[1] if m1 else None, second_spread=m2[1] if m2 else None,
        sums=sums,
    )


def across_halves(first: Pair, second: Pair, rng: np.random.Generator, n_flips: int) -> Pair:
    """The first half of ``first`` and the second half of ``second`` as one pair, with the DiD between them.

    Each half keeps its own figures (estimate, interval, p, MDE); the DiD is
    the second's second half minus the first's first half, tested and
    inverted on the units of both (a unit missing from one counts 0 there).
    """
    if first is second or first.sums is None or second.sums is None:
        return first if first is second else second
    a = first.sums.select("unit", "s1", "n1")
    b = second.sums.select("unit", "s2", "n2")
    sums = a.join(b, on="unit", how="full", coalesce=True).fill_null(0.0).sort("unit")
    t = _tests(sums, rng, n_flips)
    return Pair(
        first=first.first, second=second.second, did=second.second - first.first,
        first_ci=first.first_ci, second_ci=second.second_ci, did_ci=t["did_ci"],
        second_p=second.second_p, did_p=float(t["did_p"]), n=int(round(float(sums["n1"].sum() + sums["n2"].sum()))),
        units=len(sums),
        first_p=first.first_p, first_mde=first.first_mde, second_mde=second.second_mde,
        first_mde_gain=first.first_mde_gain, first_mde_loss=first.first_mde_loss,
        second_mde_gain=second.second_mde_gain, second_mde_loss=second.second_mde_loss,
        first_spread=first.first_spread, second_spread=second.second_spread, sums=sums,
    )


CONTRASTS: tuple[tuple[str, str], ...] = (
    ("learning_from_feedback", "learning from feedback (system - best content-ignoring arm)"),
    ("system_vs_placebo", "system - placebo"),
    ("effect_of_feedback_calls", "effect of feedback calls (placebo - twin)"),
    ("effect_of_use", "effect of use (system - twin)"),
    ("system_vs_always_false", "system - always False"),
    ("system_vs_always_true", "system - always True"),
)
"""The contrasts of a feedback-using system, as ``metrics.json`` keys them, with their names in tables."""


ARM_PAIRS: dict[str, tuple[str, str]] = {
    "system_vs_placebo": ("system", "placebo"),
    "effect_of_feedback_calls": ("placebo", "twin"),
    "effect_of_use": ("system", "twin"),
    "system_vs_always_false": ("system", "always_false"),
    "system_vs_always_true": ("system", "always_true"),
}
"""Each contrast but the headline as ``(minuend role, reference role)``."""


STALE = "stale_above_current"
"""The cost column beside the headline: a superseded value outranks the current one."""


def contrast_entry(pair: Pair, minus: str, reference: str) -> dict[str, Any]:
    """A contrast's figures under named keys (``first``/``second``/``did`` with ``_lo``, ``_hi``, ``_p``, ``_mde``)."""
    return {
        "system": minus, "reference": reference,
        "first": pair.first, "first_lo": pair.first_ci[0], "first_hi": pair.first_ci[1], "first_p": pair.first_p,
        "first_mde": pair.first_mde, "first_mde_gain": pair.first_mde_gain, "first_mde_loss": pair.first_mde_loss,
        "first_spread": pair.first_spread,
        "second": pair.second, "second_lo": pair.second_ci[0], "second_hi": pair.second_ci[1],
        "second_p": pair.second_p, "second_mde": pair.second_mde, "second_mde_gain": pair.second_mde_gain,
        "second_mde_loss": pair.second_mde_loss, "second_spread": pair.second_spread,
        "did": pair.did, "did_lo": pair.did_ci[0], "did_hi": pair.did_ci[1], "did_p": pair.did_p,
        "paired": pair.n, "units": pair.units,
    }
