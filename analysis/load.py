"""The one run-folder reader (``read_run``, ``label_arms``), and the load table.

``read_run`` reads ``spec.json``, ``run.json``, the rows, ``metrics.json`` and
``perf.json``; a missing or damaged file is a ``UserError`` naming it. The load
table reads the columns ``memsim.sim.load`` adds to the rows (simulated
seconds): modelled service times make it a function of the seed
(``metrics.json``), measured ones go to ``perf.json``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from memsim.core.errors import SystemsFailed, UserError, naming_file, short_value
from memsim.sim.load import percentiles
from memsim.sim.spec import RunSpec, read_spec

__all__ = ["RunData", "read_run", "label_arms", "twins_and_placebos", "load_table", "format_load"]

_REQUIRED = ("system", "episode", "user_id", "question_id", "q_index", "kind", "excluded", "error")
"""Probe columns every reader relies on besides the metric (``memsim.sim.recorder.PROBE_SCHEMA``)."""


@dataclass(frozen=True, slots=True)
class RunData:
    """A run folder read into memory."""

    path: Path
    """The run folder."""
    spec: RunSpec
    """``spec.json``."""
    probes: pl.DataFrame
    """``probes.parquet``: one row per question per system."""
    timeline: pl.DataFrame
    """``timeline.parquet`` (empty when the folder has none)."""
    info: dict[str, Any]
    """``run.json``: totals, failures, the systems' reports, the arms (empty when absent)."""
    metrics: dict[str, Any] | None
    """``metrics.json`` (None when absent: ``memsim.analysis.summary`` recomputes it from the rows)."""
    perf: dict[str, Any]
    """``perf.json``: wall-clock figures (empty when absent)."""

    @property
    def metric(self) -> str:
        """The headline column (``spec.metric``)."""
        return self.spec.metric

    @property
    def longitudinal(self) -> bool:
        """True for runs with a question stream over time (learning table and curves apply)."""
        return self.spec.kind == "longitudinal"

    @property
    def systems(self) -> list[str]:
        """Labels of the systems that have rows, in the spec's order."""
        present = set(self.probes["system"].to_list()) if self.probes.height else set()
        listed = [s.display for s in self.spec.systems]
        return [s for s in listed if s in present] + sorted(present - set(listed))

    @property
    def control(self) -> str | None:
        """The static control's label in a longitudinal run that has it; static runs have none."""
        return self.spec.control if self.longitudinal and self.spec.control in self.systems else None

    def entry(self, system: str) -> dict[str, Any]:
        """``metrics.json``'s figures of one system (empty when it has none)."""
        return dict((self.metrics or {}).get("systems", {}).get(system) or {})


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except OSError as exc:
        raise UserError(f"{path}: unreadable ({exc.strerror})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object")
    return data


def _parquet(path: Path) -> pl.DataFrame:
    try:
        with naming_file(path, "reading the run folder"):  # a damaged file or failing disk: the file and what failed
            return pl.read_parquet(path)
    except UserError:
        raise
    except Exception as exc:  # polars raises several types for corrupt files
        raise UserError(f"{path}: unreadable ({type(exc).__name__})") from None


def _failed_first(path: Path, probes: pl.DataFrame) -> str | None:
    """Why a run has no scored row, when its systems failed before their first one; None otherwise.

    One line naming each such system, the call that failed and its error, from ``run.json``'s failures.
    """
    if not (path / "run.json").is_file():
        return None
    info = _read_json(path / "run.json")
    failed = info.get("failed_systems") or {}
    scored = set(probes["system"].unique().to_list()) if probes.height and "system" in probes.columns else set()
    first = [label for label in failed if label not in scored]
    if not first or scored:
        return None
    said = []
    for label in first:
        why = next((f for f in info.get("failures") or [] if isinstance(f, dict) and f.get("system") == label), None)
        if why is None:
            said.append(f"system {short_value(label)} failed: {failed[label]}")
            continue
        error = str(why.get("error", "")).removeprefix("SystemCallFailed: ").removeprefix(f"system {label}: ")
        said.append(f"system {short_value(label)} failed in {why.get('operation')} at {why.get('time')}: {error[:300]}")
    return f"{path}: no scored row: {'; '.join(said)}"


def read_run(run_dir: str | Path, *, require: Collection[str] = ()) -> RunData:
    """Read a run folder (longitudinal or static): the one reader every command and report uses.

    Args:
        run_dir: the folder.
        require: files that must be there besides ``spec.json`` and
            ``probes.parquet`` (e.g. ``run.json``, ``timeline.parquet``); the
            others are optional (an empty frame or dict, ``metrics`` None).

    Raises:
        UserError: no such folder, no ``spec.json`` (not a run folder), no
            ``probes.parquet`` (the run did not finish), a required file
            missing, a file unreadable, or rows without the spec's metric or a
            column every reader relies on; each names the file.
    """
    path = Path(run_dir)
    if not path.is_dir():
        raise UserError(f"{path}: no such run folder")
    if not (path / "spec.json").is_file():
        raise UserError(f"{path}: missing spec.json (not a run folder)")
    spec = read_spec(path)
    if not (path / "probes.parquet").is_file():
        raise UserError(
            f"{path}: missing probes.parquet (the run did not finish; rerun its command with the same --out to resume)"
        )
    for name in require:
        if not (path / name).is_file():
            raise UserError(f"{path}: not a finished run folder ({name} missing)")
    probes = _parquet(path / "probes.parquet")
    missing = [c for c in _REQUIRED if c not in probes.columns]
    if missing:
        raise UserError(f"{path / 'probes.parquet'}: missing column(s) {', '.join(missing)}")
    if spec.metric not in probes.columns or probes.height == 0:
        why = _failed_first(path, probes)
        if why is not None:
            raise SystemsFailed(why)
    if spec.metric not in probes.columns:
        scores = [c for c, t in probes.schema.items() if t.is_numeric() and ("@" in c or c.startswith("answer_"))]
        raise UserError(
            f"{path / 'probes.parquet'}: no column {spec.metric!r} (the metric of spec.json); "
            f"score columns: {', '.join(scores) or 'none'}"
        )
    if (path / "timeline.parquet").is_file():
        timeline = _parquet(path / "timeline.parquet")
    else:
        from memsim.sim.recorder import TIMELINE_SCHEMA

        timeline = pl.DataFrame(schema=TIMELINE_SCHEMA)

    def optional(name: str) -> dict[str, Any] | None:
        return _read_json(path / name) if (path / name).is_file() else None

    info, metrics, perf = optional("run.json"), optional("metrics.json"), optional("perf.json")
    return RunData(path, spec, probes, timeline, info or {}, metrics, perf or {})


def label_arms(labels: Sequence[str], info: Mapping[str, Any] | None = None) -> dict[str, tuple[str, str]]:
    """Every label's ``(base system label, arm)``; arm is ``system``, ``twin`` or ``placebo``.

    Read from ``run.json``'s ``arms`` (written by the recorder where the arms
    are made). Folders written before it was recorded fall back to the label
    rule of the time, here only: ``x~twin`` / ``x~placebo`` belong to ``x``.
    A twin or placebo whose system has no rows counts as a system of its own.
    """
    recorded: Mapping[str, Any] = (info or {}).get("arms") or {}
    out: dict[str, tuple[str, str]] = {}
    for label in labels:
        if recorded:
            arm = recorded.get(label) or {}
            base, role = str(arm.get("system", label)), str(arm.get("arm", "system"))
        else:
            base, sep, role = label.rpartition("~")
            if not sep or role not in ("twin", "placebo"):
                base, role = label, "system"
        out[label] = (base, role) if base in labels else (label, "system")
    return out


def twins_and_placebos(
    labels: Sequence[str], info: Mapping[str, Any] | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """``(twins, placebos)`` among ``labels``: system -> its twin's label; placebo -> the twin it is compared with."""
    arms = label_arms(labels, info)
    twin = {base: label for label, (base, role) in arms.items() if role == "twin"}
    twins = {s: twin[s] for s in labels if s in twin}
    placebos = {label: twin[base] for label, (base, role) in arms.items() if role == "placebo" and base in twin}
    return twins, placebos


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
