"""``memsim compare SWEEP_DIR``: a sweep's cells aggregated over seeds, systems ranked, a plot per knob.

Every figure comes from the sweep's ``index.parquet`` (each finished cell's
``metrics.json``, per system):

- per scenario point and system, the mean over seeds with a 95% Student t
  interval of the runs' headline metric (e.g. ``recall_all@10``; the index
  keeps it in its ``accuracy`` column, named by the metric wherever shown), of the **learning
  effect** (the DiD against the system's own twin: change between halves
  minus the twin's change; only for systems that learn from feedback) and of
  the DiD against the static control;
- per scenario point, the systems ranked on the learning effect and on
  the headline metric (by the mean over seeds), with the Friedman mean ranks over seeds
  (seeds as datasets) when at least three systems have a value in two seeds;
- per knob, one figure: the headline metric and learning effect against the knob's
  value, a line per system, intervals over seeds.

A system that appears in several cells of one seed and point (the control
beside each system) is counted once per seed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl

from memsim.analysis.stats import friedman_ranking, summarise_seeds
from memsim.analysis.sweep import is_sweep_dir, read_index
from memsim.core.errors import UserError

__all__ = ["aggregate", "rankings", "knob_values", "plot_knobs", "compare_sweep", "FIGURES"]

FIGURES: tuple[tuple[str, str], ...] = (
    ("accuracy", "the headline metric (named by it when shown)"),
    ("did_twin", "learning effect (DiD vs twin)"),
    ("did_control", "DiD vs static control"),
)
"""(index column, what it is) of the aggregated figures."""


def _per_seed(index: pl.DataFrame) -> pl.DataFrame:
    """Finished rows, one per scenario, point, system and seed."""
    done = index.filter(pl.col("state") == "done").sort("index")
    return done.unique(subset=["scenario", "point", "system", "seed"], keep="first", maintain_order=True)


def aggregate(index: pl.DataFrame) -> pl.DataFrame:
    """Per scenario point and system: seeds, cells failed, and each figure's mean and 95% interval over seeds."""
    rows = []
    rows_all = index.unique(subset=["scenario", "point", "system", "seed"], keep="first", maintain_order=True)
    per_seed = _per_seed(index)
    for (scenario, point, system), part in rows_all.group_by(["scenario", "point", "system"], maintain_order=True):
        done = per_seed.filter((pl.col("scenario") == scenario) & (pl.col("point") == point) & (pl.col("system") == system))
        row: dict[str, Any] = {"scenario": scenario, "point": point, "system": system, "seeds": done.height,
                               "failed": part.filter(pl.col("state") == "failed").height,
                               "pending": part.filter(pl.col("state") == "pending").height,
                               "metric": part["metric"][0]}
        for col, _ in FIGURES:
            s = summarise_seeds(done[col].cast(pl.Float64).fill_null(math.nan).to_numpy(),
                                bounds=(0.0, 1.0) if col == "accuracy" else (-1.0, 1.0))
            row.update({col: s.mean, f"{col}_lo": s.ci[0], f"{col}_hi": s.ci[1], f"{col}_n": s.n})
        rows.append(row)
    return pl.DataFrame(rows)


def rankings(index: pl.DataFrame, figure: str) -> dict[str, list[dict[str, Any]]]:
    """Per point (``scenario point-json``): systems ranked by the mean of ``figure`` over seeds, best first.

    Each entry has ``system``, ``mean``, ``rank`` and, when at least three
    systems have the figure in two common seeds, ``friedman_rank`` (mean rank
    over seeds, 1 = best) and the point's Friedman p-value (``friedman_p``).
    """
    per_seed = _per_seed(index)
    out: dict[str, list[dict[str, Any]]] = {}
    for (scenario, point), part in per_seed.group_by(["scenario", "point"], maintain_order=True):
        part = part.filter(pl.col(figure).is_not_null() & pl.col(figure).is_not_nan())
        if part.height == 0:
            continue
        means = part.group_by("system", maintain_order=True).agg(pl.col(figure).mean().alias("mean")).sort(
            ["mean", "system"], descending=[True, False])
        values = means["mean"].to_list()
        # Standard competition ranking: tied systems share the better rank (1, 1, 3), never 1 and 2.
        entries = [{"system": s, "mean": m, "rank": 1 + sum(v > m for v in values)} for s, m in means.iter_rows()]
        wide = part.pivot(on="seed", index="system", values=figure, aggregate_function="first").drop_nulls()
        if wide.height >= 3 and wide.width - 1 >= 2:
            try:
                fr = friedman_ranking(wide)
            except UserError:
                fr = None
            if fr is not None:
                mean_rank = dict(zip(fr.systems, fr.mean_ranks))
                for e in entries:
                    e["friedman_rank"] = mean_rank.get(e["system"])
                    e["friedman_p"] = fr.p_value
        out[f"{scenario} {point}"] = entries
    return out


def knob_values(sweep_dir: Path, index: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Per knob: its value at every point of the index (the base value read from a base cell's spec)."""
    points = [json.loads(p) for p in index["point"].unique(maintain_order=True).to_list()]
    knobs = list(dict.fromkeys(k for p in points for k in p))
    base_cells = index.filter(pl.col("point") == "{}")["dir"].to_list()
    base_spec: dict[str, Any] = {}
    if base_cells:
        path = sweep_dir / base_cells[0] / "spec.json"
        if path.is_file():
            base_spec = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, dict[str, Any]] = {}
    for knob in knobs:
        table, name = knob.split(".", 1)
        base = (base_spec.get("scenario", {}).get("args", {}) if table == "scenario" else base_spec).get(name)
        values = {}
        for p in points:
            key = json.dumps(p, sort_keys=True)
            if knob in p:
                values[key] = p[knob]
            elif not p and base is not None:
                values[key] = base
        out[knob] = values
    return out


def plot_knobs(sweep_dir: Path, index: pl.DataFrame, out_dir: Path, *, title: str = "") -> list[Path]:
    """One PNG per knob: the headline metric and learning effect against the knob, a line per system, t intervals.

    In a factorial sweep the points of one knob value are pooled over the other knobs' values.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_seed = _per_seed(index)
    paths = []
    metric = index["metric"].drop_nulls()[0] if index["metric"].drop_nulls().len() else "metric"
    for knob, values in knob_values(sweep_dir, index).items():
        if len({json.dumps(v) for v in values.values()}) < 2:
            continue
        tagged = per_seed.filter(pl.col("point").is_in(list(values))).with_columns(
            pl.col("point").replace_strict({k: float(v) for k, v in values.items()}, return_dtype=pl.Float64).alias("x"))
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.0), squeeze=False)
        systems = list(dict.fromkeys(tagged["system"].to_list()))
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for ax, (col, what) in zip(axes[0], FIGURES[:2]):
            for i, system in enumerate(systems):
                xs, ys, los, his = [], [], [], []
                for x in sorted(set(tagged["x"].to_list())):
                    v = tagged.filter((pl.col("system") == system) & (pl.col("x") == x))[col]
                    s = summarise_seeds(v.cast(pl.Float64).fill_null(math.nan).to_numpy())
                    if s.n == 0:
                        continue
                    xs.append(x)
                    ys.append(100 * s.mean)
                    los.append(0.0 if math.isnan(s.ci[0]) else 100 * (s.mean - s.ci[0]))
                    his.append(0.0 if math.isnan(s.ci[1]) else 100 * (s.ci[1] - s.mean))
                if xs:
                    ax.errorbar(xs, ys, yerr=[los, his], marker="os^Dvx*"[i % 7], capsize=3, label=system,
                                linestyle=("-", "--", ":", "-.")[i // 7 % 4], color=colours[i % len(colours)])
            if col == "did_twin":
                ax.axhline(0.0, color="black", linewidth=0.8)
            ax.set_xlabel(knob.split(".", 1)[1])
            ax.set_ylabel(f"{metric}, %" if col == "accuracy" else "points")
            ax.set_title(metric if col == "accuracy" else what, fontsize=10)
            ax.grid(alpha=0.3)
        handles, labels = [], []
        for ax in axes[0]:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        if handles:
            fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
        fig.tight_layout()
        fig.suptitle(title or f"by {knob}: mean over seeds with 95% t interval", fontsize=10, y=1.03)
        path = out_dir / "plots" / f"knob-{knob.replace('.', '-')}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        paths.append(path)
    return paths


def _fmt(mean: float, lo: float, hi: float, n: int, *, pct: bool) -> str:
    if n == 0 or mean is None or math.isnan(mean):
        return "—"
    unit = "%" if pct else " pp"
    sign = "" if pct else "+"
    text = f"{100 * mean:{sign}.1f}{unit}"
    if n >= 2 and not math.isnan(lo):
        text += f" [{100 * lo:{sign}.1f}, {100 * hi:{sign}.1f}]"
    return text + f" (n={n})"


def _point_label(point: str) -> str:
    p = json.loads(point)
    return ", ".join(f"{k.split('.', 1)[1]} = {v}" for k, v in p.items()) or "base"


def compare_sweep(sweep_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Aggregate a sweep folder; write ``compare.md``, ``compare.html``, ``summary.parquet`` and the knob plots.

    Returns:
        The path of ``compare.md``.

    Raises:
        UserError: not a sweep folder, or no cell finished.
    """
    src = Path(sweep_dir)
    if not is_sweep_dir(src):
        raise UserError(f"{src}: not a sweep folder (no sweep.json)")
    index = read_index(src)
    if index.filter(pl.col("state") == "done").height == 0:
        raise UserError(f"{src}: no finished cell to compare (states: {sorted(set(index['state'].to_list()))})")
    out = Path(out_dir) if out_dir is not None else src / "compare"
    out.mkdir(parents=True, exist_ok=True)
    table = aggregate(index)
    table.write_parquet(out / "summary.parquet")
    name = json.loads((src / "sweep.json").read_text(encoding="utf-8")).get("sweep", {}).get("name", src.name)
    metric = table["metric"][0]
    states = index.unique(subset=["cell"]).group_by("state").len().sort("state")
    lines = [f"# Sweep {name}: {index['cell'].n_unique()} cells "
             f"({', '.join(f'{n} {s}' for s, n in states.iter_rows())}), metric {metric}", ""]
    lines += [f"Mean over seeds with a 95% Student t interval (n = seeds). {metric}: the runs' headline metric. "
              "Learning effect: change between halves minus the twin's change (same system, feedback withheld); "
              "— for a system without a twin. DiD vs control: change between halves minus the static control's.", ""]
    head = f"| scenario | point | system | seeds | {metric} | learning effect | DiD vs control | failed |"
    for scenario in dict.fromkeys(table["scenario"].to_list()):
        lines += [head, "|---|---|---|---:|---|---|---|---:|"]
        for r in table.filter(pl.col("scenario") == scenario).iter_rows(named=True):
            cells = [_fmt(r[c], r[f"{c}_lo"], r[f"{c}_hi"], r[f"{c}_n"], pct=(c == "accuracy")) for c, _ in FIGURES]
            lines.append(f"| {scenario} | {_point_label(r['point'])} | {r['system']} | {r['seeds']} | "
                         + " | ".join(cells) + f" | {r['failed']} |")
        lines.append("")
    for col, what in FIGURES[:2]:
        ranks = rankings(index, col)
        if not ranks:
            continue
        lines += [f"## Ranking on {metric if col == 'accuracy' else what}", ""]
        for key, entries in ranks.items():
            scenario, point = key.split(" ", 1)
            fried = entries[0].get("friedman_p")
            extra = f"; Friedman over seeds p = {fried:.3g}" if fried is not None else ""
            ranked = ", ".join(
                f"{e['rank']}. {e['system']} ("
                + (f"{100 * e['mean']:.1f}%" if col == "accuracy" else f"{100 * e['mean']:+.1f} pp")
                + (f", mean rank {e['friedman_rank']:.2f}" if e.get("friedman_rank") is not None else "") + ")"
                for e in entries)
            lines.append(f"- {scenario} ({_point_label(point)}){extra}: {ranked}")
        lines.append("")
    plots = plot_knobs(src, index, out, title=f"{name}: mean over seeds with 95% t interval")
    if plots:
        lines += ["## By knob", ""] + [f"![{p.stem}]({p.relative_to(out)})" for p in plots] + [""]
    failed = index.filter(pl.col("state") == "failed").unique(subset=["cell"])
    if failed.height:
        lines += ["## Failed cells", ""] + [f"- {r['cell']} ({r['system_set']}, seed {r['seed']}): {r['error']}"
                                             for r in failed.iter_rows(named=True)] + [""]
    md = "\n".join(lines)
    (out / "compare.md").write_text(md, encoding="utf-8")
    (out / "compare.html").write_text(_html(md, name), encoding="utf-8")
    return out / "compare.md"


def _html(md: str, name: str) -> str:
    """The Markdown as a plain page (markdown-it-py, tables on): lists as lists, images as images."""
    import html

    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render(md)
    style = "body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}" \
            "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}img{max-width:100%}"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(name)}</title>"
            f"<style>{style}</style></head><body>{body}</body></html>\n")
