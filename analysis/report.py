"""Reports of run folders: one self-contained HTML page and a Markdown summary.

``write_report(run_dir)`` reads a run folder as the pipeline writes it
(``spec.json``, ``probes.parquet``, ``timeline.parquet``, ``metrics.json``,
``perf.json``) and writes ``report.html`` (every figure inline as an SVG
data URI; no scripts or styles from the network) and ``report.md`` (the
tables, for papers and pull requests) into the folder. Both run kinds get a
report: a longitudinal run adds the learning-through-use table, learning
curves and timelines; a static run (no question stream over time) gets its
tables per question kind.

The headline metric is the run's own (``RunSpec.metric``). The overall and
per-kind scores and their intervals, storage and safety counts come from
``metrics.json``, the one summariser's output (``analysis.summary``); a
folder without ``metrics.json`` is summarised in memory. The halves table
(first and second half, change, DiD against the static control, paired
test) is ``analysis.stats.learning_summary`` on the rows, drawn from the
run's ``stats`` stream, so it is reproducible. Latencies come from
``perf.json`` (wall-clock, not part of the deterministic metrics).

``compare_runs(run_dirs, out_dir)`` does the same across runs: summary per
run, mean and t-interval across seeds, and a Friedman ranking with a
critical-difference diagram when there are enough systems and runs.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from analysis import curves as cv
from analysis import plots
from analysis.stats import (
    critical_difference_plot,
    format_markdown,
    format_table,
    friedman_ranking,
    learning_summary,
    summarise_seeds,
)
from sim.errors import UserError
from sim.spec import RunSpec, read_spec

__all__ = [
    "RunData",
    "load_run",
    "halves_table",
    "scored_probes",
    "stats_rng",
    "summary_text",
    "write_report",
    "compare_runs",
    "DEFAULT_WINDOW",
    "DEFAULT_WINDOW_DAYS",
    "DEFAULT_FADING",
]

DEFAULT_WINDOW = 50
"""Questions in the windowed accuracy curve."""
DEFAULT_WINDOW_DAYS = 30.0
"""Simulated days in the time-windowed accuracy curve."""
DEFAULT_FADING = 0.98
"""Fading factor of the fading-factor accuracy curve."""

_WORST = 10
_SHOWN_MEMORIES = 5
_REQUIRED = ("system", "episode", "user_id", "question_id", "q_index", "kind", "excluded", "error")
"""Probe columns a report reads besides the metric (``sim.recorder.PROBE_SCHEMA``)."""


@dataclass(frozen=True, slots=True)
class RunData:
    """A run folder read into memory."""

    path: Path
    """The run folder."""
    spec: RunSpec
    """``spec.json``."""
    probes: pl.DataFrame
    """``probes.parquet``: one row per question per system."""
    timeline: pl.DataFrame
    """``timeline.parquet`` (empty when the folder has none)."""
    metrics: dict[str, Any]
    """``metrics.json`` (computed by ``analysis.summary.summarise`` when the folder has none)."""
    perf: dict[str, Any]
    """``perf.json``: wall-clock figures (empty when absent)."""

    @property
    def metric(self) -> str:
        """The headline column (``spec.metric``)."""
        return self.spec.metric

    @property
    def longitudinal(self) -> bool:
        """True for runs with a question stream over time (learning table and curves apply)."""
        return self.spec.kind == "longitudinal"

    @property
    def systems(self) -> list[str]:
        """Labels of the systems that have rows, in the spec's order."""
        present = set(self.probes["system"].to_list()) if self.probes.height else set()
        listed = [s.display for s in self.spec.systems]
        return [s for s in listed if s in present] + sorted(present - set(listed))

    @property
    def control(self) -> str | None:
        """The static control's label in a longitudinal run that has it; static runs have none."""
        return self.spec.control if self.longitudinal and self.spec.control in self.systems else None

    def entry(self, system: str) -> dict[str, Any]:
        """``metrics.json``'s figures of one system (empty when it has none)."""
        return dict(self.metrics.get("systems", {}).get(system) or {})


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except OSError as exc:
        raise UserError(f"{path}: unreadable ({exc.strerror})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object")
    return data


def _parquet(path: Path) -> pl.DataFrame:
    try:
        return pl.read_parquet(path)
    except Exception as exc:  # polars raises several types for corrupt files
        raise UserError(f"{path}: unreadable ({type(exc).__name__})") from None


def load_run(run_dir: str | Path) -> RunData:
    """Read a run folder (longitudinal or static).

    Raises:
        UserError: the folder is not a run folder (no ``spec.json``), the run
            did not finish (no ``probes.parquet``), a file is unreadable, the
            rows lack the spec's metric or a column a report reads, or
            ``metrics.json`` was made for another metric.
    """
    path = Path(run_dir)
    if not path.is_dir():
        raise UserError(f"{path}: no such run folder")
    if not (path / "spec.json").is_file():
        raise UserError(f"{path}: missing spec.json (not a run folder)")
    spec = read_spec(path)
    if not (path / "probes.parquet").is_file():
        raise UserError(
            f"{path}: missing probes.parquet (the run did not finish; rerun its command with the same --out to resume)"
        )
    probes = _parquet(path / "probes.parquet")
    missing = [c for c in _REQUIRED if c not in probes.columns]
    if missing:
        raise UserError(f"{path / 'probes.parquet'}: missing column(s) {', '.join(missing)}")
    if spec.metric not in probes.columns:
        scores = [c for c, t in probes.schema.items() if t.is_numeric() and ("@" in c or c.startswith("answer_"))]
        raise UserError(
            f"{path / 'probes.parquet'}: no column {spec.metric!r} (the metric of spec.json); "
            f"score columns: {', '.join(scores) or 'none'}"
        )
    timeline_path = path / "timeline.parquet"
    if timeline_path.is_file():
        timeline = _parquet(timeline_path)
    else:
        from sim.recorder import TIMELINE_SCHEMA

        timeline = pl.DataFrame(schema=TIMELINE_SCHEMA)
    perf = _read_json(path / "perf.json") if (path / "perf.json").is_file() else {}
    if (path / "metrics.json").is_file():
        metrics = _read_json(path / "metrics.json")
        if metrics.get("metric") != spec.metric:
            raise UserError(
                f"{path / 'metrics.json'}: metric {metrics.get('metric')!r} is not the metric of spec.json "
                f"({spec.metric!r}); remove metrics.json to have it recomputed from the rows"
            )
    else:
        # metrics.json is recomputable from the rows: summarise in memory, write nothing but the report.
        from analysis.summary import summarise

        if not (path / "run.json").is_file():
            raise UserError(f"{path}: missing metrics.json and run.json (not a finished run folder)")
        summary = summarise(spec, probes, timeline, _read_json(path / "run.json"))
        metrics = summary.metrics
        perf = perf or summary.timings
    return RunData(path=path, spec=spec, probes=probes, timeline=timeline, metrics=metrics, perf=perf)


def stats_rng(run: RunData) -> np.random.Generator:
    """A fresh copy of the generator the summariser draws from (the run's ``stats`` stream)."""
    from sim.runner import random_streams

    return random_streams(run.spec.seed)["stats"]


def scored_probes(run: RunData) -> pl.DataFrame:
    """Probe rows without a system error: a failed retrieval is not a scored question."""
    return run.probes.filter(pl.col("error").is_null())


def halves_table(run: RunData, *, metric: str | None = None, n_boot: int | None = None) -> pl.DataFrame | None:
    """First and second half, change and DiD against the static control per system (``learning_summary``).

    Args:
        run: a longitudinal run (static runs have no question stream over time: None).
        metric: the column (default the run's metric).
        n_boot: bootstrap resamples (default the spec's).

    Returns:
        The table, or None for a static run or a run without scored rows.
    """
    df = scored_probes(run)
    metric = metric or run.metric
    if not run.longitudinal or _scored_n(df, metric) == 0:
        return None
    return learning_summary(df, metric=metric, control=run.control, rng=stats_rng(run), n_boot=n_boot or run.spec.n_boot)


def _scored_rows(run: RunData) -> pl.DataFrame:
    """Rows that count in scores: no error and not excluded (as in ``metrics.json``)."""
    return scored_probes(run).filter(pl.col("excluded").is_null())


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _pct(v: Any) -> str:
    return "—" if _missing(v) else f"{100 * v:.1f}"


def _pp(v: Any) -> str:
    return "—" if _missing(v) else f"{100 * v:+.1f}"


def _num(v: Any, digits: int = 1) -> str:
    return "—" if _missing(v) else f"{v:,.{digits}f}"


def _ci(v: Any, lo: Any, hi: Any) -> str:
    if _missing(v):
        return "—"
    if _missing(lo) or _missing(hi):
        return _pct(v)
    return f"{_pct(v)} [{_pct(lo)}, {_pct(hi)}]"


def _score_ci(table: Mapping[str, Any], col: str) -> str:
    """A score of a ``metrics.json`` table (overall or one kind) with its interval."""
    score = table.get("scores", {}).get(col) or {}
    return _ci(score.get("mean"), score.get("lo"), score.get("hi"))


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


def _score_columns(run: RunData) -> list[str]:
    """Columns of the overall table: the metric, its cut-off's siblings, other scores, answer judges.

    Columns nobody scored (no changed facts, no reader) are left out: they would only show dashes.
    """
    from analysis.summary import score_columns

    tables = [run.entry(s).get("overall", {}) for s in run.systems]
    # The scorers' own order (metrics.json sorts its keys).
    ordered = score_columns(run.spec, run.probes)
    scored = [c for c in ordered if any((t.get("scores", {}).get(c) or {}).get("mean") is not None for t in tables)]
    cut = run.metric.partition("@")[2] or str(run.spec.k)
    picked = [run.metric]
    picked += [c for c in scored if "@" in c and c.partition("@")[2] == cut and not c.startswith("answer_")]
    picked += [c for c in scored if "@" not in c and not c.startswith("answer_")]
    picked += [c for c in scored if c.startswith("answer_")]
    return list(dict.fromkeys(picked))


def _scored_n(rows: pl.DataFrame, col: str) -> int:
    return rows[col].cast(pl.Float64).drop_nulls().drop_nans().len() if col in rows.columns else 0


def _llm_totals(run: RunData, system: str) -> tuple[int, int] | None:
    """The system's own LLM calls and tokens over the run (None when it made none)."""
    tl = run.timeline.filter(pl.col("system") == system) if run.timeline.height else run.timeline
    if tl.height == 0:
        return None
    if run.spec.fresh_per_episode:
        # Fresh systems per episode: counters restart, so each episode's last row adds up.
        last = tl.group_by("episode", maintain_order=True).last()
    else:
        last = tl.tail(1)
    calls = int(last["llm_calls"].fill_null(0).sum())
    tokens = int(last["tokens"].fill_null(0).sum())
    return (calls, tokens) if calls or tokens else None


def _overview_table(run: RunData, halves: pl.DataFrame | None) -> _Table:
    """Each score per system with its interval (``metrics.json``), plus latency, storage and cost."""
    from analysis.power import mde_from_interval

    mde = {}
    if halves is not None:
        mde = {r["system"]: mde_from_interval(r["did_lo"], r["did_hi"]) for r in halves.iter_rows(named=True)}
    rows_all = _scored_rows(run)
    cols = _score_columns(run)
    llm = {s: _llm_totals(run, s) for s in run.systems}
    headers = ["system", "questions", "scored", *[f"{c} (%)" for c in cols]]
    if run.longitudinal:
        headers.append("DiD MDE (pp)")
    headers += ["retrieve median (ms)", "retrieve p95 (ms)", "final items", "final storage (MiB)"]
    if any(llm.values()):
        headers += ["system LLM calls", "system LLM tokens"]
    rows = []
    for system in run.systems:
        entry = run.entry(system)
        overall = entry.get("overall", {})
        part = rows_all.filter(pl.col("system") == system)
        cells = [system, str(overall.get("questions", "—")), str(overall.get("scored", "—"))]
        cells += [f"{_score_ci(overall, c)} (n={_scored_n(part, c)})" for c in cols]
        if run.longitudinal:
            cells.append(_pct(mde.get(system)))
        latency = (run.perf.get("systems", {}).get(system) or {}).get("retrieve_ms") or {}
        cells += [_num(latency.get("p50"), 2), _num(latency.get("p95"), 2)]
        final_bytes = entry.get("final_bytes")
        cells += [_num(entry.get("final_items"), 0), "—" if final_bytes is None else _num(final_bytes / 2**20, 2)]
        if any(llm.values()):
            totals = llm[system]
            cells += ["—", "—"] if totals is None else [_num(totals[0], 0), _num(totals[1], 0)]
        rows.append(tuple(cells))
    episodes = max((run.entry(s).get("overall", {}).get("episodes", 0) for s in run.systems), default=0)
    unit = "users" if run.longitudinal else "episodes"
    notes = [
        f"[lo, hi]: 95% percentile bootstrap interval, whole {unit} resampled ({episodes}); from metrics.json",
        "n: questions scored for that column (NaN = unscored, excluded); scored: questions not excluded",
        "latencies are wall-clock (perf.json)",
    ]
    if run.longitudinal:
        notes.append("DiD MDE: smallest DiD against the control this run could detect at 80% power")
    excluded = {s: run.entry(s).get("overall", {}).get("excluded") for s in run.systems}
    for system, reasons in excluded.items():
        if reasons:
            notes.append(f"{system}: excluded from scores: " + ", ".join(f"{r} {n}" for r, n in reasons.items()))
    failures = run.metrics.get("failures") or []
    if failures:
        notes.append(f"{len(failures)} system failure(s) recorded (run.json)")
    return _Table(tuple(headers), tuple(rows), tuple(notes))


def _kinds(run: RunData) -> list[str]:
    kinds: dict[str, None] = {}
    for system in run.systems:
        kinds.update(dict.fromkeys(run.entry(system).get("per_kind", {})))
    return sorted(kinds, key=lambda k: (k == "", k))


def _halves(rows: pl.DataFrame, metric: str) -> tuple[str, str]:
    """First and second half of a metric on some rows, split at their median ``q_index``."""
    sc = rows.filter(pl.col(metric).is_not_null() & pl.col(metric).cast(pl.Float64).is_not_nan())
    if sc.height == 0:
        return "—", "—"
    split = float(np.median(sc["q_index"].to_numpy()))
    a = sc.filter(pl.col("q_index") < split)[metric].cast(pl.Float64)
    b = sc.filter(pl.col("q_index") >= split)[metric].cast(pl.Float64)
    return (
        f"{_pct(a.mean()) if a.len() else '—'} (n={a.len()})",
        f"{_pct(b.mean()) if b.len() else '—'} (n={b.len()})",
    )


def _category_table(run: RunData) -> _Table | None:
    """Per question kind and system: the metric and answer judges with intervals (``metrics.json``)."""
    kinds = _kinds(run)
    if not kinds:
        return None
    cols = [run.metric, *[c for c in _score_columns(run) if c.startswith("answer_") and c != run.metric]]
    headers = ["kind", "system", "questions", "scored", *[f"{c} (%)" for c in cols]]
    if run.longitudinal:
        headers += [f"{run.metric} 1st half (%)", f"{run.metric} 2nd half (%)"]
    headers.append("excluded")
    rows_all = _scored_rows(run)
    rows = []
    for kind in kinds:
        for system in run.systems:
            table = run.entry(system).get("per_kind", {}).get(kind)
            if not table:
                continue
            cells = [kind or "(none)", system, str(table.get("questions", "—")), str(table.get("scored", "—"))]
            cells += [_score_ci(table, c) for c in cols]
            if run.longitudinal:
                part = rows_all.filter((pl.col("system") == system) & (pl.col("kind") == kind))
                cells += list(_halves(part, run.metric))
            excluded = table.get("excluded") or {}
            cells.append(", ".join(f"{r} {n}" for r, n in excluded.items()) or "—")
            rows.append(tuple(cells))
    notes = ["[lo, hi]: 95% percentile bootstrap interval over the kind's questions, whole episodes resampled"]
    if run.longitudinal:
        notes.append("halves split at the median question index of the kind's scored questions")
    return _Table(tuple(headers), tuple(rows), tuple(notes))


def _category_bars(run: RunData) -> pl.DataFrame:
    rows = []
    for kind in _kinds(run):
        for system in run.systems:
            score = (run.entry(system).get("per_kind", {}).get(kind) or {}).get("scores", {}).get(run.metric) or {}
            if score.get("mean") is not None:
                rows.append({"category": kind or "(none)", "system": system, "mean": score["mean"],
                             "lo": score.get("lo"), "hi": score.get("hi")})
    return pl.DataFrame(rows, schema={"category": pl.Utf8, "system": pl.Utf8, "mean": pl.Float64,
                                      "lo": pl.Float64, "hi": pl.Float64})


def _as_list(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    if isinstance(v, pl.Series):
        return [str(x) for x in v.to_list()]
    return [str(v)]


def _worst(run: RunData) -> dict[str, list[dict[str, Any]]]:
    """Lowest-scoring questions per system: lowest metric, then lowest judge, then evidence found deepest."""
    df = _scored_rows(run)
    judges = cv.answer_metrics(df)
    answer_col = "answer" if "answer" in df.columns else None
    out: dict[str, list[dict[str, Any]]] = {}
    for system in run.systems:
        part = df.filter(pl.col("system") == system).filter(
            pl.col(run.metric).is_not_null() & pl.col(run.metric).cast(pl.Float64).is_not_nan()
        )
        keys = [pl.col(run.metric)]
        desc = [False]
        if judges:
            keys.append(pl.col(judges[0]).cast(pl.Float64).fill_nan(None))
            desc.append(False)
        if "first_rank" in df.columns:
            keys.append(pl.col("first_rank").fill_null(10**9))
            desc.append(True)
        keys.append(pl.col("question_id"))
        desc.append(False)
        part = part.sort(keys, descending=desc, nulls_last=True).head(_WORST)
        out[system] = [
            {
                "question_id": r.get("question_id"),
                "category": r.get("kind"),
                "score": r.get(run.metric),
                "question": r.get("question") or "",
                "gold": r.get("gold") or "",
                "answer": r.get(answer_col) if answer_col else None,
                "judges": {j: r.get(j) for j in judges},
                "first_rank": r.get("first_rank"),
                "memories": _as_list(r.get("retrieved_text"))[:_SHOWN_MEMORIES],
                "error": r.get("error"),
            }
            for r in part.iter_rows(named=True)
        ]
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
    if run.longitudinal:
        bits = [f"longitudinal run of scenario {spec.scenario.name}", f"seed {spec.seed}"]
    else:
        bits = [f"static run of {spec.scenario.name} (fresh systems per episode, questions after ingest)",
                f"seed {spec.seed}"]
    bits.append(f"k {spec.k}")
    bits.append(f"metric {run.metric}")
    bits.append(f"systems {', '.join(run.systems)}")
    if run.control:
        bits.append(f"control {run.control}")
    if run.probes.height:
        if run.longitudinal:
            bits.append(f"{run.probes['user_id'].n_unique()} user(s)")
        else:
            bits.append(f"{run.probes['episode'].n_unique()} episode(s)")
    return "; ".join(bits)


@dataclass(frozen=True, slots=True)
class _Built:
    """Everything a report shows, computed once."""

    summaries: tuple[tuple[str, pl.DataFrame], ...]
    overview: _Table
    categories: _Table | None
    worst: dict[str, list[dict[str, Any]]]
    figures: tuple[tuple[str, str, str, str], ...]  # (section, svg, alt, caption)


def _learning_tables(run: RunData, n_boot: int | None) -> list[tuple[str, pl.DataFrame]]:
    """The halves table of the headline metric, then one per answer judge."""
    out: list[tuple[str, pl.DataFrame]] = []
    for metric in [run.metric, *[m for m in cv.answer_metrics(run.probes) if m != run.metric]]:
        table = halves_table(run, metric=metric, n_boot=n_boot)
        if table is not None:
            out.append((metric, table))
    return out


def _build(run: RunData, *, window: int, window_days: float, fading: float, n_boot: int | None) -> _Built:
    summaries: list[tuple[str, pl.DataFrame]] = []
    figures: list[tuple[str, str, str, str]] = []
    df = scored_probes(run)
    if run.longitudinal and df.height:
        summaries = _learning_tables(run, n_boot)
        for metric in [run.metric, *[m for m in cv.answer_metrics(df) if m != run.metric]]:
            if _scored_n(df, metric) == 0:
                continue
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
        if run.timeline.height:
            storage = cv.storage_timeline(run.timeline)
            figures.append(
                ("timelines", plots.storage_figure(storage), "storage and cost timeline",
                 "Memories stored, storage size, the system's own LLM tokens and cumulative ingest time over simulated days.")
            )
        lat = cv.latency_curves(df, window=window)
        if lat.height:
            figures.append(
                ("timelines", plots.latency_figure(lat), "latency timeline",
                 f"Rolling median and 95th percentile latency over the last {window} questions (wall-clock).")
            )
        cost = cv.cost_curves(df)
        if cost.height and any(c.startswith("cum_") for c in cost.columns):
            figures.append(
                ("timelines", plots.cost_figure(cost), "reader cost timeline",
                 "Cumulative reader prompt and completion tokens and reader LLM time.")
            )
    categories = _category_table(run)
    bars = _category_bars(run)
    if categories is not None and bars.height:
        figures.append(
            ("categories", plots.bar_figure(bars, group="category", value="mean", lo="lo", hi="hi", ylabel=f"{run.metric} (%)"),
             f"{run.metric} per kind", f"{run.metric} per question kind and system with 95% bootstrap intervals.")
        )
    headline = summaries[0][1] if summaries and summaries[0][0] == run.metric else None
    return _Built(tuple(summaries), _overview_table(run, headline), categories, _worst(run), tuple(figures))


def summary_text(run: RunData, *, n_boot: int | None = None) -> str:
    """The run's headline tables as plain text: the halves table (longitudinal) or the per-kind tables (static)."""
    halves = halves_table(run, n_boot=n_boot)
    if halves is not None:
        return format_table(halves)
    from analysis.summary import format_tables

    return "\n\n".join(f"{system}\n{format_tables(run.metrics, system)}" for system in run.systems)


def write_report(
    run_dir: str | Path | RunData,
    *,
    window: int = DEFAULT_WINDOW,
    window_days: float = DEFAULT_WINDOW_DAYS,
    fading: float = DEFAULT_FADING,
    n_boot: int | None = None,
) -> Path:
    """Write ``report.html`` and ``report.md`` into a run folder.

    Args:
        run_dir: a run folder (``memsim run``, ``demo``, ``static``, ``rerun``), or one already loaded.
        window: questions in the windowed accuracy curve.
        window_days: simulated days in the time-windowed curve.
        fading: fading factor of the fading-factor curve.
        n_boot: bootstrap resamples of the halves tables (default: the spec's); the overall and
            per-kind intervals are the ones in ``metrics.json``.

    Returns:
        Path of ``report.html``.

    Raises:
        UserError: the folder is not a readable run.
    """
    run = run_dir if isinstance(run_dir, RunData) else load_run(run_dir)
    built = _build(run, window=window, window_days=window_days, fading=fading, n_boot=n_boot)
    title = f"memsim report: {run.path.name}"
    sections: list[tuple[str, str, str]] = []
    spec_json = html.escape(json.dumps(run.spec.to_json(), indent=2, sort_keys=True))
    spec_html = (
        f"<p>{html.escape(_spec_summary(run))}</p>"
        f"<details><summary>spec.json</summary><pre class='spec'>{spec_json}</pre></details>"
    )
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
        sections.append(("categories", "Per question kind", built.categories.html() + figs))
    sections.append(("worst", "Worst questions per system", _worst_html(built.worst, run.metric)))
    out = run.path / "report.html"
    out.write_text(_page(title, sections), encoding="utf-8")

    md = [f"# {title}", "", _spec_summary(run), ""]
    for metric, frame in built.summaries:
        md += [f"## Learning through use: {metric}", "", format_markdown(frame), ""]
    md += ["## Overall", "", built.overview.markdown(), ""]
    if built.categories is not None:
        md += ["## Per question kind", "", built.categories.markdown(), ""]
    md += ["## Worst questions", "", _worst_md(built.worst, run.metric)]
    (run.path / "report.md").write_text("\n".join(md).rstrip() + "\n", encoding="utf-8")
    return out


# ---------------------------------------------------------------------------
# Comparing runs
# ---------------------------------------------------------------------------


def _run_label(run: RunData, others: Sequence[RunData]) -> str:
    names = [r.path.name for r in others]
    return run.path.name if names.count(run.path.name) == 1 else str(run.path)


def _per_run_rows(run: RunData, label: str) -> list[dict[str, Any]]:
    """One row per system of a run: the metric overall (``metrics.json``) and, for longitudinal runs, halves and DiD."""
    rows = _scored_rows(run)
    halves = halves_table(run)
    learning = {r["system"]: r for r in halves.iter_rows(named=True)} if halves is not None else {}
    out = []
    for system in run.systems:
        score = run.entry(system).get("overall", {}).get("scores", {}).get(run.metric) or {}
        lr = learning.get(system, {})
        out.append({
            "run": label, "system": system, "metric": run.metric,
            "n": _scored_n(rows.filter(pl.col("system") == system), run.metric),
            "overall": score.get("mean"), "first": lr.get("first"), "second": lr.get("second"),
            "diff": lr.get("diff"), "did": lr.get("did"),
        })
    return out


def compare_runs(
    run_dirs: Sequence[str | Path],
    out_dir: str | Path,
    *,
    window: int = DEFAULT_WINDOW,
    fading: float = DEFAULT_FADING,
) -> Path:
    """Compare several run folders; write ``compare.html`` and ``compare.md`` into ``out_dir``.

    Shows, per run and system, the headline metric (``metrics.json``) and,
    for longitudinal runs, the halves and difference in differences against
    the static control (``halves_table``); across runs (seeds), the mean and 95% t-interval of each figure per
    system; and, with at least three systems in at least two runs, a
    Friedman ranking with Nemenyi post-hoc tests and a critical-difference
    diagram (runs as datasets).

    Returns:
        Path of ``compare.html``.

    Raises:
        UserError: no runs, a folder is not a readable run, or the runs score different metrics.
    """
    if not run_dirs:
        raise UserError("compare: give at least one run folder")
    runs = [load_run(d) for d in run_dirs]
    metrics = dict.fromkeys(r.metric for r in runs)
    if len(metrics) > 1:
        named = ", ".join(f"{r.path}: {r.metric}" for r in runs)
        raise UserError(f"compare: the runs have different metrics (spec.json metric: {named}); compare runs of one metric")
    metric = runs[0].metric
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    figures: list[tuple[str, str, str]] = []
    curve_parts = []
    for run in runs:
        label = _run_label(run, runs)
        rows.extend(_per_run_rows(run, label))
        if run.longitudinal and run.probes.height:
            acc = cv.accuracy_curves(scored_probes(run), metric=metric, window=window, fading=fading)
            curve_parts.append(acc.with_columns((pl.lit(label + " / ") + pl.col("system")).alias("system")))
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
("overall: each run's metrics.json; halves and DiD: analysis.stats.learning_summary on its rows; "
         "n = questions scored on the metric",),
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
                    f"ranked on {metric}",
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
        figures.append(("curves", plots.accuracy_figure(acc, x="q_index", window=window, fading=fading, metric=metric),
                        "accuracy over question index, all runs"))
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
