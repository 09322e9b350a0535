"""The judge check's report: a table of every judge's figures, and the folder ``memsim judge-check`` writes."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from memsim.analysis.judge_check_items import CATEGORIES, CheckItem, check_set_digest
from memsim.analysis.judge_check_stats import RELIABLE_ACCURACY
from memsim.core.table import text_table

__all__ = ["format_check_table", "write_check"]


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def format_check_table(results: Mapping[str, Mapping[str, Any]], *, n_items: int | None = None) -> str:
    """One row per judge (accuracy, false accept, false reject, kappa, unjudged, mark), then per category."""
    names = list(results)
    rows = []
    for name, r in results.items():
        kappa = "-" if r.get("kappa") is None else f"{r['kappa']:.3f}"
        mark = "reliable" if r.get("reliable") else f"UNRELIABLE (< {100 * RELIABLE_ACCURACY:.0f}%)"
        rows.append([name, _pct(r["accuracy"]), _pct(r["false_accept"]), _pct(r["false_reject"]), kappa,
                     r["unjudged"], mark])
    lines = [text_table(["judge", "acc%", "FA%", "FR%", "kappa", "unjudged", "mark"], rows, align="lrrrrrl")]
    cats = [c for c in CATEGORIES if any(c in r.get("per_category", {}) for r in results.values())]
    if cats:
        lines += ["", "accuracy % per category (label: pass/fail, n items)"]
        first = next(iter(results.values()))
        rows = [
            [c, "pass" if CATEGORIES[c] else "fail", first.get("per_category", {}).get(c, {}).get("n", 0),
             *(_pct(r.get("per_category", {}).get(c, {}).get("accuracy")) for r in results.values())]
            for c in cats
        ]
        lines.append(text_table(["category", "label", "n", *names], rows))
    if n_items is not None:
        lines.append("")
        lines.append(
            f"{n_items} labelled items; accuracy counts an unjudged item as a miss; FA = fail items accepted, "
            f"FR = pass items rejected; a judge below {100 * RELIABLE_ACCURACY:.0f}% is unreliable"
        )
    return "\n".join(lines)


def write_check(
    out_dir: str | Path,
    items: Sequence[CheckItem],
    results: Mapping[str, Mapping[str, Any]],
    *,
    meta: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``items.csv`` (every item with every judge's score), ``judge_check.json`` and ``table.txt``."""
    import polars as pl

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frame = pl.DataFrame([asdict(it) for it in items])
    for name, r in results.items():
        frame = frame.with_columns(pl.Series(f"score_{name}", [math.nan if s is None else s for s in r["scores"]],
                                             dtype=pl.Float64))
    frame.write_csv(out / "items.csv")
    summary = {
        "meta": dict(meta or {}),
        "n_items": len(items),
        "items": check_set_digest(items),
        "threshold": RELIABLE_ACCURACY,
        "judges": {n: {k: v for k, v in r.items() if k != "scores"} for n, r in results.items()},
    }
    (out / "judge_check.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out / "table.txt").write_text(format_check_table(results, n_items=len(items)) + "\n", encoding="utf-8")
    return out
