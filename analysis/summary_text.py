"""A run's tables as text: the systems table, the compression line and the answer-accuracy lines.

The numbers come from ``memsim.analysis.summary.summarise`` (``metrics.json``);
``memsim run``, ``memsim static`` and the report print these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from memsim.core.table import text_table

__all__ = ["format_tables", "format_compression", "format_answer_accuracy"]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def format_tables(
    metrics: Mapping[str, Any], system: str, *, kind_names: Mapping[str, str] | None = None
) -> str:
    """One system's score tables (rows: kinds, then overall; one table per metric family), as text.

    The headline metric is printed again with its 95% interval (episodes resampled).
    """
    entry = metrics["systems"][system]
    names = dict(kind_names or {})
    kinds = [k for k in names if k in entry["per_kind"]] + [k for k in entry["per_kind"] if k not in names]
    groups = [(names.get(k, k), entry["per_kind"][k]) for k in kinds] + [("overall", entry["overall"])]
    cols = list(entry["overall"]["scores"])
    families: dict[str, list[str]] = {}
    for col in cols:
        fam, _, cut = col.partition("@")
        families.setdefault(fam if cut else col, []).append(col)
    for members in families.values():  # metrics.json sorts its keys as strings (@1 @10 @5): numeric order here
        members.sort(key=lambda c: int(c.partition("@")[2]) if c.partition("@")[2].isdigit() else 0)
    lines: list[str] = []
    for fam, members in families.items():
        heads = [c.partition("@")[2] and "@" + c.partition("@")[2] or c.removeprefix("answer_") for c in members]
        # "scored": the questions the family's columns scored (the most over its cut-offs), not those merely
        # left in: a question without gold keys is in the table but unscored.
        rows = [[name, g["questions"], max((g["scores"].get(c, {}).get("n", g["scored"]) for c in members),
                                           default=g["scored"]),
                 *(_num(g["scores"].get(c, {}).get("mean")) for c in members)]
                for name, g in groups]
        lines += [text_table([fam, "n", "scored", *heads], rows), ""]
    metric = metrics["metric"]
    head = entry["overall"]["scores"].get(metric, {})
    if head.get("mean") is not None and head.get("lo") is not None:
        lines.append(
            f"{metric} {head['mean']:.3f} [{head['lo']:.3f}, {head['hi']:.3f}] "
            f"(95% bootstrap interval, {entry['overall']['episodes']} episodes resampled)"
            + _judge_notes(metrics, system, metric)
        )
    excluded = entry["overall"]["excluded"]
    if excluded:
        lines.append("excluded from scores: " + ", ".join(f"{r} {n}" for r, n in excluded.items()))
    if metrics.get("protocol"):
        lines.append(f"protocol {metrics['protocol']['name']}")
    marks = [(c, j) for c, j in (metrics.get("judges") or {}).items() if j.get("mark")]
    for col, info in marks:
        lines.append(f"{col.removeprefix('answer_')}: {info['mark']}")
    return "\n".join(lines)


def _judge_notes(metrics: Mapping[str, Any], system: str, col: str) -> str:
    """What a headline judged by an LLM carries on its own line: replies without a verdict, an unreliable mark."""
    judge = ((metrics["systems"][system].get("answers") or {}).get("judges") or {}).get(col) or {}
    notes = []
    if judge.get("unreadable"):
        notes.append(f"{judge['unreadable']} of {judge['questions']} judge replies had no verdict, scored wrong")
    mark = ((metrics.get("judges") or {}).get(col) or {}).get("mark", "")
    if "unreliable" in mark:
        notes.append(mark)
    return f" [{'; '.join(notes)}]" if notes else ""


def format_compression(metrics: Mapping[str, Any], metric: str) -> str:
    """The gated systems' kept and compression beside the headline ``metric``, one row each (empty: no gate)."""
    reports = metrics.get("system_reports") or {}
    rows = [(name, reports[name]) for name in metrics["systems"] if "kept" in reports.get(name, {})]
    if not rows:
        return ""
    cells = []
    for name, report in rows:
        score = metrics["systems"][name]["overall"]["scores"].get(metric, {})
        interval = f" [{score['lo']:.3f}, {score['hi']:.3f}]" if score.get("lo") is not None else ""
        cells.append([name, f"{report['kept']:.3f}", f"{report['compression']:.3f}",
                      f"{_num(score.get('mean'))}{interval}"])
    return text_table(["system", "kept", "compression", metric], cells, align="lrrl")


def format_answer_accuracy(
    metrics: Mapping[str, Any], probes: pl.DataFrame, system: str, *, column: str
) -> str:
    """Every judge side by side, then the headline judge as LongMemEval reports it.

    One row per judge: accuracy over judged answers, judged and unjudged
    counts (with the reasons), abstention questions (judged with the
    abstention rubric) and the judge's mark (unreliable, self-judging,
    memsim paraphrase). Then pairwise agreement and kappa, the spread of
    accuracy across judges, and for ``column``: overall, task-averaged (the
    mean of the per-kind means, so a large kind does not outweigh a small
    one) and per reason of exclusion. Unjudged answers are counted, never
    scored as wrong and never dropped without a word.
    """
    entry = metrics["systems"][system]
    marks = metrics.get("judges") or {}
    lines: list[str] = []
    protocol = metrics.get("protocol")
    if protocol:
        left = ", ".join(protocol["answer_excluded"])
        lines.append(f"protocol {protocol['name']}" + (f": {left} questions left out of accuracy, "
                                                         "judged in the abstention column" if left else ""))
    prompts = metrics.get("reader_prompts")
    if prompts:
        lines.append("reader prompt: " + (prompts if isinstance(prompts, str) else "from " + ", ".join(prompts)))
    table = entry.get("answers")
    if table:
        rows = []
        for col, j in table["judges"].items():
            ab = j["abstention"]
            ab_text = "-" if not ab["questions"] else f"{_num(ab['accuracy'])} ({ab['judged']}/{ab['questions']})"
            rows.append([col.removeprefix("answer_"), _num(j["accuracy"]), j["judged"], j["unjudged"], ab_text,
                         marks.get(col, {}).get("mark", "")])
        lines.append(text_table(["judge", "accuracy", "judged", "unjudged", "abstention", "mark"], rows,
                                align="lrrrrl"))
        for col, j in table["judges"].items():
            if j.get("unreadable"):
                lines.append(f"unreadable by {col.removeprefix('answer_')}: {j['unreadable']} of {j['questions']} "
                             "replies had no verdict; scored wrong, in the accuracy above")
            if j["unjudged_reasons"]:
                reasons = ", ".join(f"{r} {n}" for r, n in j["unjudged_reasons"].items())
                lines.append(f"unjudged by {col.removeprefix('answer_')}: {reasons}")
        for pair in table["agreement"]:
            kappa = "-" if pair["kappa"] is None else f"{pair['kappa']:.3f}"
            lines.append(
                f"agreement {pair['a'].removeprefix('answer_')} vs {pair['b'].removeprefix('answer_')}: "
                f"{_num(pair['agreement'])} (kappa {kappa}, {pair['n']} answers judged by both)"
            )
        if table["spread"] is not None:
            lines.append(f"spread of accuracy across judges: {table['spread']:.3f}")
    if column.startswith("answer_"):
        lines.append(_headline_accuracy(entry, probes, system, column, marks.get(column, {}).get("mark", "")))
    return "\n".join(lines)


def _headline_accuracy(entry: Mapping[str, Any], probes: pl.DataFrame, system: str, column: str, mark: str) -> str:
    per_kind = [g["scores"].get(column, {}).get("mean") for g in entry["per_kind"].values()]
    kind_means = [v for v in per_kind if v is not None]
    overall = entry["overall"]["scores"].get(column, {})
    parts = [f"overall {_num(overall.get('mean'))} ({overall.get('n', 0)} judged)"]
    task = sum(kind_means) / len(kind_means) if kind_means else None
    parts.append(f"task-averaged {_num(task)} over {len(kind_means)} kinds")
    rows = probes.filter((pl.col("system") == system) & pl.col("excluded").is_not_null()) if probes.height else probes
    if rows.height and column in rows.columns:
        for reason in sorted(set(rows["excluded"].to_list())):
            x = rows.filter(pl.col("excluded") == reason)[column].cast(pl.Float64).fill_null(math.nan).to_numpy()
            judged = x[~np.isnan(x)]
            mean = float(judged.mean()) if judged.size else None
            parts.append(f"{reason} {_num(mean)} ({judged.size} of {x.size} judged)")
    unreadable = ((entry.get("answers") or {}).get("judges") or {}).get(column, {}).get("unreadable")
    if unreadable:
        parts.append(f"{unreadable} replies without a verdict scored wrong")
    text = f"{column}: " + ", ".join(parts)
    return f"{text} [{mark}]" if mark else text
