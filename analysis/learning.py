"""Learning through use: three contrasts per feedback-using system, with user-level inference.

A system that learns from feedback is played with its **twin** (the same
system, same arguments, same random draws, same stream, feedback withheld,
maintenance kept) and its **placebo** (told bits unrelated to the question,
at the same rate). On the questions both arms of a pair scored:

- **learning from feedback** = system - placebo: what the content of the
  feedback taught (the headline);
- **effect of feedback calls** = placebo - twin: what being told anything did;
- **effect of use** = system - twin: both together (the flat ``gain_*`` keys);
- each per half, with the **DiD** across halves (does it grow?), and the same
  contrast in ``stale_above_current``;
- **DiD vs static control**: ``(2nd - 1st)_system - (2nd - 1st)_control``,
  reported apart because it also moves with storage policy and with the
  question mix, not only with learning.

Halves are per user: each user's questions split at that user's own median
question index. Intervals are percentile bootstraps that resample whole
units; p-values are sign-flip tests of the same question-weighted statistic
(whole units' sums flipped). The unit is the user when there are at least
``MIN_USERS`` users, else the question thread (a question and its re-asks),
and the interval is then conditional on these users. Each contrast's MDE is
design-based (``memsim.analysis.stats.design_mde``): the smallest effect that test detects
with 80% power when the reference arm's questions are redrawn at their
users' base rates plus the effect; it never reads the observed gap.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from memsim.analysis.stats import MDE_METHOD, Design, design_mde, percentile_interval, sign_flip_p, sign_flips
from memsim.sim.core.streams import stream_key
from memsim.sim.core.table import text_table

__all__ = [
    "MIN_USERS", "CONTRASTS", "STALE", "Pair", "compare", "paired_rows", "unit_column", "contrast_design", "mde_rng",
    "learning_table", "user_halves", "gain_curve", "gain_curve_band", "format_learning", "format_diff", "format_p",
    "contrast_rows", "contrast_headers", "arm_rows", "arm_headers", "learning_notes",
]

MIN_USERS = 30
"""Fewest users for resampling whole users (below: question threads, conditional on the users)."""

_Z80 = 0.8416  # one-sided z of 80% power
_Z975 = 1.96


def user_halves(probes: pl.DataFrame) -> pl.DataFrame:
    """``question_id -> (user_id, thread_id, half)``: each user's questions split at that user's median index."""
    qs = probes.select("question_id", "user_id", "thread_id", "q_index", "kind").unique("question_id").sort("q_index")
    med = qs.group_by("user_id").agg(pl.col("q_index").median().alias("_median"))
    return qs.join(med, on="user_id").with_columns(
        (pl.col("q_index") >= pl.col("_median")).cast(pl.Int8).alias("half")
    ).drop("_median")


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
    second_ci: tuple[float, float]
    did_ci: tuple[float, float]
    second_p: float
    """Sign-flip p of the second-half difference (the question-weighted mean, whole units flipped)."""
    did_p: float
    """Sign-flip p of the DiD (the same question-weighted statistic)."""
    n: int
    """Paired questions."""
    units: int
    """Resampled units."""
    first_p: float = math.nan
    """Sign-flip p of the first-half difference."""
    first_mde: float | None = None
    """Design-based MDE of the first-half difference (None: not asked for, or out of reach)."""
    second_mde: float | None = None
    """Design-based MDE of the second-half difference."""


def mde_rng(seed: int, *, metric: str, system: str, other: str, half: int) -> np.random.Generator:
    """The generator of one design-based MDE: a child of the run's ``stats`` stream named by the contrast.

    Keyed by name rather than drawn in turn, so ``memsim power`` rebuilds the very
    draws a run's MDE used, and adding a contrast moves no other.
    """
    name = f"mde {metric} half {half}: {system} - {other}"
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(stream_key("stats"), stream_key(name))))


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


def unit_column(joined: pl.DataFrame) -> str:
    """``user_id`` with at least ``MIN_USERS`` users, else ``thread_id``."""
    return "user_id" if joined["user_id"].n_unique() >= MIN_USERS else "thread_id"


def contrast_design(joined: pl.DataFrame, *, other: str, half: int) -> Design:
    """The design behind one half of a contrast: the reference arm's paired rows (``paired_rows``)."""
    rows = joined.filter(pl.col("half") == half)
    return Design.from_rows(rows[other].to_numpy(), rows["user_id"].to_numpy(), rows[unit_column(joined)].to_numpy(),
                            rows["_w"].to_numpy())


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
) -> Pair | None:
    """``system - other`` per half on the questions both scored, with unit-resampled intervals and p.

    The estimate of a half is the question-weighted mean difference; its p is
    a sign-flip test of that same statistic (whole units' sums flipped). With
    ``balance_kinds``, questions are weighted so both halves count the kinds in
    the same proportions (``paired_rows``: a shift in the kind mix between
    halves, such as "previous value" questions that only become askable after
    facts change, then moves neither half). With ``mde_seed`` (the run's
    seed), each half also gets its design-based MDE (``memsim.analysis.stats.design_mde``
    on ``other``'s rows, drawn from ``mde_rng``).
    """
    joined = paired_rows(probes, halves, metric=metric, system=system, other=other, balance_kinds=balance_kinds)
    if joined.height == 0:
        return None
    unit_col = unit_column(joined)
    units = joined.group_by(unit_col, maintain_order=True).agg(
        (pl.col("_d") * pl.col("_w")).filter(pl.col("half") == 0).sum().alias("s1"),
        pl.col("_w").filter(pl.col("half") == 0).sum().alias("n1"),
        (pl.col("_d") * pl.col("_w")).filter(pl.col("half") == 1).sum().alias("s2"),
        pl.col("_w").filter(pl.col("half") == 1).sum().alias("n2"),
    ).sort(unit_col)
    s1, n1 = units["s1"].to_numpy().astype(float), units["n1"].to_numpy().astype(float)
    s2, n2 = units["s2"].to_numpy().astype(float), units["n2"].to_numpy().astype(float)
    first = s1.sum() / n1.sum() if n1.sum() else math.nan
    second = s2.sum() / n2.sum() if n2.sum() else math.nan
    k = len(units)
    idx = rng.integers(0, k, size=(n_boot, k))
    w = np.zeros((n_boot, k))
    np.add.at(w, (np.repeat(np.arange(n_boot), k), idx.ravel()), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        b1 = (w @ s1) / (w @ n1)
        b2 = (w @ s2) / (w @ n2)
    flips = sign_flips(k, rng)
    # Each unit's share of the weighted DiD: flipping it tests the DiD itself.
    did_parts = (s2 / n2.sum() if n2.sum() else 0 * s2) - (s1 / n1.sum() if n1.sum() else 0 * s1)

    def mde(half: int) -> float | None:
        if mde_seed is None or not (joined["half"] == half).any():
            return None
        design = contrast_design(joined, other=other, half=half)
        return design_mde(design, rng=mde_rng(mde_seed, metric=metric, system=system, other=other, half=half))

    return Pair(
        first=float(first),
        second=float(second),
        did=float(second - first),
        first_ci=percentile_interval(b1),
        second_ci=percentile_interval(b2),
        did_ci=percentile_interval(b2 - b1),
        second_p=float(sign_flip_p(s2, flips)[0]),
        did_p=float(sign_flip_p(did_parts, flips)[0]),
        n=joined.height,
        units=k,
        first_p=float(sign_flip_p(s1, flips)[0]),
        first_mde=mde(0),
        second_mde=mde(1),
    )


CONTRASTS: tuple[tuple[str, str], ...] = (
    ("learning_from_feedback", "learning from feedback (system - placebo)"),
    ("effect_of_feedback_calls", "effect of feedback calls (placebo - twin)"),
    ("effect_of_use", "effect of use (system - twin)"),
)
"""The three contrasts of a feedback-using system, as ``metrics.json`` keys them, with their names in tables."""

STALE = "stale_above_current"
"""The cost column beside the headline: a superseded value outranks the current one."""


def _contrast(pair: Pair, minus: str, reference: str) -> dict[str, Any]:
    """A contrast's figures under named keys (``first``/``second``/``did`` with ``_lo``, ``_hi``, ``_p``, ``_mde``)."""
    return {
        "system": minus, "reference": reference,
        "first": pair.first, "first_lo": pair.first_ci[0], "first_hi": pair.first_ci[1], "first_p": pair.first_p,
        "first_mde": pair.first_mde,
        "second": pair.second, "second_lo": pair.second_ci[0], "second_hi": pair.second_ci[1],
        "second_p": pair.second_p, "second_mde": pair.second_mde,
        "did": pair.did, "did_lo": pair.did_ci[0], "did_hi": pair.did_ci[1], "did_p": pair.did_p,
        "paired": pair.n, "units": pair.units,
    }


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
) -> dict[str, dict[str, Any]]:
    """Per system (twins and placebos as their own rows): halves, stale>cur, the contrasts, DiDs, p, MDE.

    A system with a twin gets ``contrasts``: ``learning_from_feedback`` (system
    minus placebo), ``effect_of_feedback_calls`` (placebo minus twin) and
    ``effect_of_use`` (system minus twin; the first two only when a placebo
    ran), each per half with interval, p and design-based MDE, the DiD across
    halves, and the same contrast in ``stale_above_current`` (``stale``). The
    flat ``gain_*``/``did_twin*`` keys of a system (and of its placebo) are
    the difference with its twin.

    Args:
        probes: the run's rows.
        metric: the headline column.
        twins: system label -> its twin's label (systems that learn from feedback).
        placebos: placebo label -> the twin it is compared with.
        control: the static control's label (None: no "vs static control" column).
        rng: the run's ``stats`` stream.
        n_boot: bootstrap resamples.
        balance_kinds: weight questions so that both halves have the same kind mix (``compare``).
        seed: the run's seed, for the design-based MDEs (``mde_rng``); None: no MDE.
    """
    scored = probes.filter(pl.col("error").is_null())
    halves = user_halves(scored)
    n_users = halves["user_id"].n_unique()
    primaries = _primaries(scored, twins, placebos)
    has_stale = STALE in scored.columns and metric != STALE
    pairs: dict[tuple[str, str], Pair | None] = {}

    def pair_of(system: str, other: str) -> Pair | None:
        if (system, other) not in pairs:
            pairs[system, other] = compare(scored, halves, metric=metric, system=system, other=other, rng=rng,
                                           n_boot=n_boot, balance_kinds=balance_kinds, mde_seed=seed)
        return pairs[system, other]

    placebo_of = {t: p for p, t in placebos.items()}
    out: dict[str, dict[str, Any]] = {}
    for label in dict.fromkeys(scored["system"].to_list()):
        rows = scored.filter(pl.col("system") == label).join(halves.select("question_id", "half"), on="question_id")
        x = rows[metric].cast(pl.Float64)
        entry: dict[str, Any] = {
            "users": n_users,
            "unit": "user" if n_users >= MIN_USERS else "thread",
            "first": _nanmean(x.filter(rows["half"] == 0)),
            "second": _nanmean(x.filter(rows["half"] == 1)),
            "mix_first": _mix(rows.filter(pl.col("half") == 0)),
            "mix_second": _mix(rows.filter(pl.col("half") == 1)),
        }
        if has_stale:
            st = rows[STALE].cast(pl.Float64)
            entry.update(stale_first=_nanmean(st.filter(rows["half"] == 0)), stale_second=_nanmean(st.filter(rows["half"] == 1)))
        reference = twins.get(label) or placebos.get(label)
        if reference is not None:
            pair = pair_of(label, reference)
            if pair is not None:
                entry.update(
                    twin=reference,
                    gain_first=pair.first, gain_first_lo=pair.first_ci[0], gain_first_hi=pair.first_ci[1],
                    gain_second=pair.second, gain_second_lo=pair.second_ci[0], gain_second_hi=pair.second_ci[1],
                    gain_second_p=pair.second_p, gain_mde=pair.second_mde,
                    did_twin=pair.did, did_twin_lo=pair.did_ci[0], did_twin_hi=pair.did_ci[1], did_twin_p=pair.did_p,
                    paired=pair.n, units=pair.units,
                )
                entry["gain_by_kind"] = _by_kind(scored, halves, metric, label, reference)
        if label in twins:
            twin, placebo = twins[label], placebo_of.get(twins[label])
            arms = {"effect_of_use": (label, twin)}
            if placebo is not None:
                arms = {"learning_from_feedback": (label, placebo), "effect_of_feedback_calls": (placebo, twin), **arms}
            contrasts: dict[str, Any] = {}
            for key, (a, b) in arms.items():
                pair = pair_of(a, b)
                if pair is None:
                    continue
                contrasts[key] = _contrast(pair, a, b)
                if has_stale:
                    stale = compare(scored, halves, metric=STALE, system=a, other=b, rng=rng, n_boot=n_boot)
                    if stale is not None:
                        contrasts[key]["stale"] = {k: v for k, v in _contrast(stale, a, b).items()
                                                   if not k.endswith("_mde")}
            if contrasts:
                entry["contrasts"] = contrasts
        if control is not None and label != control and label in primaries:
            pair = compare(scored, halves, metric=metric, system=label, other=control, rng=rng, n_boot=n_boot,
                           balance_kinds=balance_kinds)
            if pair is not None:
                entry.update(
                    did_control=pair.did, did_control_lo=pair.did_ci[0], did_control_hi=pair.did_ci[1],
                    did_control_p=pair.did_p, did_control_mde=_interval_mde(pair.did_ci),
                )
        out[label] = entry
    return out


def _interval_mde(ci: tuple[float, float]) -> float | None:
    """MDE of the DiD vs the static control, read from its interval's width (80% power, two-sided 5%).

    Only this figure, which is not one of the three contrasts, keeps the interval reading.
    """
    lo, hi = ci
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return (hi - lo) / (2 * _Z975) * (_Z975 + _Z80)


def _primaries(scored: pl.DataFrame, twins: Mapping[str, str], placebos: Mapping[str, str]) -> set[str]:
    """Labels that are neither twins nor placebos."""
    others = set(twins.values()) | set(placebos)
    return {s for s in scored["system"].unique().to_list() if s not in others}


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


def _mde_text(v: Any) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"


def _text_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return text_table(head, rows, align="l" * len(head)).split("\n")


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
                label, name,
                format_diff(c, "first"), format_p(c.get("first_p")), _mde_text(c.get("first_mde")),
                format_diff(c, "second"), format_p(c.get("second_p")), _mde_text(c.get("second_mde")),
                format_diff(c, "did"), format_p(c.get("did_p")),
                format_diff(stale, "second") if stale else "—",
            ])
    return rows


def contrast_headers(metric: str) -> list[str]:
    """Headers of ``contrast_rows``, naming the metric."""
    return ["system", "contrast", f"1st half, {metric} (pp)", "p", "MDE", f"2nd half, {metric} (pp)", "p", "MDE",
            "DiD 2nd - 1st (pp)", "p", "stale>cur, 2nd half (pp)"]


def arm_rows(table: Mapping[str, Mapping[str, Any]], placebos: Collection[str] = ()) -> list[list[str]]:
    """One row per arm: each half of the metric and of stale>cur (%), and the DiD vs the static control."""
    def pct(v: Any) -> str:
        return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"

    twin_of = {e["twin"]: label for label, e in table.items() if "twin" in e and label not in placebos}
    rows = []
    for label, e in table.items():
        role = f"twin of {twin_of[label]}" if label in twin_of else (
            "placebo" if label in placebos else ("feedback-using" if "contrasts" in e else "no feedback use"))
        rows.append([label, role, pct(e.get("first")), pct(e.get("second")), pct(e.get("stale_first")),
                     pct(e.get("stale_second")), format_diff(e, "did_control") if "did_control" in e else "",
                     format_p(e.get("did_control_p")) if "did_control" in e else ""])
    return rows


def arm_headers(metric: str) -> list[str]:
    """Headers of ``arm_rows``, naming the metric."""
    return ["system", "arm", f"{metric} 1st half %", f"{metric} 2nd half %", "stale>cur 1st %", "stale>cur 2nd %",
            "DiD vs static control (pp) [95% CI]", "p"]


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
    users, unit = any_entry.get("users", 0), any_entry.get("unit", "user")
    lines = [
        f"metric: {metric} (every halves figure above is {metric}); halves: each user's questions split at that "
        "user's median",
        "learning from feedback = system - its placebo (the same system told bits unrelated to the question, at "
        "the same rate): what the content of feedback taught; effect of feedback calls = placebo - twin (the same "
        "system told nothing): what being told anything did; effect of use = system - twin: both together",
    ]
    if unit == "user":
        lines.append(f"[lo, hi]: 95% bootstrap interval resampling the {users} users; p: sign-flip test of the same "
                     "question-weighted difference, whole users' signs flipped")
    else:
        lines.append(
            f"[lo, hi]: 95% bootstrap interval resampling question threads, CONDITIONAL ON THESE {users} USERS "
            f"(fewer than {MIN_USERS}); p: sign-flip test of the same question-weighted difference, whole threads "
            "flipped"
        )
    mix1, mix2 = any_entry.get("mix_first") or {}, any_entry.get("mix_second") or {}
    if mix1 or mix2:
        kinds = sorted(set(mix1) | set(mix2))
        lines.append("kind mix (questions, 1st/2nd half): " + ", ".join(f"{k} {mix1.get(k, 0)}/{mix2.get(k, 0)}" for k in kinds)
                     + ("; halves balanced by kind (each question weighted by its kind's share)" if balance_kinds
                        else "; not balanced (--balance-kinds weights both halves to the same mix)"))
    lines.append("stale>cur: share of changed-fact questions where a superseded value outranks the current one "
                 "(lower is better); its contrast is the same difference in stale>cur")
    lines.append(MDE_METHOD)
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
) -> str:
    """The learning-through-use tables as text: the contrasts first, then each arm's halves, with the footnotes.

    ``missing_control``: the static control the spec names but the run did not play (its column is empty, and
    the footnote says why). ``placebos``: the placebo labels (``metrics.json``'s ``placebos``; from ``run.json``).
    """
    lines: list[str] = []
    contrasts = contrast_rows(table)
    if contrasts:
        lines += _text_table(contrast_headers(metric), contrasts)
        lines.append("")
    lines += _text_table(arm_headers(metric), arm_rows(table, placebos))
    lines.append("")
    lines += learning_notes(table, metric=metric, control=control, missing_control=missing_control,
                            balance_kinds=balance_kinds)
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
) -> list[dict[str, Any]]:
    """``gain_curve`` with a 95% band per window that resamples whole units within the window.

    The point estimate of each window is ``gain_curve``'s (the mean of
    ``system - twin`` over the window's paired questions). The band is a
    percentile bootstrap of that ratio of sums: users are resampled when the
    run has at least ``MIN_USERS`` of them, else question threads (the band
    is then conditional on these users), as in ``compare``.

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
    unit_col = "user_id" if d["user_id"].n_unique() >= MIN_USERS else "thread_id"
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
