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
endpoint. A file that does not check out (a wrong hash, a truncated or
non-JSON line, an unknown event type, a missing field) is a ``UserError``
naming the file and line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from memsim.memory.base import Turn
from memsim.scenarios.base import FileScenario, ScenarioStream
from memsim.sim.core.errors import UserError
from memsim.sim.core.files import write_atomic
from memsim.sim.events import Deletion, Event, Question, Session, Tick

__all__ = ["WORLD_FORMAT", "WORLD_VERSION", "write_world", "read_world", "read_header", "WorldConfig", "WorldScenario"]

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


def _parse(raw: bytes, where: str, *, last: bool) -> dict[str, Any]:
    if last and not raw.endswith(b"\n"):
        raise UserError(f"{where}: truncated line (no end of line); the file was cut short")
    try:
        row = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise UserError(f"{where}: truncated or damaged line (not JSON)") from None
    if not isinstance(row, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(row).__name__}")
    return row


def _build(cls: type, row: Mapping[str, Any], where: str, what: str) -> Any:
    """``cls`` from the JSON fields of ``row``; a missing required field or a bad value names them."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in row:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise UserError(f"{where}: {what} is missing field {f.name!r}")
            continue
        v = row[f.name]
        try:
            if f.name in _TIMES:
                v = datetime.fromisoformat(v)
                if v.tzinfo is None:
                    raise ValueError("no time zone")
            elif f.name == "turns":
                v = tuple(_build(Turn, t, where, "turn") for t in v)
            elif f.name in ("metadata", "extra"):
                v = dict(v)
            elif isinstance(v, list):
                v = tuple(v)
        except UserError:
            raise
        except (TypeError, ValueError) as exc:
            raise UserError(f"{where}: {what} field {f.name!r} has a bad value {v!r} ({exc})") from None
        kwargs[f.name] = v
    unknown = sorted(set(row) - {f.name for f in dataclasses.fields(cls)} - {"type"})
    if unknown:
        raise UserError(f"{where}: {what} has unknown field(s) {', '.join(map(repr, unknown))}")
    return cls(**kwargs)


def _header(p: Path, raw: bytes, *, only: bool) -> dict[str, Any]:
    """The checked header line of world file ``p`` (``only``: the file has no other line)."""
    if not raw:
        raise UserError(f"{p} line 1: empty world file (expected a header line)")
    header = _parse(raw, f"{p} line 1", last=only)
    if header.get("format") != WORLD_FORMAT:
        raise UserError(f"{p} line 1: not a memsim world file (format {header.get('format')!r}, expected {WORLD_FORMAT!r})")
    if header.get("version") != WORLD_VERSION:
        raise UserError(f"{p} line 1: world file version {header.get('version')!r}; this memsim reads version {WORLD_VERSION}")
    missing = [k for k in _HEADER_KEYS if k not in header]
    if missing:
        raise UserError(f"{p} line 1: header is missing field(s) {', '.join(map(repr, missing))}")
    return header


def read_header(path: str | Path) -> dict[str, Any]:
    """The header of a world file, read and checked without reading its events.

    Raises:
        UserError: a missing file or a bad header line (naming the file and line 1).
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.readline()
            only = not f.read(1)
    except FileNotFoundError:
        raise UserError(f"world file not found: {p}") from None
    return _header(p, raw, only=only)


def read_world(path: str | Path) -> tuple[dict[str, Any], ScenarioStream]:
    """The header and the stream of a world file, checked line by line and against its hash.

    Raises:
        UserError: a missing file, a bad header, a truncated or non-JSON line, an unknown event
            type, a missing field or a body whose sha256 is not the header's; the message names
            the file and the line.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise UserError(f"world file not found: {p}") from None
    lines = data.splitlines(keepends=True)
    header = _header(p, lines[0] if lines else b"", only=len(lines) <= 1)
    events: list[Event] = []
    for n, raw in enumerate(lines[1:], start=2):
        where = f"{p} line {n}"
        row = _parse(raw, where, last=n == len(lines))
        kind = row.get("type")
        if kind not in _TYPES:
            raise UserError(f"{where}: unknown event type {kind!r}; known: {', '.join(_TYPES)}")
        events.append(_build(_TYPES[kind], row, where, f"{kind} event"))
    digest = hashlib.sha256(b"".join(lines[1:])).hexdigest()
    if digest != header["sha256"]:
        raise UserError(f"{p} line 1: the body's sha256 {digest[:12]} is not the header's {str(header['sha256'])[:12]} "
                        "(the file was changed after it was written)")
    try:
        start, end = datetime.fromisoformat(header["start"]), datetime.fromisoformat(header["end"])
    except (TypeError, ValueError):
        raise UserError(f"{p} line 1: header start/end are not ISO times") from None
    meta = {**dict(header.get("meta") or {}),
            "world": {"source": header["source"], "counts": header["counts"], "sha256": header["sha256"]}}
    return header, ScenarioStream(start=start, end=end, events=tuple(events), meta=meta)


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
        if not config.path().is_file():
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
