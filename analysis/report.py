"""Reports of run folders: one self-contained HTML page (``report.html.j2``) and a Markdown summary.

``write_report(run_dir)`` renders what the summariser computed (``metrics.json``,
``memsim.analysis.summary``; a folder without it is summarised in memory) and
computes no statistics of its own. A longitudinal run's report leads with
learning through use: the contrasts of every feedback-using system
(learning from feedback against the best content-ignoring arm, then against
each arm; per half with interval, p and design-based MDE, the DiD, the
stale>cur contrast), each
arm's halves of the metric and of stale>cur (one pair of tables per answer
judge) and the gain over the twin over simulated time with its 95% band. Then
come the overall scores, the metric's curves, storage/latency/cost timelines, one
table of systems x question kinds shaded by value, and the worst questions.
Latencies come from ``perf.json`` (wall-clock). ``compare_runs(run_dirs,
out_dir)`` does the same across runs: summary per run, mean and t-interval
across seeds, and a Friedman ranking with a critical-difference diagram.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from memsim.analysis import curves as cv
from memsim.analysis import plots
from memsim.analysis.learning import (
    CONTRASTS,
    MIN_USERS,
    arm_headers,
    contrast_headers,
    contrast_rows,
    format_diff,
    format_learning,
    format_p,
    has_learners,
    learning_header,
    learning_notes,
    learning_title,
)
from memsim.analysis.load import RunData, label_arms, read_run
from memsim.analysis.stats import (
    critical_difference_plot,
    friedman_ranking,
    summarise_seeds,
)
from memsim.analysis.summary import GAIN_WINDOW_DAYS as _GAIN_DAYS
from memsim.analysis.summary import format_tables, score_columns, with_metrics
from memsim.core.errors import UserError

__all__ = [
    "RunData",
    "load_run",
    "scored_probes",
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


def load_run(run_dir: str | Path) -> RunData:
    """Read a run folder with its ``metrics.json`` (summarised in memory when the folder has none).

    Raises:
        UserError: see ``memsim.analysis.load.read_run`` and ``memsim.analysis.summary.with_metrics``.
    """
    return with_metrics(read_run(run_dir))


def scored_probes(run: RunData) -> pl.DataFrame:
    """Probe rows without a system error: a failed retrieval is not a scored question."""
    return run.probes.filter(pl.col("error").is_null())


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
    row_classes: tuple[str, ...] = ()
    """CSS class per row (e.g. ``twin``); empty for none."""

    def markdown(self) -> str:
        out = ["| " + " | ".join(self.headers) + " |", "|" + "|".join("---" for _ in self.headers) + "|"]
        out += ["| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in r) + " |" for r in self.rows]
        if self.notes:
            out.append("")
            out += [f"- {n}" for n in self.notes]
        return "\n".join(out)


def _score_columns(run: RunData) -> list[str]:
    """Columns of the overall table: the metric, its cut-off's siblings, other scores, answer judges.

    Columns nobody scored (no changed facts, no reader) are left out: they would only show dashes.
    """

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


def _judge_header(run: RunData, col: str) -> str:
    """A score column's header; a judge's carries its mark (unreliable, self-judging, paraphrase)."""
    mark = ((run.metrics.get("judges") or {}).get(col) or {}).get("mark")
    return f"{col} (%) [{mark}]" if mark else f"{col} (%)"


def _answers_table(run: RunData) -> _Table | None:
    """Every judge side by side per system: accuracy, judged, unjudged with reasons, abstention, mark; agreement below."""
    marks = run.metrics.get("judges") or {}
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for system in _family_order(run):
        table = run.entry(system).get("answers")
        if not table:
            continue
        for col, j in table["judges"].items():
            ab = j.get("abstention") or {}
            reasons = ", ".join(f"{r} {n}" for r, n in (j.get("unjudged_reasons") or {}).items())
            rows.append((
                system,
                col.removeprefix("answer_"),
                _pct(j.get("accuracy")),
                str(j.get("judged", 0)),
                f"{j.get('unjudged', 0)}" + (f" ({reasons})" if reasons else ""),
                "—" if not ab.get("questions") else f"{_pct(ab.get('accuracy'))} ({ab.get('judged', 0)}/{ab['questions']})",
                (marks.get(col) or {}).get("mark", ""),
            ))
        for pair in table.get("agreement", []):
            kappa = "—" if pair.get("kappa") is None else f"{pair['kappa']:.3f}"
            notes.append(
                f"{system}: {pair['a'].removeprefix('answer_')} vs {pair['b'].removeprefix('answer_')}: agreement "
                f"{_pct(pair.get('agreement'))}%, kappa {kappa} ({pair['n']} answers judged by both)"
            )
        if table.get("spread") is not None:
            notes.append(f"{system}: spread of accuracy across judges {100 * table['spread']:.1f} pp")
    if not rows:
        return None
    notes.append(
        "accuracy over judged answers; unjudged answers are counted with their reason, never scored; abstention "
        "questions are judged with the abstention rubric; a judge below 90% on memsim judge-check is unreliable "
        "(a deterministic one on its file-free items)"
    )
    headers = ("system", "judge", "accuracy (%)", "judged", "unjudged", "abstention (%)", "mark")
    return _Table(headers, tuple(rows), tuple(notes))


def _overview_table(run: RunData) -> _Table:
    """Each score per system with its interval (``metrics.json``), plus latency, storage and cost."""
    rows_all = _scored_rows(run)
    cols = _score_columns(run)
    order = _family_order(run)
    llm = {s: (run.entry(s).get("system_llm_calls"), run.entry(s).get("system_llm_tokens")) for s in order}
    any_llm = any(c is not None for c, _ in llm.values())
    headers = ["system", "questions", "scored", *[_judge_header(run, c) for c in cols]]
    headers += ["retrieve median (ms)", "retrieve p95 (ms)", "final items", "final storage (MiB)"]
    if any_llm:
        headers += ["system LLM calls", "system LLM tokens"]
    # A world whose users ask in their own words to forget a topic: how often its turns still surface.
    in_words = {s: run.entry(s).get("forgotten_in_words") for s in order}
    if any(in_words.values()):
        headers += ["forgotten in words, still retrieved (%)"]
    rows = []
    for system in order:
        entry = run.entry(system)
        overall = entry.get("overall", {})
        part = rows_all.filter(pl.col("system") == system)
        cells = [system, str(overall.get("questions", "—")), str(overall.get("scored", "—"))]
        # n is shown only where a column scored fewer questions than the system answered (NaN = unscored).
        cells += [
            _score_ci(overall, c) + ("" if _scored_n(part, c) == overall.get("scored") else f" (n={_scored_n(part, c)})")
            for c in cols
        ]
        latency = (run.perf.get("systems", {}).get(system) or {}).get("retrieve_ms") or {}
        cells += [_num(latency.get("p50"), 2), _num(latency.get("p95"), 2)]
        final_bytes = entry.get("final_bytes")
        cells += [_num(entry.get("final_items"), 0), "—" if final_bytes is None else _num(final_bytes / 2**20, 2)]
        if any_llm:
            cells += [_num(v, 0) for v in llm[system]]
        if any(in_words.values()):
            f = in_words[system]
            cells += ["—" if not f else f"{_num(100 * f['share'], 1)} ({f['retrieving']}/{f['questions']})"]
        rows.append(tuple(cells))
    episodes = max((run.entry(s).get("overall", {}).get("episodes", 0) for s in run.systems), default=0)
    unit = "users" if run.longitudinal else "episodes"
    notes = [
        f"[lo, hi]: 95% percentile bootstrap interval, whole {unit} resampled ({episodes}); from metrics.json",
        "(n=...): questions scored for that column where fewer than 'scored' (NaN = unscored, excluded); "
        "scored: questions not excluded",
        "latencies are wall-clock (perf.json)",
    ]
    if any(in_words.values()):
        notes.append("forgotten in words, still retrieved: of the questions asked after the user asked in their own "
                     "words to forget a topic (no API deletion), the share whose top k still held a turn that told "
                     "it (by provenance)")
    excluded = {s: run.entry(s).get("overall", {}).get("excluded") for s in run.systems}
    for system, reasons in excluded.items():
        if reasons:
            notes.append(f"{system}: excluded from scores: " + ", ".join(f"{r} {n}" for r, n in reasons.items()))
    failures = run.metrics.get("failures") or []
    if failures:
        notes.append(f"{len(failures)} system failure(s) recorded (run.json)")
    if run.info.get("llm"):  # the reader's and judges' calls, cached replies included (run.json llm)
        from memsim.sim.answer.setup import format_cost

        notes.append(format_cost(run.info["llm"]))
    return _Table(tuple(headers), tuple(rows), tuple(notes))


# ---------------------------------------------------------------------------
# Learning through use (the lead): the twin table and the gain curve
# ---------------------------------------------------------------------------


def _twins(run: RunData) -> dict[str, str]:
    """System -> its twin's label (``metrics.json``), for systems with rows."""
    return {s: t for s, t in (run.metrics.get("twins") or {}).items() if s in run.systems and t in run.systems}


def _placebos(run: RunData) -> dict[str, str]:
    """Placebo label -> the twin it is compared with (``metrics.json``)."""
    return {p: t for p, t in (run.metrics.get("placebos") or {}).items() if p in run.systems and t in run.systems}


def _arms(run: RunData) -> dict[str, dict[str, str]]:
    """System -> ``{role: label}`` of its content-ignoring arms (``metrics.json``'s ``arms``, else twins and placebos)."""
    recorded = run.metrics.get("arms")
    if recorded is None:
        placebo_of = {t: p for p, t in _placebos(run).items()}
        recorded = {s: {"twin": t, **({"placebo": placebo_of[t]} if t in placebo_of else {})}
                    for s, t in _twins(run).items()}
    return {s: {r: lab for r, lab in fam.items() if lab in run.systems} for s, fam in recorded.items()
            if s in run.systems}


def _family_order(run: RunData) -> list[str]:
    """Systems in the spec's order, each followed by its twin, placebo and constant arms (a family reads as one block)."""
    arms = _arms(run)
    members = {lab for fam in arms.values() for lab in fam.values()}
    out: list[str] = []
    for s in run.systems:
        if s in members:
            continue
        out.append(s)
        out.extend(arms.get(s, {}).values())
    return out + [s for s in run.systems if s not in out]


def _excludes_zero(e: Mapping[str, Any], key: str) -> int:
    """+1 / -1 when the interval of ``key`` lies above / below zero, else 0."""
    lo, hi = e.get(f"{key}_lo"), e.get(f"{key}_hi")
    if _missing(lo) or _missing(hi):
        return 0
    return 1 if lo > 0 else -1 if hi < 0 else 0


_ARM_TEXT = {
    "twin": "twin of {of}: told nothing",
    "placebo": "placebo of {of}: its own bits permuted within user and week",
    "always_false": "{of} told always False",
    "always_true": "{of} told always True",
}
"""How the arms table describes each content-ignoring arm."""


def _learning_rows(run: RunData, table: Mapping[str, Mapping[str, Any]]) -> tuple[list[tuple[str, ...]], list[str]]:
    """Rows of the arms table (each half of the metric and of stale>cur) and a CSS class per row."""
    role_of = {lab: (s, r) for s, fam in _arms(run).items() for r, lab in fam.items()}
    rows, classes = [], []
    for label in _family_order(run):
        e = table.get(label)
        if e is None:
            continue
        if label in role_of:
            system, role = role_of[label]
            name, cls = f"{label} ({_ARM_TEXT.get(role, role).format(of=system)})", "twin"
        elif label == run.control:
            name, cls = f"{label} (static control)", ""
        else:
            name, cls = label, ""
        rows.append((
            name, _pct(e.get("first")), _pct(e.get("second")), _pct(e.get("stale_first")), _pct(e.get("stale_second")),
            format_diff(e, "did_control") if "did_control" in e else "",
            format_p(e.get("did_control_p")) if "did_control" in e else "",
        ))
        classes.append(cls)
    return rows, classes


def _contrast_rows(run: RunData, table: Mapping[str, Mapping[str, Any]]) -> tuple[list[tuple[str, ...]], list[str]]:
    """Rows of the contrasts table (``memsim.analysis.learning.contrast_rows``), marked up or down by the 2nd half."""
    ordered = {s: table[s] for s in _family_order(run) if s in table}
    rows = [tuple(r) for r in contrast_rows(ordered)]
    classes = []
    for label, e in ordered.items():
        for key, _ in CONTRASTS:
            c = (e.get("contrasts") or {}).get(key)
            if c is not None:
                sign = _excludes_zero(c, "second")
                classes.append("up" if sign > 0 else "down" if sign < 0 else "")
    return rows, classes


def _learning_tables(run: RunData, table: Mapping[str, Mapping[str, Any]], metric: str) -> list[tuple[str, _Table]]:
    """The contrasts table (with the footnotes) when any system has a twin, then the arms table."""
    notes = learning_notes(table, metric=metric, control=run.control, missing_control=run.metrics.get("control_missing"),
                           balance_kinds=bool(run.metrics.get("balance_kinds")))
    arms, arm_classes = _learning_rows(run, table)
    out = []
    contrasts, classes = _contrast_rows(run, table)
    if contrasts:
        out.append((f"{learning_header(table, metric)}: contrasts per feedback-using system",
                    _Table(tuple(contrast_headers(metric)), tuple(contrasts), tuple(notes), tuple(classes))))
        notes = []
    headers = tuple(h for h in arm_headers(metric) if h != "arm")
    out.append((f"{metric}: each arm's halves", _Table(headers, tuple(arms), tuple(notes), tuple(arm_classes))))
    return out


def _twin_tables(run: RunData) -> list[tuple[str, _Table]]:
    """The headline's learning tables, then each answer judge's (``metrics.json``'s ``answer_learning``), titled."""
    if not run.longitudinal or not run.metrics.get("systems"):
        return []
    tables = {run.metric: {s: run.entry(s) for s in run.systems}, **(run.metrics.get("answer_learning") or {})}
    return [t for m, tab in tables.items() for t in _learning_tables(run, {s: tab[s] for s in run.systems if s in tab}, m)]


def _gain_bands(run: RunData) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """Gain over the twin per window with its band, per learning system and per placebo (``metrics.json``)."""
    def ordered(key: str) -> dict[str, list[dict[str, Any]]]:
        bands = run.metrics.get(key) or {}
        return {s: bands[s] for s in run.systems if s in bands}

    return ordered("gain_bands"), ordered("placebo_bands")


# ---------------------------------------------------------------------------
# Per question kind: one table of systems x kinds, shaded by value
# ---------------------------------------------------------------------------


def _kinds(run: RunData) -> list[str]:
    kinds: dict[str, None] = {}
    for system in run.systems:
        kinds.update(dict.fromkeys(run.entry(system).get("per_kind", {})))
    return sorted(kinds, key=lambda k: (k == "", k))


@dataclass(frozen=True, slots=True)
class _Cell:
    """One cell of the shaded table: its text, the value that shades it and how (score or signed gain)."""

    text: str
    value: float | None = None
    signed: bool = False
    scale: float = 1.0
    """Largest absolute value of a signed row group (the shading's full strength)."""


def _shade(cell: _Cell) -> str:
    """Background colour of a cell: blue by score (0..1); green or red by a signed gain."""
    if cell.value is None or _missing(cell.value):
        return ""
    if cell.signed:
        strength = min(1.0, abs(cell.value) / cell.scale) if cell.scale > 0 else 0.0
        rgb = (44, 160, 44) if cell.value > 0 else (214, 39, 40)
        alpha = 0.55 * strength
    else:
        rgb, alpha = (31, 119, 180), 0.55 * min(1.0, max(0.0, cell.value))
    # Light enough that dark text stays readable at full strength.
    return f"background:rgba({rgb[0]},{rgb[1]},{rgb[2]},{alpha:.2f})"


@dataclass(frozen=True, slots=True)
class _HeatTable:
    """Systems (rows) x question kinds (columns), cells shaded by value; rendered as HTML or Markdown."""

    headers: tuple[str, ...]
    rows: tuple[tuple[_Cell, ...], ...]
    row_classes: tuple[str, ...]
    notes: tuple[str, ...]

    def markdown(self) -> str:
        return _Table(self.headers, tuple(tuple(c.text for c in r) for r in self.rows), self.notes).markdown()


def _kind_cell(table: Mapping[str, Any] | None, col: str) -> _Cell:
    if not table:
        return _Cell("")
    score = table.get("scores", {}).get(col) or {}
    mean = score.get("mean")
    if _missing(mean):
        excluded = table.get("excluded") or {}
        if not excluded:
            return _Cell("—")
        # Abstention and adversarial questions have no evidence: nothing for a retrieval metric to find.
        said = ", ".join(f"{n} {r}" for r, n in excluded.items())
        how = "an answer judge scores them" if col.startswith("answer_") else "no evidence to retrieve; a reader's answer scores them"
        return _Cell(f"not scored: {said} ({how})")
    return _Cell(_ci(mean, score.get("lo"), score.get("hi")), float(mean))


def _category_table(run: RunData) -> _HeatTable | None:
    """One table of systems x question kinds: each score per kind (``metrics.json``), and the gain over the twin."""
    kinds = _kinds(run)
    if not kinds:
        return None
    cols = [run.metric, *[c for c in _score_columns(run) if c.startswith("answer_") and c != run.metric]]
    order = _family_order(run)
    counts = {}
    for kind in kinds:
        # Every system answers the same questions; the largest count covers a system that failed some.
        counts[kind] = max((run.entry(s).get("per_kind", {}).get(kind) or {}).get("questions", 0) for s in order)
    total = max((run.entry(s).get("overall", {}).get("questions", 0) for s in order), default=0)
    headers = ("system", f"all (n={total})", *[f"{k or '(none)'} (n={counts[k]})" for k in kinds])
    rows: list[tuple[_Cell, ...]] = []
    classes: list[str] = []
    twins = _twins(run)
    members = {lab for fam in _arms(run).values() for lab in fam.values()}
    for col in cols:
        if len(cols) > 1:
            rows.append((_Cell(_judge_header(run, col)), *[_Cell("") for _ in range(len(headers) - 1)]))
            classes.append("group")
        for system in order:
            entry = run.entry(system)
            if not entry:
                continue
            cells = [_Cell(system), _kind_cell(entry.get("overall"), col)]
            cells += [_kind_cell(entry.get("per_kind", {}).get(k), col) for k in kinds]
            rows.append(tuple(cells))
            classes.append("twin" if system in members else "")
            if col == run.metric and system in twins and entry.get("gain_by_kind"):
                by_kind = entry["gain_by_kind"]
                values = [entry.get("gain_second")] + [(by_kind.get(k) or {}).get("gain_second") for k in kinds]
                scale = max((abs(v) for v in values if not _missing(v)), default=0.0)
                gain = [_Cell(f"  {system}: gain over twin, 2nd half (pp)"),
                        _Cell(format_diff(entry, "gain_second"), entry.get("gain_second"), signed=True, scale=scale)]
                for k in kinds:
                    g = by_kind.get(k) or {}
                    v = g.get("gain_second")
                    gain.append(_Cell("—" if _missing(v) else f"{_pp(v)} (n={g.get('n_second', 0)})", v,
                                      signed=True, scale=scale))
                rows.append(tuple(gain))
                classes.append("gain")
    notes = [
        "cells: mean (%) [95% percentile bootstrap interval, whole "
        + ("users" if run.longitudinal else "episodes") + " resampled], from metrics.json; "
        "blue shading grows with the score",
        "n in a column heading: questions of that kind (excluded ones included)",
    ]
    if run.longitudinal and twins:
        notes.append(
            "gain rows: system minus its twin on the same questions of the kind, second half of each user's "
            "questions, point estimate (n = paired questions); green above zero, red below, shaded relative to "
            "the largest gain in the row"
        )
    return _HeatTable(headers, tuple(rows), tuple(classes), tuple(notes))



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
                "evidence": [t for t in _as_list(r.get("evidence_text")) if t],
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

def _page(title: str, subtitle: str, sections: Sequence[tuple[str, str, list[tuple[str, Any]]]]) -> str:
    """The page (``report.html.j2``): ``sections`` are ``(id, title, blocks)``, a block ``(kind, value)``."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("memsim.analysis", "."), autoescape=True, keep_trailing_newline=True
    )
    env.globals.update(shade=_shade, num=_num, shown=_SHOWN_MEMORIES,
                       b64=lambda svg: base64.b64encode(svg.encode("utf-8")).decode("ascii"))
    env.filters["judge_text"] = lambda kv: f"{kv[0].removeprefix('answer_')}={_num(kv[1], 2)}"
    return env.get_template("report.html.j2").render(title=title, subtitle=subtitle, sections=sections)


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
class _Figure:
    """One figure of the report, or the sentence that stands in for a figure with nothing to show."""

    section: str
    alt: str
    caption: str
    svg: str | None = None
    """None: no data; ``caption`` then says why in words."""
    key: str = ""
    """Short id of the figure (``data-figure`` of the sentence that stands in for it)."""


@dataclass(frozen=True, slots=True)
class _Built:
    """Everything a report shows, computed once."""

    learning: tuple[tuple[str, _Table], ...]
    overview: _Table
    categories: _HeatTable | None
    worst: dict[str, list[dict[str, Any]]]
    figures: tuple[_Figure, ...]


def _gain_figure(run: RunData, styles: Mapping[str, Mapping[str, Any]]) -> _Figure:
    """The lead figure: gain over the twin per learning system over simulated time (or why there is none)."""
    bands, placebos = _gain_bands(run)
    alt = "gain over twin over simulated time"
    if not bands:
        reason = (
            "No system in this run learns from feedback (none was played with a twin), so there is no gain over a "
            "twin to draw. The table above gives each system's halves and, where a static control ran, its DiD "
            "against it."
            if not _twins(run) else
            "The learning systems and their twins share no scored question, so there is no gain over the twin to draw."
        )
        return _Figure("learning", alt, reason, key="gain-over-twin")
    unit = next(iter(bands.values()))[0]["unit"]
    users = run.probes["user_id"].n_unique()
    band = (f"95% band, {users} users resampled per window" if unit == "user"
            else f"95% band, question threads resampled (conditional on these {users} users)")
    svg = plots.gain_figure(bands, metric=run.metric, window_days=_GAIN_DAYS, styles=styles,
                            placebos=placebos, band_label=band)
    caption = (
        f"Gain over the twin (the same system with feedback withheld) in {run.metric}, percentage points, per "
        f"{_GAIN_DAYS:g}-day window of simulated time; above zero the system does better than its twin on "
        f"the same questions because it used feedback. Shaded: {band}"
        + ("." if unit == "user" else f" (fewer than {MIN_USERS} users: the band does not generalise to other users).")
    )
    return _Figure("learning", alt, caption, svg, key="gain-over-twin")


def _timeline_figures(run: RunData, df: pl.DataFrame, styles: Mapping[str, Mapping[str, Any]], window: int) -> list[_Figure]:
    """Storage, latency and cost figures, each without panels that have no data, and sentences for those."""
    out: list[_Figure] = []
    # A system that failed before its first row has no style (it is in no table): its timeline rows stay out.
    drawn = list(styles)
    timeline = run.timeline.filter(pl.col("system").is_in(drawn)) if run.timeline.height else run.timeline
    df = df.filter(pl.col("system").is_in(drawn)) if df.height else df
    if timeline.height:
        storage = cv.storage_timeline(timeline)
        shown = plots.panels_with_data(storage, [p[0] for p in plots.STORAGE_PANELS])
        svg = plots.storage_figure(storage, styles=styles)
        titles = {"items": "memories stored", "bytes": "storage size", "tokens": "the system's own LLM tokens",
                  "cum_ingest_ms": "cumulative ingest time"}
        caption = "Over simulated days: " + ", ".join(titles[c] for c in shown) + "."
        if "tokens" not in shown:
            caption += " No system made LLM calls of its own in this run, so there is no token panel."
        out.append(_Figure("timelines", "storage and cost timeline", caption, svg))
    lat = cv.latency_curves(df, window=window)
    if lat.height:
        out.append(_Figure("timelines", "latency timeline",
                           f"Rolling median and 95th percentile latency over the last {window} questions (wall-clock).",
                           plots.latency_figure(lat, styles=styles)))
    cost = cv.cost_curves(df)
    svg = plots.cost_figure(cost, styles=styles) if cost.height else None
    if svg is not None:
        out.append(_Figure("timelines", "reader cost timeline",
                           "Cumulative reader prompt and completion tokens and reader LLM time.", svg))
    else:
        out.append(_Figure("timelines", "reader cost timeline",
                           "No reader LLM calls in this run (retrieval is scored without an answer), so there is no "
                           "reader cost to draw.", key="reader-cost"))
    return out


def _build(run: RunData, *, window: int, window_days: float, fading: float) -> _Built:
    figures: list[_Figure] = []
    df = scored_probes(run)
    styles = plots.system_styles(_family_order(run), label_arms(run.systems, run.info))
    learning: list[tuple[str, _Table]] = []
    if run.longitudinal and df.height:
        learning = _twin_tables(run)
        figures.append(_gain_figure(run, styles))
        for metric in [run.metric, *[m for m in cv.answer_metrics(df) if m != run.metric]]:
            if _scored_n(df, metric) == 0:
                continue
            acc = cv.accuracy_curves(df, metric=metric, window=window, window_days=window_days, fading=fading)
            for x, where in (("q_index", "question index"), ("t_days", "simulated days")):
                if x == "t_days" and acc["t_days"].drop_nans().len() == 0:
                    continue
                figures.append(_Figure(
                    "curves",
                    f"{metric} over {where}",
                    f"{metric} per system over {where}: windowed, cumulative prequential and fading-factor means.",
                    plots.accuracy_figure(acc, x=x, metric=metric, window=window, window_days=window_days,
                                          fading=fading, styles=styles),
                ))
        figures += _timeline_figures(run, df, styles, window)
    return _Built(tuple(learning), _overview_table(run), _category_table(run), _worst(run), tuple(figures))


def summary_text(run: RunData) -> str:
    """The run's headline tables as plain text: the twin table (longitudinal) or the per-kind tables (static)."""
    if run.longitudinal and run.metrics.get("systems"):
        table = {s: run.entry(s) for s in _family_order(run)}
        return format_learning(table, metric=run.metric, control=run.control, placebos=_placebos(run))

    return "\n\n".join(f"{system}\n{format_tables(run.metrics, system)}" for system in run.systems)


def _ranked_systems(run: RunData) -> list[str]:
    """The run's systems without their twins and placebos (arms of the same system)."""
    arms = label_arms(run.systems, run.info)
    return [s for s in run.systems if arms[s][1] == "system"]


def write_report(
    run_dir: str | Path | RunData,
    *,
    window: int = DEFAULT_WINDOW,
    window_days: float = DEFAULT_WINDOW_DAYS,
    fading: float = DEFAULT_FADING,
) -> Path:
    """Write ``report.html`` and ``report.md`` into a run folder: it renders ``metrics.json``, computing no statistics.

    Args:
        run_dir: a run folder (``memsim run``, ``demo``, ``static``, ``rerun``), or one already loaded.
        window: questions in the windowed accuracy curve.
        window_days: simulated days in the time-windowed curve.
        fading: fading factor of the fading-factor curve.

    Returns:
        Path of ``report.html``.

    Raises:
        UserError: the folder is not a readable run.
    """
    run = run_dir if isinstance(run_dir, RunData) else load_run(run_dir)
    built = _build(run, window=window, window_days=window_days, fading=fading)
    title = f"memsim report: {run.path.name}"
    sections: list[tuple[str, str, list[tuple[str, Any]]]] = []
    entries = {s: run.entry(s) for s in run.systems}
    through = learning_title(entries).split(" (")[0] if built.learning else ""
    summary = ("summary", "Overall", [("table", built.overview)])
    if not has_learners(entries):
        sections.append(summary)  # nothing learns: the overall figures lead, the change through use follows
    if built.learning:
        lead: list[tuple[str, Any]] = []
        for heading, table in built.learning:
            lead += [("h3", heading), ("table", table)]
        lead += [("figure", f) for f in built.figures if f.section == "learning"]
        sections.append(("learning", f"{through}: {run.metric}", lead))
    if has_learners(entries):
        sections.append(summary)
    answers = _answers_table(run)
    if answers is not None:
        sections.append(("answers", "Answers and judges", [("table", answers)]))
    for sid, title_s in (("curves", "Learning curves"), ("timelines", "Storage, latency and cost timelines")):
        figs = [("figure", f) for f in built.figures if f.section == sid]
        if figs:
            sections.append((sid, title_s, figs))
    if built.categories is not None:
        sections.append(("categories", f"Per question kind: {run.metric}", [("heat", built.categories)]))
    from memsim.analysis.missed import as_block, missed_markdown, missed_questions

    missed = missed_questions(run.probes, metric=run.metric, systems=_ranked_systems(run))
    sections.append(("missed", "Questions most systems miss", [("missed", as_block(missed, run.metric))]))
    sections.append(("worst", "Worst questions per system", [("worst", (built.worst, run.metric))]))
    sections.append(("spec", "Spec", [("spec", json.dumps(run.spec.to_json(), indent=2, sort_keys=True))]))
    out = run.path / "report.html"
    out.write_text(_page(title, _spec_summary(run), sections), encoding="utf-8")

    md = [f"# {title}", "", _spec_summary(run), ""]
    overall = ["## Overall", "", built.overview.markdown(), ""]
    if not has_learners(entries):
        md += overall
    for metric, table in built.learning:
        md += [f"## {through}: {metric}", "", table.markdown(), ""]
    for f in built.figures:
        if f.svg is None:
            md += [f"_{f.caption}_", ""]
    if has_learners(entries):
        md += overall
    if answers is not None:
        md += ["## Answers and judges", "", answers.markdown(), ""]
    if built.categories is not None:
        md += ["## Per question kind", "", built.categories.markdown(), ""]
    md += ["## Questions most systems miss", "", missed_markdown(missed, run.metric), ""]
    md += ["## Worst questions", "", _worst_md(built.worst, run.metric)]
    (run.path / "report.md").write_text("\n".join(md).rstrip() + "\n", encoding="utf-8")
    return out



# ---------------------------------------------------------------------------
# Comparing runs
# ---------------------------------------------------------------------------


def _run_label(run: RunData, others: Sequence[RunData]) -> str:
    names = [r.path.name for r in others]
    return run.path.name if names.count(run.path.name) == 1 else str(run.path)


_COMPARED = ("overall", "first", "second", "gain_second", "did_control")
"""The per-run figures of ``compare_runs``, each from the run's ``metrics.json``."""


def _per_run_rows(run: RunData, label: str) -> list[dict[str, Any]]:
    """One row per system of a run, the figures from its ``metrics.json``.

    ``overall``: the metric over the run; for longitudinal runs ``first`` and ``second`` (the halves of each
    user's questions), ``gain_second`` (gain over the twin in the second half; None for a system without a
    twin) and ``did_control`` (difference in differences against the static control).
    """
    rows = _scored_rows(run)
    out = []
    for system in run.systems:
        e = run.entry(system)
        score = e.get("overall", {}).get("scores", {}).get(run.metric) or {}
        out.append({
            "run": label, "system": system, "metric": run.metric,
            "n": _scored_n(rows.filter(pl.col("system") == system), run.metric),
            "overall": score.get("mean"),
            **{key: e.get(key) for key in _COMPARED[1:]},
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

    Shows, per run and system, figures of the run's ``metrics.json``: the
    headline metric and, for longitudinal runs, the halves, the gain over the
    twin in the second half and the difference in differences against the
    static control; across runs (seeds), the mean and 95% t-interval of each
    figure per system; and, with at least three systems in at least two runs, a
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
    curve_parts = []
    for run in runs:
        label = _run_label(run, runs)
        rows.extend(_per_run_rows(run, label))
        if run.longitudinal and run.probes.height:
            acc = cv.accuracy_curves(scored_probes(run), metric=metric, window=window, fading=fading)
            curve_parts.append(acc.with_columns((pl.lit(label + " / ") + pl.col("system")).alias("system")))
    table = pl.DataFrame(rows, schema={"run": pl.Utf8, "system": pl.Utf8, "metric": pl.Utf8, "n": pl.Int64,
                                       **{key: pl.Float64 for key in _COMPARED}})
    pct = ("overall", "first", "second")
    controls = list(dict.fromkeys(r.control for r in runs if r.control is not None))
    headers = ("overall (%)", "1st half (%)", "2nd half (%)", "gain over twin, 2nd half (pp)", "DiD vs static control (pp)")
    per_run = _Table(
        ("run", "system", "metric", "n", *headers),
        tuple(
            (r["run"], r["system"], r["metric"], str(r["n"]),
             *((_pct if key in pct else _pp)(r[key]) for key in _COMPARED))
            for r in table.iter_rows(named=True)
        ),
        ("every figure comes from the run's metrics.json: overall = the metric over the run; halves = each user's "
         "questions split at that user's own median; gain over twin = system minus its twin (the same system with "
         "feedback withheld) in the 2nd half, — for a system without a twin; DiD vs static control "
         f"({', '.join(controls) or 'none'}) = (2nd - 1st)_system - (2nd - 1st)_control",
         "n = questions scored on the metric"),
    )
    seed_rows = []
    for system in dict.fromkeys(table["system"].to_list()):
        part = table.filter(pl.col("system") == system)
        cells = [system]
        for col in _COMPARED:
            s = summarise_seeds(part[col].cast(pl.Float64).fill_null(math.nan).to_numpy(),
                                bounds=(0.0, 1.0) if col in pct else (-1.0, 1.0))
            fmt = _pct if col in pct else _pp
            cells.append("—" if s.n == 0 else f"{fmt(s.mean)} [{fmt(s.ci[0])}, {fmt(s.ci[1])}] (n={s.n})")
        seed_rows.append(tuple(cells))
    across = _Table(
        ("system", *headers),
        tuple(seed_rows),
        ("mean across runs with a 95% Student t interval; n = runs with a value (an interval needs n >= 2)",),
    )
    ranking: list[tuple[str, Any]] = []
    wide = table.pivot(on="run", index="system", values="overall", aggregate_function="first")
    if wide.height >= 3 and wide.width - 1 >= 2:
        complete = wide.drop_nulls()
        shared = complete["system"].to_list()
        if len(shared) < 3:  # said "needs at least 3 systems, got 1" of runs with five systems between them
            ranking = [("p", f"No ranking: a Friedman ranking needs at least 3 systems scored in every run; "
                             f"{wide.height} systems across {wide.width - 1} runs, {len(shared)} in all of them"
                             + (f" ({', '.join(shared)})" if shared else ""))]
    if wide.height >= 3 and wide.width - 1 >= 2 and not ranking:
        try:
            fr = friedman_ranking(complete)
        except UserError as exc:
            ranking = [("p", f"No ranking: {exc}")]
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
            cd = "critical-difference diagram"
            ranking = [("table", ranks), ("table", pairs), ("figure", _Figure("ranking", cd, cd, critical_difference_plot(fr)))]
    sections: list[tuple[str, str, list[tuple[str, Any]]]] = [
        ("runs", "Runs", [("list", [f"{r.path}: {_spec_summary(r)}" for r in runs])]),
        ("summary", "Summary per run", [("table", per_run)]),
        ("seeds", "Across runs", [("table", across)]),
    ]
    if ranking:
        sections.append(("ranking", "Ranking", ranking))
    if curve_parts:
        alt = "accuracy over question index, all runs"
        svg = plots.accuracy_figure(pl.concat(curve_parts), x="q_index", window=window, fading=fading, metric=metric)
        sections.append(("curves", "Learning curves", [("figure", _Figure("curves", alt, alt, svg))]))
    path = out / "compare.html"
    path.write_text(_page("memsim comparison", "", sections), encoding="utf-8")
    md = ["# memsim comparison", "", "## Summary per run", "", per_run.markdown(), "", "## Across runs", "", across.markdown()]
    if ranking:  # the ranking's tables, or the sentence saying why there is none
        md += ["", "## Ranking", "", "\n\n".join(v.markdown() if k == "table" else v for k, v in ranking if k != "figure")]
    (out / "compare.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    return path
