"""World files: a generated (or rendered) stream written once, hashed, and replayed offline.

A world file is JSON Lines. The first line is the header::

    {"format": "memsim-world", "version": 1, "source": {...}, "counts": {...},
     "start": ISO, "end": ISO, "totals": {...}, "meta": {...}, "sha256": HEX}

``source`` is the spec of the scenario it was generated from (name, args,
seed, and how it was rendered), ``counts`` what a render did (rewritten,
verified, retried, kept as generated; empty when the stream was written
unchanged), ``sha256`` the hash of every byte after the header line. Each
further line is one event, ``{"type": "session" | "question" | "deletion" |
"tick", ...}`` with the fields of ``memsim.sim.events`` (times in ISO 8601,
turns as objects), in the stream's order.

The ``world`` scenario (``[scenario] name = "world"``, ``data =
"world.jsonl"``) replays the file: the same events, questions, gold and
evidence as the stream it was written from, with no random draws and no
endpoint. A world file is checked like a dataset before anything runs
(``read_world``): the header, every event's fields (types, required fields,
valid Unicode within the size limits ``MAX_*``), ids unique, events in time
order inside the header's span, evidence, superseded and deleted turn ids
that exist, were said earlier and belong to the asking user, and the body's
hash. A file that does not check out is a ``UserError`` naming the file,
the line and the field (and how many more problems the file has).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from memsim.memory.base import Turn
from memsim.scenarios.base import FileScenario, ScenarioStream
from memsim.core.errors import UserError
from memsim.core.files import read_limited, regular_file, utf8_problem, write_atomic
from memsim.core.validate import size_limits_on
from memsim.sim.events import Deletion, Event, Question, Session, Tick

__all__ = [
    "WORLD_FORMAT", "WORLD_VERSION", "write_world", "read_world", "read_header", "WorldConfig", "WorldScenario",
    "MAX_WORLD_BYTES", "MAX_LINE_BYTES", "MAX_TEXT_CHARS", "MAX_ID_CHARS", "MAX_QUESTIONS", "MAX_USERS", "MAX_EVENTS",
]

WORLD_FORMAT = "memsim-world"
"""The header's ``format``."""
WORLD_VERSION = 1
"""The header's ``version``: the layout this module writes and reads."""

_TYPES: dict[str, type] = {"session": Session, "question": Question, "deletion": Deletion, "tick": Tick}
_NAMES = {cls: name for name, cls in _TYPES.items()}
_TIMES = frozenset({"time", "created_at"})
_HEADER_KEYS = ("format", "version", "source", "counts", "start", "end", "sha256")


def _jsonable(value: Any) -> Any:
    """Plain JSON values of scenario meta (tuples as lists, datetimes as ISO, other objects as text)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _encode(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if f.name in _TIMES:
            v = v.isoformat()
        elif f.name == "turns":
            v = [_encode(t) for t in v]
        out[f.name] = _jsonable(v)
    return out


def _event_line(event: Event) -> str:
    return json.dumps({"type": _NAMES[type(event)], **_encode(event)}, ensure_ascii=False, separators=(",", ":"))


def write_world(path: str | Path, stream: ScenarioStream, *, source: Mapping[str, Any],
                counts: Mapping[str, int] | None = None) -> str:
    """Write ``stream`` as a world file at ``path`` (atomically) and return the body's sha256.

    Args:
        path: the file to write.
        stream: a longitudinal stream (its ``events``).
        source: the spec it came from (scenario name, args, seed, render settings).
        counts: what a render did (rewritten, verified, retried, kept as generated).

    Raises:
        ValueError: the stream has no events (a static benchmark's streamed episodes).
    """
    if not stream.events or stream.start is None or stream.end is None:
        raise ValueError("a world file holds a longitudinal stream's events; this stream has none")
    body = "".join(_event_line(e) + "\n" for e in stream.events).encode("utf-8")
    digest = hashlib.sha256(body).hexdigest()
    header = {
        "format": WORLD_FORMAT, "version": WORLD_VERSION, "source": _jsonable(source), "counts": dict(counts or {}),
        "start": stream.start.isoformat(), "end": stream.end.isoformat(), "totals": stream.totals(),
        "meta": _jsonable(stream.meta), "sha256": digest,
    }
    head = (json.dumps(header, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")

    write_atomic(Path(path), lambda tmp: tmp.write_bytes(head + body))
    return digest


MAX_WORLD_BYTES = 1024 * 1024 * 1024
"""Largest world file read (bytes); the 30-user demo world is about 10 MB."""
MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest line (one event) read (bytes)."""
MAX_TEXT_CHARS = 100_000
"""Longest turn or question text, gold answer or topic (characters)."""
MAX_ID_CHARS = 512
"""Longest id, speaker, kind or label (characters)."""
MAX_QUESTIONS = 25_000
"""Most questions in a world file (the demo world asks about 5,900)."""
MAX_USERS = 100_000
"""Most users in a world file (the bound of a config's ``users``)."""
MAX_EVENTS = 5_000_000
"""Most events (lines after the header) in a world file."""
_YEARS = (1900, 2999)
"""Years a world's times may fall in (as the loaders of LoCoMo and LongMemEval check)."""


class _Problems:
    """Violations found in a world file: every one is kept, the first ones are said."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.found: list[str] = []

    def add(self, line: int, message: str) -> None:
        self.found.append(f"{self.path} line {line}: {message}")

    def raise_any(self) -> None:
        """One ``UserError`` naming the first violation and how many more there are."""
        if not self.found:
            return
        more = len(self.found) - 1
        raise UserError(self.found[0] + (f" (and {more} more problem{'s' * (more > 1)} in the file)" if more else ""))


def _short(value: Any, most: int = 40) -> str:
    """A value as the messages echo it: its repr cut to ``most`` characters."""
    text = repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."


def _parse(raw: bytes, where: str, *, last: bool) -> dict[str, Any]:
    if last and not raw.endswith(b"\n"):
        raise UserError(f"{where}: truncated line (no end of line); the file was cut short")
    if len(raw) > MAX_LINE_BYTES and size_limits_on():
        raise UserError(f"{where}: a line of {len(raw):,} bytes, over the {MAX_LINE_BYTES:,}-byte limit of one event")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{where}: not valid UTF-8 at byte {exc.start} of the line ({exc.reason})") from None
    try:
        row = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError:
        raise UserError(f"{where}: truncated or damaged line (not JSON)") from None
    except RecursionError:
        raise UserError(f"{where}: nested too deeply (an event is at most four levels deep)") from None
    except ValueError as exc:  # an integer past Python's digit limit, or NaN/Infinity
        raise UserError(f"{where}: {_cut(str(exc))}") from None
    if not isinstance(row, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(row).__name__}")
    return row


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _cut(text: str, most: int = 120) -> str:
    one = " ".join(text.split())
    return one if len(one) <= most else one[: most - 3] + "..."


def _text_problem(value: Any, most: int, *, empty: bool = True) -> str | None:
    """Why ``value`` is not acceptable text, or None."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__} {_short(value)}"
    if not empty and not value.strip():
        return "must not be empty"
    if len(value) > most and size_limits_on():
        return f"is {len(value):,} characters long, over the limit of {most:,}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"is not valid Unicode (a lone surrogate at character {exc.start})"
    return None


# Per field: how long it may be, and whether it may be empty (``None``: may be null too).
_TEXTS: dict[str, tuple[int, bool]] = {
    "text": (MAX_TEXT_CHARS, True), "gold": (MAX_TEXT_CHARS, True), "topic": (MAX_TEXT_CHARS, True),
    "speaker": (MAX_ID_CHARS, False), "kind": (MAX_ID_CHARS, False),
    "turn_id": (MAX_ID_CHARS, False), "session_id": (MAX_ID_CHARS, False), "user_id": (MAX_ID_CHARS, False),
    "question_id": (MAX_ID_CHARS, False), "deletion_id": (MAX_ID_CHARS, False),
}
_OPTIONAL_TEXTS = frozenset({"reask_of", "excluded"})
_ID_LISTS = frozenset({"evidence", "superseded", "turn_ids"})


def _json_problem(value: Any, depth: int = 0) -> str | None:
    """Why a ``metadata``/``extra`` value cannot be kept (bad text, too deep), or None."""
    if depth > 8:
        return "is nested more than 8 levels deep"
    if isinstance(value, str):
        return _text_problem(value, MAX_TEXT_CHARS)
    if isinstance(value, dict):
        for k, v in value.items():
            bad = _text_problem(k, MAX_ID_CHARS) or _json_problem(v, depth + 1)
            if bad:
                return f"key {_short(k)} {bad}"
    elif isinstance(value, list):
        for v in value:
            bad = _json_problem(v, depth + 1)
            if bad:
                return bad
    return None


def _time(value: Any) -> datetime:
    """An ISO 8601 time with a time zone, in the years memsim accepts."""
    if not isinstance(value, str):
        raise ValueError(f"must be an ISO 8601 time string, got {type(value).__name__}")
    v = datetime.fromisoformat(value)
    if v.tzinfo is None:
        raise ValueError("has no time zone")
    if not _YEARS[0] <= v.year <= _YEARS[1]:
        raise ValueError(f"year {v.year} is outside {_YEARS[0]}..{_YEARS[1]}")
    return v


def _build(cls: type, row: Mapping[str, Any], where: str, what: str) -> Any:
    """``cls`` from the JSON fields of ``row``: each field present when required and of its type.

    Raises:
        UserError: a missing or unknown field, or a value of the wrong type, size or encoding,
            naming ``where`` (file and line), ``what`` and the field.
    """
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(row) - names - {"type"})
    if unknown:
        raise UserError(f"{where}: {what} has unknown field(s) {', '.join(_short(u) for u in unknown[:5])}")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in row:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise UserError(f"{where}: {what} is missing field {f.name!r}")
            continue
        v = row[f.name]
        bad: str | None = None
        if f.name in _TIMES:
            try:
                v = _time(v)
            except ValueError as exc:
                bad = f"{_short(row[f.name])} {exc}" if isinstance(row[f.name], str) else str(exc)
        elif f.name == "turns":
            if not isinstance(v, list) or not v:
                bad = f"must be a non-empty list of turns, got {_short(v)}"
            else:
                for i, t in enumerate(v):
                    if not isinstance(t, dict):
                        raise UserError(f"{where}: {what} field 'turns' item {i} must be an object, got {_short(t)}")
                v = tuple(_build(Turn, t, where, f"turn {j}") for j, t in enumerate(v))
        elif f.name in ("metadata", "extra"):
            bad = (f"must be an object, got {type(v).__name__}" if not isinstance(v, dict) else _json_problem(v))
            v = dict(v) if not bad else v
        elif f.name in _ID_LISTS:
            if not isinstance(v, list):
                bad = f"must be a list of turn ids, got {type(v).__name__} {_short(v)}"
            else:
                for item in v:
                    bad = _text_problem(item, MAX_ID_CHARS, empty=False)
                    if bad:
                        bad = f"item {_short(item)} {bad}"
                        break
                v = tuple(v)
        elif f.name in _OPTIONAL_TEXTS:
            bad = None if v is None else _text_problem(v, MAX_ID_CHARS, empty=False)
        elif f.name in _TEXTS:
            most, empty = _TEXTS[f.name]
            bad = _text_problem(v, most, empty=empty)
        if bad:
            raise UserError(f"{where}: {what} field {f.name!r} {bad}")
        kwargs[f.name] = v
    return cls(**kwargs)


def _header(p: Path, raw: bytes, *, only: bool) -> dict[str, Any]:
    """The checked header line of world file ``p`` (``only``: the file has no other line)."""
    if not raw:
        raise UserError(f"{p} line 1: empty world file (expected a header line)")
    problem = utf8_problem(raw[:4096]) if raw[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\0" in raw[:4096] else None
    if problem:
        raise UserError(f"{p}: {problem}")
    header = _parse(raw, f"{p} line 1", last=only)
    if header.get("format") != WORLD_FORMAT:
        raise UserError(f"{p} line 1: not a memsim world file (format {_short(header.get('format'))}, expected {WORLD_FORMAT!r})")
    if header.get("version") != WORLD_VERSION:
        raise UserError(f"{p} line 1: world file version {_short(header.get('version'))}; this memsim reads version {WORLD_VERSION}")
    missing = [k for k in _HEADER_KEYS if k not in header]
    if missing:
        raise UserError(f"{p} line 1: header is missing field(s) {', '.join(map(repr, missing))}")
    if not isinstance(header["sha256"], str) or len(header["sha256"]) != 64:
        raise UserError(f"{p} line 1: header field 'sha256' must be 64 hex digits, got {_short(header['sha256'])}")
    for key in ("source", "counts"):
        if not isinstance(header[key], dict):
            raise UserError(f"{p} line 1: header field {key!r} must be an object, got {_short(header[key])}")
    if not isinstance(header.get("meta", {}), dict):
        raise UserError(f"{p} line 1: header field 'meta' must be an object, got {_short(header['meta'])}")
    times = {}
    for key in ("start", "end"):
        try:
            times[key] = _time(header[key])
        except ValueError as exc:
            raise UserError(f"{p} line 1: header field {key!r} {_short(header[key])} is not a usable time: {exc}") from None
    if times["start"] >= times["end"]:
        raise UserError(f"{p} line 1: header 'start' {header['start']} is not before 'end' {header['end']}")
    return header


def read_header(path: str | Path) -> dict[str, Any]:
    """The header of a world file, read and checked without reading its events.

    Raises:
        UserError: a missing file, one that is not a regular file, or a bad header line
            (naming the file and line 1).
    """
    p = Path(path)
    regular_file(p, "world file")
    with p.open("rb") as f:
        raw = f.readline(MAX_LINE_BYTES + 1)
        only = not f.read(1)
    return _header(p, raw, only=only)


def read_world(path: str | Path) -> tuple[dict[str, Any], ScenarioStream]:
    """The header and the stream of a world file, checked like a dataset and against its hash.

    Checked before anything runs: the header (format, version, fields, times
    with a zone in 1900..2999, start before end), every event's fields (types,
    required fields, valid Unicode within the size limits), ids unique
    (sessions, turns, questions, deletions), events in time order within the
    header's span, evidence, superseded and deleted turn ids that exist, were
    said before and belong to the same user, questions only for users who
    have had a session, the header's totals, the limits on questions and
    users, and the body's sha256.

    Raises:
        UserError: the first violation, naming the file, the line and the field, and how many
            more the file has; a missing file or one that is not a regular file.
    """
    p = Path(path)
    data = read_limited(p, "world file", MAX_WORLD_BYTES)
    lines = data.splitlines(keepends=True)
    header = _header(p, lines[0] if lines else b"", only=len(lines) <= 1)
    if len(lines) - 1 > MAX_EVENTS and size_limits_on():
        raise UserError(f"{p}: {len(lines) - 1:,} events, over the limit of {MAX_EVENTS:,} (memsim --no-size-limits lifts it)")
    events: list[Event] = []
    for n, raw in enumerate(lines[1:], start=2):
        where = f"{p} line {n}"
        row = _parse(raw, where, last=n == len(lines))
        kind = row.get("type")
        if kind not in _TYPES:
            raise UserError(f"{where}: unknown event type {_short(kind)}; known: {', '.join(_TYPES)}")
        events.append(_build(_TYPES[kind], row, where, f"{kind} event"))
    if not events:
        raise UserError(f"{p}: a world file with no events")
    digest = hashlib.sha256(b"".join(lines[1:])).hexdigest()
    if digest != header["sha256"]:
        raise UserError(f"{p} line 1: the body's sha256 {digest[:12]} is not the header's {str(header['sha256'])[:12]} "
                        "(the file was changed after it was written)")
    # The hash proves only that the file is as written: a file written to lie passes it, so the stream is checked too.
    _check_stream(p, header, events)
    start, end = _time(header["start"]), _time(header["end"])
    meta = {**dict(header.get("meta") or {}),
            "world": {"source": header["source"], "counts": header["counts"], "sha256": header["sha256"]}}
    return header, ScenarioStream(start=start, end=end, events=tuple(events), meta=meta)


def _check_stream(p: Path, header: Mapping[str, Any], events: Sequence[Event]) -> None:
    """The checks across events (ids, order, references, span, totals); raises on any violation."""
    problems = _Problems(p)
    start, end = _time(header["start"]), _time(header["end"])
    order = {Session: 0, Deletion: 1, Question: 2, Tick: 3}
    seen_ids: dict[str, dict[str, int]] = {"session": {}, "turn": {}, "question": {}, "deletion": {}}
    turns: dict[str, tuple[str, datetime]] = {}  # turn id -> (user, when said)
    users: set[str] = set()
    questions: dict[str, str] = {}  # question id -> user
    last: Event | None = None

    def unique(kind: str, key: str, line: int, field: str) -> None:
        if key in seen_ids[kind]:
            first = seen_ids[kind][key]
            where = "earlier on this line" if first == line else f"of line {first}"
            problems.add(line, f"{field} {_short(key)} repeats the {kind} id {where}")
        else:
            seen_ids[kind][key] = line

    def said(ids: Sequence[str], user: str, when: datetime, line: int, field: str) -> None:
        for tid in ids:
            owner = turns.get(tid)
            if owner is None:
                problems.add(line, f"field {field!r} names turn {_short(tid)}, which no earlier session holds")
            elif owner[0] != user:
                problems.add(line, f"field {field!r} names turn {_short(tid)} of user {_short(owner[0])}, not of {_short(user)}")
            elif owner[1] > when:
                problems.add(line, f"field {field!r} names turn {_short(tid)}, said after this event")

    for n, e in enumerate(events, start=2):
        if not start <= e.time <= end:
            problems.add(n, f"field 'time' {e.time.isoformat()} is outside the header's span {header['start']} .. {header['end']}")
        if last is not None and (e.time, order[type(e)]) < (last.time, order[type(last)]):
            problems.add(n, f"event at {e.time.isoformat()} comes after one at {last.time.isoformat()} "
                            "(events must be in time order; at equal times sessions, deletions, questions, ticks)")
        last = e
        if isinstance(e, Session):
            unique("session", e.session_id, n, "session_id")
            users.add(e.user_id)
            for i, t in enumerate(e.turns):
                unique("turn", t.turn_id, n, f"turn {i} turn_id")
                if t.user_id != e.user_id:
                    problems.add(n, f"turn {i} field 'user_id' {_short(t.user_id)} is not the session's {_short(e.user_id)}")
                if t.session_id != e.session_id:
                    problems.add(n, f"turn {i} field 'session_id' {_short(t.session_id)} is not the session's {_short(e.session_id)}")
                if t.created_at > e.time:
                    problems.add(n, f"turn {i} field 'created_at' {t.created_at.isoformat()} is after the session's time")
                elif t.created_at < start:
                    problems.add(n, f"turn {i} field 'created_at' {t.created_at.isoformat()} is before the header's "
                                    f"start {header['start']}")
                turns.setdefault(t.turn_id, (e.user_id, t.created_at))
        elif isinstance(e, Question):
            unique("question", e.question_id, n, "question_id")
            if e.user_id not in users:
                problems.add(n, f"field 'user_id': question for user {_short(e.user_id)}, who has had no session")
            said(e.evidence, e.user_id, e.time, n, "evidence")
            said(e.superseded, e.user_id, e.time, n, "superseded")
            if e.reask_of is not None and questions.get(e.reask_of) != e.user_id:
                problems.add(n, f"field 'reask_of' names {_short(e.reask_of)}, not an earlier question of this user")
            questions[e.question_id] = e.user_id
        elif isinstance(e, Deletion):
            unique("deletion", e.deletion_id, n, "deletion_id")
            if not e.turn_ids:
                problems.add(n, "field 'turn_ids' is empty (a deletion names the turns to forget)")
            said(e.turn_ids, e.user_id, e.time, n, "turn_ids")
        if len(problems.found) >= 1000:
            break
    if size_limits_on():
        if len(questions) > MAX_QUESTIONS:
            problems.add(1, f"{len(questions):,} questions, over the limit of {MAX_QUESTIONS:,} (memsim --no-size-limits lifts it)")
        if len(users) > MAX_USERS:
            problems.add(1, f"{len(users):,} users, over the limit of {MAX_USERS:,} (memsim --no-size-limits lifts it)")
    if not problems.found and isinstance(header.get("totals"), dict):
        actual = ScenarioStream(start=start, end=end, events=tuple(events)).totals()
        for key, value in header["totals"].items():
            if key in actual and key != "span_days" and actual[key] != value:
                problems.add(1, f"header field 'totals.{key}' says {_short(value)}, the events hold {actual[key]}")
    problems.raise_any()


class WorldConfig(BaseModel):
    """Arguments of the ``world`` scenario (validated; unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: str = Field(..., description="a world file written by `memsim scenario render` (JSON Lines)")

    def path(self) -> Path:
        """The world file (a relative path is read from the working folder)."""
        return Path(self.data).expanduser()


class WorldScenario(FileScenario):
    """The ``world`` scenario: the events of a world file, replayed as written (see the module docstring)."""

    name = "world"
    config_model = WorldConfig

    def __init__(self, config: WorldConfig, *, source: str = "") -> None:
        self.config = config
        where = f" (scenario.data in {source})" if source else " (scenario.data)"
        if not config.path().exists():
            raise UserError(f"world file not found: {config.path()}{where}")
        # Only the header now (construction stays cheap); the events and the hash are checked in generate.
        self._header = read_header(config.path())

    def meta(self) -> dict[str, Any]:
        """The body hash the header declares and where the world came from (a rerun checks the hash)."""
        return {"sha256": self._header["sha256"], "source": self._header["source"], "counts": self._header["counts"]}

    def generate(self, rng: np.random.Generator) -> ScenarioStream:
        """The file's stream, checked against its hash (``rng`` is not drawn from: the world is fixed).

        Raises:
            UserError: the file changed since it was opened, or a damaged line (see ``read_world``).
        """
        header, stream = read_world(self.config.path())
        if header["sha256"] != self._header["sha256"]:
            raise UserError(f"{self.config.path()} line 1: the world file was replaced while in use")
        return stream
