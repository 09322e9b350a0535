"""LongMemEval: streaming loader, episodes and the official retrieval metrics.

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

Each instance becomes one ``Episode`` (``instance_episode``): its haystack
sessions at their dates, then its question. The engine plays it against
fresh systems (``memsim.scenarios.static.LongMemEvalBenchmark``); the scorers here
(``TurnScorer``, ``SessionScorer``) compute the official figures:

- Turn level: the keys are the *user* turns, id ``<session_id>_<index + 1>``
  where the index counts all turns of the session. Only user turns are
  ingested by the retrieval protocol, as the official corpus holds only user
  turns; the gold keys are the user turns with ``has_answer`` inside answer
  sessions. Session-level figures of a turn ranking are derived the way the
  official ``turn2session`` evaluation does (the cut-off grows until it
  covers k distinct sessions; relevance stays per retrieved item).
- Session level (``granularity="session"``): one key per session, the text of
  its user turns joined by spaces; gold sessions are the answer sessions with
  at least one user turn marked ``has_answer``.
- ``recall_any@k``, ``recall_all@k`` and ``ndcg_any@k`` for k in
  ``RETRIEVAL_KS``, with the official DCG (rank 1 weighs 1, rank r >= 2
  weighs ``1 / log2(r)``). Abstention questions are not scored.
- Instances without any gold key (single-session-assistant questions, whose
  evidence is an assistant turn) are unscored (NaN) by default; with
  ``empty_gold="official"`` they score as the official script scores them
  (recall_any 0, recall_all 1, nDCG 0), which its published averages include.

Ids that reveal gold never reach a system: answer sessions are named
``answer_...`` and abstention question ids end in ``_abs``, so every session
id becomes ``s`` + 16 hex digits of its sha256 (``opaque_session_id``), turn
keys keep their official form on that id, and user and question ids are
opaque too. The mapping is a hash, so the same session gets the same id in
every instance; the question carries its original id in ``extra``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any


from memsim.memory.base import Turn
from memsim.core.errors import UserError
from memsim.core.files import decode_utf8, read_limited, regular_file, wide_encoding
from memsim.sim.events import Episode, Question, Session
from memsim.static_benchmarks.data import LONGMEMEVAL_DEPTH, NestingGuard, check_year, is_unicode
from memsim.core.streams import seeded

if TYPE_CHECKING:
    from memsim.memory.base import Retrieved

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
    "read_question_ids",
    "select_indices",
    "Selection",
    "select",
    "turn_key",
    "gold_turn_keys",
    "gold_session_ids",
    "memory_turns",
    "opaque_id",
    "opaque_session_id",
    "opaque_turn_key",
    "session_of",
    "instance_episode",
    "iter_episodes",
    "official_dcg",
    "score_ranking",
    "score_turn2session",
    "TurnScorer",
    "SessionScorer",
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


MAX_QUESTION_IDS_BYTES = 1024 * 1024 * 1024
"""Largest ``--question-ids`` file read; ``--no-size-limits`` lifts it."""


def read_question_ids(path: str | Path) -> tuple[str, ...]:
    """The question ids listed in ``path``, in its order: a subset of instances named by id.

    The file is a JSON list of ids, a JSON list of instances (objects with a
    ``question_id``, as a LongMemEval file or a saved subset of one), or text
    with one id per line (blank lines and lines starting with ``#`` skipped).

    Raises:
        UserError: the file is unreadable, empty, not one of those shapes, or
            names an id twice (each named with the file and the entry).
    """
    p = Path(path).expanduser()
    try:
        # A regular file only, read up to the limit (a saved subset of instances can be a whole S file), UTF-8 only.
        text = decode_utf8(read_limited(p, "--question-ids file", MAX_QUESTION_IDS_BYTES), f"--question-ids {p}")
    except OSError as exc:
        raise UserError(f"--question-ids {p}: cannot read ({type(exc).__name__}: {exc})") from None
    ids: list[str] = []
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"--question-ids {p}: malformed JSON at line {exc.lineno}: {exc.msg}") from None
        for n, item in enumerate(items):
            qid = item.get("question_id") if isinstance(item, dict) else item
            if not isinstance(qid, str) or not qid.strip():
                raise UserError(f"--question-ids {p}: entry {n} is not a question id (a string, or an object with "
                                f"a 'question_id' string): {str(item)[:60]!r}")
            ids.append(qid.strip())
    else:
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if line and not line.startswith("#"):
                if any(c.isspace() for c in line):
                    raise UserError(f"--question-ids {p}: line {n} holds more than one id: {line[:60]!r}")
                ids.append(line)
    if not ids:
        raise UserError(f"--question-ids {p}: lists no question id")
    seen: set[str] = set()
    for qid in ids:
        if qid in seen:
            raise UserError(f"--question-ids {p}: question id {qid!r} is listed twice")
        seen.add(qid)
    return tuple(ids)


def select_indices(
    index: Sequence[tuple[str, str]],
    *,
    types: Collection[str] | None = None,
    sample: int | None = None,
    seed: int = 0,
    limit: int | None = None,
    ids: Collection[str] | None = None,
) -> list[int]:
    """File positions to run: the named ids, filtered by type, then a stratified sample, then the first ``limit``.

    The sample keeps each type's share (largest remainders, ties by type
    order) and draws within each type with ``numpy.random.default_rng(seed)``,
    so the same seed picks the same instances.

    Args:
        index: ``scan_instances`` output.
        types: question types to keep (``None``: all).
        sample: number of instances to draw (``None``: all).
        seed: seed of the draw.
        limit: keep at most this many, in file order.
        ids: only the instances with these question ids (``None``: all); an
            id the file does not hold is an error, so a published subset is
            run whole or not at all.
    """
    if types is not None:
        unknown = sorted(set(types) - set(QUESTION_TYPES))
        if unknown:
            raise UserError(f"--types: unknown question type(s) {', '.join(unknown)}; valid: {', '.join(QUESTION_TYPES)}")
    wanted = None if ids is None else set(ids)
    if wanted is not None:
        missing = sorted(wanted - {q for q, _ in index})
        if missing:
            raise UserError(f"--question-ids: {len(missing)} of {len(wanted)} ids are not in the file "
                            f"(first: {', '.join(missing[:5])})")
    chosen = [i for i, (q, t) in enumerate(index) if (types is None or t in types) and (wanted is None or q in wanted)]
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
            rng = seeded(seed)
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


MEMORY_FORMATS: tuple[str, ...] = ("official", "seed")
"""What a memory's text is: the official retrieval corpus's, or the seed's dated form."""


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


def memory_turns(
    inst: Instance,
    *,
    granularity: str = "turn",
    user_only: bool = True,
    rename: Callable[[str], str] | None = None,
    user_id: str | None = None,
    memory_format: str = "seed",
) -> list[list[Turn]]:
    """The instance's haystack as memory turns, one list per session, oldest first.

    Args:
        inst: the instance.
        granularity: ``"turn"``: one ``Turn`` per turn, id ``turn_key``;
            ``"session"``: one ``Turn`` per session, id the session id, text
            the session's user turns joined by spaces (the official session key).
        user_only: at turn granularity, keep only user turns (the retrieval
            protocol's corpus); ``False`` keeps every turn (QA protocol).
        rename: maps a session id to the id systems see (``opaque_session_id``);
            None keeps the file's ids.
        user_id: the turns' user (default the question id).
        memory_format: ``"official"``: a memory's text is what the official
            retrieval script indexes (a user turn's content; a session's user
            turns joined by spaces); ``"seed"``: the seed's dated form,
            ``"<date> | <role>: <content>"``.

    Every turn carries ``metadata["date_text"]`` (the file's date string);
    in the official format also ``metadata["verbatim"]``, so that
    ``render_turn`` gives the text alone.
    """
    if granularity not in GRANULARITIES:
        raise UserError(f"granularity {granularity!r} unknown; valid: {', '.join(GRANULARITIES)}")
    if memory_format not in MEMORY_FORMATS:
        raise UserError(f"memory_format {memory_format!r} unknown; valid: {', '.join(MEMORY_FORMATS)}")
    out: list[list[Turn]] = []
    uid = inst.question_id if user_id is None else user_id
    for s in inst.sessions:
        sid = s.session_id if rename is None else rename(s.session_id)
        meta: dict[str, Any] = {"date_text": s.date_text}
        if memory_format == "official":
            meta["verbatim"] = True
        if granularity == "session":
            text = " ".join(t.content for t in s.turns if t.role == "user")
            out.append([Turn(sid, uid, "user", text, s.date, sid, meta)])
            continue
        out.append(
            [
                Turn(turn_key(sid, t.index), uid, t.role, t.content, s.date, sid, meta)
                for t in s.turns
                if t.role == "user" or not user_only
            ]
        )
    return out


def opaque_id(prefix: str, original: str) -> str:
    """``prefix`` + 16 hex digits of the sha256 of ``original``: stable, reveals nothing."""
    return prefix + hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def opaque_session_id(session_id: str) -> str:
    """The id systems see for a session (``answer_...`` names would reveal gold)."""
    return opaque_id("s", session_id)


def opaque_turn_key(key: str) -> str:
    """An official turn key ``<session_id>_<n>`` on the session's opaque id."""
    sid, _, n = key.rpartition("_")
    return f"{opaque_session_id(sid)}_{n}"


def session_of(key: str) -> str:
    """The session id of a turn key ``<session_id>_<n>``."""
    return key.rpartition("_")[0]


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
# Selection and episodes


@dataclass(frozen=True, slots=True)
class Selection:
    """Which instances of a file a run takes."""

    indices: tuple[int, ...] | None
    """File positions to run (None: every instance in file order, up to ``limit``)."""
    limit: int | None = None
    """At most this many, in file order (already applied when ``indices`` is set)."""

    def instances(self, path: str | Path, *, warnings: LoadWarnings | None = None) -> Iterator[Instance]:
        """Stream the selected instances."""
        it = iter_instances(path, warnings=warnings, indices=self.indices)
        if self.indices is None and self.limit is not None:
            return itertools.islice(it, self.limit)
        return it


def select(
    path: str | Path,
    *,
    types: Collection[str] | None = None,
    sample: int | None = None,
    seed: int = 0,
    limit: int | None = None,
    ids: Collection[str] | None = None,
) -> Selection:
    """Resolve named ids, a type filter, a stratified sample and a limit (``select_indices``).

    Ids, type filters and samples need the ids and types of all instances
    first: a light scan of the file. A limit alone reads only as far as it needs.
    """
    if limit is not None and limit < 0:
        raise UserError(f"--limit must not be negative, got {limit}")
    if not types and sample is None and not ids:
        return Selection(None, limit)
    chosen = select_indices(
        scan_instances(path), types=set(types) if types else None, sample=sample, seed=seed, limit=limit,
        ids=ids or None,
    )
    return Selection(tuple(chosen), limit)


def instance_episode(
    inst: Instance, *, granularity: str = "turn", user_only: bool = True, empty_gold: str = "skip",
    memory_format: str = "seed",
) -> Episode:
    """One instance as an episode: its haystack sessions at their dates, then its question.

    Every id a system sees is opaque (``opaque_id``): sessions, turns (the
    official key on the opaque session id), the user and the question. The
    question is asked at ``inst.latest`` (its date, or the newest session's
    when the file dates a session after it), so every session is ingested and
    retrievable first, as in the official corpus.

    ``evidence`` holds the gold keys at the ingested granularity (user turns
    marked ``has_answer`` in answer sessions, or those sessions); abstention
    questions have none and are ``excluded="abstention"`` (still answered and
    judged). ``extra`` carries what the official scorers need and systems
    never see: ``question_id`` (the file's), ``question_date`` (as written),
    ``granularity``, ``gold_sessions`` (opaque ids), ``n_items`` (items
    ingested), ``n_gold_items`` (items ingested from gold sessions: the ideal
    DCG of ``turn2session``), ``empty_gold``, ``question_type`` and
    ``abstention``.

    Raises:
        UserError: two session ids of the instance share an opaque id.
    """
    if empty_gold not in ("skip", "official"):
        raise UserError(f"empty_gold {empty_gold!r} unknown; valid: skip, official")
    user = opaque_id("u", inst.question_id)
    renamed = {s.session_id: opaque_session_id(s.session_id) for s in inst.sessions}
    if len(set(renamed.values())) != len(renamed):
        raise UserError(f"instance {inst.question_id}: two session ids share an opaque id; report this")
    gold_sessions = frozenset() if inst.is_abstention else gold_session_ids(inst)
    sessions: list[Session] = []
    n_items = n_gold_items = 0
    for s, turns in zip(
        inst.sessions,
        memory_turns(inst, granularity=granularity, user_only=user_only, rename=renamed.__getitem__, user_id=user,
                     memory_format=memory_format),
    ):
        if not turns:
            continue
        n_items += len(turns)
        if s.session_id in gold_sessions:
            n_gold_items += len(turns)
        sessions.append(Session(session_id=renamed[s.session_id], user_id=user, time=s.date, turns=tuple(turns)))
    if inst.is_abstention:
        evidence: tuple[str, ...] = ()
    elif granularity == "session":
        evidence = tuple(sorted(renamed[sid] for sid in gold_sessions))
    else:
        evidence = tuple(sorted(opaque_turn_key(key) for key in gold_turn_keys(inst)))
    question = Question(
        question_id=opaque_id("q", inst.question_id),
        user_id=user,
        time=inst.latest,
        text=inst.question,
        gold=inst.answer,
        kind=inst.question_type,
        evidence=evidence,
        topic=inst.question_id,
        excluded="abstention" if inst.is_abstention else None,
        extra={
            "question_id": inst.question_id,
            "question_date": inst.question_date_text,
            "granularity": granularity,
            "gold_sessions": tuple(sorted(renamed[sid] for sid in gold_sessions)),
            "n_items": n_items,
            "n_gold_items": n_gold_items,
            "empty_gold": empty_gold,
            "question_type": inst.question_type,
            "abstention": inst.is_abstention,
        },
    )
    # The episode id is the file's question id: rows show it, no system sees it.
    return Episode(inst.question_id, (*sessions, question))


def iter_episodes(
    path: str | Path,
    selection: Selection,
    *,
    granularity: str = "turn",
    user_only: bool = True,
    include_abstention: bool = False,
    empty_gold: str = "skip",
    warnings: LoadWarnings | None = None,
    memory_format: str = "seed",
) -> Iterator[Episode]:
    """The selected instances as episodes, read one at a time (flat memory on the M file).

    Abstention instances are left out unless ``include_abstention``.
    """
    for inst in selection.instances(path, warnings=warnings):
        if inst.is_abstention and not include_abstention:
            continue
        yield instance_episode(inst, granularity=granularity, user_only=user_only, empty_gold=empty_gold,
                               memory_format=memory_format)


# ---------------------------------------------------------------------------
# Scorers (``memsim.sim.scorers`` registry: ``lme_turn``, ``lme_session``)


def _nan(columns: Iterable[str]) -> dict[str, float]:
    return dict.fromkeys(columns, math.nan)


@dataclass(frozen=True, slots=True)
class TurnScorer:
    """Official turn-level ``turn_recall_any@k``, ``turn_recall_all@k``, ``turn_ndcg_any@k``.

    Scores the provenance of the ranking against the question's evidence (the
    gold user-turn keys); NaN for an excluded question and for a run at
    session granularity (it has no turn ranking).
    """

    name: str = "lme_turn"

    def columns(self, ks: Sequence[int]) -> list[str]:
        """One column per metric and cut-off."""
        return [f"turn_{m}@{k}" for k in ks for m in _METRICS]

    def score(self, question: Question, retrieved: Sequence[Retrieved], *, ks: Sequence[int]) -> dict[str, Any]:
        """The official figures of one ranking."""
        extra = question.extra
        if question.excluded is not None or extra.get("granularity", "turn") != "turn":
            return _nan(self.columns(ks))
        scores = score_ranking(
            [m.source_turn_ids for m in retrieved], question.evidence, ks=ks, empty_gold=extra.get("empty_gold", "skip")
        )
        return {f"turn_{name}": v for name, v in scores.items()}


@dataclass(frozen=True, slots=True)
class SessionScorer:
    """Official session-level ``session_recall_any@k``, ``session_recall_all@k``, ``session_ndcg_any@k``.

    At session granularity the ranking is of sessions (``score_ranking``); at
    turn granularity the session figures of the turn ranking
    (``score_turn2session``), which grow a cut-off until it covers k distinct
    sessions. When the fetched list is shorter than the system's store and
    covers fewer than k sessions, the official figure depends on memories
    that were not fetched: that cut-off is NaN (unscored), never a guess.
    Fetch deeper (``retrieve_k``) to score it.
    """

    name: str = "lme_session"

    def columns(self, ks: Sequence[int]) -> list[str]:
        """One column per metric and cut-off."""
        return [f"session_{m}@{k}" for k in ks for m in _METRICS]

    def score(self, question: Question, retrieved: Sequence[Retrieved], *, ks: Sequence[int]) -> dict[str, Any]:
        """The official session-level figures of one ranking."""
        if question.excluded is not None:
            return _nan(self.columns(ks))
        extra = question.extra
        gold = extra.get("gold_sessions", ())
        empty_gold = extra.get("empty_gold", "skip")
        if extra.get("granularity", "turn") == "session":
            scores = score_ranking([m.source_turn_ids for m in retrieved], gold, ks=ks, empty_gold=empty_gold)
            return {f"session_{name}": v for name, v in scores.items()}
        # A memory's sessions, in provenance order, without repeats.
        ranked = [tuple(dict.fromkeys(session_of(t) for t in m.source_turn_ids)) for m in retrieved]
        scores = score_turn2session(
            ranked, gold, n_relevant=int(extra.get("n_gold_items", 0)), ks=ks, empty_gold=empty_gold
        )
        # Fewer memories than max(ks) came back only when the store ran out: the ranking is whole.
        truncated = len(retrieved) < int(extra.get("n_items", 0)) and len(retrieved) >= max(ks, default=0)
        if gold and truncated:
            covered = len({sid for sids in ranked for sid in sids})
            for k in ks:
                if k > covered:
                    for m in _METRICS:
                        scores[f"{m}@{k}"] = math.nan
        return {f"session_{name}": v for name, v in scores.items()}
