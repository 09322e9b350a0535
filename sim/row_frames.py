"""Rows (plain dicts) made into polars frames, for the recorder (``memsim.sim.recorder``).

A frame has every column of its schema, then the rows' other columns, each
typed by its first non-null value; list-of-lists-of-strings columns are built
from joined strings, which is much faster than row by row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

__all__ = ["concat_frames", "rows_frame"]

_NESTED = pl.List(pl.List(pl.Utf8))
_SEP = "\x1f"


def rows_frame(rows: list[dict[str, Any]], schema: Mapping[str, Any]) -> pl.DataFrame:
    """The frame of ``rows``: the columns of ``schema``, then the rows' other columns."""
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
    columns: dict[str, Any] = {name: [row.get(name) for row in rows] for name in full}
    for name, dtype in full.items():
        if dtype == _NESTED:
            columns[name] = _nested_strings(name, columns[name])
    return pl.DataFrame(columns, schema=full, strict=False)


def _nested_strings(name: str, values: list[Any]) -> pl.Series | list[Any]:
    """A list-of-lists-of-strings column, built from joined strings (polars builds nested lists row by row, slowly).

    Falls back to the values as given when a row is missing or an inner list
    is empty or holds the separator.
    """
    joined: list[list[str]] = []
    for row in values:
        if row is None:
            return values
        out = []
        for inner in row:
            if not inner or any(_SEP in t for t in inner):
                return values
            out.append(_SEP.join(inner))
        joined.append(out)
    return pl.Series(name, joined, dtype=pl.List(pl.Utf8)).list.eval(pl.element().str.split(_SEP))


def concat_frames(frames: list[pl.DataFrame], schema: Mapping[str, Any]) -> pl.DataFrame:
    """``frames`` joined one under the other (columns matched by name); an empty frame of ``schema`` when none."""
    if not frames:
        return pl.DataFrame(schema=dict(schema))
    return pl.concat(frames, how="diagonal_relaxed")


def _dtype(value: Any) -> Any:
    if isinstance(value, bool):
        return pl.Boolean
    if isinstance(value, str):
        return pl.Utf8
    if isinstance(value, int):
        return pl.Int64
    return pl.Float64
