"""Sensitivity of a learning-through-use result to the scenario knobs, one knob at a time.

Where in scenario space does a system's plasticity help, hurt, or do
nothing? ``sensitivity_grid`` moves one knob at a time away from a base
config (the others stay at the base values), runs the system and the static
control on a few seeds at every point, and measures the difference in
differences (DiD) of the system against the control.

The seeds of one point are pooled into one comparison rather than averaged:
every seed's rows keep their own users and question threads (ids are
prefixed by the seed), and each seed's question positions are scaled to
``[0, 1)``. The halves are the tables' rule (each user's questions split at
that user's median, ``memsim.analysis.stats.user_halves``), and the interval is
``memsim.analysis.stats.diff_in_diff``'s: inverted from the sign-flip test of
the DiD over question threads (or users, when there are many), so three seeds
give one interval that is narrower than any seed's own.

``sensitivity_sweep`` expresses the same grid as a sweep spec
(``memsim.analysis.sweep``: one cell per point and seed, played on a process pool
or Dask, resumable) and ``grid_from_sweep`` measures its cells exactly as
``sensitivity_grid`` measures its in-process runs.

Knobs live either in the scenario table (``reask_rate``, ``topic_skew``,
``change_rate``) or in the run table (``feedback_delay_hours``); a
``Knob`` names which.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from memsim.analysis.stats import diff_in_diff
from memsim.memory.registry import SystemSpec
from memsim.core.errors import UserError
from memsim.core.streams import streams

__all__ = [
    "Knob",
    "GridPoint",
    "DEFAULT_KNOBS",
    "pool_seeds",
    "sensitivity_grid",
    "sensitivity_sweep",
    "grid_from_sweep",
    "grid_frame",
    "format_table",
    "plot_grid",
]


@dataclass(frozen=True, slots=True)
class Knob:
    """One scenario or run setting varied around its base value."""

    name: str
    """The key in its table (e.g. ``reask_rate``)."""
    table: str
    """``scenario`` or ``run``."""
    values: tuple[float, ...]
    """Values tried (the base value is added when missing)."""
    label: str
    """Axis label for the plot."""


DEFAULT_KNOBS: tuple[Knob, ...] = (
    Knob("reask_rate", "scenario", (0.0, 0.3, 0.6), "re-ask rate (share of questions asked again)"),
    Knob("topic_skew", "scenario", (0.0, 1.0, 2.0), "topic popularity skew (Zipf exponent)"),
    Knob("change_rate", "scenario", (0.25, 1.0, 2.0), "fact change rate (x base rates)"),
    Knob("feedback_delay_hours", "run", (0.0, 1.0, 72.0), "feedback delay (hours)"),
)
"""The knobs the issue names, around the persona defaults (0.3, 1.0, 1.0, 1 hour)."""


@dataclass(frozen=True, slots=True)
class GridPoint:
    """The pooled DiD of the system against the control at one knob value."""

    knob: str
    """Knob varied (``Knob.name``)."""
    value: float
    """Its value at this point."""
    is_base: bool
    """Whether this is the base config's value."""
    seeds: int
    """Seeds pooled."""
    questions: int
    """Paired questions over all seeds."""
    did: float
    """Pooled DiD (metric units; positive = the system gains on the control over the stream)."""
    lo: float
    """Lower bound of the interval."""
    hi: float
    """Upper bound of the interval."""
    seed_dids: tuple[float, ...]
    """Each seed's own DiD, for the spread."""
    metric: str
    """The metric the DiD is measured in (the runs' ``RunSpec.metric``)."""

    @property
    def verdict(self) -> str:
        """``helps``, ``hurts`` or ``no effect`` (the interval against 0)."""
        if self.lo > 0:
            return "helps"
        if self.hi < 0:
            return "hurts"
        return "no effect"


def pool_seeds(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """One frame from several seeds' probe rows, with seed-prefixed ids and positions scaled to [0, 1).

    Positions are scaled per seed (``q_index / questions in that seed``,
    times 10^6 and rounded); users keep their seed's prefix, so each user's
    halves are the ones that seed's own tables use.
    """
    out = []
    for seed, probes in enumerate(frames):
        if probes.height == 0:
            continue
        n = int(probes["q_index"].max()) + 1
        prefix = f"s{seed}:"
        cols = [
            (pl.lit(prefix) + pl.col(c).cast(pl.Utf8)).alias(c)
            for c in ("user_id", "question_id", "thread_id")
            if c in probes.columns
        ]
        cols.append((pl.col("q_index") * 1_000_000 // n).cast(pl.Int64).alias("q_index"))
        out.append(probes.with_columns(cols))
    return pl.concat(out, how="vertical_relaxed") if out else pl.DataFrame()


def _points(knobs: Sequence[Knob], base: dict[str, dict[str, Any]]) -> Iterator[tuple[Knob, float, bool]]:
    for knob in knobs:
        if knob.table not in base:
            raise UserError(f"knob {knob.name!r}: unknown table {knob.table!r}; valid: scenario, run")
        if knob.name not in base[knob.table]:
            raise UserError(
                f"knob {knob.name!r} is not a {knob.table} setting of this config; "
                f"valid: {', '.join(sorted(base[knob.table]))}"
            )
        b = float(base[knob.table][knob.name])
        for v in sorted({*map(float, knob.values), b}):
            yield knob, v, v == b


def sensitivity_grid(
    config: Any,
    *,
    system: str | SystemSpec = "neuroplastic",
    knobs: Sequence[Knob] = DEFAULT_KNOBS,
    seeds: int = 3,
    embedder_factory: Callable[[], Any] | None = None,
    n_boot: int = 1000,
    progress: Callable[[str], None] | None = None,
) -> list[GridPoint]:
    """Run the one-knob-at-a-time grid and measure the pooled DiD at each point.

    Args:
        config: a loaded run config (``memsim.scenarios.config.RunConfig``): the base point.
        system: the system under study (name or ``SystemSpec``).
        knobs: knobs to vary; each must be a key of its table in the resolved config.
        seeds: seeds per point (consecutive from the config's seed).
        embedder_factory: embedder for every run (default: the run's own, MiniLM).
        n_boot: random sign patterns of the DiD test (more than 16 units; ``diff_in_diff``).
        progress: called with one line per finished run.

    Returns:
        One ``GridPoint`` per knob value, knobs in order, values ascending.
        The base point is simulated once and reported under every knob.

    Raises:
        UserError: unknown knob, fewer than 1 seed, or the system is the control.
    """
    from memsim.analysis.power import run_seeds

    spec_sys, control, base = _check(config, system, seeds)
    cache: dict[tuple[str, str, float] | None, tuple[tuple[pl.DataFrame, ...], str]] = {}

    def frames(knob: Knob, value: float, key: tuple[str, str, float] | None) -> tuple[tuple[pl.DataFrame, ...], str]:
        if key not in cache:
            point_config = config
            # The runs' own summaries are not used here; 100 resamples keep them cheap.
            overrides: dict[str, Any] = {"n_boot": 100}
            if key is not None and knob.table == "scenario":
                point_config = config.model_copy(update={"scenario": {**config.scenario, knob.name: value}})
            elif key is not None:
                overrides[knob.name] = value
            where = "base" if key is None else f"{knob.name}={value:g}"

            def report(seed: int, outcome: Any, where: str = where) -> None:
                if progress is not None:
                    questions = outcome.result.probes.filter(pl.col("system") == control).height
                    progress(f"{where} seed {seed}: {questions} questions")

            runs = run_seeds(point_config, systems=[SystemSpec(control), spec_sys], seeds=seeds,
                             embedder_factory=embedder_factory, progress=report, **overrides)
            cache[key] = (tuple(f.filter(pl.col("error").is_null()) for f in runs.probes), runs.metric)
        return cache[key]

    return _measure(knobs, base, frames, label=spec_sys.display, control=control,
                    rng=streams(config.run.seed)["stats"], n_boot=n_boot)


def _measure(
    knobs: Sequence[Knob],
    base: dict[str, dict[str, Any]],
    frames: Callable[[Knob, float, tuple[str, str, float] | None], tuple[tuple[pl.DataFrame, ...], str]],
    *,
    label: str,
    control: str,
    rng: np.random.Generator,
    n_boot: int,
) -> list[GridPoint]:
    """The grid's points from each point's per-seed rows (``frames(knob, value, key)``; key None = base)."""
    points: list[GridPoint] = []
    for knob, value, is_base in _points(knobs, base):
        key = None if is_base else (knob.table, knob.name, value)
        rows, metric = frames(knob, value, key)
        per_seed = []
        for f in rows:
            d = diff_in_diff(f, metric=metric, system=label, control=control, rng=rng, n_boot=100)
            per_seed.append(d.did)
        pooled = diff_in_diff(pool_seeds(rows), metric=metric, system=label, control=control, rng=rng, n_boot=n_boot)
        points.append(
            GridPoint(knob.name, value, is_base, len(rows), pooled.n, pooled.did, pooled.ci[0], pooled.ci[1],
                      tuple(per_seed), metric)
        )
    return points


def _check(config: Any, system: str | SystemSpec, seeds: int) -> tuple[SystemSpec, str, dict[str, dict[str, Any]]]:
    from memsim.analysis.pipeline import scenario_for

    if seeds < 1:
        raise UserError(f"seeds must be at least 1, got {seeds}")
    spec_sys = system if isinstance(system, SystemSpec) else SystemSpec(system)
    control = config.run.control
    if spec_sys.display == control:
        raise UserError(f"the system under study is the control {control!r}; choose another system")
    scen = dict(config.scenario)
    name = scen.pop("name")
    resolved = scenario_for(name, scen).spec_args()
    return spec_sys, control, {"scenario": resolved, "run": config.run.model_dump(exclude={"workers", "scheduler"})}


def sensitivity_sweep(
    config: Any,
    *,
    system: str | SystemSpec = "neuroplastic",
    knobs: Sequence[Knob] = DEFAULT_KNOBS,
    seeds: int = 3,
    embedder: str = "hash",
) -> Any:
    """The grid as a sweep spec: one-at-a-time over ``knobs``, the control and the system in each cell.

    Raises:
        UserError: unknown knob, fewer than 1 seed, or the system is the control.
    """
    from memsim.analysis.sweep import config_sweep

    spec_sys, control, base = _check(config, system, seeds)
    grids: dict[str, dict[str, list[float]]] = {"scenario": {}, "run": {}}
    for knob, value, is_base in _points(knobs, base):
        if not is_base:
            grids[knob.table].setdefault(knob.name, []).append(value)
    return config_sweep(config, systems=[SystemSpec(control), spec_sys], seeds=seeds, embedder=embedder,
                        name="sensitivity", scenario_grid=grids["scenario"], run_grid=grids["run"],
                        design="one-at-a-time", n_boot=100)


def grid_from_sweep(
    result: Any,
    config: Any,
    *,
    system: str | SystemSpec = "neuroplastic",
    knobs: Sequence[Knob] = DEFAULT_KNOBS,
    n_boot: int = 1000,
) -> list[GridPoint]:
    """The grid's points from a finished ``sensitivity_sweep`` (``memsim.analysis.sweep.SweepResult``).

    Raises:
        UserError: a cell did not finish, or a point of the grid has no cells.
    """
    from memsim.analysis.sweep import cell_probes, require_done

    require_done(result)
    seeds = len({r.cell.seed for r in result.records})
    spec_sys, control, base = _check(config, system, seeds)
    by_point: dict[str, list[Any]] = {}
    for r in result.records:
        by_point.setdefault(json.dumps(r.cell.point, sort_keys=True), []).append(r.cell)

    def frames(knob: Knob, value: float, key: tuple[str, str, float] | None) -> tuple[tuple[pl.DataFrame, ...], str]:
        point = {} if key is None else {f"{knob.table}.{knob.name}": value}
        cells = next((cs for p, cs in by_point.items() if _same_point(json.loads(p), point)), None)
        if not cells:
            raise UserError(f"sweep {result.out_dir}: no cells for {knob.name} = {value:g}")
        cells = sorted(cells, key=lambda c: c.seed)
        rows = tuple(cell_probes(result.out_dir, c).filter(pl.col("error").is_null()) for c in cells)
        return rows, str(cells[0].spec["metric"])

    return _measure(knobs, base, frames, label=spec_sys.display, control=control,
                    rng=streams(config.run.seed)["stats"], n_boot=n_boot)


def _same_point(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return set(a) == set(b) and all(float(a[k]) == float(b[k]) for k in a)


def grid_frame(points: Sequence[GridPoint]) -> pl.DataFrame:
    """The grid as a table, one row per point."""
    return pl.DataFrame(
        {
            "knob": [p.knob for p in points],
            "value": [p.value for p in points],
            "base": [p.is_base for p in points],
            "seeds": [p.seeds for p in points],
            "questions": [p.questions for p in points],
            "did": [p.did for p in points],
            "lo": [p.lo for p in points],
            "hi": [p.hi for p in points],
            "verdict": [p.verdict for p in points],
            "metric": [p.metric for p in points],
        }
    )


def format_table(points: Sequence[GridPoint]) -> str:
    """A plain-text table: knob, value, pooled DiD in points with its interval, per-seed DiDs, verdict."""
    from memsim.core.table import text_table

    rows = []
    for p in points:
        seeds = " ".join(f"{100 * d:+.1f}" if not math.isnan(d) else "nan" for d in p.seed_dids)
        rows.append([p.knob, f"{p.value:g}" + ("*" if p.is_base else " "), f"{100 * p.did:+.1f}",
                     f"[{100 * p.lo:+.1f}, {100 * p.hi:+.1f}]", seeds, p.verdict])
    lines = [text_table(["knob", "value", "DiD", "95% interval", "per seed", "verdict"], rows, align="lrrrrl")]
    metrics = ", ".join(dict.fromkeys(p.metric for p in points))
    lines.append(f"DiD in points of {metrics}; * = base value; interval: paired bootstrap over pooled seeds")
    return "\n".join(lines)


def plot_grid(points: Sequence[GridPoint], path: Path, *, knobs: Sequence[Knob] = DEFAULT_KNOBS, title: str = "") -> Path:
    """One panel per knob: pooled DiD (points) with its interval, a line at 0, the base value marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {k.name: k.label for k in knobs}
    names = list(dict.fromkeys(p.knob for p in points))
    cols = 2 if len(names) > 1 else 1
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False, sharey=True)
    for ax, name in zip(axes.flat, names):
        pts = [p for p in points if p.knob == name]
        x = np.arange(len(pts))
        y = np.array([100 * p.did for p in pts])
        err = np.array([[100 * (p.did - p.lo) for p in pts], [100 * (p.hi - p.did) for p in pts]])
        colours = ["tab:green" if p.verdict == "helps" else "tab:red" if p.verdict == "hurts" else "tab:grey" for p in pts]
        ax.axhline(0.0, color="black", linewidth=0.8)
        for xi, yi, e0, e1, c in zip(x, y, err[0], err[1], colours):
            ax.errorbar([xi], [yi], yerr=[[e0], [e1]], fmt="o", color=c, capsize=4)
        for xi, p in zip(x, pts):
            for d in p.seed_dids:
                ax.plot([xi + 0.12], [100 * d], marker=".", color="tab:blue", alpha=0.5, linestyle="none")
        ax.set_xticks(x, [f"{p.value:g}" + (" (base)" if p.is_base else "") for p in pts])
        ax.set_xlabel(labels.get(name, name))
        ax.set_ylabel("DiD vs control (points)")
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
