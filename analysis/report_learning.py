"""The report's lead, learning through use: the contrasts and arms tables, and the gain bands.

A longitudinal run's report opens with the contrasts of every feedback-using system (learning from
feedback against the best content-ignoring arm, then against each arm) and each arm's halves of the
metric and of stale>cur, one pair of tables per answer judge; all from ``metrics.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memsim.analysis.learning import (
    CONTRASTS,
    arm_headers,
    contrast_headers,
    contrast_rows,
    format_diff,
    format_p,
    learning_header,
    learning_notes,
)
from memsim.analysis.load import RunData
from memsim.analysis.report_tables import Table, family_order, is_missing, percent, run_arms

__all__ = ["gain_bands", "twin_tables"]


def _excludes_zero(e: Mapping[str, Any], key: str) -> int:
    """+1 / -1 when the interval of ``key`` lies above / below zero, else 0."""
    lo, hi = e.get(f"{key}_lo"), e.get(f"{key}_hi")
    if is_missing(lo) or is_missing(hi):
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
    role_of = {lab: (s, r) for s, fam in run_arms(run).items() for r, lab in fam.items()}
    rows, classes = [], []
    for label in family_order(run):
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
            name, percent(e.get("first")), percent(e.get("second")), percent(e.get("stale_first")), percent(e.get("stale_second")),
            format_diff(e, "did_control") if "did_control" in e else "",
            format_p(e.get("did_control_p")) if "did_control" in e else "",
        ))
        classes.append(cls)
    return rows, classes


def _contrast_rows(run: RunData, table: Mapping[str, Mapping[str, Any]]) -> tuple[list[tuple[str, ...]], list[str]]:
    """Rows of the contrasts table (``memsim.analysis.learning.contrast_rows``), marked up or down by the 2nd half."""
    ordered = {s: table[s] for s in family_order(run) if s in table}
    rows = [tuple(r) for r in contrast_rows(ordered)]
    classes = []
    for label, e in ordered.items():
        for key, _ in CONTRASTS:
            c = (e.get("contrasts") or {}).get(key)
            if c is not None:
                sign = _excludes_zero(c, "second")
                classes.append("up" if sign > 0 else "down" if sign < 0 else "")
    return rows, classes


def _learning_tables(run: RunData, table: Mapping[str, Mapping[str, Any]], metric: str) -> list[tuple[str, Table]]:
    """The contrasts table (with the footnotes) when any system has a twin, then the arms table."""
    notes = learning_notes(table, metric=metric, control=run.control, missing_control=run.metrics.get("control_missing"),
                           balance_kinds=bool(run.metrics.get("balance_kinds")))
    arms, arm_classes = _learning_rows(run, table)
    out = []
    contrasts, classes = _contrast_rows(run, table)
    if contrasts:
        out.append((f"{learning_header(table, metric)}: contrasts per feedback-using system",
                    Table(tuple(contrast_headers(metric)), tuple(contrasts), tuple(notes), tuple(classes))))
        notes = []
    headers = tuple(h for h in arm_headers(metric) if h != "arm")
    out.append((f"{metric}: each arm's halves", Table(headers, tuple(arms), tuple(notes), tuple(arm_classes))))
    return out


def twin_tables(run: RunData) -> list[tuple[str, Table]]:
    """The headline's learning tables, then each answer judge's (``metrics.json``'s ``answer_learning``), titled."""
    if not run.longitudinal or not run.metrics.get("systems"):
        return []
    tables = {run.metric: {s: run.entry(s) for s in run.systems}, **(run.metrics.get("answer_learning") or {})}
    return [t for m, tab in tables.items() for t in _learning_tables(run, {s: tab[s] for s in run.systems if s in tab}, m)]


def gain_bands(run: RunData) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """Gain over the twin per window with its band, per learning system and per placebo (``metrics.json``)."""
    def ordered(key: str) -> dict[str, list[dict[str, Any]]]:
        bands = run.metrics.get(key) or {}
        return {s: bands[s] for s in run.systems if s in bands}

    return ordered("gain_bands"), ordered("placebo_bands")
