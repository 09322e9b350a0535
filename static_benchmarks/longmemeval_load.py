"""LongMemEval's files read: the published schema checked instance by instance, streamed from disk.

``iter_instances`` streams a file (the M file is about 2.7 GB) with ``ijson``,
so memory is bounded by the largest instance; ``instance_from_json`` checks one
instance and names the file, instance id and field of every defect, counting
the defects the published files are known to have (``LoadWarnings``).
The episodes, selection and ids are in ``memsim.static_benchmarks.longmemeval``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsim.core.errors import UserError
from memsim.core.files import regular_file, wide_encoding
from memsim.static_benchmarks.data import LONGMEMEVAL_DEPTH, NestingGuard, check_year, is_unicode

if TYPE_CHECKING:
    pass

__all__ = ["QUESTION_TYPES", "LmeTurn", "LmeSession", "Instance", "LoadWarnings", "parse_lme_date", "instance_from_json", "iter_instances", "load_instances", "scan_instances"]

QUESTION_TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)
"""The six question types of the published files."""


_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\(\s*[A-Za-z]{3}\s*\))?\s*(\d{1,2}):(\d{2})\s*$")


_DATE_EXAMPLE = "2023/05/30 (Tue) 23:40"


_ROLES = ("user", "assistant")


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
    still ingested and retrievable, as officially), ``repeated_session`` (a
    non-answer session listed again with the same turns; the first listing
    is kept).
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
        return check_year(datetime(year, month, day, hour, minute, tzinfo=timezone.utc))
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
    if isinstance(value, str) and not is_unicode(value):
        return _raise(_bad(source, qid, key, "text that is not valid Unicode (a lone surrogate escape)"))
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
    seen: dict[str, Any] = {}
    for si, (sid, date_text, raw) in enumerate(zip(sids, dates, raw_sessions)):
        if not isinstance(sid, str) or not sid:
            raise _bad(source, qid, f"haystack_session_ids[{si}]", "expected a non-empty string")
        if sid in seen:
            # The S file lists a few filler sessions twice, word for word, at two dates (13 of its 500
            # instances): the first listing is kept. A second listing with other turns is an error.
            if raw != seen[sid] or sid in answer_set:
                raise _bad(source, qid, f"haystack_session_ids[{si}]", f"session id {sid!r} appears twice")
            warn.add("repeated_session", f"{qid}: {sid} (again at {date_text})")
            continue
        seen[sid] = raw
        session = _session(raw, sid, date_text, si, sid in answer_set, source, qid)
        _session_warnings(warn, session, qid, qdate, qdate_text)
        sessions.append(session)
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


def _session(raw: Any, sid: str, date_text: Any, si: int, is_answer: bool, source: str, qid: str) -> LmeSession:
    """One haystack session checked: its date, and each turn's role, content and ``has_answer``."""
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
        if not isinstance(content, str) or not is_unicode(content):
            raise _bad(source, qid, f"{where}.content", "missing, not a string, or not valid Unicode")
        has = t.get("has_answer", False)
        if not isinstance(has, bool):
            raise _bad(source, qid, f"{where}.has_answer", f"expected true or false, got {has!r}")
        turns.append(LmeTurn(ti, role, content, has))
    return LmeSession(sid, date, date_text, tuple(turns), is_answer)


def _session_warnings(warn: LoadWarnings, session: LmeSession, qid: str, qdate: datetime, qdate_text: str) -> None:
    """The tolerated defects of a session: evidence marks out of place, a session dated after its question."""
    sid, has = session.session_id, any(t.has_answer for t in session.turns)
    if session.is_answer and not has:
        warn.add("answer_session_without_has_answer", f"{qid}: {sid}")
    if not session.is_answer and has:
        warn.add("has_answer_outside_answer_session", f"{qid}: {sid}")
    if session.date > qdate:
        warn.add("session_after_question", f"{qid}: {sid} ({session.date_text} > {qdate_text})")


def _open_array(path: Path) -> Any:
    if path.exists() and not path.is_dir():
        regular_file(path, "LongMemEval data file")  # a FIFO or a device is refused before it is opened
    try:
        f = path.open("rb")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (get the LongMemEval files as the README says)") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot open: {exc.strerror}") from None
    head = f.read(4096)
    wide = wide_encoding(head)
    if wide is not None:
        f.close()
        raise UserError(f"{path}: {wide}")
    bom = head.startswith(b"\xef\xbb\xbf")  # a UTF-8 byte order mark: allowed, and skipped for the parser
    head = head[3 if bom else 0:].lstrip()
    if not head.startswith(b"["):
        f.close()
        what = "an empty file" if not head else f"a file starting with {head[:1]!r}"
        raise UserError(f"{path}: expected a JSON array of LongMemEval instances, got {what}")
    f.seek(3 if bom else 0)
    return NestingGuard(f, LONGMEMEVAL_DEPTH, str(path), "LongMemEval")


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
            (the others are still parsed, to find where they end); reading
            stops after the last of them.

    Raises:
        UserError: for a missing or non-array file, a truncated or malformed
            file (naming the last complete instance) and bad instances.
    """
    import ijson

    p = Path(path)
    wanted = None if indices is None else frozenset(indices)
    stop = max(wanted, default=-1) if wanted is not None else None
    last = "none (error before the first instance)"
    seen: set[str] = set()
    n = 0
    with _open_array(p) as f:
        try:
            for obj in ijson.items(f, "item", use_float=True):
                if stop is not None and n > stop:
                    return  # nothing wanted lies further on: the rest of a 2.7 GB file is not read
                if wanted is None or n in wanted:
                    inst = instance_from_json(obj, source=str(p), index=n, warnings=warnings)
                    if inst.question_id in seen:
                        raise UserError(f"{p}: instance #{n}: duplicate question_id {inst.question_id!r}")
                    seen.add(inst.question_id)
                    last = inst.question_id
                    yield inst
                else:
                    last = obj.get("question_id", f"#{n}") if isinstance(obj, Mapping) else f"#{n}"
                n += 1
        except (ijson.JSONError, UnicodeDecodeError) as exc:  # a lone surrogate escape can decode to bad UTF-8
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
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            last = out[-1][0] if out else "none"
            raise UserError(
                f"{p}: truncated or malformed JSON after {len(out)} complete instances "
                f"(last: {last}): {str(exc).strip() or type(exc).__name__}"
            ) from None
    return out
