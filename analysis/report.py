"""Reports of run folders: one self-contained HTML page and a Markdown summary.

``write_report(run_dir)`` reads ``spec.json``, ``probes.parquet`` and, for
longitudinal runs, ``timeline.parquet``, and writes ``report.html`` (every
figure inline as an SVG data URI; no scripts or styles from the network) and
``report.md`` (the tables, for papers and pull requests) into the folder.
``compare_runs(run_dirs, out_dir)`` does the same across runs: summary per
run, mean and t-interval across seeds, and a Friedman ranking with a
critical-difference diagram when there are enough systems and runs.

Intervals come from the run's own seed, so a report is reproducible.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from analysis import curves as cv
from analysis import plots
from analysis.stats import (
    bootstrap_ci,
    cluster_labels,
    critical_difference_plot,
    format_markdown,
    friedman_ranking,
    learning_summary,
    summarise_seeds,
)
from sim.errors import UserError

__all__ = ["RunData", "load_run", "scored_probes", "stats_rng", "write_report", "compare_runs", "DEFAULT_WINDOW", "DEFAULT_WINDOW_DAYS", "DEFAULT_FADING"]

DEFAULT_WINDOW = 50
"""Questions in the windowed accuracy curve."""
DEFAULT_WINDOW_DAYS = 30.0
"""Simulated days in the time-windowed accuracy curve."""
DEFAULT_FADING = 0.98
"""Fading factor of the fading-factor accuracy curve."""

_WORST = 10
_SHOWN_MEMORIES = 5


@dataclass(frozen=True, slots=True)
class RunData:
    """A run folder read into memory."""

    path: Path
    """The run folder."""
    spec: dict[str, Any]
    """``spec.json``."""
    probes: pl.DataFrame
    """``probes.parquet``: one row per question per system."""
    timeline: pl.DataFrame | None
    """``timeline.parquet`` when present (longitudinal runs)."""
    metrics: dict[str, Any]
    """``metrics.json`` when present, else empty."""
    longitudinal: bool
    """True for runs with a question stream (curves apply)."""
    metric: str
    """The headline metric column."""
    category: str | None
    """The column naming each question's category, if any."""
    user: str | None
    """The column naming each question's user or conversation, if any."""
    control: str | None
    """The control system's label when it is in the run."""

    @property
    def systems(self) -> list[str]:
        """System labels in order of first appearance."""
        return list(dict.fromkeys(self.probes["system"].to_list())) if self.probes.height else []

    @property
    def seed(self) -> int:
        """The run's seed (0 when the spec names none)."""
        seed = self.spec.get("seed", 0)
        return int(seed) if isinstance(seed, (int, float)) else 0


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object")
    return data


def _numeric(df: pl.DataFrame, col: str) -> bool:
    return col in df.columns and df.schema[col].is_numeric()


def load_run(run_dir: str | Path) -> RunData:
    """Read a run folder (longitudinal or static).

    Raises:
        UserError: the folder, ``spec.json`` or ``probes.parquet`` is missing
            or unreadable, or no score column can be found.
    """
    path = Path(run_dir)
    if not path.is_dir():
        raise UserError(f"{path}: no such run folder")
    for name in ("spec.json", "probes.parquet"):
        if not (path / name).is_file():
            raise UserError(f"{path}: missing {name} (a run folder has spec.json and probes.parquet)")
    spec = _read_json(path / "spec.json")
    try:
        probes = pl.read_parquet(path / "probes.parquet")
    except Exception as exc:  # polars raises several types for corrupt files
        raise UserError(f"{path / 'probes.parquet'}: unreadable ({type(exc).__name__})") from None
    if "system" not in probes.columns:
        # Static runs of one system may omit the label; take it from the spec.
        label = spec.get("system", {}).get("label") if isinstance(spec.get("system"), dict) else None
        probes = probes.with_columns(pl.lit(str(label or "system")).alias("system"))
    timeline = None
    if (path / "timeline.parquet").is_file():
        timeline = pl.read_parquet(path / "timeline.parquet")
    metrics = _read_json(path / "metrics.json") if (path / "metrics.json").is_file() else {}
    k = spec.get("k", 10)
    candidates = [spec.get("metric"), "evidence", f"recall_all@{k}"]
    metric = next((c for c in candidates if isinstance(c, str) and _numeric(probes, c)), None)
    if metric is None:
        scores = [c for c in probes.columns if "@" in c and _numeric(probes, c)]
        if not scores:
            raise UserError(f"{path / 'probes.parquet'}: no score column (expected 'evidence' or 'recall_all@k')")
        metric = scores[0]
    longitudinal = spec.get("kind", "longitudinal") == "longitudinal" and "q_index" in probes.columns and "benchmark" not in spec
    category = next((c for c in ("kind", "category_label", "category") if c in probes.columns and probes.schema[c] == pl.Utf8), None)
    user = next((c for c in ("user_id", "conversation") if c in probes.columns), None)
    control = spec.get("control")
    systems = set(probes["system"].to_list())
    return RunData(
        path=path,
        spec=spec,
        probes=probes,
        timeline=timeline,
        metrics=metrics,
        longitudinal=longitudinal,
        metric=metric,
        category=category,
        user=user,
        control=control if control in systems else None,
    )


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------


def _pct(v: Any) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"


def _num(v: Any, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:,.{digits}f}"


def _ci(v: Any, lo: Any, hi: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return _pct(v)
    return f"{_pct(v)} [{_pct(lo)}, {_pct(hi)}]"


@dataclass(frozen=True, slots=True)
class _Table:
    """Headers, rows of cell text and footnotes; rendered as HTML or Markdown."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()

    def html(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.headers)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in self.rows)
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>" + (
            f"<ul class='notes'>{notes}</ul>" if notes else ""
        )

    def markdown(self) -> str:
        out = ["| " + " | ".join(self.headers) + " |", "|" + "|".join("---" for _ in self.headers) + "|"]
        out += ["| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in r) + " |" for r in self.rows]
        if self.notes:
            out.append("")
            out += [f"- {n}" for n in self.notes]
        return "\n".join(out)


def _summary_table(summary: pl.DataFrame) -> _Table:
    md = format_markdown(summary).splitlines()
    headers = tuple(c.strip() for c in md[0].strip("|").split(" | "))
    rows = []
    for line in md[2:]:
        if not line.startswith("|"):
            break
        rows.append(tuple(c.strip() for c in line.strip().strip("|").split(" | ")))
    notes = tuple(line[2:] for line in md if line.startswith("- "))
    return _Table(headers, tuple(rows), notes)


def _overview_table(run: RunData, rng: np.random.Generator) -> _Table:
    """Mean of each score per system with bootstrap intervals, plus latency and storage."""
    df = run.probes
    k = run.spec.get("k")
    score_cols = [run.metric]
    for base in ("recall_any", "recall_all", "ndcg"):
        c = f"{base}@{k}"
        if c not in score_cols and _numeric(df, c):
            score_cols.append(c)
    if _numeric(df, "stale_above_current"):
        score_cols.append("stale_above_current")
    score_cols += [c for c in cv.answer_metrics(df) if c not in score_cols]
    # A column nobody scored (no changed facts, no reader) would only show dashes.
    score_cols = [c for c in score_cols if df[c].cast(pl.Float64).drop_nulls().drop_nans().len() > 0]
    headers = ["system", "questions", *[f"{c} (%)" for c in score_cols], "retrieve median (ms)", "retrieve p95 (ms)"]
    storage = cv.storage_timeline(run.timeline) if run.timeline is not None else None
    if storage is not None and "items" in storage.columns:
        headers += ["final items", "final storage (MiB)"]
    if storage is not None and "tokens" in storage.columns:
        headers += ["system LLM calls", "system LLM tokens"]
    rows = []
    for system in run.systems:
        part = df.filter(pl.col("system") == system)
        clusters = cluster_labels(part, user_col=run.user) if run.user else None
        cells = [system, str(part.height)]
        for c in score_cols:
            x = part[c].cast(pl.Float64).to_numpy()
            scored = x[~np.isnan(x)]
            mean = float(scored.mean()) if scored.size else math.nan
            lo, hi = bootstrap_ci(x, rng=rng, clusters=clusters)
            cells.append(f"{_ci(mean, lo, hi)} (n={scored.size})")
        if "retrieve_ms" in part.columns:
            ms = part["retrieve_ms"].cast(pl.Float64).drop_nulls().drop_nans().to_numpy()
            cells += [_num(float(np.median(ms))) if ms.size else "—", _num(float(np.percentile(ms, 95))) if ms.size else "—"]
        else:
            cells += ["—", "—"]
        if storage is not None and "items" in storage.columns:
            last = storage.filter(pl.col("system") == system).tail(1)
            cells += (
                [_num(last["items"][0], 0), _num(last["bytes"][0] / 2**20, 2) if "bytes" in last.columns else "—"]
                if last.height
                else ["—", "—"]
            )
        if storage is not None and "tokens" in storage.columns:
            last = storage.filter(pl.col("system") == system).tail(1)
            cells += [_num(last["llm_calls"][0], 0) if "llm_calls" in last.columns and last.height else "—",
                      _num(last["tokens"][0], 0) if last.height else "—"]
        rows.append(tuple(cells))
    notes = (
        "[lo, hi]: 95% percentile bootstrap interval over questions"
        + (f" (whole {run.user} clusters resampled when there are 30 or more; else question threads)" if run.user else ""),
        "n: questions scored for that column (NaN = unscored, excluded)",
    )
    return _Table(tuple(headers), tuple(rows), notes)


def _category_table(run: RunData, rng: np.random.Generator) -> _Table | None:
    if run.category is None:
        return None
    df = run.probes
    cats = sorted({str(c) for c in df[run.category].drop_nulls().to_list()})
    cols = [run.metric, *cv.answer_metrics(df)]
    headers = [run.category, "system", "n", *[f"{c} (%)" for c in cols]]
    if run.longitudinal:
        headers += [f"{run.metric} 1st half (%)", f"{run.metric} 2nd half (%)"]
    rows = []
    for cat in cats:
        part = df.filter(pl.col(run.category).cast(pl.Utf8) == cat)
        for system in run.systems:
            s = part.filter(pl.col("system") == system)
            if s.height == 0:
                continue
            cells = [cat, system, str(s.height)]
            for c in cols:
                x = s[c].cast(pl.Float64).to_numpy()
                scored = x[~np.isnan(x)]
                lo, hi = bootstrap_ci(x, rng=rng, n_boot=1000)
                cells.append(_ci(float(scored.mean()) if scored.size else math.nan, lo, hi))
            if run.longitudinal:
                sc = s.filter(pl.col(run.metric).is_not_null() & pl.col(run.metric).is_not_nan())
                if sc.height:
                    split = float(np.median(sc["q_index"].to_numpy()))
                    a = sc.filter(pl.col("q_index") < split)[run.metric]
                    b = sc.filter(pl.col("q_index") >= split)[run.metric]
                    cells += [f"{_pct(a.mean()) if a.len() else '—'} (n={a.len()})", f"{_pct(b.mean())} (n={b.len()})"]
                else:
                    cells += ["—", "—"]
            rows.append(tuple(cells))
    notes = ("[lo, hi]: 95% percentile bootstrap interval over the category's questions",)
    return _Table(tuple(headers), tuple(rows), notes)


def _as_list(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    if isinstance(v, pl.Series):
        return [str(x) for x in v.to_list()]
    return [str(v)]


def _worst(run: RunData) -> dict[str, list[dict[str, Any]]]:
    """Lowest-scoring questions per system: lowest metric, then never-found evidence first."""
    df = run.probes
    gold_col = "gold" if "gold" in df.columns else ("answer" if run.spec.get("benchmark") else None)
    answer_col = "answer" if gold_col == "gold" and "answer" in df.columns else None
    judges = cv.answer_metrics(df)
    rank_col = next((c for c in ("first_rank", "first_evidence_rank") if c in df.columns), None)
    out: dict[str, list[dict[str, Any]]] = {}
    for system in run.systems:
        part = df.filter(pl.col("system") == system).filter(
            pl.col(run.metric).is_not_null() & pl.col(run.metric).is_not_nan()
        )
        keys = [pl.col(run.metric)]
        desc = [False]
        if judges:
            keys.append(pl.col(judges[0]).fill_nan(None))
            desc.append(False)
        if rank_col:
            keys.append(pl.col(rank_col).fill_null(10**9))
            desc.append(True)
        keys.append(pl.col("question_id"))
        desc.append(False)
        part = part.sort(keys, descending=desc, nulls_last=True).head(_WORST)
        items = []
        for r in part.iter_rows(named=True):
            items.append(
                {
                    "question_id": r.get("question_id"),
                    "category": r.get(run.category) if run.category else None,
                    "score": r.get(run.metric),
                    "question": r.get("question") or "",
                    "gold": r.get(gold_col) if gold_col else "",
                    "answer": r.get(answer_col) if answer_col else None,
                    "judges": {j: r.get(j) for j in judges},
                    "first_rank": r.get(rank_col) if rank_col else None,
                    "memories": _as_list(r.get("retrieved_text"))[:_SHOWN_MEMORIES],
                    "error": r.get("error"),
                }
            )
        out[system] = items
    return out


# ---------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1300px;padding:0 1rem;color:#222}
h1{font-size:1.6rem}h2{border-bottom:1px solid #ccc;padding-bottom:.2rem;margin-top:2.2rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.86rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}tbody tr:nth-child(even){background:#fafafa}
ul.notes{font-size:.8rem;color:#555;margin-top:.2rem}
figure{margin:1rem 0}figcaption{font-size:.85rem;color:#444}
img.plot{max-width:100%;height:auto;border:1px solid #eee}
pre.spec{background:#f7f7f7;padding:.8rem;overflow:auto;font-size:.8rem}
.worst td.mem{font-size:.78rem;color:#333}.worst ol{margin:0;padding-left:1.2rem}
nav a{margin-right:1rem}
"""

# Checks in the browser that every figure decoded; a failure is a console error.
_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('img.plot'), ok = 0;
  imgs.forEach(function (img) {
    if (img.complete && img.naturalWidth > 0) { ok += 1; }
    else { console.error('figure failed to render: ' + img.alt); }
  });
  document.body.setAttribute('data-figures-ok', String(ok));
  document.body.setAttribute('data-figures', String(imgs.length));
});
"""


def _img(svg: str, alt: str, caption: str) -> str:
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return (
        f"<figure><img class='plot' alt='{html.escape(alt, quote=True)}' "
        f"src='data:image/svg+xml;base64,{data}'><figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def _section(sid: str, title: str, body: str) -> str:
    return f"<section id='{sid}'><h2>{html.escape(title)}</h2>{body}</section>"


def _page(title: str, sections: Sequence[tuple[str, str, str]]) -> str:
    nav = "".join(f"<a href='#{sid}'>{html.escape(t)}</a>" for sid, t, _ in sections)
    body = "".join(_section(sid, t, b) for sid, t, b in sections)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>"
        f"<body><h1>{html.escape(title)}</h1><nav>{nav}</nav>{body}"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )


def _worst_html(worst: dict[str, list[dict[str, Any]]], metric: str) -> str:
    parts = []
    for system, items in worst.items():
        rows = []
        for it in items:
            mems = "".join(f"<li>{html.escape(m)}</li>" for m in it["memories"]) or "<li>(nothing retrieved)</li>"
            judges = ", ".join(f"{k.removeprefix('answer_')}={_num(v, 2)}" for k, v in it["judges"].items())
            answer = "" if it["answer"] is None else html.escape(str(it["answer"]))
            extra = f"<br><small>error: {html.escape(str(it['error']))}</small>" if it.get("error") else ""
            rows.append(
                "<tr>"
                f"<td>{html.escape(str(it['question_id']))}<br><small>{html.escape(str(it['category'] or ''))}</small></td>"
                f"<td>{html.escape(str(it['question']))}{extra}</td>"
                f"<td>{html.escape(str(it['gold'] or ''))}</td>"
                f"<td>{answer}{'<br><small>' + html.escape(judges) + '</small>' if judges else ''}</td>"
                f"<td>{_num(it['score'], 2)}; first rank {it['first_rank'] if it['first_rank'] is not None else '—'}</td>"
                f"<td class='mem'><ol>{mems}</ol></td>"
                "</tr>"
            )
        parts.append(
            f"<h3>{html.escape(system)}</h3><table class='worst'><thead><tr><th>question id</th><th>question</th>"
            f"<th>gold</th><th>answer</th><th>{html.escape(metric)}</th><th>retrieved memories (top {_SHOWN_MEMORIES})</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    return "".join(parts)


def _worst_md(worst: dict[str, list[dict[str, Any]]], metric: str, limit: int = 5) -> str:
    out = []
    for system, items in worst.items():
        out.append(f"**{system}**\n")
        for it in items[:limit]:
            out.append(f"- `{it['question_id']}` {it['question']} — gold: {it['gold']}; {metric} = {_num(it['score'], 2)}")
        out.append("")
    return "\n".join(out)


def _spec_summary(run: RunData) -> str:
    spec = run.spec
    bits = []
    if run.longitudinal:
        scen = spec.get("scenario") or {}
        bits.append(f"scenario {scen.get('name', '?')}")
        bits.append(f"seed {spec.get('seed', '?')}")
    else:
        bits.append(f"static {spec.get('benchmark') or spec.get('kind', '?')}")
    bits.append(f"metric {run.metric}")
    bits.append(f"systems {', '.join(run.systems)}")
    if run.control:
        bits.append(f"control {run.control}")
    users = run.probes[run.user].n_unique() if run.user else 1
    bits.append(f"{users} user(s)")
    return "; ".join(bits)


@dataclass(frozen=True, slots=True)
class _Built:
    """Everything a report shows, computed once."""

    summaries: tuple[tuple[str, pl.DataFrame], ...]
    overview: _Table
    categories: _Table | None
    worst: dict[str, list[dict[str, Any]]]
    figures: tuple[tuple[str, str, str, str], ...]  # (section, svg, alt, caption)


def stats_rng(run: RunData) -> np.random.Generator:
    """The generator the runner used for its summary, so report and metrics.json agree.

    The runner splits ``default_rng(seed)`` into scenario, system and
    statistics streams (``spawn(3)``) and draws the summary from the third.
    """
    root = np.random.default_rng(run.seed)
    return root.spawn(3)[2] if run.longitudinal else root


def scored_probes(run: RunData) -> pl.DataFrame:
    """Probe rows without a system error: a failed retrieval is not a scored question."""
    df = run.probes
    if "error" in df.columns and df.schema["error"] == pl.Utf8:
        return df.filter(pl.col("error").is_null())
    return df


def _build(run: RunData, *, window: int, window_days: float, fading: float, n_boot: int) -> _Built:
    rng = stats_rng(run)
    summaries: list[tuple[str, pl.DataFrame]] = []
    figures: list[tuple[str, str, str, str]] = []
    df = scored_probes(run)
    if run.longitudinal:
        for metric in [run.metric, *cv.answer_metrics(df)]:
            if df[metric].cast(pl.Float64).drop_nulls().drop_nans().len() == 0:
                continue
            summaries.append((metric, learning_summary(df, metric=metric, control=run.control, rng=rng, n_boot=n_boot)))
            acc = cv.accuracy_curves(df, metric=metric, window=window, window_days=window_days, fading=fading)
            for x, where in (("q_index", "question index"), ("t_days", "simulated days")):
                if x == "t_days" and acc["t_days"].drop_nans().len() == 0:
                    continue
                figures.append(
                    (
                        "curves",
                        plots.accuracy_figure(acc, x=x, metric=metric, window=window, window_days=window_days, fading=fading),
                        f"{metric} accuracy over {where}",
                        f"{metric} per system over {where}: windowed, cumulative prequential and fading-factor means.",
                    )
                )
        if run.timeline is not None and run.timeline.height:
            storage = cv.storage_timeline(run.timeline)
            figures.append(
                ("timelines", plots.storage_figure(storage), "storage and cost timeline",
                 "Memories stored, storage size, the system's own LLM tokens and cumulative ingest time over simulated days.")
            )
        lat = cv.latency_curves(df, window=window)
        if lat.height:
            figures.append(
                ("timelines", plots.latency_figure(lat), "latency timeline",
                 f"Rolling median and 95th percentile latency over the last {window} questions.")
            )
        cost = cv.cost_curves(df)
        if cost.height and any(c.startswith("cum_") for c in cost.columns):
            figures.append(
                ("timelines", plots.cost_figure(cost), "reader cost timeline",
                 "Cumulative reader prompt and completion tokens and reader LLM time.")
            )
    overview = _overview_table(run, rng)
    categories = _category_table(run, rng)
    if categories is not None and run.category:
        cat_rows = []
        for cat in sorted({str(c) for c in df[run.category].drop_nulls().to_list()}):
            for system in run.systems:
                s = df.filter((pl.col(run.category).cast(pl.Utf8) == cat) & (pl.col("system") == system))
                x = s[run.metric].cast(pl.Float64).to_numpy()
                scored = x[~np.isnan(x)]
                if scored.size:
                    lo, hi = bootstrap_ci(x, rng=rng, n_boot=1000)
                    cat_rows.append({"category": cat, "system": system, "mean": float(scored.mean()), "lo": lo, "hi": hi})
        if cat_rows:
            figures.append(
                ("categories", plots.bar_figure(pl.DataFrame(cat_rows), group="category", value="mean", lo="lo", hi="hi",
                                                ylabel=f"{run.metric} (%)"),
                 f"{run.metric} per category", f"{run.metric} per {run.category} and system with 95% bootstrap intervals.")
            )
    return _Built(tuple(summaries), overview, categories, _worst(run), tuple(figures))


def write_report(
    run_dir: str | Path,
    *,
    window: int = DEFAULT_WINDOW,
    window_days: float = DEFAULT_WINDOW_DAYS,
    fading: float = DEFAULT_FADING,
    n_boot: int = 2000,
) -> Path:
    """Write ``report.html`` and ``report.md`` into a run folder.

    Args:
        run_dir: a run folder (``memsim run``, ``memsim demo`` or ``memsim static``).
        window: questions in the windowed accuracy curve.
        window_days: simulated days in the time-windowed curve.
        fading: fading factor of the fading-factor curve.
        n_boot: bootstrap resamples per interval.

    Returns:
        Path of ``report.html``.

    Raises:
        UserError: the folder is not a readable run.
    """
    run = load_run(run_dir)
    built = _build(run, window=window, window_days=window_days, fading=fading, n_boot=n_boot)
    title = f"memsim report: {run.path.name}"
    sections: list[tuple[str, str, str]] = []
    spec_html = f"<p>{html.escape(_spec_summary(run))}</p><details><summary>spec.json</summary><pre class='spec'>{html.escape(json.dumps(run.spec, indent=2, default=str))}</pre></details>"
    sections.append(("spec", "Spec", spec_html))
    summary_html = ""
    for metric, frame in built.summaries:
        summary_html += f"<h3>Learning through use: {html.escape(metric)}</h3>" + _summary_table(frame).html()
    summary_html += "<h3>Overall</h3>" + built.overview.html()
    sections.append(("summary", "Summary", summary_html))
    for sid, title_s in (("curves", "Learning curves"), ("timelines", "Storage, latency and cost timelines")):
        figs = [f for f in built.figures if f[0] == sid]
        if figs:
            sections.append((sid, title_s, "".join(_img(svg, alt, cap) for _, svg, alt, cap in figs)))
    if built.categories is not None:
        figs = "".join(_img(svg, alt, cap) for s, svg, alt, cap in built.figures if s == "categories")
        sections.append(("categories", "Per category", built.categories.html() + figs))
    sections.append(("worst", "Worst questions per system", _worst_html(built.worst, run.metric)))
    out = run.path / "report.html"
    out.write_text(_page(title, sections), encoding="utf-8")

    md = [f"# {title}", "", _spec_summary(run), ""]
    for metric, frame in built.summaries:
        md += [f"## Learning through use: {metric}", "", format_markdown(frame), ""]
    md += ["## Overall", "", built.overview.markdown(), ""]
    if built.categories is not None:
        md += ["## Per category", "", built.categories.markdown(), ""]
    md += ["## Worst questions", "", _worst_md(built.worst, run.metric)]
    (run.path / "report.md").write_text("\n".join(md).rstrip() + "\n", encoding="utf-8")
    return out


# ---------------------------------------------------------------------------
# Comparing runs
# ---------------------------------------------------------------------------


def _run_label(run: RunData, others: Sequence[RunData]) -> str:
    names = [r.path.name for r in others]
    return run.path.name if names.count(run.path.name) == 1 else str(run.path)


def compare_runs(
    run_dirs: Sequence[str | Path],
    out_dir: str | Path,
    *,
    window: int = DEFAULT_WINDOW,
    fading: float = DEFAULT_FADING,
    n_boot: int = 2000,
) -> Path:
    """Compare several run folders; write ``compare.html`` and ``compare.md`` into ``out_dir``.

    Shows, per run and system, the headline metric and (longitudinal runs)
    the halves and difference in differences; across runs (seeds), the mean
    and 95% t-interval of each figure per system; and, with at least three
    systems in at least two runs, a Friedman ranking with Nemenyi post-hoc
    tests and a critical-difference diagram (runs as datasets).

    Returns:
        Path of ``compare.html``.

    Raises:
        UserError: no runs, or a folder is not a readable run.
    """
    if not run_dirs:
        raise UserError("compare: give at least one run folder")
    runs = [load_run(d) for d in run_dirs]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    figures: list[tuple[str, str, str]] = []
    curve_parts = []
    for run in runs:
        label = _run_label(run, runs)
        rng = stats_rng(run)
        if run.longitudinal:
            summary = learning_summary(scored_probes(run), metric=run.metric, control=run.control, rng=rng, n_boot=n_boot)
            for r in summary.iter_rows(named=True):
                x = run.probes.filter(pl.col("system") == r["system"])[run.metric].cast(pl.Float64)
                rows.append({"run": label, "system": r["system"], "metric": run.metric, "n": r["n"],
                             "overall": x.drop_nans().mean(), "first": r["first"], "second": r["second"],
                             "diff": r["diff"], "did": r["did"]})
            acc = cv.accuracy_curves(run.probes, metric=run.metric, window=window, fading=fading)
            curve_parts.append(acc.with_columns((pl.lit(label + " / ") + pl.col("system")).alias("system")))
        else:
            for system in run.systems:
                x = run.probes.filter(pl.col("system") == system)[run.metric].cast(pl.Float64).drop_nans()
                rows.append({"run": label, "system": system, "metric": run.metric, "n": x.len(),
                             "overall": x.mean(), "first": None, "second": None, "diff": None, "did": None})
    table = pl.DataFrame(rows, schema={"run": pl.Utf8, "system": pl.Utf8, "metric": pl.Utf8, "n": pl.Int64,
                                       "overall": pl.Float64, "first": pl.Float64, "second": pl.Float64,
                                       "diff": pl.Float64, "did": pl.Float64})
    per_run = _Table(
        ("run", "system", "metric", "n", "overall (%)", "1st half (%)", "2nd half (%)", "change (pp)", "DiD vs control (pp)"),
        tuple(
            (r["run"], r["system"], r["metric"], str(r["n"]), _pct(r["overall"]), _pct(r["first"]), _pct(r["second"]),
             _pp(r["diff"]), _pp(r["did"]))
            for r in table.iter_rows(named=True)
        ),
    )
    seed_rows = []
    for system in dict.fromkeys(table["system"].to_list()):
        part = table.filter(pl.col("system") == system)
        cells = [system]
        for col in ("overall", "first", "second", "diff", "did"):
            s = summarise_seeds(part[col].cast(pl.Float64).fill_null(math.nan).to_numpy())
            fmt = _pct if col in ("overall", "first", "second") else _pp
            cells.append("—" if s.n == 0 else f"{fmt(s.mean)} [{fmt(s.ci[0])}, {fmt(s.ci[1])}] (n={s.n})")
        seed_rows.append(tuple(cells))
    across = _Table(
        ("system", "overall (%)", "1st half (%)", "2nd half (%)", "change (pp)", "DiD vs control (pp)"),
        tuple(seed_rows),
        ("mean across runs with a 95% Student t interval; n = runs with a value (an interval needs n >= 2)",),
    )
    ranking_html = ""
    ranking_md = ""
    wide = table.pivot(on="run", index="system", values="overall", aggregate_function="first")
    if wide.height >= 3 and wide.width - 1 >= 2:
        complete = wide.drop_nulls()
        try:
            fr = friedman_ranking(complete)
        except UserError as exc:
            ranking_html = f"<p>No ranking: {html.escape(str(exc))}</p>"
            ranking_md = f"No ranking: {exc}"
        else:
            ranks = _Table(
                ("system", "mean rank (1 = best)"),
                tuple((s, f"{r:.2f}") for s, r in sorted(zip(fr.systems, fr.mean_ranks), key=lambda t: t[1])),
                (
                    f"{fr.test}: chi2 = {fr.statistic:.2f}, p = {fr.p_value:.3g}, N = {fr.n_datasets} runs, "
                    f"k = {fr.k} systems, effect size Kendall's W = {fr.kendall_w:.2f}; "
                    f"Nemenyi critical difference at alpha {fr.alpha:g} = {fr.cd:.2f}",
                ),
            )
            pairs = _Table(
                ("system A", "system B", "Nemenyi p", "mean rank difference"),
                tuple(
                    (a, b, f"{p:.3g}", f"{fr.mean_ranks[fr.systems.index(a)] - fr.mean_ranks[fr.systems.index(b)]:+.2f}")
                    for a, b, p in fr.pairwise_p
                ),
                (f"Nemenyi post-hoc (studentized range), N = {fr.n_datasets} runs; effect = difference in mean rank",),
            )
            figures.append(("ranking", critical_difference_plot(fr), "critical-difference diagram"))
            ranking_html = ranks.html() + pairs.html()
            ranking_md = ranks.markdown() + "\n\n" + pairs.markdown()
    if curve_parts:
        acc = pl.concat(curve_parts)
        figures.append(("curves", plots.accuracy_figure(acc, x="q_index", window=window, fading=fading,
                                                        metric=runs[0].metric), "accuracy over question index, all runs"))
    sections = [
        ("runs", "Runs", "<ul>" + "".join(f"<li>{html.escape(str(r.path))}: {html.escape(_spec_summary(r))}</li>" for r in runs) + "</ul>"),
        ("summary", "Summary per run", per_run.html()),
        ("seeds", "Across runs", across.html()),
    ]
    if ranking_html:
        sections.append(("ranking", "Ranking", ranking_html + "".join(_img(svg, alt, alt) for s, svg, alt in figures if s == "ranking")))
    curve_figs = [f for f in figures if f[0] == "curves"]
    if curve_figs:
        sections.append(("curves", "Learning curves", "".join(_img(svg, alt, alt) for _, svg, alt in curve_figs)))
    path = out / "compare.html"
    path.write_text(_page("memsim comparison", sections), encoding="utf-8")
    md = ["# memsim comparison", "", "## Summary per run", "", per_run.markdown(), "", "## Across runs", "", across.markdown()]
    if ranking_md:
        md += ["", "## Ranking", "", ranking_md]
    (out / "compare.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    return path


def _pp(v: Any) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:+.1f}"
