"""The run as a report reads it, and the report's tables: the overview, answers and judges, per question kind, worst questions.

Every figure comes from the summariser (``metrics.json``, ``memsim.analysis.summary``) or from the run's rows;
nothing here computes a statistic. A ``Table`` or ``HeatTable`` renders as HTML (``report.html.j2``) or Markdown.
Systems are listed family by family (``family_order``): each system followed by its twin, placebo and constant arms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from memsim.analysis import curves as cv
from memsim.analysis.learning import format_diff
from memsim.analysis.load import RunData, read_run
from memsim.analysis.summary import score_columns, with_metrics

__all__ = [
    "SHOWN_MEMORIES",
    "HeatTable",
    "Table",
    "answers_table",
    "category_table",
    "family_order",
    "is_missing",
    "load_run",
    "number",
    "overview_table",
    "percent",
    "points",
    "run_arms",
    "run_placebos",
    "run_twins",
    "scored_count",
    "scored_probes",
    "scored_rows",
    "shade",
    "worst_questions",
]

_WORST = 10
"""Questions shown per system among the worst."""
SHOWN_MEMORIES = 5
"""Retrieved memories shown per worst question."""


def load_run(run_dir: str | Path) -> RunData:
    """Read a run folder with its ``metrics.json`` (summarised in memory when the folder has none).

    Raises:
        UserError: see ``memsim.analysis.load.read_run`` and ``memsim.analysis.summary.with_metrics``.
    """
    return with_metrics(read_run(run_dir))


def scored_probes(run: RunData) -> pl.DataFrame:
    """Probe rows without a system error: a failed retrieval is not a scored question."""
    return run.probes.filter(pl.col("error").is_null())


def scored_rows(run: RunData) -> pl.DataFrame:
    """Rows that count in scores: no error and not excluded (as in ``metrics.json``)."""
    return scored_probes(run).filter(pl.col("excluded").is_null())


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------


def is_missing(v: Any) -> bool:
    """Whether a figure is absent: None or NaN."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def percent(v: Any) -> str:
    """A share as a percentage with one decimal; a dash when missing."""
    return "—" if is_missing(v) else f"{100 * v:.1f}"


def points(v: Any) -> str:
    """A difference of shares in signed percentage points; a dash when missing."""
    return "—" if is_missing(v) else f"{100 * v:+.1f}"


def number(v: Any, digits: int = 1) -> str:
    """A number with thousands separators and ``digits`` decimals; a dash when missing."""
    return "—" if is_missing(v) else f"{v:,.{digits}f}"


def _ci(v: Any, lo: Any, hi: Any) -> str:
    if is_missing(v):
        return "—"
    if is_missing(lo) or is_missing(hi):
        return percent(v)
    return f"{percent(v)} [{percent(lo)}, {percent(hi)}]"


def _score_ci(table: Mapping[str, Any], col: str) -> str:
    """A score of a ``metrics.json`` table (overall or one kind) with its interval."""
    score = table.get("scores", {}).get(col) or {}
    return _ci(score.get("mean"), score.get("lo"), score.get("hi"))


@dataclass(frozen=True, slots=True)
class Table:
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


def scored_count(rows: pl.DataFrame, col: str) -> int:
    """Rows that scored ``col`` (neither null nor NaN); 0 when the column is absent."""
    return rows[col].cast(pl.Float64).drop_nulls().drop_nans().len() if col in rows.columns else 0


def _judge_header(run: RunData, col: str) -> str:
    """A score column's header; a judge's carries its mark (unreliable, self-judging, paraphrase)."""
    mark = ((run.metrics.get("judges") or {}).get(col) or {}).get("mark")
    return f"{col} (%) [{mark}]" if mark else f"{col} (%)"


def answers_table(run: RunData) -> Table | None:
    """Every judge side by side per system: accuracy, judged, unjudged with reasons, abstention, mark; agreement below."""
    marks = run.metrics.get("judges") or {}
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for system in family_order(run):
        table = run.entry(system).get("answers")
        if not table:
            continue
        for col, j in table["judges"].items():
            ab = j.get("abstention") or {}
            reasons = ", ".join(f"{r} {n}" for r, n in (j.get("unjudged_reasons") or {}).items())
            rows.append((
                system,
                col.removeprefix("answer_"),
                percent(j.get("accuracy")),
                str(j.get("judged", 0)),
                f"{j.get('unjudged', 0)}" + (f" ({reasons})" if reasons else ""),
                "—" if not ab.get("questions") else f"{percent(ab.get('accuracy'))} ({ab.get('judged', 0)}/{ab['questions']})",
                (marks.get(col) or {}).get("mark", ""),
            ))
        for pair in table.get("agreement", []):
            kappa = "—" if pair.get("kappa") is None else f"{pair['kappa']:.3f}"
            notes.append(
                f"{system}: {pair['a'].removeprefix('answer_')} vs {pair['b'].removeprefix('answer_')}: agreement "
                f"{percent(pair.get('agreement'))}%, kappa {kappa} ({pair['n']} answers judged by both)"
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
    return Table(headers, tuple(rows), tuple(notes))


def overview_table(run: RunData) -> Table:
    """Each score per system with its interval (``metrics.json``), plus latency, storage and cost."""
    rows_all = scored_rows(run)
    cols = _score_columns(run)
    order = family_order(run)
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
            _score_ci(overall, c) + ("" if scored_count(part, c) == overall.get("scored") else f" (n={scored_count(part, c)})")
            for c in cols
        ]
        latency = (run.perf.get("systems", {}).get(system) or {}).get("retrieve_ms") or {}
        cells += [number(latency.get("p50"), 2), number(latency.get("p95"), 2)]
        final_bytes = entry.get("final_bytes")
        cells += [number(entry.get("final_items"), 0), "—" if final_bytes is None else number(final_bytes / 2**20, 2)]
        if any_llm:
            cells += [number(v, 0) for v in llm[system]]
        if any(in_words.values()):
            f = in_words[system]
            cells += ["—" if not f else f"{number(100 * f['share'], 1)} ({f['retrieving']}/{f['questions']})"]
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
    return Table(tuple(headers), tuple(rows), tuple(notes))


# ---------------------------------------------------------------------------
# Families: each system with its content-ignoring arms
# ---------------------------------------------------------------------------


def run_twins(run: RunData) -> dict[str, str]:
    """System -> its twin's label (``metrics.json``), for systems with rows."""
    return {s: t for s, t in (run.metrics.get("twins") or {}).items() if s in run.systems and t in run.systems}


def run_placebos(run: RunData) -> dict[str, str]:
    """Placebo label -> the twin it is compared with (``metrics.json``)."""
    return {p: t for p, t in (run.metrics.get("placebos") or {}).items() if p in run.systems and t in run.systems}


def run_arms(run: RunData) -> dict[str, dict[str, str]]:
    """System -> ``{role: label}`` of its content-ignoring arms (``metrics.json``'s ``arms``, else twins and placebos)."""
    recorded = run.metrics.get("arms")
    if recorded is None:
        placebo_of = {t: p for p, t in run_placebos(run).items()}
        recorded = {s: {"twin": t, **({"placebo": placebo_of[t]} if t in placebo_of else {})}
                    for s, t in run_twins(run).items()}
    return {s: {r: lab for r, lab in fam.items() if lab in run.systems} for s, fam in recorded.items()
            if s in run.systems}


def family_order(run: RunData) -> list[str]:
    """Systems in the spec's order, each followed by its twin, placebo and constant arms (a family reads as one block)."""
    arms = run_arms(run)
    members = {lab for fam in arms.values() for lab in fam.values()}
    out: list[str] = []
    for s in run.systems:
        if s in members:
            continue
        out.append(s)
        out.extend(arms.get(s, {}).values())
    return out + [s for s in run.systems if s not in out]


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


def shade(cell: _Cell) -> str:
    """Background colour of a cell: blue by score (0..1); green or red by a signed gain."""
    if cell.value is None or is_missing(cell.value):
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
class HeatTable:
    """Systems (rows) x question kinds (columns), cells shaded by value; rendered as HTML or Markdown."""

    headers: tuple[str, ...]
    rows: tuple[tuple[_Cell, ...], ...]
    row_classes: tuple[str, ...]
    notes: tuple[str, ...]

    def markdown(self) -> str:
        return Table(self.headers, tuple(tuple(c.text for c in r) for r in self.rows), self.notes).markdown()


def _kind_cell(table: Mapping[str, Any] | None, col: str) -> _Cell:
    if not table:
        return _Cell("")
    score = table.get("scores", {}).get(col) or {}
    mean = score.get("mean")
    if is_missing(mean):
        excluded = table.get("excluded") or {}
        if not excluded:
            return _Cell("—")
        # Abstention and adversarial questions have no evidence: nothing for a retrieval metric to find.
        said = ", ".join(f"{n} {r}" for r, n in excluded.items())
        how = "an answer judge scores them" if col.startswith("answer_") else "no evidence to retrieve; a reader's answer scores them"
        return _Cell(f"not scored: {said} ({how})")
    return _Cell(_ci(mean, score.get("lo"), score.get("hi")), float(mean))


def category_table(run: RunData) -> HeatTable | None:
    """One table of systems x question kinds: each score per kind (``metrics.json``), and the gain over the twin."""
    kinds = _kinds(run)
    if not kinds:
        return None
    cols = [run.metric, *[c for c in _score_columns(run) if c.startswith("answer_") and c != run.metric]]
    order = family_order(run)
    counts = {}
    for kind in kinds:
        # Every system answers the same questions; the largest count covers a system that failed some.
        counts[kind] = max((run.entry(s).get("per_kind", {}).get(kind) or {}).get("questions", 0) for s in order)
    total = max((run.entry(s).get("overall", {}).get("questions", 0) for s in order), default=0)
    headers = ("system", f"all (n={total})", *[f"{k or '(none)'} (n={counts[k]})" for k in kinds])
    rows: list[tuple[_Cell, ...]] = []
    classes: list[str] = []
    twins = run_twins(run)
    members = {lab for fam in run_arms(run).values() for lab in fam.values()}
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
                scale = max((abs(v) for v in values if not is_missing(v)), default=0.0)
                gain = [_Cell(f"  {system}: gain over twin, 2nd half (pp)"),
                        _Cell(format_diff(entry, "gain_second"), entry.get("gain_second"), signed=True, scale=scale)]
                for k in kinds:
                    g = by_kind.get(k) or {}
                    v = g.get("gain_second")
                    gain.append(_Cell("—" if is_missing(v) else f"{points(v)} (n={g.get('n_second', 0)})", v,
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
    return HeatTable(headers, tuple(rows), tuple(classes), tuple(notes))



def _as_list(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    if isinstance(v, pl.Series):
        return [str(x) for x in v.to_list()]
    return [str(v)]


def worst_questions(run: RunData) -> dict[str, list[dict[str, Any]]]:
    """Lowest-scoring questions per system: lowest metric, then lowest judge, then evidence found deepest."""
    df = scored_rows(run)
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
                "memories": _as_list(r.get("retrieved_text"))[:SHOWN_MEMORIES],
                "error": r.get("error"),
            }
            for r in part.iter_rows(named=True)
        ]
    return out
