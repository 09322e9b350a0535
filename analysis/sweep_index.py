"""A sweep folder's records: each cell's state (``cell.json``), the index (``index.parquet``) and the cell table.

``CellRecord`` is a cell and what became of it, ``SweepResult`` what a
sweep folder holds after ``run_sweep``; ``index_frame`` is one row per cell
and system with the cell's state and headline figures, and ``format_cells``
the cells as a text table. Re-exported by ``memsim.analysis.sweep``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsim.analysis.sweep_plan import CELL_FILE, CELLS, INDEX_FILE, Cell
from memsim.core.errors import UserError
from memsim.core.files import write_atomic

__all__ = ["CellRecord", "SweepResult", "read_records", "index_frame", "write_index", "read_index", "format_cells"]


@dataclass(frozen=True)
class CellRecord:
    """A cell and what became of it."""

    cell: Cell
    state: str
    """``done``, ``failed`` or ``pending``."""
    error: str | None = None
    wall_seconds: float | None = None
    headline: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepResult:
    """What a sweep holds after ``run_sweep``."""

    out_dir: Path
    records: tuple[CellRecord, ...]
    ran: int
    """Cells played by this call (the others were finished before)."""
    wall_seconds: float

    @property
    def counts(self) -> dict[str, int]:
        """Cells per state."""
        out = {"done": 0, "failed": 0, "pending": 0}
        for r in self.records:
            out[r.state] = out.get(r.state, 0) + 1
        return out


def read_records(out_dir: Path, cells: Sequence[Cell]) -> list[CellRecord]:
    """Each cell's state from its ``cell.json`` (``pending`` when there is none)."""
    out = []
    for c in cells:
        path = Path(out_dir) / CELLS / c.cell_id / CELL_FILE
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            out.append(CellRecord(c, "pending"))
            continue
        out.append(CellRecord(c, rec.get("state", "pending"), rec.get("error"), rec.get("wall_seconds"),
                              rec.get("headline") or {}))
    return out


_INDEX_FIGURES = ("accuracy", "questions", "first", "second", "did_twin", "did_twin_lo", "did_twin_hi",
                  "did_control", "did_control_lo", "did_control_hi", "answer_accuracy")


def index_frame(records: Sequence[CellRecord]) -> Any:
    """One row per cell and system: the cell, its point, seed, state, error and headline figures."""
    import polars as pl

    rows = []
    for r in records:
        c = r.cell
        for system in c.systems:
            h = r.headline.get(system, {})
            rows.append({
                "cell": c.cell_id, "index": c.index, "scenario": c.scenario,
                "point": json.dumps(c.point, sort_keys=True), "base": c.is_base,
                "system_set": ",".join(c.systems), "system": system, "seed": c.seed, "state": r.state,
                "error": r.error, "wall_seconds": r.wall_seconds, "metric": c.spec.get("metric"),
                **{k: (None if h.get(k) is None else float(h[k])) for k in _INDEX_FIGURES},
                "dir": f"{CELLS}/{c.cell_id}",
            })
    schema = {"cell": pl.Utf8, "index": pl.Int64, "scenario": pl.Utf8, "point": pl.Utf8, "base": pl.Boolean,
              "system_set": pl.Utf8, "system": pl.Utf8, "seed": pl.Int64, "state": pl.Utf8, "error": pl.Utf8,
              "wall_seconds": pl.Float64, "metric": pl.Utf8, **{k: pl.Float64 for k in _INDEX_FIGURES}, "dir": pl.Utf8}
    return pl.DataFrame(rows, schema=schema)


def write_index(out_dir: Path, records: Sequence[CellRecord]) -> None:
    """Write ``index.parquet`` of ``records`` into the sweep folder, atomically."""
    write_atomic(out_dir / INDEX_FILE, index_frame(records).write_parquet)


def read_index(out_dir: str | Path) -> Any:
    """A sweep's ``index.parquet``.

    Raises:
        UserError: not a sweep folder.
    """
    import polars as pl

    path = Path(out_dir) / INDEX_FILE
    if not path.is_file():
        raise UserError(f"{out_dir}: no {INDEX_FILE}; not a sweep folder (run memsim sweep SPEC.toml --out DIR)")
    return pl.read_parquet(path)


def format_cells(cells: Sequence[Cell], costs: Sequence[Mapping[str, Any]] | None = None,
                 records: Sequence[CellRecord] | None = None) -> str:
    """The cells as a text table (with costs and states when given)."""
    lines = [f"{'#':>4} {'cell':<16} {'scenario':<12} {'point':<34} {'systems':<34} {'seed':>5}"
             + (f" {'turns':>6} {'quest':>6} {'est s':>7} {'LLM calls':>9} {'tokens':>9}" if costs else "")
             + (f" {'state':<7}" if records else "")]
    for i, c in enumerate(cells):
        point = ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in c.point.items()) or "base"
        line = f"{c.index:>4} {c.cell_id:<16} {c.scenario:<12} {point[:34]:<34} {' & '.join(c.systems)[:34]:<34} {c.seed:>5}"
        if costs:
            e = costs[i]
            line += f" {e['turns']:>6} {e['questions']:>6} {e['seconds']:>7.1f} {e['llm_calls']:>9} {e['tokens']:>9}"
        if records:
            line += f" {records[i].state:<7}"
        lines.append(line)
    return "\n".join(lines)
