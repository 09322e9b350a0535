"""Power and minimum detectable effect of the learning contrasts and of the halves DiD.

Two questions come with every learning figure: would a real effect of a
given size show up, and how small an effect could? Both are answered here on
a run's own rows:

- ``contrast_power`` is the design-based power curve of one contrast
  (system minus placebo, placebo minus twin, system minus twin) in one half:
  the reference arm's questions are redrawn as Bernoulli(user's base rate +
  effect) and tested with the headline's own sign-flip test
  (``memsim.analysis.stats.design_power``); its MDE is the very figure a run's learning
  table prints (same function, same named random stream). At effect 0 it
  rejects in about 5% of replicates: the synthetic null varies as the run does.
- ``power_curve`` injects a known effect into a base system's recorded rows
  (``memsim.memory.inject.inject_rows``: the same oracle as the ``control-inject``
  instrument, with a probability rising linearly over the run) and counts,
  over seeds, how often the DiD interval against the control lies above 0.
  The oracle probability is calibrated per seed so that the *expected* DiD
  the injection adds equals the requested effect (in metric units, e.g.
  0.05 = 5 points of recall_all@k).
- ``minimum_detectable_effect`` reads the smallest effect reaching the
  target power off the curve.
- ``mde_from_interval``: ``(z(1 - alpha/2) + z(power)) x SE`` from an
  interval's width, what the DiD vs the static control still reports (the
  three contrasts use ``contrast_power``'s MDE).
- ``aa_coverage`` checks the interval's calibration with an exact null: two
  exchangeable static arms that keep a random top-k' (k' uniform in 1..k) of
  the same recorded ranking, whose true DiD is 0 by symmetry.
- ``run_seeds`` plays a config on consecutive seeds through the one pipeline
  (``memsim.analysis.pipeline.execute``) and keeps the probe rows, in this process;
  ``power_sweep`` expresses the same runs as a sweep (``memsim.analysis.sweep``: a
  process pool or Dask, resumable) and ``seed_runs_from_sweep`` reads them back.

Nothing here replays retrieval: every figure comes from recorded probe rows.
The metric is the run's own (``RunSpec.metric``, ``recall_all@k`` unless a
run names another); injection and the A/A arms recompute it as recall_all at
``k``, so it must be that column.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from scipy import stats as sps

from memsim.analysis.stats import diff_in_diff, user_halves
from memsim.memory.inject import inject_rows, oracle_probability, promote_gold
from memsim.core.errors import UserError

__all__ = [
    "PowerPoint",
    "mde_from_interval",
    "injection_gain",
    "calibrate_p_end",
    "power_curve",
    "ContrastPower",
    "contrast_arms",
    "contrast_power",
    "CONTRAST_EFFECTS",
    "minimum_detectable_effect",
    "random_cutoff_rows",
    "aa_coverage",
    "SeedRuns",
    "run_seeds",
    "power_sweep",
    "seed_runs_from_sweep",
    "DEFAULT_EFFECTS",
]

DEFAULT_EFFECTS: tuple[float, ...] = (0.0, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15)
"""Effects (metric units) on the default power curve."""


@dataclass(frozen=True, slots=True)
class PowerPoint:
    """Detection rate of one injected effect over seeds."""

    effect: float
    """Injected effect: expected DiD added (metric units)."""
    power: float
    """Share of seeds whose DiD interval lies above 0."""
    seeds: int
    """Seeds simulated (those where the effect could be injected)."""
    mean_did: float
    """Mean measured DiD over those seeds (compare with ``effect``)."""


def mde_from_interval(lo: float, hi: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable effect from a ``1 - alpha`` interval: ``(z(1-alpha/2) + z(power)) x SE``.

    The standard error is read as ``(hi - lo) / (2 z(1 - alpha/2))``. NaN
    when the interval is missing.
    """
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return math.nan
    za = float(sps.norm.ppf(1 - alpha / 2))
    zb = float(sps.norm.ppf(power))
    return (za + zb) * (hi - lo) / (2 * za)


def _scores(rows: pl.DataFrame, metric: str) -> np.ndarray:
    """The metric column as floats (NaN = unscored); a missing column is the caller's error."""
    if metric not in rows.columns:
        raise UserError(f"probes: no metric column {metric!r} (the run's metric)")
    return rows[metric].cast(pl.Float64).fill_null(math.nan).to_numpy()


def _fix_and_time(
    rows: pl.DataFrame, k: int, span_days: float, metric: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: whether promotion would fix it, its ramp position, its second-half mask."""
    ev = rows["evidence_ids"].to_list()
    src = rows["retrieved_sources"].to_list()
    old = _scores(rows, metric)
    fix = np.zeros(rows.height)
    for i, (e, s) in enumerate(zip(ev, src, strict=True)):
        if not e or old[i] == 1.0 or np.isnan(old[i]):
            continue
        gold, after = promote_gold(s or [], e, k)
        covered = {x for a in after for x in a}
        fix[i] = 1.0 if gold is not None and all(x in covered for x in e) else 0.0
    ramp = np.array([oracle_probability(t, 1.0, span_days) for t in rows["t_days"].to_list()])
    # The one halves rule (each user's questions split at that user's median), as the tables use.
    half = dict(user_halves(rows).select("question_id", "half").iter_rows())
    second = np.array([half[q] == 1 for q in rows["question_id"].to_list()], dtype=bool)
    return fix, ramp, second


def injection_gain(rows: pl.DataFrame, *, k: int, span_days: float, metric: str) -> float:
    """Expected DiD added per unit of ``p_end`` (while ``p_end x ramp <= 1``) on one system's rows."""
    fix, ramp, second = _fix_and_time(rows.sort("q_index"), k, span_days, metric)
    if second.sum() == 0 or (~second).sum() == 0:
        return 0.0
    return float((fix * ramp)[second].mean() - (fix * ramp)[~second].mean())


def calibrate_p_end(rows: pl.DataFrame, effect: float, *, k: int, span_days: float, metric: str) -> float | None:
    """The oracle ``p_end`` whose expected added DiD is ``effect``; None when out of reach (> 1)."""
    if effect == 0:
        return 0.0
    gain = injection_gain(rows, k=k, span_days=span_days, metric=metric)
    if gain <= 0:
        return None
    p = effect / gain
    return p if p <= 1.0 else None


def power_curve(
    runs: Sequence[pl.DataFrame],
    *,
    system: str,
    control: str,
    effects: Sequence[float] = DEFAULT_EFFECTS,
    k: int,
    span_days: float,
    metric: str,
    rng: np.random.Generator,
    n_boot: int = 1000,
    alpha: float = 0.05,
) -> list[PowerPoint]:
    """Power of the halves DiD to detect each injected effect, over seeds.

    Args:
        runs: probe rows of one run per seed, each holding ``system`` and ``control``.
        system: label of the base system the effect is injected into. When it
            is the control itself, the only difference between the arms is the
            injected effect (the most favourable case).
        control: label of the static control.
        effects: effects to inject (expected DiD added, metric units).
        k: results per question in those runs.
        span_days: span of the runs in days (the oracle's ramp).
        metric: the runs' ``recall_all@k`` column (``RunSpec.metric``), the one injected into.
        rng: the caller's generator (bootstrap and coin keys).
        n_boot: bootstrap resamples per interval.
        alpha: 1 - coverage; detection is ``lower bound > 0``.

    Returns:
        One ``PowerPoint`` per effect; seeds where the effect cannot be
        reached (oracle probability above 1) are left out of its point.
    """
    def trial(probes: pl.DataFrame, effect: float) -> tuple[float, bool] | None:
        p_end = calibrate_p_end(probes.filter(pl.col("system") == system), effect, k=k, span_days=span_days, metric=metric)
        if p_end is None:
            return None
        injected = _injected(probes, system, p_end, span_days, rng, k, metric)
        ctl = probes.filter(pl.col("system") == control)
        frame = pl.concat([ctl, injected.select(ctl.columns)], how="vertical_relaxed")
        dd = diff_in_diff(frame, metric=metric, system="injected", control=control, rng=rng, n_boot=n_boot, alpha=alpha)
        return None if math.isnan(dd.did) else (dd.did, dd.ci[0] > 0)

    return _curve(runs, effects, trial)


def _injected(probes: pl.DataFrame, system: str, p_end: float, span_days: float, rng: np.random.Generator, k: int,
              metric: str) -> pl.DataFrame:
    """``system``'s rows with the oracle's effect injected, keyed by the next draw of ``rng``, labelled ``injected``."""
    key = int(rng.integers(2**62))
    return inject_rows(probes, system=system, p_end=p_end, span_days=span_days, seed=key, k=k, metric=metric, label="injected")


def _curve(runs: Sequence[pl.DataFrame], effects: Sequence[float],
           trial: Callable[[pl.DataFrame, float], tuple[float, bool] | None]) -> list[PowerPoint]:
    """One ``PowerPoint`` per effect from ``trial(run, effect)``: (measured effect, detected), or None to leave the run out."""
    points = []
    for effect in effects:
        found = [r for r in (trial(probes, effect) for probes in runs) if r is not None]
        n, hits = len(found), sum(int(d) for _, d in found)
        points.append(PowerPoint(effect, hits / n if n else math.nan, n, float(np.mean([v for v, _ in found])) if n else math.nan))
    return points


CONTRAST_EFFECTS: tuple[float, ...] = (-0.1, -0.05, -0.03, -0.02, -0.01, 0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1,
                                        0.15)
"""Effects (metric units) on the default design-based power curve of a contrast: losses and gains."""


@dataclass(frozen=True, slots=True)
class ContrastPower:
    """The design-based power curve of one contrast in one half of one run, and its MDE."""

    system: str
    """The arm the contrast is read for (``system - reference``)."""
    reference: str
    """The reference arm, whose rows the synthetic arms are redrawn from."""
    half: int
    """0: first half of each user's questions; 1: second (the headline)."""
    effects: tuple[float, ...]
    power: tuple[float, ...]
    """Share of replicates rejecting at 5%, per effect."""
    mde: float | None
    """The smaller of ``mde_gain`` and ``mde_loss`` (what the run's learning table prints for this contrast and half)."""
    questions: int
    """The reference arm's paired questions in that half."""
    units: int
    """Units whose signs are flipped (users, or question threads below ``MIN_USERS`` users)."""
    mde_gain: float | None = None
    """Smallest gain at 80% power (None: out of reach)."""
    mde_loss: float | None = None
    """Magnitude of the smallest loss at 80% power."""
    spread: float = 0.0
    """Standard deviation across units of the injected effect."""
    unit: str = "user"
    """``user`` or ``thread``."""


def contrast_arms(
    probes: pl.DataFrame, info: Any, *, metric: str, system: str | None, contrast: str | None, half: int = 1,
    unit: str | None = None, balance_kinds: bool = False, channel: str | None = None,
) -> tuple[str, str, str]:
    """``(contrast, minuend, reference)`` of a contrast among a run's arms (roles from ``run.json``).

    The headline (``learning_from_feedback``, the default) takes the reference
    the learning table chose for ``half``: the content-ignoring arm with the
    highest metric there (``memsim.analysis.learning.best_reference``).

    Raises:
        UserError: no feedback-using system, an unknown one, or an arm the run did not play.
    """
    from memsim.analysis.learning import ARM_PAIRS, best_reference, family_arms

    labels = list(dict.fromkeys(probes["system"].to_list()))
    families = family_arms(labels, info)
    if not families:
        raise UserError("power: no system in the run was played with a twin (none uses feedback)")
    base = system or next(iter(families))
    if base not in families:
        raise UserError(f"power: --system {base!r} has no twin in the run; feedback-using: {', '.join(families)}")
    fam = {"system": base, **families[base]}
    name = contrast or "learning_from_feedback"
    if name == "learning_from_feedback":
        ref = best_reference(probes, metric=metric, system=base, arms=families[base], half=half, unit=unit,
                             balance_kinds=balance_kinds, channel=channel)
        if ref is None:
            raise UserError(f"power: {base} shares no scored question with any of its arms in half {half + 1}")
        return name, base, ref
    if name not in ARM_PAIRS:
        raise UserError(f"power: unknown contrast {name!r}; valid: learning_from_feedback, {', '.join(ARM_PAIRS)}")
    a, b = (fam.get(r) for r in ARM_PAIRS[name])
    if a is None or b is None:
        missing = [r for r in ARM_PAIRS[name] if r not in fam]
        raise UserError(f"power: --contrast {name} needs {base}'s {' and '.join(missing)} arm, which the run did not play")
    return name, a, b


def contrast_power(
    probes: pl.DataFrame,
    *,
    metric: str,
    system: str,
    reference: str,
    seed: int,
    effects: Sequence[float] = CONTRAST_EFFECTS,
    half: int = 1,
    balance_kinds: bool = False,
    unit: str | None = None,
    spread: float | None = None,
) -> ContrastPower:
    """Design-based power of ``system - reference`` over ``effects``, by the computation behind a run's MDE.

    The design is the reference arm's paired rows in ``half`` (``memsim.analysis.learning.contrast_design``),
    with the spread between units the contrast shows there (or ``spread``, declared);
    power and MDE draw from that contrast's own child of the ``stats`` stream
    (``memsim.analysis.learning.mde_rng``) with the run's ``seed``, so the MDE is the very
    figure ``summarise`` wrote into ``metrics.json``, and the curve crosses 80% there.
    ``unit``: the run's unit (``metrics.json``'s ``inference_unit``); None: from the rows' users.

    Raises:
        UserError: an arm has no rows, or the metric column is missing.
    """
    from memsim.analysis.learning import contrast_design, mde_rng, paired_rows, unit_column
    from memsim.analysis.stats import design_mdes, design_power

    _scores(probes, metric)
    scored = probes.filter(pl.col("error").is_null())
    labels = set(scored["system"].unique().to_list())
    for label in (system, reference):
        if label not in labels:
            raise UserError(f"power: the run has no rows of {label!r}; arms: {', '.join(sorted(labels))}")
    joined = paired_rows(scored, user_halves(scored), metric=metric, system=system, other=reference,
                         balance_kinds=balance_kinds)
    design = contrast_design(joined, other=reference, half=half, unit=unit, spread=spread)

    def rng() -> np.random.Generator:
        return mde_rng(seed, metric=metric, system=system, other=reference, half=half)

    found = design_mdes(design, rng=rng())
    return ContrastPower(
        system=system, reference=reference, half=half, effects=tuple(float(e) for e in effects),
        power=tuple(design_power(design, effects, rng=rng())), mde=found.mde,
        questions=int(design.base.size), units=design.units, mde_gain=found.gain, mde_loss=found.loss,
        spread=design.spread, unit="user" if unit_column(joined, unit) == "user_id" else "thread",
    )


def minimum_detectable_effect(points: Sequence[PowerPoint], *, target: float = 0.8) -> float | None:
    """The smallest effect at ``target`` power, linearly interpolated on the curve; None if never reached."""
    pts = sorted((p for p in points if not math.isnan(p.power)), key=lambda p: p.effect)
    for a, b in zip(pts, pts[1:]):
        if a.power >= target:
            return a.effect
        if b.power >= target:
            return a.effect + (target - a.power) * (b.effect - a.effect) / (b.power - a.power)
    if pts and pts[0].power >= target:
        return pts[0].effect
    return None


def _evidence_depth(rows: pl.DataFrame) -> np.ndarray:
    """Rank (1-based) at which the last evidence turn appears; inf when some never does."""
    out = np.full(rows.height, np.inf)
    for i, (ev, src) in enumerate(zip(rows["evidence_ids"].to_list(), rows["retrieved_sources"].to_list(), strict=True)):
        if not ev:
            out[i] = np.nan
            continue
        need = set(ev)
        for r, s in enumerate(src or [], start=1):
            need -= set(s)
            if not need:
                out[i] = r
                break
    return out


def random_cutoff_rows(
    probes: pl.DataFrame, *, system: str, k: int, metric: str, rng: np.random.Generator, label: str
) -> pl.DataFrame:
    """A static arm: ``system``'s rows scored on a random top-k' (k' uniform in 1..k) of its ranking.

    The score (recall_all at k') is written to the ``metric`` column.
    """
    rows = probes.filter(pl.col("system") == system)
    depth = _evidence_depth(rows)
    cut = rng.integers(1, k + 1, size=rows.height)
    score = np.where(np.isnan(depth), np.nan, (depth <= cut).astype(float))
    return rows.with_columns(pl.lit(label).alias("system"), pl.Series(metric, score, dtype=pl.Float64))


def aa_coverage(
    runs: Sequence[pl.DataFrame],
    *,
    system: str,
    k: int,
    metric: str,
    replicates: int,
    rng: np.random.Generator,
    n_boot: int = 1000,
    alpha: float = 0.05,
) -> tuple[float, int]:
    """Share of A/A replicates whose DiD interval covers 0, and the number of replicates.

    Each replicate draws two independent ``random_cutoff_rows`` arms from one
    of ``runs`` (in turn); the arms are exchangeable, so the true DiD is 0.
    ``metric`` names the column the arms are scored in (the runs' ``recall_all@k``).
    """
    covered = done = 0
    for i in range(replicates):
        probes = runs[i % len(runs)]
        a = random_cutoff_rows(probes, system=system, k=k, metric=metric, rng=rng, label="arm-a")
        b = random_cutoff_rows(probes, system=system, k=k, metric=metric, rng=rng, label="arm-b")
        dd = diff_in_diff(pl.concat([a, b]), metric=metric, system="arm-a", control="arm-b", rng=rng, n_boot=n_boot, alpha=alpha)
        if math.isnan(dd.did):
            continue
        done += 1
        covered += int(dd.ci[0] <= 0.0 <= dd.ci[1])
    return (covered / done if done else math.nan), done


@dataclass(frozen=True, slots=True)
class SeedRuns:
    """Probe rows of one config played on consecutive seeds."""

    probes: tuple[pl.DataFrame, ...]
    """Each seed's probe rows, in seed order."""
    seeds: tuple[int, ...]
    """The seeds played."""
    span_days: float
    """The longest simulated span of those runs (days)."""
    k: int
    """Results per question (``RunSpec.k``)."""
    metric: str
    """The runs' headline column (``RunSpec.metric``)."""
    infos: tuple[dict[str, Any], ...] = ()
    """Each seed's ``run.json`` (its arms and totals), in seed order; empty where the runs kept none."""


def run_seeds(
    config: Any,
    *,
    systems: Sequence[Any],
    seeds: int,
    embedder_factory: Callable[[], Any] | None = None,
    progress: Callable[[int, Any], None] | None = None,
    **overrides: Any,
) -> SeedRuns:
    """Play a config on ``seeds`` consecutive seeds (from its own) through ``memsim.analysis.pipeline.execute``.

    Rows stay in memory (no run folder). Each seed's systems draw from that
    seed's ``systems`` stream (``memsim.core.streams``), as ``memsim run`` does.

    Args:
        config: a loaded config (``memsim.scenarios.config.RunConfig``).
        systems: the systems to play (``memsim.memory.registry.SystemSpec``).
        seeds: how many seeds.
        embedder_factory: embedder for every run (default: the run's own).
        progress: called with each seed and its ``Outcome`` when it finishes.
        **overrides: run settings for every seed (``n_boot``, ``feedback_delay_hours``...).

    Raises:
        UserError: fewer than 1 seed, or a bad config or system.
    """
    from memsim.analysis.pipeline import execute, spec_from_config

    if seeds < 1:
        raise UserError(f"seeds must be at least 1, got {seeds}")
    frames: list[pl.DataFrame] = []
    infos: list[dict[str, Any]] = []
    played: list[int] = []
    span, k, metric = 0.0, 0, ""
    for i in range(seeds):
        seed = config.run.seed + i
        spec = spec_from_config(config, systems=systems, **{**overrides, "seed": seed})
        outcome = execute(spec, out_dir=None, embedder_factory=embedder_factory)
        frames.append(outcome.result.probes)
        infos.append(dict(outcome.result.info))
        played.append(seed)
        span = max(span, float(outcome.result.info.get("span_days") or 0.0))
        k, metric = spec.k, spec.metric
        if progress is not None:
            progress(seed, outcome)
    return SeedRuns(tuple(frames), tuple(played), span, k, metric, tuple(infos))


def power_sweep(config: Any, *, systems: Sequence[Any], seeds: int, embedder: str = "minilm") -> Any:
    """The runs behind a power curve as a sweep spec: ``systems`` in one cell per seed, cheap summaries.

    Played with ``memsim.analysis.sweep.run_sweep``, its cells hold the same probe
    rows as ``run_seeds`` (same seeds, same random streams).

    Raises:
        UserError: fewer than 1 seed, or a bad config or system.
    """
    from memsim.analysis.sweep import config_sweep

    if seeds < 1:
        raise UserError(f"seeds must be at least 1, got {seeds}")
    # Only the rows are used: the runs' own summaries are kept cheap (n_boot does not change rows).
    return config_sweep(config, systems=systems, seeds=seeds, embedder=embedder, name="power", n_boot=100)


def seed_runs_from_sweep(result: Any) -> SeedRuns:
    """The probe rows of a finished power sweep (``memsim.analysis.sweep.SweepResult``), in seed order.

    Raises:
        UserError: a cell did not finish.
    """
    import json
    from pathlib import Path

    from memsim.analysis.sweep import cell_probes, require_done

    require_done(result)
    cells = sorted((r.cell for r in result.records), key=lambda c: c.seed)
    frames, spans, infos = [], [], []
    for c in cells:
        frames.append(cell_probes(result.out_dir, c))
        folder = Path(result.out_dir) / "cells" / c.cell_id
        metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
        spans.append(float(metrics.get("span_days") or 0.0))
        info = folder / "run.json"
        infos.append(json.loads(info.read_text(encoding="utf-8")) if info.is_file() else {})
    first = cells[0].spec
    return SeedRuns(tuple(frames), tuple(c.seed for c in cells), max(spans, default=0.0), int(first["k"]),
                    str(first["metric"]), tuple(infos))
