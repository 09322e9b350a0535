"""``memsim erasure RUN_DIR``: what deletion requests left behind, by place and by simulated month.

Reads a run folder: the timeline's ``forget`` rows (what each system still
held right after a deletion, by place: ``memsim.sim.erasure``), the question rows
(``deleted_leaks``: retrieved memories derived from turns deleted earlier)
and ``run.json``'s ``erasure`` entries (memsim's own caches before and after
the purge). Per system: deletions, leaks by place, questions that later
retrieved a deleted memory and, when a reader ran, were answered from it,
and the time to full erasure (from a user's deletion to the last question
of that user that still retrieved a deleted memory; 0 when none did).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from memsim.core.table import text_table

__all__ = ["erasure_table", "format_erasure"]

_MONTH_DAYS = 30.0


def erasure_table(probes: pl.DataFrame, timeline: pl.DataFrame, info: Mapping[str, Any]) -> dict[str, Any]:
    """Leaks by place and month per system, later leaking questions, time to full erasure, cache purges."""
    out: dict[str, Any] = {"systems": {}, "caches": _caches(info.get("erasure") or [])}
    forgets = timeline.filter(pl.col("event") == "forget") if timeline.height else timeline
    # ``leaked`` is every place's total since runs record ``leaked_provenance``; before, it was provenance+merged.
    total = "leaked_provenance" in forgets.columns
    places = [c for c in forgets.columns if (c == "leaked" and not total) or c.startswith("leaked_")]
    for system in dict.fromkeys(timeline["system"].to_list() if timeline.height else []):
        f = forgets.filter(pl.col("system") == system) if forgets.height else forgets
        q = probes.filter(pl.col("system") == system) if probes.height else probes
        by_place = {("provenance+merged" if c == "leaked" else c.removeprefix("leaked_")): int(f[c].fill_null(0).sum()) for c in places}
        by_month: dict[int, int] = {}
        for row in f.iter_rows(named=True):
            month = int(row["t_days"] // _MONTH_DAYS) + 1
            by_month[month] = by_month.get(month, 0) + sum(int(row[c] or 0) for c in places if total or c != "leaked_merged")
        leaking = q.filter(pl.col("deleted_leaks") > 0) if q.height else q
        answered = leaking.filter(pl.col("answer").is_not_null()).height if "answer" in leaking.columns else None
        worst = 0.0
        first_deletion = {r["user_id"]: r["t_days"] for r in f.sort("t_days").unique("user_id", keep="first").iter_rows(named=True)} if f.height else {}
        for row in leaking.iter_rows(named=True):
            start = first_deletion.get(row["user_id"])
            if start is not None:
                worst = max(worst, row["t_days"] - start)
        out["systems"][system] = {
            "deletions": f.height,
            "leaks_by_place": by_place,
            "leaks_by_month": by_month,
            "questions_retrieving_deleted": leaking.height,
            "answered_from_deleted": answered,
            "days_to_full_erasure": worst if leaking.height else 0.0,
        }
    return out


def _caches(entries: list[Mapping[str, Any]]) -> dict[str, Any]:
    total: dict[str, dict[str, int]] = {}
    for e in entries:
        for stage in ("held_before", "purged", "held_after"):
            for cache, n in (e.get(stage) or {}).items():
                total.setdefault(cache, {}).setdefault(stage, 0)
                total[cache][stage] += int(n)
    return total


def format_erasure(table: Mapping[str, Any]) -> str:
    """The erasure table as text."""
    rows = []
    for name, s in table["systems"].items():
        places = ", ".join(f"{k} {v}" for k, v in s["leaks_by_place"].items()) or "—"
        answered = "—" if s["answered_from_deleted"] is None else str(s["answered_from_deleted"])
        rows.append([name, s["deletions"], places, s["questions_retrieving_deleted"], answered,
                     f"{s['days_to_full_erasure']:.2f}"])
    head = ["system", "deletions", "leaks by place (right after forget)", "later q", "answered", "days to erase"]
    lines = [text_table(head, rows, align="lrlrrr")]
    for cache, c in table["caches"].items():
        lines.append(f"memsim {cache}: held {c.get('held_before', 0)} copies at deletion, purged {c.get('purged', 0)}, left {c.get('held_after', 0)}")
    lines.append("later q: questions after a deletion that retrieved a deleted memory; answered: of those, answered by the reader")
    return "\n".join(lines)
