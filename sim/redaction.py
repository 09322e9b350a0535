"""Redaction of run rows: the text that came from a turn a user asked to forget.

A row's retrieved text, evidence text, gold answer and reader's answer are
replaced with ``REDACTED`` where its evidence or retrieved memories came from
a deleted turn, and with ``REDACTED_COPY`` where they hold a deleted turn's
text whatever their memory names as its source
(``memsim.sim.erasure.CopyFinder``). The recorder (``memsim.sim.recorder``)
redacts the rows it holds and the parts it has committed with these.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from memsim.sim.erasure import REDACTED_COPY, CopyFinder

__all__ = ["REDACTED", "frame_ids", "frame_texts", "redact_frame", "redact_row", "redacted_rows"]

REDACTED = "[redacted: from a deleted turn]"
"""What stands in the run folder for text that came from a turn a user asked to forget."""
_TEXT_COLUMNS = ("gold", "answer", "answer_raw")
"""Text columns of a row whose evidence or memories came from a deleted turn (besides ``retrieved_text``)."""
_MARKS = (REDACTED, REDACTED_COPY)
"""What redaction leaves: never searched again, never counted as text."""


def redact_row(row: dict[str, Any], gone: set[str] | frozenset[str], copies: CopyFinder | None = None) -> bool:
    """Redact, in place, the text of ``row`` that came from turns in ``gone`` or holds a text ``copies`` finds.

    Returns whether anything changed.
    """
    hit = [not gone.isdisjoint(s or ()) for s in row.get("retrieved_sources") or ()]
    from_deleted = any(hit) or any(t in gone for t in (row.get("evidence_ids") or ()))
    changed = False
    texts = row.get("retrieved_text")
    if from_deleted and texts is not None:
        row["retrieved_text"] = texts = [REDACTED if h else t for t, h in zip(texts, hit)] + list(texts[len(hit):])
        changed = True
    if copies:
        if texts is not None:
            cleaned = [REDACTED_COPY if isinstance(t, str) and t not in _MARKS and copies.holds(t) else t for t in texts]
            if cleaned != list(texts):
                row["retrieved_text"] = cleaned
                changed = True
    said = row.get("evidence_text")
    if said is not None:
        ids = list(row.get("evidence_ids") or ())
        cleaned = [REDACTED if i < len(ids) and ids[i] in gone else
                   REDACTED_COPY if copies and isinstance(t, str) and t not in _MARKS and copies.holds(t) else t
                   for i, t in enumerate(said)]
        if cleaned != list(said):
            row["evidence_text"] = cleaned
            changed = True
    for column in _TEXT_COLUMNS:
        value = row.get(column)
        if value is None or value in _MARKS:
            continue
        if from_deleted:
            row[column] = REDACTED
            changed = True
        elif copies and isinstance(value, str) and copies.holds(value):
            row[column] = REDACTED_COPY
            changed = True
    return changed or from_deleted


def redacted_rows(probes: pl.DataFrame) -> int:
    """Rows of the run whose text was redacted after a deletion."""
    if probes.height == 0:
        return 0
    marked = pl.lit(False)
    for mark in _MARKS:
        marked = marked | pl.col("retrieved_text").list.contains(mark).fill_null(False) | (pl.col("gold") == mark).fill_null(False)
    return probes.filter(marked).height


def frame_ids(frame: pl.DataFrame) -> frozenset[str]:
    """Every turn id a frame's rows were derived from (evidence and memory sources)."""
    ids: set[str] = set()
    if "evidence_ids" in frame.columns:
        ids.update(frame["evidence_ids"].explode().drop_nulls().to_list())
    if "retrieved_sources" in frame.columns:
        ids.update(frame["retrieved_sources"].explode().explode().drop_nulls().to_list())
    return frozenset(ids)


def frame_texts(frame: pl.DataFrame) -> frozenset[str]:
    """Every distinct text a frame's rows carry that may hold a deleted turn's text (memories, gold, answers)."""
    texts: set[str] = set()
    for column in ("retrieved_text", "evidence_text"):
        if column in frame.columns:
            texts.update(frame[column].explode().drop_nulls().unique().to_list())
    for column in _TEXT_COLUMNS:
        if column in frame.columns and frame[column].dtype == pl.Utf8:
            texts.update(frame[column].drop_nulls().unique().to_list())
    return frozenset(texts - set(_MARKS))


def redact_frame(
    frame: pl.DataFrame, gone: frozenset[str], copies: CopyFinder | None = None
) -> tuple[int, pl.DataFrame]:
    """(rows changed, the frame with their text redacted); the frame itself when nothing came from ``gone``.

    The rows derived from ``gone`` are found by one vectorised pass, those holding a text
    ``copies`` finds by one pass over the frame's distinct texts; only those rows are rebuilt.
    """
    if frame.height == 0:
        return 0, frame
    ids = list(gone)
    hit = pl.lit(False)
    if copies:
        found = [t for t in frame_texts(frame) if copies.holds(t)]
        if found:
            for column in ("retrieved_text", "evidence_text"):
                if column in frame.columns:
                    hit = hit | pl.col(column).list.eval(pl.element().is_in(found)).list.any().fill_null(False)
            for column in _TEXT_COLUMNS:
                if column in frame.columns and frame[column].dtype == pl.Utf8:
                    hit = hit | pl.col(column).is_in(found).fill_null(False)
    if "evidence_ids" in frame.columns:
        hit = hit | pl.col("evidence_ids").list.eval(pl.element().is_in(ids)).list.any().fill_null(False)
    if "retrieved_sources" in frame.columns:
        sources = pl.element().list.eval(pl.element().is_in(ids)).list.any()
        hit = hit | pl.col("retrieved_sources").list.eval(sources).list.any().fill_null(False)
    indexed = frame.with_row_index("_row")
    touched = indexed.filter(hit)
    if touched.height == 0:
        return 0, frame
    rows = touched.drop("_row").to_dicts()
    changed = sum(redact_row(row, gone, copies) for row in rows)
    patch = pl.DataFrame(rows, schema=frame.schema, strict=False).insert_column(0, touched["_row"])
    return changed, pl.concat([indexed.filter(~hit), patch]).sort("_row").drop("_row")
