"""The run's recorder: processes append rows; frames are built once at the end.

Rows are plain dicts appended to lists (cheap on the hot path); polars frames
are made once, with a fixed schema for the columns every row has, so that an
empty run still yields well-typed, empty frames.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

__all__ = ["Recorder", "PROBE_SCHEMA", "TIMELINE_SCHEMA"]

PROBE_SCHEMA: dict[str, Any] = {
    "system": pl.Utf8,
    "user_id": pl.Utf8,
    "question_id": pl.Utf8,
    "q_index": pl.Int64,
    "time": pl.Datetime("us", "UTC"),
    "t_days": pl.Float64,
    "kind": pl.Utf8,
    "topic": pl.Utf8,
    "reask": pl.Boolean,
    "thread_id": pl.Utf8,
    "question": pl.Utf8,
    "gold": pl.Utf8,
    "evidence_ids": pl.List(pl.Utf8),
    "superseded_ids": pl.List(pl.Utf8),
    "evidence": pl.Float64,
    "first_rank": pl.Int64,
    "stale_above_current": pl.Float64,
    "retrieve_ms": pl.Float64,
    "embed_ms": pl.Float64,
    "n_retrieved": pl.Int64,
    "retrieved_ids": pl.List(pl.Utf8),
    "retrieved_sources": pl.List(pl.List(pl.Utf8)),
    "retrieved_text": pl.List(pl.Utf8),
    "isolation_failures": pl.Int64,
    "deleted_leaks": pl.Int64,
    "error": pl.Utf8,
}
"""Columns every probe row has; score columns (``recall_all@k`` ...) and answer columns are added as Float64."""

TIMELINE_SCHEMA: dict[str, Any] = {
    "system": pl.Utf8,
    "user_id": pl.Utf8,
    "time": pl.Datetime("us", "UTC"),
    "t_days": pl.Float64,
    "event": pl.Utf8,
    "items": pl.Int64,
    "bytes": pl.Int64,
    "vector_bytes": pl.Int64,
    "text_bytes": pl.Int64,
    "metadata_bytes": pl.Int64,
    "llm_calls": pl.Int64,
    "tokens": pl.Int64,
    "ingest_ms": pl.Float64,
    "embed_ms": pl.Float64,
    "turns": pl.Int64,
    "leaked": pl.Int64,
    "error": pl.Utf8,
}
"""Columns of the timeline (one row per session, tick or deletion per system)."""


class Recorder:
    """Collects probe rows (one per question per system) and timeline rows."""

    def __init__(self) -> None:
        self._probes: list[dict[str, Any]] = []
        self._timeline: list[dict[str, Any]] = []
        self.failures: list[dict[str, Any]] = []
        """Systems that raised: system, time, operation, error."""

    def probe(self, row: Mapping[str, Any]) -> None:
        """Record one scored question for one system."""
        self._probes.append(dict(row))

    def timeline(self, row: Mapping[str, Any]) -> None:
        """Record one session / tick / deletion outcome for one system."""
        self._timeline.append(dict(row))

    def failure(self, system: str, time: Any, operation: str, error: str) -> None:
        """Record that ``system`` raised during ``operation``."""
        self.failures.append({"system": system, "time": str(time), "operation": operation, "error": error})

    @property
    def n_probes(self) -> int:
        """Probe rows so far."""
        return len(self._probes)

    def probes_frame(self) -> pl.DataFrame:
        """All probe rows as one frame (fixed columns first, then scores, then answers)."""
        return _frame(self._probes, PROBE_SCHEMA)

    def timeline_frame(self) -> pl.DataFrame:
        """All timeline rows as one frame."""
        return _frame(self._timeline, TIMELINE_SCHEMA)


def _frame(rows: list[dict[str, Any]], schema: Mapping[str, Any]) -> pl.DataFrame:
    # Extra columns take their type from their first non-null value.
    extra: dict[str, Any] = {}
    for row in rows:
        for key, value in row.items():
            if key in schema or (key in extra and extra[key] is not None):
                continue
            extra[key] = None if value is None else _dtype(value)
    full = {**schema, **{k: (v or pl.Float64) for k, v in extra.items()}}
    if not rows:
        return pl.DataFrame(schema=full)
    columns = {name: [row.get(name) for row in rows] for name in full}
    return pl.DataFrame(columns, schema=full, strict=False)


def _dtype(value: Any) -> Any:
    if isinstance(value, bool):
        return pl.Boolean
    if isinstance(value, str):
        return pl.Utf8
    if isinstance(value, int):
        return pl.Int64
    return pl.Float64
