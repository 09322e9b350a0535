"""The static retrieval protocol, shared by every static benchmark.

For each conversation a fresh memory system ingests every session in order
(``now`` = the session's time); then each of the conversation's questions
retrieves a ranked list (``now`` = the question's time) that is scored
against the gold evidence turns through provenance (``sim.scoring``).

One ranked list of ``retrieve_k = max(k, max(ks))`` memories is fetched per
question and every cut-off is scored on its prefix, so a run with ``-k 30``
still reports @50; ``k`` is the run's headline cut-off (what a reader would
see). Questions an adapter marks ``excluded`` (adversarial, no usable
evidence) are still asked and recorded but get NaN scores and are counted.

A run folder holds ``spec.json`` (how to reproduce the run),
``probes.parquet`` (one row per question) and ``metrics.json``, whose score
tables are computed from the probes frame by ``summarise`` and so can be
recomputed from the parquet file alone.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl
from tqdm.auto import tqdm

from memory.base import MemorySystem, Retrieved, Turn
from sim.errors import UserError
from sim.scoring import DEFAULT_KS, evidence_scores, first_evidence_rank

__all__ = [
    "METRICS",
    "StaticSession",
    "StaticQuestion",
    "StaticConversation",
    "Probe",
    "ConversationLog",
    "StaticRunResult",
    "resolve_ks",
    "probe_question",
    "run_static",
    "probes_frame",
    "summarise",
    "format_tables",
    "default_run_dir",
    "check_run_dir",
    "write_run",
]

METRICS: tuple[str, ...] = ("recall_all", "recall_any", "ndcg")
"""Evidence metrics reported at every cut-off, in table order."""


@dataclass(frozen=True, slots=True)
class StaticSession:
    """One session to ingest."""

    session_id: str
    """Stable session id."""
    now: datetime
    """Clock time handed to ``ingest`` (the session's time)."""
    turns: tuple[Turn, ...]
    """The session's turns in order."""


@dataclass(frozen=True, slots=True)
class StaticQuestion:
    """One question with its gold data; the system sees only ``question``."""

    question_id: str
    """Stable question id."""
    user_id: str
    """Whose memory is asked."""
    question: str
    """The query text."""
    answer: str
    """Gold answer (kept for readers and judges; never shown to the system)."""
    category: str
    """The benchmark's category code, as text."""
    evidence: tuple[str, ...]
    """Gold evidence turn ids."""
    now: datetime
    """Clock time handed to ``retrieve``."""
    excluded: str | None = None
    """Why the question is left out of evidence scores (None: it is scored)."""


@dataclass(frozen=True, slots=True)
class StaticConversation:
    """One user's history and the questions asked about it."""

    user_id: str
    """User id handed to the system."""
    sessions: tuple[StaticSession, ...]
    """Sessions in the order they are ingested."""
    questions: tuple[StaticQuestion, ...]
    """Questions asked after all sessions are in."""


@dataclass(frozen=True, slots=True)
class Probe:
    """The record of one asked question."""

    question: StaticQuestion
    """What was asked, with its gold data."""
    retrieved_ids: tuple[str, ...]
    """Memory ids, best first."""
    retrieved_sources: tuple[tuple[str, ...], ...]
    """Provenance of each retrieved memory."""
    retrieved_scores: tuple[float, ...]
    """The system's ranking score of each retrieved memory."""
    retrieve_ms: float
    """Wall time of the ``retrieve`` call in milliseconds."""
    first_evidence_rank: int | None
    """1-based rank of the first memory meeting the evidence (None: not retrieved)."""
    scores: Mapping[str, float]
    """Evidence scores by name (``"recall_all@5"``); NaN when excluded."""
    answer: Mapping[str, Any] = field(default_factory=dict)
    """Reader and judge columns (``answer``, ``answer_<judge>``, tokens, ...); empty without a reader."""


AnswerStep = Callable[[StaticQuestion, Sequence[Retrieved]], Mapping[str, Any]]
"""Reader + judges for one question: the question and the memories the reader sees -> row columns."""


class PartialRunError(Exception):
    """A run stopped early (an endpoint failed); ``partial`` holds every question finished before."""

    def __init__(self, cause: BaseException, partial: StaticRunResult) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.partial = partial


@dataclass(frozen=True, slots=True)
class ConversationLog:
    """Cost of one conversation: ingest and retrieval time, what the system held."""

    user_id: str
    """The conversation's user id."""
    sessions: int
    """Sessions ingested."""
    turns: int
    """Turns ingested."""
    questions: int
    """Questions asked."""
    ingest_s: float
    """Wall time of all ``ingest`` calls."""
    retrieve_s: float
    """Wall time of all ``retrieve`` calls."""
    memory_items: int
    """``stats().items`` after the questions."""
    memory_bytes: int
    """``stats().bytes`` after the questions."""
    report: Mapping[str, Any] = field(default_factory=dict)
    """The system's own ``report()`` (e.g. a gate's compression), when it has one."""


@dataclass(frozen=True, slots=True)
class StaticRunResult:
    """Everything a static run produced, before it is written out."""

    k: int
    """The run's headline cut-off."""
    retrieve_k: int
    """How many memories each question retrieved."""
    ks: tuple[int, ...]
    """Cut-offs scored."""
    probes: tuple[Probe, ...]
    """One per question, in asking order."""
    conversations: tuple[ConversationLog, ...]
    """One per conversation."""
    wall_s: float
    """Wall time of the whole run (system construction included)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Anything a caller wants carried along (unused by the protocol)."""


def resolve_ks(k: int, ks: Iterable[int] = DEFAULT_KS) -> tuple[int, ...]:
    """The cut-offs a run scores: ``ks`` plus the run's own ``k``, sorted.

    Raises:
        UserError: ``k`` (or a cut-off) is not a positive integer.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise UserError(f"-k must be a positive integer, got {k!r}")
    out = set(ks) | {k}
    bad = [x for x in out if x <= 0]
    if bad:
        raise UserError(f"cut-offs must be positive, got {bad}")
    return tuple(sorted(out))


def probe_question(
    system: MemorySystem,
    question: StaticQuestion,
    *,
    retrieve_k: int,
    ks: Sequence[int],
    answer: AnswerStep | None = None,
    answer_k: int | None = None,
) -> Probe | BaseException:
    """Ask one question and score what comes back.

    This is the per-question step of the protocol. With ``answer``, the
    reader sees the top ``answer_k`` memories and the judges score its answer;
    an exception from that step is returned (not raised), so that the caller
    can keep every finished question before stopping.
    """
    start = time.perf_counter()
    retrieved = system.retrieve(question.question, user_id=question.user_id, now=question.now, k=retrieve_k)
    elapsed_ms = (time.perf_counter() - start) * 1000.0
    if len(retrieved) > retrieve_k:
        raise RuntimeError(
            f"system returned {len(retrieved)} memories for k={retrieve_k} (question {question.question_id})"
        )
    sources = tuple(tuple(r.source_turn_ids) for r in retrieved)
    if question.excluded is None:
        scores = evidence_scores(sources, question.evidence, ks)
        rank = first_evidence_rank(sources, question.evidence)
    else:
        scores = {f"{m}@{k}": math.nan for k in ks for m in METRICS}
        rank = None
    answered: Mapping[str, Any] = {}
    if answer is not None:
        try:
            answered = dict(answer(question, retrieved[: answer_k or retrieve_k]))
        except Exception as exc:  # handed back: the caller writes what is done, then stops
            return exc
    return Probe(
        question=question,
        retrieved_ids=tuple(r.memory_id for r in retrieved),
        retrieved_sources=sources,
        retrieved_scores=tuple(float(r.score) for r in retrieved),
        retrieve_ms=elapsed_ms,
        first_evidence_rank=rank,
        scores=scores,
        answer=answered,
    )


def run_static(
    conversations: Sequence[StaticConversation],
    make_system: Callable[[], MemorySystem],
    *,
    k: int,
    ks: Iterable[int] = DEFAULT_KS,
    progress: bool | None = None,
    answer: AnswerStep | None = None,
) -> StaticRunResult:
    """Run the static retrieval protocol (and, with ``answer``, the QA step).

    Args:
        conversations: what to ingest and ask, conversation by conversation.
        make_system: builds a fresh, empty system; called once per
            conversation so that no state carries over.
        k: the run's headline cut-off.
        ks: further cut-offs to score (``k`` is always added).
        progress: show a progress bar (None: only on a terminal).
        answer: optional reader + judges, called with each question and its
            top ``k`` memories after retrieval is scored.

    Returns:
        The probes and per-conversation costs.

    Raises:
        PartialRunError: the answer step failed (an endpoint went away);
            ``partial`` holds every question finished before, so nothing is lost.
    """
    all_ks = resolve_ks(k, ks)
    retrieve_k = max(all_ks)
    total = sum(len(s.turns) for c in conversations for s in c.sessions) + sum(
        len(c.questions) for c in conversations
    )
    probes: list[Probe] = []
    logs: list[ConversationLog] = []
    run_start = time.perf_counter()
    with tqdm(
        total=total,
        unit="item",
        desc="static run",
        disable=None if progress is None else not progress,
        leave=False,
    ) as bar:
        for conv in conversations:
            system = make_system()
            bar.set_postfix_str(f"{conv.user_id} ingest", refresh=False)
            ingest_start = time.perf_counter()
            for session in conv.sessions:
                system.ingest(session.turns, user_id=conv.user_id, now=session.now)
                bar.update(len(session.turns))
            ingest_s = time.perf_counter() - ingest_start
            bar.set_postfix_str(f"{conv.user_id} questions", refresh=False)
            conv_probes = []
            for question in conv.questions:
                probe = probe_question(system, question, retrieve_k=retrieve_k, ks=all_ks, answer=answer, answer_k=k)
                if isinstance(probe, BaseException):
                    partial = StaticRunResult(
                        k=k, retrieve_k=retrieve_k, ks=all_ks, probes=tuple(probes + conv_probes),
                        conversations=tuple(logs), wall_s=time.perf_counter() - run_start,
                    )
                    raise PartialRunError(probe, partial) from probe
                conv_probes.append(probe)
                bar.update(1)
            stats = system.stats()
            probes.extend(conv_probes)
            logs.append(
                ConversationLog(
                    user_id=conv.user_id,
                    sessions=len(conv.sessions),
                    turns=sum(len(s.turns) for s in conv.sessions),
                    questions=len(conv.questions),
                    ingest_s=ingest_s,
                    retrieve_s=sum(p.retrieve_ms for p in conv_probes) / 1000.0,
                    memory_items=stats.items,
                    memory_bytes=stats.bytes,
                    report=system.report() if callable(getattr(system, "report", None)) else {},
                )
            )
    return StaticRunResult(
        k=k,
        retrieve_k=retrieve_k,
        ks=all_ks,
        probes=tuple(probes),
        conversations=tuple(logs),
        wall_s=time.perf_counter() - run_start,
    )


def probes_frame(
    result: StaticRunResult,
    *,
    system: str,
    category_labels: Mapping[str, str] | None = None,
) -> pl.DataFrame:
    """One row per question: gold data, what was retrieved, every score, latency.

    Args:
        result: a finished run.
        system: the system's display name (a column, so frames can be stacked).
        category_labels: names for category codes (code itself when absent).
    """
    labels = dict(category_labels or {})
    score_names = [f"{m}@{k}" for k in result.ks for m in METRICS]
    rows: dict[str, list[Any]] = {
        name: []
        for name in (
            "system",
            "conversation",
            "question_id",
            "category",
            "category_label",
            "question",
            "answer",
            "evidence",
            "excluded",
            "asked_at",
            "retrieved_ids",
            "retrieved_sources",
            "retrieved_scores",
            "first_evidence_rank",
            "retrieve_ms",
            *score_names,
        )
    }
    for p in result.probes:
        q = p.question
        rows["system"].append(system)
        rows["conversation"].append(q.user_id)
        rows["question_id"].append(q.question_id)
        rows["category"].append(q.category)
        rows["category_label"].append(labels.get(q.category, q.category))
        rows["question"].append(q.question)
        rows["answer"].append(q.answer)
        rows["evidence"].append(list(q.evidence))
        rows["excluded"].append(q.excluded)
        rows["asked_at"].append(q.now)
        rows["retrieved_ids"].append(list(p.retrieved_ids))
        rows["retrieved_sources"].append([list(s) for s in p.retrieved_sources])
        rows["retrieved_scores"].append(list(p.retrieved_scores))
        rows["first_evidence_rank"].append(p.first_evidence_rank)
        rows["retrieve_ms"].append(p.retrieve_ms)
        for name in score_names:
            rows[name].append(p.scores[name])
    schema: dict[str, Any] = {
        "system": pl.Utf8,
        "conversation": pl.Utf8,
        "question_id": pl.Utf8,
        "category": pl.Utf8,
        "category_label": pl.Utf8,
        "question": pl.Utf8,
        "answer": pl.Utf8,
        "evidence": pl.List(pl.Utf8),
        "excluded": pl.Utf8,
        "asked_at": pl.Datetime("us", "UTC"),
        "retrieved_ids": pl.List(pl.Utf8),
        "retrieved_sources": pl.List(pl.List(pl.Utf8)),
        "retrieved_scores": pl.List(pl.Float64),
        "first_evidence_rank": pl.Int64,
        "retrieve_ms": pl.Float64,
        **{name: pl.Float64 for name in score_names},
    }
    answer_cols: dict[str, Any] = {}
    for p in result.probes:
        for key, value in p.answer.items():
            if key not in answer_cols and value is not None:
                answer_cols[key] = (
                    pl.Boolean if isinstance(value, bool) else pl.Utf8 if isinstance(value, str)
                    else pl.Int64 if isinstance(value, int) else pl.Float64
                )
    for key, dtype in answer_cols.items():
        rows[key] = [p.answer.get(key) for p in result.probes]
        schema[key] = dtype
    return pl.DataFrame(rows, schema=schema, strict=False)


def _score_columns(frame: pl.DataFrame) -> list[str]:
    return [c for c in frame.columns if "@" in c and c.split("@", 1)[0] in METRICS]


def _group_summary(frame: pl.DataFrame, score_cols: Sequence[str]) -> dict[str, Any]:
    scored = frame.filter(pl.col("excluded").is_null())
    excluded = (
        frame.filter(pl.col("excluded").is_not_null()).group_by("excluded").len().sort("excluded").rows()
    )
    means: dict[str, float | None] = {}
    for col in score_cols:
        # Scored rows never hold NaN (their evidence is non-empty); a group with
        # no scored question reports null, never zero.
        means[col] = None if scored.height == 0 else float(scored[col].mean())  # type: ignore[arg-type]
    answers: dict[str, float | None] = {}
    for col in (c for c in frame.columns if c.startswith("answer_") and frame[c].dtype.is_numeric()):
        # Answers are judged on every question (adversarial ones included); NaN = unscored.
        vals = frame[col].cast(pl.Float64).fill_nan(None).drop_nulls()
        answers[col] = float(vals.mean()) if vals.len() else None  # type: ignore[arg-type]
    out = {
        "questions": frame.height,
        "scored": scored.height,
        "excluded": {reason: n for reason, n in excluded},
        "scores": means,
    }
    if answers:
        out["answers"] = answers
        for col in ("prompt_tokens", "completion_tokens"):
            if col in frame.columns:
                out[col] = int(frame[col].fill_null(0).sum())
    return out


def _latency(frame: pl.DataFrame) -> dict[str, float | None]:
    if frame.height == 0:
        return {"p50": None, "p95": None, "mean": None}
    col = frame["retrieve_ms"]
    return {
        "p50": float(col.quantile(0.5, interpolation="linear")),  # type: ignore[arg-type]
        "p95": float(col.quantile(0.95, interpolation="linear")),  # type: ignore[arg-type]
        "mean": float(col.mean()),  # type: ignore[arg-type]
    }


def _code_key(code: str) -> tuple[int, int | str]:
    return (0, int(code)) if code.isdigit() else (1, code)


def summarise(frame: pl.DataFrame) -> dict[str, Any]:
    """Score tables of a probes frame: overall and per category.

    Everything here is a function of the frame alone, so
    ``summarise(pl.read_parquet(run / "probes.parquet"))`` reproduces the
    ``overall``, ``per_category`` and ``retrieve_ms`` entries of a run's
    ``metrics.json``.
    """
    score_cols = _score_columns(frame)
    per_category: dict[str, Any] = {}
    codes = sorted(set(frame["category"].to_list()), key=_code_key)
    for code in codes:
        part = frame.filter(pl.col("category") == code)
        entry = _group_summary(part, score_cols)
        entry["label"] = part["category_label"][0]
        per_category[code] = entry
    return {
        "overall": _group_summary(frame, score_cols),
        "per_category": per_category,
        "retrieve_ms": _latency(frame),
    }


def _fmt(value: float | None, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.3f}"


def format_tables(metrics: Mapping[str, Any], ks: Sequence[int]) -> str:
    """Per-category and overall tables, one per metric, as printable text."""
    cats: list[tuple[str, Mapping[str, Any]]] = [
        (f"{code} {entry['label']}" if entry["label"] != code else code, entry)
        for code, entry in metrics["per_category"].items()
    ]
    cats.append(("overall", metrics["overall"]))
    name_w = max(12, *(len(name) for name, _ in cats))
    lines: list[str] = []
    for metric in METRICS:
        header = f"{metric:<{name_w}} {'n':>5} {'scored':>6}" + "".join(f" {'@' + str(k):>7}" for k in ks)
        lines.append(header)
        lines.append("-" * len(header))
        for name, entry in cats:
            cells = "".join(" " + _fmt(entry["scores"].get(f"{metric}@{k}"), 7) for k in ks)
            lines.append(f"{name:<{name_w}} {entry['questions']:>5} {entry['scored']:>6}{cells}")
        lines.append("")
    answer_cols = list(metrics["overall"].get("answers", {}))
    if answer_cols:
        header = f"{'answers':<{name_w}} {'n':>5}" + "".join(f" {c.removeprefix('answer_'):>12}" for c in answer_cols)
        lines.append(header)
        lines.append("-" * len(header))
        for name, entry in cats:
            got = entry.get("answers", {})
            cells = "".join(" " + _fmt(got.get(c), 12) for c in answer_cols)
            lines.append(f"{name:<{name_w}} {entry['questions']:>5}{cells}")
        lines.append("")
    excluded = metrics["overall"]["excluded"]
    if excluded:
        lines.append("excluded from evidence scores: " + ", ".join(f"{r} {n}" for r, n in excluded.items()))
    lat = metrics["retrieve_ms"]
    if lat["p50"] is not None:
        lines.append(f"retrieve latency: p50 {lat['p50']:.2f} ms, p95 {lat['p95']:.2f} ms")
    return "\n".join(lines)


def default_run_dir(benchmark: str, system: str, *, root: str | Path = "runs", now: datetime | None = None) -> Path:
    """``runs/static-<benchmark>-<system>-<UTC timestamp>``, with the system name made path-safe."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", system).strip("_") or "system"
    return Path(root) / f"static-{benchmark}-{safe}-{stamp}"


_RUN_FILES = ("spec.json", "probes.parquet", "metrics.json")


def check_run_dir(out: str | Path) -> Path:
    """Check that ``out`` can take a new run (call before a long run, not only after).

    Raises:
        UserError: ``out`` is a file, or already holds a run.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a folder")
    taken = [name for name in _RUN_FILES if (out / name).exists()]
    if taken:
        raise UserError(f"--out {out}: already holds a run ({', '.join(taken)}); choose another folder")
    return out


def write_run(out: str | Path, spec: Mapping[str, Any], frame: pl.DataFrame, metrics: Mapping[str, Any]) -> Path:
    """Write ``spec.json``, ``probes.parquet`` and ``metrics.json`` into ``out``.

    Raises:
        UserError: ``out`` is a file, or already holds a run.
    """
    out = check_run_dir(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot create folder: {exc.strerror or exc}") from None
    (out / "spec.json").write_text(json.dumps(spec, indent=2, sort_keys=False, default=str) + "\n")
    frame.write_parquet(out / "probes.parquet")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, allow_nan=False, default=str) + "\n")
    return out
