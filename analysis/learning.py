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
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from memsim.analysis.stats import (
    FlipTest,
    inference_unit,
    percentile_interval,
    user_halves,
)
from memsim.analysis.contrasts import (ARM_PAIRS, CONTRASTS, MIN_USERS, ROLE_NAMES, ROLES, STALE, Pair, across_halves,
                                       compare, contrast_design, contrast_entry, mde_rng, paired_rows, unit_column,
                                       unit_sums)
from memsim.analysis.learning_text import (arm_headers, arm_rows, contrast_headers, contrast_rows, format_diff,
                                           format_learning, format_p, has_learners, learning_header, learning_notes,
                                           learning_title)

__all__ = [
    "MIN_USERS", "ROLES", "ROLE_NAMES", "CONTRASTS", "ARM_PAIRS", "STALE", "Pair", "compare", "paired_rows",
    "unit_column", "unit_sums", "contrast_design", "mde_rng", "family_arms", "design_unit", "best_reference",
    "headline_roles",
    "learning_table",
    "user_halves", "gain_curve", "gain_curve_band", "format_learning", "format_diff", "format_p", "contrast_rows",
    "contrast_headers", "arm_rows", "arm_headers", "learning_notes", "learning_header", "has_learners", "learning_title",
]

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
    labels = list(dict.fromkeys(scored["system"].to_list()))
    families, member = _families(labels, arms, twins, placebos)
    has_stale = STALE in scored.columns and metric != STALE
    pair_of = _Pairs(scored, halves, metric=metric, rng=rng, n_boot=n_boot, balance_kinds=balance_kinds, seed=seed,
                     unit=unit)
    contrasts_of: dict[str, dict[str, Any]] = {}
    for system, fam in families.items():
        contrasts = _family_contrasts(system, fam, pair_of, channel=channel, has_stale=has_stale)
        if contrasts:
            contrasts_of[system] = contrasts
    common = {"users": n_users, "unit": unit, "unit_reason": unit_reason}
    out: dict[str, dict[str, Any]] = {}
    for label in labels:
        entry = _arm_entry(label, scored, halves, metric, common, families, member, pair_of, has_stale=has_stale)
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


def _families(labels: Sequence[str], arms: Mapping[str, Mapping[str, str]] | None, twins: Mapping[str, str],
              placebos: Mapping[str, str]) -> tuple[dict[str, dict[str, str]], dict[str, tuple[str, str]]]:
    """The families of the arms that played: system -> {role: label}, and each member's (system, role)."""
    if arms is None:
        placebo_of = {t: p for p, t in placebos.items()}
        arms = {s: {"twin": t, **({"placebo": placebo_of[t]} if t in placebo_of else {})} for s, t in twins.items()}
    families = {s: {r: lab for r, lab in fam.items() if lab in labels} for s, fam in arms.items() if s in labels}
    families = {s: fam for s, fam in families.items() if fam}
    member = {lab: (s, r) for s, fam in families.items() for r, lab in fam.items()}
    return families, member


class _Pairs:
    """The run's paired comparisons, each computed once, in the order first asked for (they draw from ``rng``)."""

    def __init__(self, scored: pl.DataFrame, halves: pl.DataFrame, *, metric: str, rng: np.random.Generator,
                 n_boot: int, balance_kinds: bool, seed: int | None, unit: str) -> None:
        self.scored, self.halves, self.metric, self.rng, self.n_boot = scored, halves, metric, rng, n_boot
        self.balance_kinds, self.seed, self.unit = balance_kinds, seed, unit
        self.pairs: dict[tuple[str, str, str], Pair | None] = {}

    def __call__(self, a: str, b: str, *, col: str | None = None, mde: bool = True) -> Pair | None:
        col = col or self.metric
        key = (col, a, b)
        if key not in self.pairs:
            self.pairs[key] = compare(self.scored, self.halves, metric=col, system=a, other=b, rng=self.rng,
                                      n_boot=self.n_boot, balance_kinds=self.balance_kinds and col == self.metric,
                                      mde_seed=self.seed if mde and col == self.metric else None, unit=self.unit)
        return self.pairs[key]


def _no_mde(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A stale contrast's entry: its differences, intervals and p, without MDEs or spreads."""
    return {k: v for k, v in entry.items() if "_mde" not in k and "spread" not in k}


def _family_contrasts(system: str, fam: Mapping[str, str], pair_of: _Pairs, *, channel: str | None,
                      has_stale: bool) -> dict[str, Any]:
    """A system's contrasts with its content-ignoring arms: the headline, then each arm pair of ``ARM_PAIRS``."""
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
        rng, n_boot = pair_of.rng, pair_of.n_boot
        head = across_halves(vs[r1], vs[r2], rng, n_boot)  # type: ignore[arg-type,index]
        entry = contrast_entry(head, system, fam[r2])  # type: ignore[index]
        entry.update(first_reference=fam[r1], second_reference=fam[r2], first_reference_arm=r1,  # type: ignore[index]
                     second_reference_arm=r2, candidates=[fam[r] for r in vs])
        if ref1 is None:
            entry.update(first=None, first_lo=None, first_hi=None, first_p=None, did=None, did_lo=None,
                         did_hi=None, did_p=None)
        if has_stale:
            s1, s2 = pair_of(system, fam[r1], col=STALE), pair_of(system, fam[r2], col=STALE)  # type: ignore[index]
            if s1 is not None and s2 is not None:
                entry["stale"] = _no_mde(contrast_entry(across_halves(s1, s2, rng, n_boot), system, fam[r2]))  # type: ignore[index]
        contrasts["learning_from_feedback"] = entry
    for key, (a, b, pair) in found.items():
        contrasts[key] = contrast_entry(pair, a, b)
        if has_stale:
            stale = pair_of(a, b, col=STALE)
            if stale is not None:
                contrasts[key]["stale"] = _no_mde(contrast_entry(stale, a, b))
    return contrasts


def _arm_entry(label: str, scored: pl.DataFrame, halves: pl.DataFrame, metric: str, common: Mapping[str, Any],
               families: Mapping[str, Mapping[str, str]], member: Mapping[str, tuple[str, str]], pair_of: _Pairs,
               *, has_stale: bool) -> dict[str, Any]:
    """One arm's row: its halves, its mix, its role, and its difference with its system's twin."""
    rows = scored.filter(pl.col("system") == label).join(halves.select("question_id", "half"), on="question_id")
    x = rows[metric].cast(pl.Float64)
    entry: dict[str, Any] = {
        **common,
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
    return entry


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
