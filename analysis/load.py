"""The load table: latency in simulated time, queue waits, throughput, ingestion lag, deadlines.

Reads the columns ``memsim.sim.load`` adds to a run's rows (a run with a ``[load]``
table). Every figure is in simulated seconds. Under ``memory_time =
"modelled"`` the table is a function of the seed and goes into
``metrics.json``; under ``"measured"`` it depends on the machine and goes into
``perf.json`` (``memsim.analysis.summary``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from memsim.sim.load import percentiles

__all__ = ["load_table", "format_load"]


def _col(frame: pl.DataFrame, name: str) -> list[float]:
    if name not in frame.columns or frame.height == 0:
        return []
    return [float(v) for v in frame[name].drop_nulls().to_list()]


def load_table(
    probes: pl.DataFrame, timeline: pl.DataFrame, *, score: str, deadline_s: float | None
) -> dict[str, Any]:
    """Per system: latency percentiles per operation, waits, throughput, lagged questions, deadline accuracy.

    Args:
        probes: the run's question rows (with ``memsim.sim.load``'s columns).
        timeline: the run's session rows (with ``ingest_*_s``).
        score: the column whose mean is "accuracy" (a judge's column when a reader ran, else the headline metric).
        deadline_s: the run's answer deadline (None: accuracy with deadlines equals without).
    """
    out: dict[str, Any] = {"score": score, "deadline_s": deadline_s, "systems": {}}
    if probes.height == 0 or "latency_s" not in probes.columns:
        return out
    scored = probes.filter(pl.col("error").is_null() & pl.col("latency_s").is_not_null())
    if "excluded" in scored.columns:
        scored = scored.filter(pl.col("excluded").is_null())
    for system in dict.fromkeys(scored["system"].to_list()):
        rows = scored.filter(pl.col("system") == system)
        sessions = timeline.filter((pl.col("system") == system) & (pl.col("event") == "session")) if timeline.height else timeline
        values = np.asarray([np.nan if v is None else float(v) for v in rows[score].to_list()], dtype=float)
        ok = ~np.isnan(values)
        miss = np.asarray([bool(v) for v in rows["deadline_miss"].fill_null(False).to_list()], dtype=bool)
        lag = np.asarray([bool(v) for v in rows["ingest_lag"].fill_null(False).to_list()], dtype=bool)
        arrive = np.asarray(rows["t_days"].to_list(), dtype=float) * 86400.0
        done = arrive + np.asarray(rows["latency_s"].to_list(), dtype=float)
        span_h = (done.max() - arrive.min()) / 3600.0 if rows.height else 0.0
        with_deadline = np.where(miss, 0.0, values)
        out["systems"][system] = {
            "questions": rows.height,
            "sessions": sessions.height,
            "ingest": {
                "latency": percentiles(_col(sessions, "ingest_latency_s")),
                "wait": percentiles(_col(sessions, "ingest_wait_s")),
                "service": percentiles(_col(sessions, "ingest_service_s")),
            },
            "retrieve": {
                "latency": percentiles(_col(rows, "retrieve_latency_s")),
                "wait": percentiles(_col(rows, "retrieve_wait_s")),
                "service": percentiles(_col(rows, "retrieve_service_s")),
            },
            "answer": {
                "latency": percentiles(_col(rows, "latency_s")),
                "wait": percentiles(_col(rows, "llm_wait_s")),
                "service": percentiles(_col(rows, "llm_service_s")),
            },
            "questions_per_hour": rows.height / span_h if span_h > 0 else None,
            "peak_questions_per_hour": int(np.bincount((done // 3600.0).astype(np.int64)).max()) if rows.height else 0,
            "lagged_questions": int(lag.sum()),
            "lagged_accuracy": float(values[lag & ok].mean()) if (lag & ok).any() else None,
            "deadline_misses": int(miss.sum()),
            "accuracy": float(values[ok].mean()) if ok.any() else None,
            "accuracy_with_deadline": float(with_deadline[ok].mean()) if ok.any() else None,
        }
    return out


def _f(v: float | None, scale: float = 1.0, fmt: str = "{:.2f}") -> str:
    return "—" if v is None else fmt.format(v * scale)


def format_load(table: Mapping[str, Any], *, where: str = "metrics.json") -> str:
    """The load table as text: one row per system, seconds of simulated time."""
    systems: Mapping[str, Any] = table.get("systems", {})
    if not systems:
        return "(no load rows)"
    head = (
        f"{'system':<22} {'ingest p50/p95/p99 s':>22} {'retrieve p50/p95/p99 s':>24} {'wait p95 s':>10} "
        f"{'answer p50/p95/p99 s':>22} {'peak q/h':>8} {'lagged':>6} {'late':>5} {'acc %':>6} {'acc dl %':>8}"
    )
    lines = [head]
    for name, s in systems.items():
        def trio(p: Mapping[str, Any]) -> str:
            return "/".join(_f(p.get(k)) for k in ("p50", "p95", "p99"))

        lines.append(
            f"{name:<22} {trio(s['ingest']['latency']):>22} {trio(s['retrieve']['latency']):>24} "
            f"{_f(s['retrieve']['wait'].get('p95')):>10} {trio(s['answer']['latency']):>22} "
            f"{s['peak_questions_per_hour']:>8} {s['lagged_questions']:>6} {s['deadline_misses']:>5} "
            f"{_f(s['accuracy'], 100, '{:.1f}'):>6} {_f(s['accuracy_with_deadline'], 100, '{:.1f}'):>8}"
        )
    deadline = table.get("deadline_s")
    lines.append(
        f"simulated seconds; answer = arrival to answer; wait = queue wait before retrieval; peak q/h = most answers in one simulated hour; "
        f"lagged = asked while an earlier session of that user was still queued for ingest; late = past the deadline; acc = mean {table.get('score')}, "
        f"acc dl = late answers ({'deadline ' + str(deadline) + ' s' if deadline else 'no deadline'}) scored 0; from {where}"
    )
    return "\n".join(lines)


def score_column(columns: Sequence[str], metric: str) -> str:
    """The column accuracy is read from: the first judge's answer column when a reader ran, else the metric."""
    answers = [c for c in columns if c.startswith("answer_")]
    return answers[0] if answers else metric
