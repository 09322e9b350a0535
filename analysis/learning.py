"""Learning through use: the contrasts of each feedback-using system against the arms that ignore content.

A system that learns from feedback is played beside arms that get the same
stream and the same random draws but whose feedback carries nothing about
the question (the roles come from ``run.json``'s ``arms``, never from
labels): its **twin** (no feedback calls), its **placebo** (the system's own
bits, permuted within user and week: the same calls and the same dose), and
the **constant arms**, told always False or always True at the same calls.
On the questions both arms of a pair scored:

- **learning from feedback** (the headline) = system - the best arm that
  ignores content: per half, the arm among those played with the highest
  metric on the paired questions (by point estimate), so a system that noise
  harms cannot look as if it learned unless it beats every such arm;
- **system - placebo**, **system - always False**, **system - always True**:
  the system against each content-ignoring arm alone;
- **effect of feedback calls** = placebo - twin: what being told anything did;
- **effect of use** = system - twin: both together (the flat ``gain_*`` keys);
- each per half, with the **DiD** across halves and the same contrast in
  ``stale_above_current``;
- **DiD vs static control**: ``(2nd - 1st)_system - (2nd - 1st)_control``,
  reported apart because it also moves with storage policy and with the
  question mix, not only with learning.

Halves follow ``memsim.analysis.stats.user_halves`` (each user's questions
split at that user's median). The unit of inference (users from 30 users in
the design, else question threads, conditional on the users) is decided once
(``memsim.analysis.stats.inference_unit``). Each p is a sign-flip test of the
question-weighted difference (whole units' sums flipped) and each interval
the shifts that test does not reject (``memsim.analysis.stats.FlipTest``), so
an interval excludes 0 exactly when p < 0.05. Each contrast's MDE is
design-based (``memsim.analysis.stats.design_mdes``): the smallest gain or loss
that test detects with 80% power when the reference arm's questions are
redrawn at their users' base rates plus the effect, varying between units as
the contrast's units do; it never reads the observed gap.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from memsim.analysis.stats import (
    MDE_METHOD,
    MIN_USER_CLUSTERS,
    Design,
    FlipTest,
    MdeSearch,
    design_mdes,
    did_parts,
    effect_spread,
    inference_unit,
    percentile_interval,
    sign_flips,
    user_halves,
)
from memsim.core.streams import substream
from memsim.core.table import fit_table, table_width, text_table

__all__ = [
    "MIN_USERS", "ROLES", "ROLE_NAMES", "CONTRASTS", "ARM_PAIRS", "STALE", "Pair", "compare", "paired_rows",
    "unit_column", "unit_sums", "contrast_design", "mde_rng", "family_arms", "design_unit", "best_reference",
    "headline_roles",
    "learning_table",
    "user_halves", "gain_curve", "gain_curve_band", "format_learning", "format_diff", "format_p", "contrast_rows",
    "contrast_headers", "arm_rows", "arm_headers", "learning_notes", "learning_header",
]

MIN_USERS = MIN_USER_CLUSTERS
"""Fewest users for users to be the unit (below: question threads, conditional on the users)."""

ROLES: tuple[str, ...] = ("twin", "placebo", "always_false", "always_true")
"""The arms that ignore the content of feedback (``run.json`` arm names), in the order that breaks ties."""

ROLE_NAMES: dict[str, str] = {
    "system": "system", "twin": "twin", "placebo": "placebo", "always_false": "always False",
    "always_true": "always True",
}
"""How tables name each arm."""

_Z80 = 0.8416  # one-sided z of 80% power
_Z975 = 1.96


def family_arms(labels: Sequence[str], info: Mapping[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """System label -> ``{role: label}`` of its content-ignoring arms among ``labels`` (roles in ``ROLES`` order).

    Read from ``run.json``'s ``arms`` (``memsim.analysis.load.label_arms``); a
    system played with none of them is left out.
    """
    from memsim.analysis.load import label_arms

    found: dict[str, dict[str, str]] = {}
    for label, (base, role) in label_arms(labels, info).items():
        if role in ROLES and base != label:
            found.setdefault(base, {})[role] = label
    return {s: {r: found[s][r] for r in ROLES if r in found[s]} for s in labels if s in found}


def design_unit(info: Mapping[str, Any] | None, probes: pl.DataFrame) -> tuple[str, int, str]:
    """``(unit, users, reason)`` of a run: decided from the users its stream plays (``run.json`` totals).

    The rows' users are the fallback for folders without totals; rows that
    failed count too, so losing a user never switches the unit.
    """
    users = int(((info or {}).get("totals") or {}).get("users") or 0)
    if users <= 0 and probes.height and "user_id" in probes.columns:
        users = probes["user_id"].n_unique()
    unit, reason = inference_unit(users)
    return unit, users, reason


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


def _across(first: Pair, second: Pair, rng: np.random.Generator, n_flips: int) -> Pair:
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


def _contrast(pair: Pair, minus: str, reference: str) -> dict[str, Any]:
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


def headline_roles(channel: str | None) -> tuple[str, ...]:
    """The arms the headline may take as its reference under ``channel``.

    Where feedback reaches systems as user turns (``correction``,
    ``implicit``), the twin and the constant arms are told a different number
    of turns than their system (none, or one after every question), and those
    turns fill the store whatever they say; only the placebo is told turns at
    its system's dose. There the headline is system - placebo, and the other
    arms stay in the detailed table. Elsewhere every content-ignoring arm may
    be the reference.
    """
    if channel is not None and channel.partition(":")[0] in ("correction", "implicit"):
        return ("placebo",)
    return ROLES


def _best_arm(pairs: Mapping[str, Pair | None], half: int) -> str | None:
    """The role whose arm scores highest in ``half``: the smallest ``system - arm`` (ties: ``ROLES`` order)."""
    return _lowest({role: (None if p is None else (p.first if half == 0 else p.second)) for role, p in pairs.items()})


def _lowest(values: Mapping[str, float | None]) -> str | None:
    best: tuple[float, str] | None = None
    for role in ROLES:
        value = values.get(role)
        if value is None or math.isnan(value):
            continue
        if best is None or value < best[0]:
            best = (value, role)
    return None if best is None else best[1]


def best_reference(
    probes: pl.DataFrame, *, metric: str, system: str, arms: Mapping[str, str], half: int, unit: str | None = None,
    balance_kinds: bool = False, channel: str | None = None,
) -> str | None:
    """The label of the arm the headline compares ``system`` with in ``half`` (``learning_table``'s choice).

    ``arms``: role -> label of the system's content-ignoring arms. The same
    estimates as the table's (the question-weighted mean of ``system - arm``
    on the paired questions of that half), so the choice is the same.
    """
    allowed = [role for role in headline_roles(channel) if role in arms] or list(arms)
    arms = {role: label for role, label in arms.items() if role in allowed}
    scored = probes.filter(pl.col("error").is_null())
    halves = user_halves(scored)
    values: dict[str, float | None] = {}
    for role, label in arms.items():
        joined = paired_rows(scored, halves, metric=metric, system=system, other=label, balance_kinds=balance_kinds)
        if joined.height == 0:
            continue
        sums = unit_sums(joined, unit_column(joined, unit))
        s, n = (sums["s1"], sums["n1"]) if half == 0 else (sums["s2"], sums["n2"])
        values[role] = FlipTest(s.to_numpy().astype(float), n.to_numpy().astype(float), (np.zeros((1, len(sums))), True)).estimate
    role = _lowest(values)
    return None if role is None else arms[role]


def learning_table(
    probes: pl.DataFrame,
    *,
    metric: str,
    twins: Mapping[str, str],
    placebos: Mapping[str, str],
    control: str | None,
    rng: np.random.Generator,
    n_boot: int = 2000,
    balance_kinds: bool = False,
    seed: int | None = None,
    arms: Mapping[str, Mapping[str, str]] | None = None,
    unit: str | None = None,
    unit_reason: str | None = None,
    channel: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Per system (every arm as its own row): halves, stale>cur, the contrasts, DiDs, p, MDE.

    A system with content-ignoring arms gets ``contrasts``:
    ``learning_from_feedback`` (system minus the best of those arms, chosen per
    half by point estimate; ``first_reference``/``second_reference`` name it),
    ``system_vs_placebo``, ``effect_of_feedback_calls`` (placebo minus twin),
    ``effect_of_use`` (system minus twin), ``system_vs_always_false`` and
    ``system_vs_always_true``, those whose arms ran, each per half with
    interval, p and design-based MDE, the DiD across halves, and the same
    contrast in ``stale_above_current`` (``stale``). The flat
    ``gain_*``/``did_twin*`` keys of a system (and of each of its other arms)
    are the difference with its twin. Every arm's entry names its ``arm`` and
    the system it belongs to (``of``).

    Args:
        probes: the run's rows.
        metric: the headline column.
        twins: system label -> its twin's label (systems that learn from feedback).
        placebos: placebo label -> the twin it is compared with.
        control: the static control's label (None: no "vs static control" column).
        rng: the run's ``stats`` stream.
        n_boot: random sign patterns per test when there are more than 16 units.
        balance_kinds: weight questions so that both halves have the same kind mix (``compare``).
        seed: the run's seed, for the design-based MDEs (``mde_rng``); None: no MDE.
        arms: system label -> ``{role: label}`` of its content-ignoring arms (``family_arms``);
            None: the twins and placebos given.
        unit: ``"user"`` or ``"thread"`` as the design decided (``design_unit``); None: from the rows' users.
        unit_reason: why that unit, for the table's header line.
    """
    scored = probes.filter(pl.col("error").is_null())
    halves = user_halves(scored)
    n_users = halves["user_id"].n_unique()
    if unit is None:
        unit, unit_reason = inference_unit(n_users)
    if arms is None:
        placebo_of = {t: p for p, t in placebos.items()}
        arms = {s: {"twin": t, **({"placebo": placebo_of[t]} if t in placebo_of else {})} for s, t in twins.items()}
    labels = list(dict.fromkeys(scored["system"].to_list()))
    families = {s: {r: lab for r, lab in fam.items() if lab in labels} for s, fam in arms.items() if s in labels}
    families = {s: fam for s, fam in families.items() if fam}
    member = {lab: (s, r) for s, fam in families.items() for r, lab in fam.items()}
    has_stale = STALE in scored.columns and metric != STALE
    pairs: dict[tuple[str, str, str], Pair | None] = {}

    def pair_of(a: str, b: str, *, col: str = metric, mde: bool = True) -> Pair | None:
        key = (col, a, b)
        if key not in pairs:
            pairs[key] = compare(scored, halves, metric=col, system=a, other=b, rng=rng, n_boot=n_boot,
                                 balance_kinds=balance_kinds and col == metric,
                                 mde_seed=seed if mde and col == metric else None, unit=unit)
        return pairs[key]

    contrasts_of: dict[str, dict[str, Any]] = {}
    for system, fam in families.items():
        label_of = {"system": system, **fam}
        contrasts: dict[str, Any] = {}
        found: dict[str, tuple[str, str, Pair]] = {}
        for key, (ra, rb) in ARM_PAIRS.items():
            a, b = label_of.get(ra), label_of.get(rb)
            pair = pair_of(a, b) if a and b else None
            if pair is not None:
                found[key] = (a, b, pair)  # type: ignore[assignment]
        # The headline's candidates: those the channel allows (``headline_roles``), else every arm that ran.
        allowed = [role for role in headline_roles(channel) if role in fam] or [role for role in ROLES if role in fam]
        vs = {role: pair_of(system, fam[role]) for role in ROLES if role in allowed}
        ref1, ref2 = _best_arm(vs, 0), _best_arm(vs, 1)
        if ref2 is not None or ref1 is not None:
            r1, r2 = ref1 or ref2, ref2 or ref1
            head = _across(vs[r1], vs[r2], rng, n_boot)  # type: ignore[arg-type]
            entry = _contrast(head, system, fam[r2])  # type: ignore[index]
            entry.update(first_reference=fam[r1], second_reference=fam[r2], first_reference_arm=r1,  # type: ignore[index]
                         second_reference_arm=r2, candidates=[fam[r] for r in vs])
            if ref1 is None:
                entry.update(first=None, first_lo=None, first_hi=None, first_p=None, did=None, did_lo=None,
                             did_hi=None, did_p=None)
            if has_stale:
                s1, s2 = pair_of(system, fam[r1], col=STALE), pair_of(system, fam[r2], col=STALE)  # type: ignore[index]
                if s1 is not None and s2 is not None:
                    entry["stale"] = {k: v for k, v in _contrast(_across(s1, s2, rng, n_boot), system, fam[r2]).items()  # type: ignore[index]
                                      if "_mde" not in k and "spread" not in k}
            contrasts["learning_from_feedback"] = entry
        for key, (a, b, pair) in found.items():
            contrasts[key] = _contrast(pair, a, b)
            if has_stale:
                stale = pair_of(a, b, col=STALE)
                if stale is not None:
                    contrasts[key]["stale"] = {k: v for k, v in _contrast(stale, a, b).items()
                                               if "_mde" not in k and "spread" not in k}
        if contrasts:
            contrasts_of[system] = contrasts

    out: dict[str, dict[str, Any]] = {}
    for label in labels:
        rows = scored.filter(pl.col("system") == label).join(halves.select("question_id", "half"), on="question_id")
        x = rows[metric].cast(pl.Float64)
        entry: dict[str, Any] = {
            "users": n_users,
            "unit": unit,
            "unit_reason": unit_reason,
            "first": _nanmean(x.filter(rows["half"] == 0)),
            "second": _nanmean(x.filter(rows["half"] == 1)),
            "mix_first": _mix(rows.filter(pl.col("half") == 0)),
            "mix_second": _mix(rows.filter(pl.col("half") == 1)),
        }
        if label in families:
            entry["arm"] = "system"
        elif label in member:
            entry["of"], entry["arm"] = member[label]
        if has_stale:
            st = rows[STALE].cast(pl.Float64)
            entry.update(stale_first=_nanmean(st.filter(rows["half"] == 0)), stale_second=_nanmean(st.filter(rows["half"] == 1)))
        base = label if label in families else member.get(label, (None, None))[0]
        twin = families.get(base, {}).get("twin") if base is not None else None
        if twin is not None and twin != label:
            pair = pair_of(label, twin, mde=False)
            if pair is not None:
                entry.update(
                    twin=twin,
                    gain_first=pair.first, gain_first_lo=pair.first_ci[0], gain_first_hi=pair.first_ci[1],
                    gain_second=pair.second, gain_second_lo=pair.second_ci[0], gain_second_hi=pair.second_ci[1],
                    gain_second_p=pair.second_p, gain_mde=pair.second_mde,
                    did_twin=pair.did, did_twin_lo=pair.did_ci[0], did_twin_hi=pair.did_ci[1], did_twin_p=pair.did_p,
                    paired=pair.n, units=pair.units,
                )
                entry["gain_by_kind"] = _by_kind(scored, halves, metric, label, twin)
        if label in contrasts_of:
            entry["contrasts"] = contrasts_of[label]
        if control is not None and label != control and label not in member:
            pair = compare(scored, halves, metric=metric, system=label, other=control, rng=rng, n_boot=n_boot,
                           balance_kinds=balance_kinds, unit=unit)
            if pair is not None:
                entry.update(
                    did_control=pair.did, did_control_lo=pair.did_ci[0], did_control_hi=pair.did_ci[1],
                    did_control_p=pair.did_p, did_control_mde=_interval_mde(pair.did_ci),
                )
        out[label] = entry
    return out


def _interval_mde(ci: tuple[float, float]) -> float | None:
    """MDE of the DiD vs the static control, read from its interval's width (80% power, two-sided 5%).

    Only this figure, which is not one of the contrasts, keeps the interval reading.
    """
    lo, hi = ci
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return (hi - lo) / (2 * _Z975) * (_Z975 + _Z80)


def _nanmean(s: pl.Series) -> float | None:
    v = s.to_numpy().astype(float)
    v = v[~np.isnan(v)]
    return float(v.mean()) if v.size else None


def _mix(rows: pl.DataFrame) -> dict[str, int]:
    """Questions per kind in one half (the halves' kind mix)."""
    return {str(k): int(n) for k, n in rows.group_by("kind").len().sort("kind").rows()}


def _by_kind(scored: pl.DataFrame, halves: pl.DataFrame, metric: str, system: str, twin: str) -> dict[str, Any]:
    """Gain over the twin per question kind and half (point estimates and counts)."""
    def scores(label: str) -> pl.DataFrame:
        return scored.filter(pl.col("system") == label).select("question_id", pl.col(metric).cast(pl.Float64).alias(label))

    d = (
        scores(system).join(scores(twin), on="question_id").join(halves, on="question_id")
        .filter(pl.col(system).is_not_nan() & pl.col(twin).is_not_nan())
        .with_columns((pl.col(system) - pl.col(twin)).alias("_d"))
    )
    out: dict[str, Any] = {}
    for (kind,), part in sorted(d.group_by(["kind"]), key=lambda kv: str(kv[0][0])):
        g1 = part.filter(pl.col("half") == 0)["_d"]
        g2 = part.filter(pl.col("half") == 1)["_d"]
        first = float(g1.mean()) if g1.len() else None  # type: ignore[arg-type]
        second = float(g2.mean()) if g2.len() else None  # type: ignore[arg-type]
        out[str(kind)] = {
            "n_first": g1.len(),
            "n_second": g2.len(),
            "gain_first": first,
            "gain_second": second,
            "did": None if first is None or second is None else second - first,
        }
    return out


def gain_curve(
    probes: pl.DataFrame, *, metric: str, system: str, twin: str, window_days: float = 14.0
) -> list[dict[str, Any]]:
    """Gain over the twin in windows of simulated time (for the report's lead figure)."""
    def scores(label: str) -> pl.DataFrame:
        return probes.filter((pl.col("system") == label) & pl.col("error").is_null()).select(
            "question_id", "t_days", pl.col(metric).cast(pl.Float64).alias(label)
        )

    d = (
        scores(system).join(scores(twin).drop("t_days"), on="question_id")
        .filter(pl.col(system).is_not_nan() & pl.col(twin).is_not_nan())
        .with_columns(
            (pl.col(system) - pl.col(twin)).alias("gain"), (pl.col("t_days") // window_days).alias("window")
        )
    )
    agg = d.group_by("window").agg(pl.col("gain").mean(), pl.len().alias("n")).sort("window")
    return [
        {"t_days": (w + 0.5) * window_days, "gain": float(g), "n": int(n)}
        for w, g, n in agg.select("window", "gain", "n").rows()
    ]


def _pp(v: Any, lo: Any = None, hi: Any = None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    text = f"{100 * v:+.1f}"
    if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
        text += f" [{100 * lo:+.1f}, {100 * hi:+.1f}]"
    return text


def format_diff(e: Mapping[str, Any], key: str) -> str:
    """A difference of a learning-table entry in percentage points with its interval (``key``, ``key_lo``, ``key_hi``)."""
    return _pp(e.get(key), e.get(f"{key}_lo"), e.get(f"{key}_hi"))


def format_p(v: Any) -> str:
    """A p-value as the tables print it."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return "<0.001" if v < 0.001 else f"{v:.3f}"


def _mde_text(c: Mapping[str, Any], half: str) -> str:
    """The smaller of a half's gain and loss MDEs, signed by which it is (``+2.9``: a gain, ``-2.7``: a loss)."""
    gain, loss = c.get(f"{half}_mde_gain"), c.get(f"{half}_mde_loss")
    if gain is None and loss is None:
        v = c.get(f"{half}_mde")
        return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"
    if loss is None or (gain is not None and gain <= loss):
        return f"+{100 * gain:.1f}"
    return f"-{100 * loss:.1f}"


def _text_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return text_table(head, rows, align="l" * len(head)).split("\n")


def _contrast_name(key: str, name: str, c: Mapping[str, Any]) -> str:
    """The contrast's name; the headline's says which arm was its reference in each half."""
    if key != "learning_from_feedback":
        return name
    r1, r2 = c.get("first_reference_arm"), c.get("second_reference_arm")
    if r1 is None and r2 is None:
        return name
    refs = (ROLE_NAMES.get(r2, r2) if r1 == r2 or r1 is None else
            f"1st {ROLE_NAMES.get(r1, r1)}, 2nd {ROLE_NAMES.get(r2, r2)}")
    return f"learning from feedback (system - best arm: {refs})"


def contrast_rows(table: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    """One row per feedback-using system and contrast, learning from feedback first (text cells, pp).

    Columns: system, contrast, then per half the difference [interval], p and
    MDE, the DiD [interval] and p, and the contrast in stale>cur, 2nd half.
    """
    rows: list[list[str]] = []
    for label, e in table.items():
        for key, name in CONTRASTS:
            c = (e.get("contrasts") or {}).get(key)
            if c is None:
                continue
            stale = c.get("stale") or {}
            rows.append([
                label, _contrast_name(key, name, c),
                format_diff(c, "first"), format_p(c.get("first_p")), _mde_text(c, "first"),
                format_diff(c, "second"), format_p(c.get("second_p")), _mde_text(c, "second"),
                format_diff(c, "did"), format_p(c.get("did_p")),
                format_diff(stale, "second") if stale else "—",
            ])
    return rows


def contrast_headers(metric: str) -> list[str]:
    """Headers of ``contrast_rows``, naming the metric."""
    return ["system", "contrast", f"1st half, {metric} (pp)", "p", "MDE", f"2nd half, {metric} (pp)", "p", "MDE",
            "DiD 2nd - 1st (pp)", "p", "stale>cur, 2nd half (pp)"]


def _role(label: str, e: Mapping[str, Any], table: Mapping[str, Mapping[str, Any]], placebos: Collection[str]) -> str:
    """How the arms table names an arm: ``twin of x``, ``placebo of x``, ``always False (x)``... from its entry."""
    arm, of = e.get("arm"), e.get("of")
    if arm == "system":
        return "feedback-using"
    if arm in ROLE_NAMES and of is not None:
        return f"{arm} of {of}" if arm in ("twin", "placebo") else f"{ROLE_NAMES[arm]} ({of})"
    # Entries written before arms were named: the twin is what a system's ``twin`` key names.
    twin_of = {t["twin"]: s for s, t in table.items() if "twin" in t and s not in placebos and "contrasts" in t}
    if label in twin_of:
        return f"twin of {twin_of[label]}"
    if label in placebos:
        return "placebo"
    return "feedback-using" if "contrasts" in e else "no feedback use"


def arm_rows(table: Mapping[str, Mapping[str, Any]], placebos: Collection[str] = ()) -> list[list[str]]:
    """One row per arm: each half of the metric and of stale>cur (%), and the DiD vs the static control."""
    def pct(v: Any) -> str:
        return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"

    rows = []
    for label, e in table.items():
        rows.append([label, _role(label, e, table, placebos), pct(e.get("first")), pct(e.get("second")),
                     pct(e.get("stale_first")), pct(e.get("stale_second")),
                     format_diff(e, "did_control") if "did_control" in e else "",
                     format_p(e.get("did_control_p")) if "did_control" in e else ""])
    return rows


def arm_headers(metric: str) -> list[str]:
    """Headers of ``arm_rows``, naming the metric."""
    return ["system", "arm", f"{metric} 1st half %", f"{metric} 2nd half %", "stale>cur 1st %", "stale>cur 2nd %",
            "DiD vs static control (pp) [95% CI]", "p"]


def has_learners(table: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether any system of the table uses feedback (and so has contrasts against arms that ignore it)."""
    return any(e.get("contrasts") for e in table.values())


def learning_title(table: Mapping[str, Mapping[str, Any]]) -> str:
    """"Learning through use" where a system learns from feedback; else "Change through use", named as not learning."""
    return "Learning through use" if has_learners(table) else \
        "Change through use (no system here learns from feedback: each half and the change, not learning)"


def learning_header(table: Mapping[str, Mapping[str, Any]], metric: str) -> str:
    """The line above the learning tables: the metric and the unit of inference, with the reason for it."""
    e = next(iter(table.values()), {})
    unit = e.get("unit", "user")
    reason = e.get("unit_reason") or f"{e.get('users', 0)} users"
    return f"{learning_title(table).split(' (')[0]}, {metric}; inference unit: {unit}s ({reason})"


def learning_notes(
    table: Mapping[str, Mapping[str, Any]],
    *,
    metric: str,
    control: str | None,
    missing_control: str | None = None,
    balance_kinds: bool = False,
) -> list[str]:
    """The footnotes every learning table carries (CLI, report): halves, contrasts, intervals, p, MDE, control."""
    any_entry = next(iter(table.values()), {})
    unit = any_entry.get("unit", "user")
    lines = [
        f"metric: {metric} (every halves figure above is {metric}); halves: each user's questions split at that "
        "user's median",
    ]
    if has_learners(table):
        lines += [
            "learning from feedback = system - the best arm that ignores the content of feedback (twin: told nothing; "
            "placebo: the system's own bits permuted within user and week, the same calls and dose; always False / "
            "always True: the same calls, a constant bit), the arm chosen per half as the one with the highest "
            f"{metric} there (named in the row): a system that noise harms cannot show learning unless it beats every "
            "such arm. Choosing the highest by its point estimate makes the headline conservative (with arms that "
            "differ by chance it leans below 0; its p and interval are those of the chosen pair)",
            "system - placebo / - always False / - always True: against one arm; effect of feedback calls = placebo - "
            "twin: what being told anything did; effect of use = system - twin: both together",
        ]
    else:
        lines.append("no system in this run uses feedback, so none has arms that ignore it: the halves and the "
                     "change between them (and against the control) say how each system fared through use, not "
                     "what feedback taught it")
    users = any_entry.get("users", 0)
    unit_text = f"whole users ({users})" if unit == "user" else \
        f"whole question threads (a question and its re-asks), CONDITIONAL ON THESE {users} USERS"
    lines.append(f"p: sign-flip test of the question-weighted difference, signs of {unit_text} flipped; [lo, hi]: "
                 "95% interval inverted from that test (the shifts it does not reject at 5%, on the same sign "
                 "patterns), so it excludes 0 exactly when p < 0.05")
    mix1, mix2 = any_entry.get("mix_first") or {}, any_entry.get("mix_second") or {}
    if mix1 or mix2:
        kinds = sorted(set(mix1) | set(mix2))
        lines.append("kind mix (questions, 1st/2nd half): " + ", ".join(f"{k} {mix1.get(k, 0)}/{mix2.get(k, 0)}" for k in kinds)
                     + ("; halves balanced by kind (each question weighted by its kind's share)" if balance_kinds
                        else "; not balanced (--balance-kinds weights both halves to the same mix)"))
    learners = has_learners(table)
    lines.append("stale>cur: share of changed-fact questions where a superseded value outranks the current one "
                 "(lower is better)" + ("; its contrast is the same difference in stale>cur" if learners else ""))
    if learners:  # a run without learners has no contrast, so no MDE of one
        lines.append(MDE_METHOD + "; the MDE column signs it: +: a gain, -: a loss")
    lines.append(
        f"DiD vs static control: (2nd - 1st) minus that of {control}, which also moves with storage policy"
        if control else
        f"DiD vs static control: not computed, the control {missing_control!r} is not among this run's systems "
        f"(add --system {missing_control})" if missing_control else "no static control in this run"
    )
    return lines


def format_learning(
    table: Mapping[str, Mapping[str, Any]],
    *,
    metric: str,
    control: str | None,
    missing_control: str | None = None,
    balance_kinds: bool = False,
    placebos: Collection[str] = (),
    width: int | None = None,
) -> str:
    """The learning-through-use tables as text: the header line, the contrasts, each arm's halves, the footnotes.

    ``missing_control``: the static control the spec names but the run did not play (its column is empty, and
    the footnote says why). ``placebos``: the placebo labels, for entries written before each names its arm.
    ``width``: the terminal's width (``memsim.core.table.console_width``); tables wider than it fold into
    their compact view (system, contrast or arm, the 2nd half with its p and MDE) and the footnotes shrink to a
    pointer to the docs. None prints every column and every footnote (reports, pipes, ``--wide``).
    """
    header = learning_header(table, metric)
    lines: list[str] = [*(textwrap.wrap(header, width) if width else [header]), ""]
    contrasts = contrast_rows(table)
    head_c, head_a = contrast_headers(metric), arm_headers(metric)
    rows_a = arm_rows(table, placebos)
    folded = width is not None and (
        (bool(contrasts) and table_width(head_c, contrasts) > width) or table_width(head_a, rows_a) > width)
    if contrasts:
        lines += fit_table(head_c, contrasts, compact=(0, 1, 5, 6, 7), wrap=(0, 1), width=width,
                           align="l" * len(head_c), what="contrasts").split("\n")
        lines.append("")
    lines += fit_table(head_a, rows_a, compact=(0, 1, 2, 3), wrap=(0, 1), width=width,
                       align="l" * len(head_a), what="arms").split("\n")
    lines.append("")
    if folded:
        lines += textwrap.wrap("Arms, contrasts, intervals and MDE: docs/concepts/contrasts.md; every column and "
                               "footnote: memsim --wide, or report.md.", width)
    else:
        notes = learning_notes(table, metric=metric, control=control, missing_control=missing_control,
                               balance_kinds=balance_kinds)
        # Wide enough for the tables: each footnote still folds to the terminal (whole into a pipe or a file).
        lines += [w for n in notes for w in (textwrap.wrap(n, width, subsequent_indent="  ") if width else [n])]
    return "\n".join(lines)


def gain_curve_band(
    probes: pl.DataFrame,
    *,
    metric: str,
    system: str,
    twin: str,
    window_days: float = 14.0,
    rng: np.random.Generator,
    n_boot: int = 2000,
    unit: str | None = None,
) -> list[dict[str, Any]]:
    """``gain_curve`` with a 95% band per window that resamples whole units within the window.

    The point estimate of each window is ``gain_curve``'s (the mean of
    ``system - twin`` over the window's paired questions). The band is a
    percentile bootstrap of that ratio of sums: users are resampled when the
    run has at least ``MIN_USERS`` of them, else question threads (the band
    is then conditional on these users), as in ``compare``; ``unit`` as the
    design decided (``design_unit``), None: from the rows' users.

    Returns:
        One dict per window with ``t_days`` (window centre), ``gain``, ``lo``,
        ``hi``, ``n`` (paired questions), ``units`` and ``unit``.
    """
    def scores(label: str) -> pl.DataFrame:
        return probes.filter((pl.col("system") == label) & pl.col("error").is_null()).select(
            "question_id", "user_id", "thread_id", "t_days", pl.col(metric).cast(pl.Float64).alias(label)
        )

    d = (
        scores(system).join(scores(twin).select("question_id", twin), on="question_id")
        .filter(pl.col(system).is_not_nan() & pl.col(twin).is_not_nan())
        .with_columns(
            (pl.col(system) - pl.col(twin)).alias("_d"), (pl.col("t_days") // window_days).alias("_window")
        )
    )
    if d.height == 0:
        return []
    # The unit is chosen once for the whole curve so that every window's band means the same thing.
    unit_col = unit_column(d, unit)
    out: list[dict[str, Any]] = []
    for (window,), part in sorted(d.group_by(["_window"]), key=lambda kv: float(kv[0][0])):
        units = part.group_by(unit_col).agg(pl.col("_d").sum().alias("s"), pl.len().alias("n")).sort(unit_col)
        s = units["s"].to_numpy().astype(float)
        n = units["n"].to_numpy().astype(float)
        k = s.size
        idx = rng.integers(0, k, size=(n_boot, k))
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = s[idx].sum(axis=1) / n[idx].sum(axis=1)
        lo, hi = percentile_interval(boot) if k > 1 else (math.nan, math.nan)
        out.append({
            "t_days": (float(window) + 0.5) * window_days,
            "gain": float(s.sum() / n.sum()),
            "lo": lo,
            "hi": hi,
            "n": int(n.sum()),
            "units": int(k),
            "unit": "user" if unit_col == "user_id" else "thread",
        })
    return out
