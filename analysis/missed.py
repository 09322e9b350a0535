"""The questions most systems miss, for error analysis: ranked by how many systems miss each, with what each retrieved.

A system **misses** a scored question when its headline score there is 0
(``recall_all@10`` = 0: some gold evidence turn is not among the top 10
memories' provenance). Only the systems themselves count (their twins and
placebos are arms of the same system). Each question comes with its text,
its gold answer, its gold evidence turns and, per system, the score, the
rank of the first evidence memory, the answer (when a reader ran) and the
top retrieved memories as the rows hold them (the recorder has already
redacted text that came from a turn deleted later in the run).

The run folder holds no table of turns: the text of a gold evidence turn is
shown only where some arm retrieved a memory made from that turn alone
(its provenance is exactly that turn), as the run stored it; otherwise the
turn is named by id and marked as not in the run folder.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

__all__ = ["MissedQuestion", "SystemAttempt", "missed_questions", "missed_markdown", "as_block", "MISSED_SHOWN",
           "MEMORIES_SHOWN", "NOT_IN_FOLDER"]

MISSED_SHOWN = 25
"""Questions shown, at most."""
MEMORIES_SHOWN = 3
"""Top retrieved memories shown per system."""
NOT_IN_FOLDER = "(text not in the run folder: no arm retrieved a memory made from this turn alone)"
"""What stands for an evidence turn's text that the rows do not hold."""


@dataclass(frozen=True, slots=True)
class SystemAttempt:
    """What one system did with one question."""

    system: str
    score: float | None
    missed: bool
    first_rank: int | None
    answer: str | None
    memories: tuple[str, ...]
    """The top ``MEMORIES_SHOWN`` retrieved texts, redacted where they came from a deleted turn."""


@dataclass(frozen=True, slots=True)
class MissedQuestion:
    """One question and every system's attempt at it."""

    question_id: str
    kind: str
    user_id: str
    question: str
    gold: str
    evidence: tuple[tuple[str, str], ...]
    """(turn id, its text as the run stored it, or ``NOT_IN_FOLDER``)."""
    missed_by: int
    systems: int
    attempts: tuple[SystemAttempt, ...]


def _float(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _turn_texts(rows: pl.DataFrame, wanted: set[str]) -> dict[str, str]:
    """Turn id -> the text of a memory whose provenance is exactly that turn, for the ids in ``wanted``."""
    found: dict[str, str] = {}
    if not {"retrieved_sources", "retrieved_text"} <= set(rows.columns):
        return found
    for sources, texts in rows.select("retrieved_sources", "retrieved_text").iter_rows():
        for src, text in zip(sources or (), texts or ()):
            if src is not None and len(src) == 1 and src[0] in wanted and src[0] not in found and text:
                found[src[0]] = text
        if len(found) == len(wanted):
            break
    return found


def _evidence(row: dict[str, Any], found: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The row's evidence turns with their text: as the run recorded it (``evidence_text``, redacted where the turn
    was deleted), else a memory made from that turn alone (runs before the column), else ``NOT_IN_FOLDER``."""
    ids = list(row.get("evidence_ids") or ())
    said = list(row.get("evidence_text") or ())
    return tuple((e, said[i] if i < len(said) and said[i] is not None else found.get(e, NOT_IN_FOLDER))
                 for i, e in enumerate(ids))


def missed_questions(
    probes: pl.DataFrame, *, metric: str, systems: Sequence[str], limit: int = MISSED_SHOWN
) -> list[MissedQuestion]:
    """The scored questions ranked by how many of ``systems`` miss them (most first), at most ``limit``.

    Ties are broken by the lower mean score over the systems, then by question id, so the order is a
    function of the rows alone.

    Args:
        probes: the run's rows (``probes.parquet``).
        metric: the headline column.
        systems: the systems that count (twins and placebos left out).
        limit: questions returned, at most.
    """
    if probes.height == 0 or metric not in probes.columns or not systems:
        return []
    scored = probes.filter(pl.col("error").is_null() & pl.col("excluded").is_null()
                           & pl.col("system").is_in(list(systems)))
    scored = scored.with_columns(pl.col(metric).cast(pl.Float64).fill_nan(None).alias("_score")).filter(
        pl.col("_score").is_not_null())
    if scored.height == 0:
        return []
    ranked = (
        scored.group_by("question_id")
        .agg((pl.col("_score") == 0).sum().alias("missed_by"), pl.col("_score").mean().alias("mean"),
             pl.len().alias("n"))
        .filter(pl.col("missed_by") > 0)
        .sort(["missed_by", "mean", "question_id"], descending=[True, False, False])
        .head(limit)
    )
    chosen = ranked["question_id"].to_list()
    part = scored.filter(pl.col("question_id").is_in(chosen))
    evidence_ids = {e for ids in part["evidence_ids"].to_list() for e in (ids or ())} if "evidence_ids" in part.columns else set()
    texts = _turn_texts(probes, evidence_ids)
    order = {s: i for i, s in enumerate(systems)}
    out: list[MissedQuestion] = []
    for qid, missed_by, n in ranked.select("question_id", "missed_by", "n").iter_rows():
        rows = sorted(part.filter(pl.col("question_id") == qid).iter_rows(named=True), key=lambda r: order[r["system"]])
        first = rows[0]
        attempts = tuple(
            SystemAttempt(
                system=r["system"], score=_float(r["_score"]), missed=r["_score"] == 0,
                first_rank=r.get("first_rank"), answer=r.get("answer"),
                memories=tuple(str(t) for t in (r.get("retrieved_text") or ())[:MEMORIES_SHOWN]),
            )
            for r in rows
        )
        out.append(MissedQuestion(
            question_id=str(qid), kind=str(first.get("kind") or ""), user_id=str(first.get("user_id") or ""),
            question=str(first.get("question") or ""), gold=str(first.get("gold") or ""),
            evidence=_evidence(first, texts),
            missed_by=int(missed_by), systems=int(n), attempts=attempts,
        ))
    return out


def missed_markdown(items: Sequence[MissedQuestion], metric: str, *, limit: int = 10) -> str:
    """The first ``limit`` questions as Markdown: a line each, its evidence and each system's top memory."""
    if not items:
        return f"No scored question has a {metric} of 0 for any system."
    lines = [f"Ranked by how many systems score 0 on {metric}; memories as the run stored them (redacted where "
             "their turn was deleted later)."]
    for q in items[:limit]:
        lines += ["", f"- **{q.question_id}** ({q.kind}, missed by {q.missed_by} of {q.systems}): {q.question} "
                      f"— gold: {q.gold or '—'}"]
        lines += [f"  - evidence {tid}: {text}" for tid, text in q.evidence]
        lines += [f"  - {a.system} ({'missed' if a.missed else 'hit'}, first rank "
                  f"{'—' if a.first_rank is None else a.first_rank}): {a.memories[0] if a.memories else '(nothing retrieved)'}"
                  for a in q.attempts]
    return "\n".join(lines)


def as_block(items: Sequence[MissedQuestion], metric: str) -> Mapping[str, Any]:
    """What ``report.html.j2``'s ``missed`` block renders."""
    return {"items": list(items), "metric": metric, "shown": MEMORIES_SHOWN}
