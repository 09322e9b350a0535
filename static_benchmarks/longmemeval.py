"""LongMemEval: streaming loader, retrieval protocol and QA protocol as published.

The published files (``longmemeval_s``, ``longmemeval_m``,
``longmemeval_oracle`` and the ``*_cleaned`` releases) are JSON arrays of
instances. Each instance has one question and its own haystack:

- ``question_id`` (abstention questions end in ``_abs``), ``question_type``
  (one of ``QUESTION_TYPES``), ``question``, ``answer`` (string or number),
  ``question_date``;
- ``haystack_session_ids``, ``haystack_dates``, ``haystack_sessions``
  (parallel lists; a session is a list of ``{role, content, has_answer?}``
  turns) and ``answer_session_ids``.

Dates look like ``2023/05/30 (Tue) 23:40`` and carry no time zone (read as
UTC). Sessions are ordered by parsed date, not by file order (ties keep file
order). The M file is about 2.7 GB, so files are streamed instance by instance
with ``ijson``: memory is bounded by the largest instance, not the file.

Retrieval protocol (offline, no LLM), as the official evaluation scores it:

- Turn level: the keys are the *user* turns, id ``<session_id>_<index + 1>``
  where the index counts all turns of the session. Only user turns are
  ingested, as the official corpus holds only user turns; the gold keys are
  the user turns with ``has_answer`` inside answer sessions. Turn-level runs
  also report session-level figures derived from the turn ranking the way
  the official ``turn2session`` evaluation does (the cut-off grows until it
  covers k distinct sessions; relevance stays per retrieved item).
- Session level (``granularity="session"``): one key per session, the text of
  its user turns joined by spaces; gold sessions are the answer sessions with
  at least one user turn marked ``has_answer``.
- Metrics ``recall_any@k``, ``recall_all@k`` and ``ndcg_any@k`` for k in
  ``RETRIEVAL_KS``, with the official DCG (rank 1 weighs 1, rank r >= 2
  weighs ``1 / log2(r)``). Abstention instances are excluded. Per question
  type and overall.
- A system returns memories with provenance; a memory is relevant when its
  ``source_turn_ids`` meet the gold keys. Each instance gets a fresh system
  that ranks its whole store (depth = number of ingested items), as the
  official script ranks the whole corpus.
- Instances without any gold key (single-session-assistant questions, whose
  evidence is an assistant turn) are unscored (NaN) by default; with
  ``empty_gold="official"`` they score as the official script scores them
  (recall_any 0, recall_all 1, nDCG 0), which its published averages include.

QA protocol: per instance a fresh system ingests every turn (text
``"<date> | <role>: <content>"``), retrieves the top k for the question, a
reader answers with the question date (as the file writes it, the form the
memories carry) and the LongMemEval rubric judge
scores it. Finished instances are appended to ``qa_rows.jsonl`` in the run
folder, so an interrupted run resumes without repeating them.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memory.base import MemorySystem, Retrieved, Turn, render_turn
from sim.errors import UserError

__all__ = [
    "QUESTION_TYPES",
    "RETRIEVAL_KS",
    "GRANULARITIES",
    "LmeTurn",
    "LmeSession",
    "Instance",
    "LoadWarnings",
    "parse_lme_date",
    "instance_from_json",
    "iter_instances",
    "load_instances",
    "scan_instances",
    "select_indices",
    "turn_key",
    "gold_turn_keys",
    "gold_session_ids",
    "memory_turns",
    "official_dcg",
    "score_ranking",
    "score_turn2session",
    "RetrievalRun",
    "retrieval_row",
    "run_retrieval",
    "retrieval_frame",
    "summarise_retrieval",
    "AnswerSetup",
    "QaRun",
    "QA_ROWS",
    "read_qa_rows",
    "qa_row",
    "run_qa",
    "summarise_qa",
    "TABLE_COLUMNS",
    "format_retrieval_table",
    "format_qa_table",
]

QUESTION_TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)
"""The six question types of the published files."""

RETRIEVAL_KS: tuple[int, ...] = (1, 3, 5, 10, 30, 50)
"""Cut-offs of the official retrieval evaluation."""

GRANULARITIES: tuple[str, ...] = ("turn", "session")
"""Key granularities of the retrieval protocol."""

_METRICS: tuple[str, ...] = ("recall_any", "recall_all", "ndcg_any")
_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\(\s*[A-Za-z]{3}\s*\))?\s*(\d{1,2}):(\d{2})\s*$")
_DATE_EXAMPLE = "2023/05/30 (Tue) 23:40"
_ROLES = ("user", "assistant")


# ---------------------------------------------------------------------------
# Records


@dataclass(frozen=True, slots=True)
class LmeTurn:
    """One turn of a haystack session, as in the file."""

    index: int
    """Position in the session, counting every turn from 0."""
    role: str
    """``"user"`` or ``"assistant"``."""
    content: str
    """What was said."""
    has_answer: bool
    """Whether the file marks the turn as evidence (missing means False)."""


@dataclass(frozen=True, slots=True)
class LmeSession:
    """One haystack session."""

    session_id: str
    """Id from ``haystack_session_ids``."""
    date: datetime
    """Parsed ``haystack_dates`` entry (UTC)."""
    date_text: str
    """The date as the file writes it; shown to readers."""
    turns: tuple[LmeTurn, ...]
    """The turns in file order."""
    is_answer: bool
    """Whether the session is listed in ``answer_session_ids``."""


@dataclass(frozen=True, slots=True)
class Instance:
    """One question with its own haystack."""

    question_id: str
    """Id; abstention questions end in ``_abs``."""
    question_type: str
    """One of ``QUESTION_TYPES``."""
    question: str
    """The question text."""
    answer: str
    """Gold answer (numbers are read as their decimal text)."""
    question_date: datetime
    """Parsed ``question_date`` (UTC)."""
    question_date_text: str
    """The question date as the file writes it."""
    sessions: tuple[LmeSession, ...]
    """Haystack sessions ordered by date (ties keep file order)."""
    answer_session_ids: tuple[str, ...]
    """The ``answer_session_ids`` field as given."""
    index: int = 0
    """Position of the instance in its file (0-based)."""

    @property
    def is_abstention(self) -> bool:
        """Whether this is an abstention question (id ends in ``_abs``)."""
        return self.question_id.endswith("_abs")

    @property
    def latest(self) -> datetime:
        """The later of the question date and the newest session date."""
        if not self.sessions:
            return self.question_date
        return max(self.question_date, max(s.date for s in self.sessions))


@dataclass
class LoadWarnings:
    """Counts of defects the official protocol tolerates, with a few examples each.

    Kinds: ``answer_session_without_has_answer`` (an answer session where no
    turn is marked; the official turn and session keys treat it as a
    non-answer session), ``answer_session_not_in_haystack``,
    ``has_answer_outside_answer_session`` (ignored for gold, as officially),
    ``session_after_question`` (a session dated after the question; it is
    still ingested and retrievable, as officially).
    """

    counts: Counter[str] = field(default_factory=Counter)
    """Number of occurrences per kind."""
    examples: dict[str, list[str]] = field(default_factory=dict)
    """Up to three ``"<question_id>: <detail>"`` examples per kind."""

    def add(self, kind: str, example: str) -> None:
        """Count one occurrence of ``kind``."""
        self.counts[kind] += 1
        shown = self.examples.setdefault(kind, [])
        if len(shown) < 3:
            shown.append(example)

    def total(self) -> int:
        """All occurrences of all kinds."""
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        """Counts and examples as plain JSON data."""
        return {"counts": dict(sorted(self.counts.items())), "examples": dict(sorted(self.examples.items()))}

    def lines(self) -> list[str]:
        """One line per kind for the console."""
        return [
            f"warning: {n} x {kind} (e.g. {'; '.join(self.examples.get(kind, []))})"
            for kind, n in sorted(self.counts.items())
        ]


# ---------------------------------------------------------------------------
# Loading


def parse_lme_date(text: str) -> datetime:
    """Parse a LongMemEval date such as ``2023/05/30 (Tue) 23:40`` (UTC).

    The weekday in brackets is optional and not checked: the date decides.

    Raises:
        ValueError: when ``text`` does not have that shape or is no real date.
    """
    m = _DATE.match(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"cannot parse date {text!r}; expected like {_DATE_EXAMPLE!r}")
    year, month, day, hour, minute = (int(g) for g in m.groups())
    try:
        return datetime(year, month, day, hour, minute, tzinfo=timezone.utc)
    except ValueError as exc:
        raise ValueError(f"cannot parse date {text!r}: {exc}") from None


def _bad(source: str, qid: str, fld: str, message: str) -> UserError:
    return UserError(f"{source}: instance {qid}: field {fld}: {message}")


def _field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], source: str, qid: str) -> Any:
    if key not in obj:
        return _raise(_bad(source, qid, key, "missing"))
    value = obj[key]
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        return _raise(_bad(source, qid, key, f"expected {names}, got {type(value).__name__}"))
    return value


def _raise(exc: Exception) -> Any:
    raise exc


def _answer_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def instance_from_json(
    obj: Any, *, source: str = "<data>", index: int = 0, warnings: LoadWarnings | None = None
) -> Instance:
    """Check one instance of the published schema and build an ``Instance``.

    Args:
        obj: the decoded JSON object.
        source: file name used in error messages.
        index: position in the file (names the instance when it has no id).
        warnings: where tolerated defects are counted.

    Raises:
        UserError: naming the file, instance id and field, for missing fields,
            wrong types, unknown question types, unparseable dates, lists of
            different lengths or bad turns.
    """
    warn = warnings if warnings is not None else LoadWarnings()
    if not isinstance(obj, Mapping):
        raise UserError(f"{source}: instance #{index}: expected a JSON object, got {type(obj).__name__}")
    qid = obj.get("question_id")
    if not isinstance(qid, str) or not qid:
        raise UserError(f"{source}: instance #{index}: field question_id: missing or not a non-empty string")
    qtype = _field(obj, "question_type", str, source, qid)
    if qtype not in QUESTION_TYPES:
        raise _bad(source, qid, "question_type", f"unknown type {qtype!r}; valid: {', '.join(QUESTION_TYPES)}")
    question = _field(obj, "question", str, source, qid)
    answer = _field(obj, "answer", (str, int, float), source, qid)
    qdate_text = _field(obj, "question_date", str, source, qid)
    try:
        qdate = parse_lme_date(qdate_text)
    except ValueError as exc:
        raise _bad(source, qid, "question_date", str(exc)) from None
    sids = _field(obj, "haystack_session_ids", list, source, qid)
    dates = _field(obj, "haystack_dates", list, source, qid)
    raw_sessions = _field(obj, "haystack_sessions", list, source, qid)
    answer_ids = _field(obj, "answer_session_ids", list, source, qid)
    if not (len(sids) == len(dates) == len(raw_sessions)):
        raise _bad(
            source,
            qid,
            "haystack_sessions",
            f"haystack_session_ids ({len(sids)}), haystack_dates ({len(dates)}) and "
            f"haystack_sessions ({len(raw_sessions)}) must have the same length",
        )
    for i, a in enumerate(answer_ids):
        if not isinstance(a, str):
            raise _bad(source, qid, f"answer_session_ids[{i}]", f"expected str, got {type(a).__name__}")
    answer_set = set(answer_ids)
    sessions: list[LmeSession] = []
    seen: set[str] = set()
    for si, (sid, date_text, raw) in enumerate(zip(sids, dates, raw_sessions)):
        if not isinstance(sid, str) or not sid:
            raise _bad(source, qid, f"haystack_session_ids[{si}]", "expected a non-empty string")
        if sid in seen:
            raise _bad(source, qid, f"haystack_session_ids[{si}]", f"session id {sid!r} appears twice")
        seen.add(sid)
        if not isinstance(date_text, str):
            raise _bad(source, qid, f"haystack_dates[{si}]", f"expected str, got {type(date_text).__name__}")
        try:
            date = parse_lme_date(date_text)
        except ValueError as exc:
            raise _bad(source, qid, f"haystack_dates[{si}]", str(exc)) from None
        if not isinstance(raw, list):
            raise _bad(source, qid, f"haystack_sessions[{si}]", f"expected a list of turns, got {type(raw).__name__}")
        turns: list[LmeTurn] = []
        for ti, t in enumerate(raw):
            where = f"haystack_sessions[{si}][{ti}]"
            if not isinstance(t, Mapping):
                raise _bad(source, qid, where, f"expected a turn object, got {type(t).__name__}")
            role = t.get("role")
            if role not in _ROLES:
                raise _bad(source, qid, f"{where}.role", f"got {role!r}; valid: {', '.join(_ROLES)}")
            content = t.get("content")
            if not isinstance(content, str):
                raise _bad(source, qid, f"{where}.content", "missing or not a string")
            has = t.get("has_answer", False)
            if not isinstance(has, bool):
                raise _bad(source, qid, f"{where}.has_answer", f"expected true or false, got {has!r}")
            turns.append(LmeTurn(ti, role, content, has))
        is_answer = sid in answer_set
        if is_answer and not any(t.has_answer for t in turns):
            warn.add("answer_session_without_has_answer", f"{qid}: {sid}")
        if not is_answer and any(t.has_answer for t in turns):
            warn.add("has_answer_outside_answer_session", f"{qid}: {sid}")
        if date > qdate:
            warn.add("session_after_question", f"{qid}: {sid} ({date_text} > {qdate_text})")
        sessions.append(LmeSession(sid, date, date_text, tuple(turns), is_answer))
    for a in answer_ids:
        if a not in seen:
            warn.add("answer_session_not_in_haystack", f"{qid}: {a}")
    # sorted() is stable, so sessions with equal dates keep their file order.
    sessions.sort(key=lambda s: s.date)
    return Instance(
        question_id=qid,
        question_type=qtype,
        question=question,
        answer=_answer_text(answer),
        question_date=qdate,
        question_date_text=qdate_text,
        sessions=tuple(sessions),
        answer_session_ids=tuple(answer_ids),
        index=index,
    )


def _open_array(path: Path) -> Any:
    try:
        f = path.open("rb")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (get the LongMemEval files as the README says)") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot open: {exc.strerror}") from None
    head = f.read(4096).lstrip()
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:].lstrip()
    if not head.startswith(b"["):
        f.close()
        what = "an empty file" if not head else f"a file starting with {head[:1]!r}"
        raise UserError(f"{path}: expected a JSON array of LongMemEval instances, got {what}")
    f.seek(0)
    return f


def iter_instances(
    path: str | Path,
    *,
    warnings: LoadWarnings | None = None,
    indices: Collection[int] | None = None,
) -> Iterator[Instance]:
    """Stream the instances of a LongMemEval file, one at a time.

    Memory stays bounded by the largest instance, so the 2.7 GB M file can be
    read on a small machine.

    Args:
        path: a published file (``longmemeval_s.json``, ``..._cleaned.json``, ...).
        warnings: where tolerated defects are counted.
        indices: when given, only instances at these file positions are built
            (the others are still parsed, to find where they end).

    Raises:
        UserError: for a missing or non-array file, a truncated or malformed
            file (naming the last complete instance) and bad instances.
    """
    import ijson

    p = Path(path)
    wanted = None if indices is None else frozenset(indices)
    last = "none (error before the first instance)"
    n = 0
    with _open_array(p) as f:
        try:
            for obj in ijson.items(f, "item", use_float=True):
                if wanted is None or n in wanted:
                    inst = instance_from_json(obj, source=str(p), index=n, warnings=warnings)
                    last = inst.question_id
                    yield inst
                else:
                    last = obj.get("question_id", f"#{n}") if isinstance(obj, Mapping) else f"#{n}"
                n += 1
        except ijson.JSONError as exc:
            raise UserError(
                f"{p}: truncated or malformed JSON after {n} complete instances "
                f"(last: {last}): {str(exc).strip() or type(exc).__name__}"
            ) from None


def load_instances(path: str | Path, *, warnings: LoadWarnings | None = None) -> list[Instance]:
    """Every instance of a file, in file order (small files; stream big ones)."""
    return list(iter_instances(path, warnings=warnings))


def scan_instances(path: str | Path) -> list[tuple[str, str]]:
    """``(question_id, question_type)`` of every instance, in file order.

    A light pass over the event stream that builds no sessions: selection
    (``--types``, ``--sample``) needs the types before the heavy pass.
    """
    import ijson

    p = Path(path)
    out: list[tuple[str, str]] = []
    qid: str | None = None
    qtype: str | None = None
    with _open_array(p) as f:
        try:
            for prefix, event, value in ijson.parse(f, use_float=True):
                if prefix == "item.question_id":
                    qid = value
                elif prefix == "item.question_type":
                    qtype = value
                elif prefix == "item" and event == "end_map":
                    out.append((qid if isinstance(qid, str) else f"#{len(out)}", qtype if isinstance(qtype, str) else ""))
                    qid = qtype = None
        except ijson.JSONError as exc:
            last = out[-1][0] if out else "none"
            raise UserError(
                f"{p}: truncated or malformed JSON after {len(out)} complete instances "
                f"(last: {last}): {str(exc).strip() or type(exc).__name__}"
            ) from None
    return out


def select_indices(
    index: Sequence[tuple[str, str]],
    *,
    types: Collection[str] | None = None,
    sample: int | None = None,
    seed: int = 0,
    limit: int | None = None,
) -> list[int]:
    """File positions to run: filter by type, then a stratified sample, then the first ``limit``.

    The sample keeps each type's share (largest remainders, ties by type
    order) and draws within each type with ``numpy.random.default_rng(seed)``,
    so the same seed picks the same instances.

    Args:
        index: ``scan_instances`` output.
        types: question types to keep (``None``: all).
        sample: number of instances to draw (``None``: all).
        seed: seed of the draw.
        limit: keep at most this many, in file order.
    """
    if types is not None:
        unknown = sorted(set(types) - set(QUESTION_TYPES))
        if unknown:
            raise UserError(f"--types: unknown question type(s) {', '.join(unknown)}; valid: {', '.join(QUESTION_TYPES)}")
    chosen = [i for i, (_, t) in enumerate(index) if types is None or t in types]
    if sample is not None:
        if sample <= 0:
            raise UserError(f"--sample must be positive, got {sample}")
        if sample < len(chosen):
            by_type: dict[str, list[int]] = {}
            for i in chosen:
                by_type.setdefault(index[i][1], []).append(i)
            order = sorted(by_type, key=lambda t: (QUESTION_TYPES.index(t) if t in QUESTION_TYPES else 99, t))
            quotas = {t: sample * len(by_type[t]) / len(chosen) for t in order}
            alloc = {t: int(math.floor(q)) for t, q in quotas.items()}
            left = sample - sum(alloc.values())
            for t in sorted(order, key=lambda t: -(quotas[t] - alloc[t]))[:left]:
                alloc[t] += 1
            rng = np.random.default_rng(seed)
            picked: list[int] = []
            for t in order:
                members = by_type[t]
                take = rng.choice(len(members), size=alloc[t], replace=False)
                picked.extend(members[j] for j in take)
            chosen = sorted(picked)
    if limit is not None:
        if limit < 0:
            raise UserError(f"--limit must not be negative, got {limit}")
        chosen = chosen[:limit]
    return chosen


# ---------------------------------------------------------------------------
# Keys, gold and memory turns


def turn_key(session_id: str, index: int) -> str:
    """The official turn key: ``<session_id>_<index + 1>``."""
    return f"{session_id}_{index + 1}"


def gold_turn_keys(inst: Instance) -> frozenset[str]:
    """User turns marked ``has_answer`` inside answer sessions."""
    return frozenset(
        turn_key(s.session_id, t.index)
        for s in inst.sessions
        if s.is_answer
        for t in s.turns
        if t.role == "user" and t.has_answer
    )


def gold_session_ids(inst: Instance) -> frozenset[str]:
    """Answer sessions with at least one user turn marked ``has_answer``."""
    return frozenset(
        s.session_id for s in inst.sessions if s.is_answer and any(t.role == "user" and t.has_answer for t in s.turns)
    )


def memory_turns(inst: Instance, *, granularity: str = "turn", user_only: bool = True) -> list[list[Turn]]:
    """The instance's haystack as memory turns, one list per session, oldest first.

    Args:
        inst: the instance.
        granularity: ``"turn"``: one ``Turn`` per turn, id ``turn_key``;
            ``"session"``: one ``Turn`` per session, id the session id, text
            the session's user turns joined by spaces (the official session key).
        user_only: at turn granularity, keep only user turns (the retrieval
            protocol's corpus); ``False`` keeps every turn (QA protocol).

    Every turn carries ``metadata["date_text"]`` (the file's date string), so
    ``render_turn`` gives ``"<date> | <role>: <content>"``.
    """
    if granularity not in GRANULARITIES:
        raise UserError(f"granularity {granularity!r} unknown; valid: {', '.join(GRANULARITIES)}")
    out: list[list[Turn]] = []
    uid = inst.question_id
    for s in inst.sessions:
        meta = {"date_text": s.date_text}
        if granularity == "session":
            text = " ".join(t.content for t in s.turns if t.role == "user")
            out.append([Turn(s.session_id, uid, "user", text, s.date, s.session_id, meta)])
            continue
        out.append(
            [
                Turn(turn_key(s.session_id, t.index), uid, t.role, t.content, s.date, s.session_id, meta)
                for t in s.turns
                if t.role == "user" or not user_only
            ]
        )
    return out


# ---------------------------------------------------------------------------
# Official metrics


def official_dcg(relevances: Sequence[float]) -> float:
    """DCG as the official evaluation computes it: rank 1 weighs 1, rank r >= 2 weighs ``1/log2(r)``."""
    total = 0.0
    for rank, rel in enumerate(relevances, start=1):
        if rel:
            total += rel if rank == 1 else rel / math.log2(rank)
    return total


def _empty_gold(ks: Iterable[int], empty_gold: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in ks:
        if empty_gold == "official":
            # What the official script yields for an empty gold list: any([]) / all([]) / ideal DCG 0.
            out[f"recall_any@{k}"], out[f"recall_all@{k}"], out[f"ndcg_any@{k}"] = 0.0, 1.0, 0.0
        else:
            out[f"recall_any@{k}"] = out[f"recall_all@{k}"] = out[f"ndcg_any@{k}"] = math.nan
    return out


def score_ranking(
    ranked: Sequence[Collection[str]],
    gold: Collection[str],
    *,
    n_relevant: int | None = None,
    ks: Iterable[int] = RETRIEVAL_KS,
    empty_gold: str = "skip",
) -> dict[str, float]:
    """Official ``recall_any@k``, ``recall_all@k`` and ``ndcg_any@k`` of one ranking.

    Args:
        ranked: for each retrieved item, best first, the keys it covers (its
            provenance mapped to the level being scored).
        gold: the gold keys.
        n_relevant: relevant items in the whole corpus, for the ideal DCG
            (default ``len(gold)``); raised to the relevant items ranked when
            a system returns more (merged or duplicated memories).
        ks: cut-offs.
        empty_gold: ``"skip"`` (NaN when gold is empty) or ``"official"``.
    """
    gold_set = set(gold)
    if not gold_set:
        return _empty_gold(ks, empty_gold)
    rel = [1.0 if gold_set.intersection(keys) else 0.0 for keys in ranked]
    n_ideal = max(n_relevant if n_relevant is not None else len(gold_set), int(sum(rel)))
    out: dict[str, float] = {}
    for k in ks:
        covered: set[str] = set()
        for keys in ranked[:k]:
            covered.update(gold_set.intersection(keys))
        ideal = official_dcg([1.0] * min(k, n_ideal))
        out[f"recall_any@{k}"] = float(bool(covered))
        out[f"recall_all@{k}"] = float(covered == gold_set)
        out[f"ndcg_any@{k}"] = official_dcg(rel[:k]) / ideal if ideal else 0.0
    return out


def score_turn2session(
    ranked_sessions: Sequence[Collection[str]],
    gold_sessions: Collection[str],
    *,
    n_relevant: int,
    ks: Iterable[int] = RETRIEVAL_KS,
    empty_gold: str = "skip",
) -> dict[str, float]:
    """Session-level figures of a turn-level ranking, as the official ``turn2session``.

    Each cut-off k grows to the shortest prefix that covers k distinct
    sessions (or the whole ranking); recall is over the sessions covered;
    nDCG keeps one relevance per ranked item (a turn of a gold session is
    relevant), with the ideal DCG over the ``n_relevant`` corpus items that
    belong to gold sessions.

    Args:
        ranked_sessions: for each ranked item, the sessions of its provenance.
        gold_sessions: gold session ids.
        n_relevant: corpus items (ingested turns) that belong to gold sessions.
        ks: cut-offs.
        empty_gold: ``"skip"`` or ``"official"``.
    """
    gold_set = set(gold_sessions)
    if not gold_set:
        return _empty_gold(ks, empty_gold)
    rel = [1.0 if gold_set.intersection(keys) else 0.0 for keys in ranked_sessions]
    n_ideal = max(n_relevant, int(sum(rel)))
    # first_reach[j]: prefix length at which j + 1 distinct sessions are covered.
    first_reach: list[int] = []
    seen: set[str] = set()
    for pos, keys in enumerate(ranked_sessions, start=1):
        for key in keys:
            if key not in seen:
                seen.add(key)
                first_reach.append(pos)
    out: dict[str, float] = {}
    for k in ks:
        eff = max(k, first_reach[k - 1]) if k <= len(first_reach) else max(k, len(ranked_sessions))
        covered: set[str] = set()
        for keys in ranked_sessions[:eff]:
            covered.update(gold_set.intersection(keys))
        ideal = official_dcg([1.0] * min(eff, n_ideal))
        out[f"recall_any@{k}"] = float(bool(covered))
        out[f"recall_all@{k}"] = float(covered == gold_set)
        out[f"ndcg_any@{k}"] = official_dcg(rel[:eff]) / ideal if ideal else 0.0
    return out


# ---------------------------------------------------------------------------
# Retrieval protocol


class _TextCounter:
    """Distinct ingested texts, by 8-byte digest (bounded memory on the M file)."""

    __slots__ = ("total", "_seen")

    def __init__(self) -> None:
        self.total = 0
        self._seen: set[int] = set()

    def add(self, text: str) -> None:
        self.total += 1
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        self._seen.add(int.from_bytes(digest, "little"))

    @property
    def unique(self) -> int:
        return len(self._seen)


@dataclass(frozen=True, slots=True)
class RetrievalRun:
    """What a retrieval-protocol run produced, before it is written out."""

    granularity: str
    """``"turn"`` or ``"session"``."""
    ks: tuple[int, ...]
    """Cut-offs scored."""
    rows: tuple[Mapping[str, Any], ...]
    """One row per scored (non-abstention) instance: gold, retrieved, scores, timings."""
    abstention_skipped: int
    """Abstention instances left out, as the official evaluation leaves them out."""
    texts_ingested: int
    """Memory texts (``render_turn``) handed to the systems, over all instances."""
    unique_texts: int
    """Distinct texts among them: what a content-addressed cache embeds."""
    wall_s: float
    """Wall time of the run (loading and system construction included)."""


def _levels(granularity: str) -> tuple[str, ...]:
    return ("turn", "session") if granularity == "turn" else ("session",)


def _score_names(levels: Sequence[str], ks: Sequence[int]) -> list[str]:
    return [f"{lvl}.{m}@{k}" for lvl in levels for k in ks for m in _METRICS]


def retrieval_row(
    inst: Instance,
    system: MemorySystem,
    *,
    granularity: str = "turn",
    ks: Sequence[int] = RETRIEVAL_KS,
    empty_gold: str = "skip",
    texts: _TextCounter | None = None,
) -> dict[str, Any]:
    """Ingest one instance into ``system`` (fresh), retrieve for its question, score.

    The system ranks its whole store: ``k`` is the number of ingested items
    (at least ``max(ks)``). ``now`` for retrieval is the later of the
    question date and the newest session, so every session is retrievable as
    in the official corpus.
    """
    sessions = memory_turns(inst, granularity=granularity, user_only=True)
    uid = inst.question_id
    start = time.perf_counter()
    n_items = 0
    key_session: dict[str, str] = {}
    for turns in sessions:
        if not turns:
            continue
        system.ingest(turns, user_id=uid, now=turns[0].created_at)
        n_items += len(turns)
        for t in turns:
            key_session[t.turn_id] = t.session_id
            if texts is not None:
                texts.add(render_turn(t))
    ingest_ms = (time.perf_counter() - start) * 1000.0
    depth = max(max(ks), n_items)
    start = time.perf_counter()
    retrieved: list[Retrieved] = system.retrieve(inst.question, user_id=uid, now=inst.latest, k=depth)
    retrieve_ms = (time.perf_counter() - start) * 1000.0
    ranked = [tuple(r.source_turn_ids) for r in retrieved]
    gold_sessions = gold_session_ids(inst)
    row: dict[str, Any] = {
        "question_id": inst.question_id,
        "question_type": inst.question_type,
        "question": inst.question,
        "sessions": len(inst.sessions),
        "items": n_items,
        "retrieved": len(retrieved),
        "ingest_ms": ingest_ms,
        "retrieve_ms": retrieve_ms,
    }
    if granularity == "turn":
        gold = gold_turn_keys(inst)
        scores = score_ranking(ranked, gold, ks=ks, empty_gold=empty_gold)
        # A memory's sessions, in provenance order, without repeats.
        ranked_sessions = [tuple(dict.fromkeys(key_session[x] for x in src if x in key_session)) for src in ranked]
        n_rel = sum(1 for sid in key_session.values() if sid in gold_sessions)
        sess_scores = score_turn2session(
            ranked_sessions, gold_sessions, n_relevant=n_rel, ks=ks, empty_gold=empty_gold
        )
        row["gold_turns"] = sorted(gold)
        row.update({f"turn.{name}": v for name, v in scores.items()})
        row.update({f"session.{name}": v for name, v in sess_scores.items()})
        hits = [i for i, src in enumerate(ranked, start=1) if gold.intersection(src)]
    else:
        sess_scores = score_ranking(ranked, gold_sessions, ks=ks, empty_gold=empty_gold)
        row["gold_turns"] = sorted(gold_turn_keys(inst))
        row.update({f"session.{name}": v for name, v in sess_scores.items()})
        hits = [i for i, src in enumerate(ranked, start=1) if gold_sessions.intersection(src)]
    row["gold_sessions"] = sorted(gold_sessions)
    row["first_gold_rank"] = hits[0] if hits else None
    # Keep the ranking only as deep as it is scored: the M file ranks thousands per instance.
    row["retrieved_sources"] = [list(src) for src in ranked[: max(ks)]]
    return row


def run_retrieval(
    instances: Iterable[Instance],
    make_system: Callable[[], MemorySystem],
    *,
    granularity: str = "turn",
    ks: Iterable[int] = RETRIEVAL_KS,
    empty_gold: str = "skip",
    progress: bool | None = None,
    total: int | None = None,
) -> RetrievalRun:
    """Run the retrieval protocol over (streamed) instances.

    Args:
        instances: instances to run, e.g. ``iter_instances(path)``.
        make_system: builds a fresh, empty system; called once per instance.
            Build every system from one ``Resources`` so their embedder (and
            its cache) is shared and each distinct text is embedded once.
        granularity: ``"turn"`` (also reports session level) or ``"session"``.
        ks: cut-offs.
        empty_gold: ``"skip"`` (instances without gold are NaN) or ``"official"``.
        progress: show a progress bar (None: only on a terminal).
        total: number of instances, for the progress bar.
    """
    from tqdm.auto import tqdm

    if granularity not in GRANULARITIES:
        raise UserError(f"--granularity {granularity!r} unknown; valid: {', '.join(GRANULARITIES)}")
    if empty_gold not in ("skip", "official"):
        raise UserError(f"--empty-gold {empty_gold!r} unknown; valid: skip, official")
    ks_t = tuple(sorted(set(ks)))
    if not ks_t or ks_t[0] <= 0:
        raise UserError(f"cut-offs must be positive integers, got {list(ks_t)}")
    texts = _TextCounter()
    rows: list[dict[str, Any]] = []
    skipped = 0
    start = time.perf_counter()
    with tqdm(total=total, unit="inst", desc="longmemeval retrieval", leave=False,
              disable=None if progress is None else not progress) as bar:
        for inst in instances:
            bar.update(1)
            if inst.is_abstention:
                skipped += 1
                continue
            system = make_system()
            rows.append(retrieval_row(inst, system, granularity=granularity, ks=ks_t,
                                      empty_gold=empty_gold, texts=texts))
    return RetrievalRun(
        granularity=granularity,
        ks=ks_t,
        rows=tuple(rows),
        abstention_skipped=skipped,
        texts_ingested=texts.total,
        unique_texts=texts.unique,
        wall_s=time.perf_counter() - start,
    )


def retrieval_frame(run: RetrievalRun, *, system: str) -> Any:
    """One row per scored instance as a polars frame (``probes.parquet``)."""
    import polars as pl

    names = _score_names(_levels(run.granularity), run.ks)
    schema: dict[str, Any] = {
        "system": pl.Utf8,
        "question_id": pl.Utf8,
        "question_type": pl.Utf8,
        "question": pl.Utf8,
        "sessions": pl.Int64,
        "items": pl.Int64,
        "retrieved": pl.Int64,
        "ingest_ms": pl.Float64,
        "retrieve_ms": pl.Float64,
        "gold_turns": pl.List(pl.Utf8),
        "gold_sessions": pl.List(pl.Utf8),
        "first_gold_rank": pl.Int64,
        "retrieved_sources": pl.List(pl.List(pl.Utf8)),
        **{n: pl.Float64 for n in names},
    }
    cols: dict[str, list[Any]] = {c: [] for c in schema}
    for row in run.rows:
        for c in schema:
            cols[c].append(system if c == "system" else row[c])
    return pl.DataFrame(cols, schema=schema)


def _mean(values: Sequence[float]) -> float | None:
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return float(sum(kept) / len(kept)) if kept else None


def summarise_retrieval(frame: Any, *, ks: Sequence[int] = RETRIEVAL_KS) -> dict[str, Any]:
    """Mean scores per level, overall and per question type, from a probes frame.

    NaN rows (no gold) are unscored and left out; a group with nothing scored
    reports null. Overall means are over instances, as the official script.
    """
    levels = [lvl for lvl in ("turn", "session") if f"{lvl}.recall_any@{ks[0]}" in frame.columns]

    def group(part: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"instances": part.height}
        for lvl in levels:
            names = [f"{m}@{k}" for k in ks for m in _METRICS]
            col0 = part[f"{lvl}.recall_any@{ks[0]}"].to_list()
            out[lvl] = {
                "scored": sum(1 for v in col0 if v is not None and not math.isnan(v)),
                "scores": {n: _mean(part[f"{lvl}.{n}"].to_list()) for n in names},
            }
        return out

    types = [t for t in QUESTION_TYPES if t in set(frame["question_type"].to_list())]
    return {
        "levels": levels,
        "overall": group(frame),
        "per_type": {t: group(frame.filter(frame["question_type"] == t)) for t in types},
    }


def _cell(v: float | None, w: int = 7) -> str:
    return f"{'-':>{w}}" if v is None else f"{v:>{w}.3f}"


_SHORT = {"recall_any": "R_any", "recall_all": "R_all", "ndcg_any": "nDCG"}
TABLE_COLUMNS: tuple[str, ...] = (
    "recall_any@5",
    "recall_all@5",
    "ndcg_any@5",
    "recall_all@10",
    "ndcg_any@10",
    "recall_all@30",
    "recall_all@50",
    "ndcg_any@50",
)
"""Columns of the printed retrieval table (every cut-off is in ``metrics.json``)."""


def format_retrieval_table(
    metrics: Mapping[str, Any], columns: Sequence[str] = TABLE_COLUMNS
) -> str:
    """One table per level (turn, session): question types and overall by ``columns``."""
    groups = list(metrics["per_type"].items()) + [("overall", metrics["overall"])]
    name_w = max(26, *(len(n) for n, _ in groups))
    lines: list[str] = []
    for lvl in metrics["levels"]:
        cols = [c for c in columns if c in metrics["overall"][lvl]["scores"]]
        labels = [_SHORT.get(c.split("@")[0], c.split("@")[0]) + "@" + c.split("@")[1] for c in cols]
        width = max(7, *(len(c) for c in labels))
        head = f"{lvl + ' level':<{name_w}} {'n':>5} {'scored':>6}" + "".join(f" {c:>{width}}" for c in labels)
        lines += [head, "-" * len(head)]
        for name, g in groups:
            cells = "".join(" " + _cell(g[lvl]["scores"].get(c), width) for c in cols)
            lines.append(f"{name:<{name_w}} {g['instances']:>5} {g[lvl]['scored']:>6}{cells}")
        lines.append("")
    lines.append("R_any: recall_any, R_all: recall_all, nDCG: ndcg_any (official definitions)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# QA protocol


class AnswerSetup(Protocol):
    """A reader plus judges (``sim.answer``), or a test double.

    ``answer_and_judge`` returns flat JSON-serialisable fields: the answer,
    one ``answer_<judge>`` score per judge, tokens and cost.
    """

    def answer_and_judge(
        self,
        question: str,
        question_date: datetime | str,
        memories: Sequence[Retrieved],
        gold: str,
        category: str,
        question_id: str,
    ) -> Mapping[str, Any]:
        """Answer one question from ``memories`` and score the answer."""
        ...


@dataclass(frozen=True, slots=True)
class QaRun:
    """What a QA-protocol run has recorded (this session's rows and resumed ones)."""

    rows: tuple[Mapping[str, Any], ...]
    """One row per finished instance, in the order they finished."""
    resumed: int
    """Rows found in the run folder from an earlier, interrupted session."""
    dropped_partial_line: bool
    """Whether a half-written last line (a crash mid-write) was cut off."""
    texts_ingested: int
    """Memory texts handed to the systems this session."""
    unique_texts: int
    """Distinct texts among them."""
    wall_s: float
    """Wall time of this session."""


QA_ROWS = "qa_rows.jsonl"
"""Append-only file of finished QA instances in a run folder."""


def read_qa_rows(path: str | Path) -> tuple[list[dict[str, Any]], bool]:
    """Finished rows of a run folder's ``qa_rows.jsonl`` (missing file: none).

    A last line without its newline is what a crash mid-write leaves: it is
    cut off (and reported) so that the instance runs again. Any other bad
    line is an error.

    Returns:
        The rows and whether a partial last line was cut off.

    Raises:
        UserError: a complete line that is not a JSON object with ``question_id``.
    """
    p = Path(path)
    if not p.exists():
        return [], False
    data = p.read_bytes()
    dropped = False
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with p.open("r+b") as f:
            f.truncate(cut)
        data = data[:cut]
        dropped = True
    rows: list[dict[str, Any]] = []
    for n, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{p}: line {n}: not JSON ({exc.msg}); remove the line to resume") from None
        if not isinstance(row, dict) or not isinstance(row.get("question_id"), str):
            raise UserError(f"{p}: line {n}: expected an object with question_id; remove the line to resume")
        rows.append(row)
    return rows, dropped


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN; null reads back as unscored
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (np.integer, np.floating)):
        return _json_safe(value.item())
    return str(value)


def qa_row(
    inst: Instance,
    system: MemorySystem,
    answer: AnswerSetup,
    *,
    k: int = 30,
    texts: _TextCounter | None = None,
) -> dict[str, Any]:
    """Ingest every turn of one instance, retrieve the top ``k``, answer and judge.

    ``now`` for retrieval is the later of the question date and the newest
    session; the reader gets the question date as the file writes it. The row also carries
    ``evidence_any@k``: whether a turn the file marks ``has_answer`` (user or
    assistant, answer sessions only) is in the provenance of the top ``k``
    (NaN when there is none, e.g. abstention questions).
    """
    uid = inst.question_id
    start = time.perf_counter()
    n_items = 0
    for turns in memory_turns(inst, granularity="turn", user_only=False):
        if not turns:
            continue
        system.ingest(turns, user_id=uid, now=turns[0].created_at)
        n_items += len(turns)
        if texts is not None:
            for t in turns:
                texts.add(render_turn(t))
    ingest_ms = (time.perf_counter() - start) * 1000.0
    start = time.perf_counter()
    retrieved = system.retrieve(inst.question, user_id=uid, now=inst.latest, k=k)
    retrieve_ms = (time.perf_counter() - start) * 1000.0
    evidence = {
        turn_key(s.session_id, t.index) for s in inst.sessions if s.is_answer for t in s.turns if t.has_answer
    }
    hit = any(evidence.intersection(r.source_turn_ids) for r in retrieved[:k])
    row: dict[str, Any] = {
        "question_id": inst.question_id,
        "question_type": inst.question_type,
        "abstention": inst.is_abstention,
        "question": inst.question,
        "gold": inst.answer,
        "question_date": inst.question_date_text,
        "sessions": len(inst.sessions),
        "items": n_items,
        "k": k,
        "retrieved_ids": [r.memory_id for r in retrieved],
        "retrieved_sources": [list(r.source_turn_ids) for r in retrieved],
        "ingest_ms": ingest_ms,
        "retrieve_ms": retrieve_ms,
        f"evidence_any@{k}": (float(hit) if evidence and not inst.is_abstention else math.nan),
    }
    start = time.perf_counter()
    # The reader gets the date as the file writes it, the same form as the memories' dates,
    # as the official generation prompt does.
    result = answer.answer_and_judge(
        inst.question, inst.question_date_text, retrieved, inst.answer, inst.question_type, inst.question_id
    )
    row["answer_s"] = time.perf_counter() - start
    for key, value in result.items():
        if key in row:
            key = f"answer.{key}"
        row[key] = value
    return row


_METER_KEYS = ("calls", "prompt_tokens", "completion_tokens", "cost_usd")


def _meter_totals(answer: AnswerSetup) -> dict[str, float] | None:
    cost = getattr(answer, "cost", None)
    if not callable(cost):
        return None
    summary = cost()
    return {key: float(summary.get(key, 0.0)) for key in _METER_KEYS}


def run_qa(
    instances: Iterable[Instance],
    make_system: Callable[[], MemorySystem],
    answer: AnswerSetup,
    *,
    run_dir: str | Path,
    k: int = 30,
    progress: bool | None = None,
    total: int | None = None,
) -> QaRun:
    """Run the QA protocol, appending each finished instance to ``run_dir/qa_rows.jsonl``.

    Instances already in that file are skipped, so a run interrupted by a
    crash, Ctrl-C or an endpoint that went away resumes where it stopped.
    Each row is flushed and synced before the next instance starts.

    Args:
        instances: instances to run (streamed).
        make_system: builds a fresh, empty system; called once per instance.
        answer: the reader and judges.
        run_dir: the run folder (created when missing).
        k: memories retrieved per question.
        progress: show a progress bar (None: only on a terminal).
        total: number of instances, for the progress bar.
    """
    from tqdm.auto import tqdm

    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise UserError(f"-k must be a positive integer, got {k!r}")
    folder = Path(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / QA_ROWS
    previous, dropped = read_qa_rows(path)
    done = {r["question_id"] for r in previous}
    rows: list[Mapping[str, Any]] = list(previous)
    texts = _TextCounter()
    start = time.perf_counter()
    with path.open("a", encoding="utf-8") as out, tqdm(
        total=total, initial=0, unit="inst", desc="longmemeval qa", leave=False,
        disable=None if progress is None else not progress,
    ) as bar:
        for inst in instances:
            bar.update(1)
            if inst.question_id in done:
                continue
            before = _meter_totals(answer)
            row = qa_row(inst, make_system(), answer, k=k, texts=texts)
            after = _meter_totals(answer)
            if before is not None and after is not None:
                # Reader and judge spending of this instance, kept in its row so totals survive a resume.
                row.update({f"llm_{key}": after[key] - before[key] for key in _METER_KEYS})
            row = _json_safe(row)
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()
            os.fsync(out.fileno())
            done.add(inst.question_id)
            rows.append(row)
    return QaRun(
        rows=tuple(rows),
        resumed=len(previous),
        dropped_partial_line=dropped,
        texts_ingested=texts.total,
        unique_texts=texts.unique,
        wall_s=time.perf_counter() - start,
    )


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def summarise_qa(rows: Sequence[Mapping[str, Any]], *, score_key: str = "answer_llm_longmemeval") -> dict[str, Any]:
    """Accuracy tables as the official ``print_qa_metrics``, plus tokens and cost.

    - overall accuracy: mean over all judged instances;
    - task-averaged accuracy: mean of the per-type means (of the types present);
    - per-type accuracy (abstention instances count in their type too);
    - abstention accuracy: mean over the ``_abs`` instances.

    A row whose judge gave no verdict (null/NaN) is unscored: counted, not zero.
    Totals add every numeric field whose name ends in ``tokens`` or
    ``calls`` or contains ``cost`` (``llm_*`` fields: reader and judges; plain
    ``prompt_tokens``/``completion_tokens``: the reader). A total is NaN when
    some row lacks a number for it (e.g. a model without a price).
    """
    def acc(part: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        vals = [v for v in (_num(r.get(score_key)) for r in part) if v is not None]
        return {"n": len(part), "judged": len(vals), "accuracy": (sum(vals) / len(vals)) if vals else None}

    per_type = {t: acc([r for r in rows if r.get("question_type") == t]) for t in QUESTION_TYPES}
    per_type = {t: v for t, v in per_type.items() if v["n"]}
    type_means = [v["accuracy"] for v in per_type.values() if v["accuracy"] is not None]
    totals: dict[str, float] = {}
    for r in rows:
        for key, value in r.items():
            if key.endswith(("tokens", "calls")) or "cost" in key:
                if isinstance(value, bool):
                    continue
                v = _num(value)
                totals[key] = totals.get(key, 0.0) + (math.nan if v is None else v)
    ev = [v for v in (_num(r.get(f"evidence_any@{r.get('k')}")) for r in rows) if v is not None]
    return {
        "score_key": score_key,
        "overall": acc(rows),
        "task_averaged_accuracy": (sum(type_means) / len(type_means)) if type_means else None,
        "types_averaged": [t for t, v in per_type.items() if v["accuracy"] is not None],
        "per_type": per_type,
        "abstention": acc([r for r in rows if str(r.get("question_id", "")).endswith("_abs")]),
        "evidence_any_at_k": (sum(ev) / len(ev)) if ev else None,
        "totals": totals,
    }


def format_qa_table(metrics: Mapping[str, Any]) -> str:
    """The QA table: per type, overall, task-averaged, abstention, tokens and cost."""
    def pct(v: float | None) -> str:
        return f"{'-':>8}" if v is None else f"{100 * v:>7.1f}%"

    w = 26
    lines = [f"{'question type':<{w}} {'n':>5} {'judged':>6} {'accuracy':>8}", "-" * (w + 22)]
    for t, v in metrics["per_type"].items():
        lines.append(f"{t:<{w}} {v['n']:>5} {v['judged']:>6} {pct(v['accuracy'])}")
    lines.append("-" * (w + 22))
    o, a = metrics["overall"], metrics["abstention"]
    lines.append(f"{'overall':<{w}} {o['n']:>5} {o['judged']:>6} {pct(o['accuracy'])}")
    lines.append(f"{'task-averaged':<{w}} {'':>5} {'':>6} {pct(metrics['task_averaged_accuracy'])}")
    lines.append(f"{'abstention':<{w}} {a['n']:>5} {a['judged']:>6} {pct(a['accuracy'])}")
    if metrics.get("evidence_any_at_k") is not None:
        lines.append(f"{'evidence in top k':<{w}} {'':>5} {'':>6} {pct(metrics['evidence_any_at_k'])}")
    if metrics["totals"]:
        def show(key: str, value: float) -> str:
            if math.isnan(value):
                return f"{key} unknown"
            return f"{key} {value:.4f}" if "cost" in key else f"{key} {int(value):,}"

        lines.append("totals: " + ", ".join(show(k, v) for k, v in sorted(metrics["totals"].items())))
    return "\n".join(lines)
