"""LoCoMo (``locomo10.json``): loader, quirk summary and conversion to the static protocol.

The official file is a JSON list of ten conversations. Each record has a
``sample_id``, a ``conversation`` object (``speaker_a``, ``speaker_b``,
``session_N`` turn lists and ``session_N_date_time`` strings) and a ``qa``
list of questions with ``answer``, ``category`` and ``evidence`` (dialogue
ids such as ``"D1:3"``).

The file has quirks that the loader repairs or counts, never crashes on:

- evidence entries that hold several ids (``"D8:6; D9:17"``,
  ``"D9:1 D4:4 D4:6"``), a stray colon (``"D:11:26"``), zero padding
  (``"D30:05"``), an id with no numbers (``"D"``), ids of turns that do not
  exist, and empty evidence lists;
- integer answers (read as strings);
- category-5 (adversarial) questions without ``answer``: they carry
  ``adversarial_answer``, the answer the evidence gives for the *other*
  speaker, which is used as the answer and recorded as such;
- ``session_N_date_time`` keys without a ``session_N`` (ignored);
- dates like ``"1:56 pm on 8 May, 2023"`` (no time zone: read as UTC);
- optional image fields (``img_url``, ``blip_caption``) on turns.

Category codes are those of the LoCoMo data and code; Mem0's tables name
them differently, so both label sets are offered (``CATEGORY_LABELS``).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from memsim.memory.base import Turn
from memsim.core.errors import UserError
from memsim.core.files import read_limited, utf8_problem
from memsim.core.validate import size_limits_on
from memsim.sim.events import Episode, Question, Session
from memsim.static_benchmarks.data import LOCOMO_DEPTH, NestingGuard, check_year, is_unicode

MAX_LOCOMO_BYTES = 512 * 1024 * 1024
"""Largest LoCoMo-shaped file read (the published file is 2.8 MB); ``--no-size-limits`` lifts it."""
MAX_LOCOMO_QUESTIONS = 25_000
"""Most questions in a LoCoMo-shaped file (the published file has 1,986), as in a world file; ``--no-size-limits``
lifts it. Every question is embedded and retrieved for: a bound checked while reading, before any work."""

__all__ = [
    "CATEGORY_LABELS",
    "ADVERSARIAL",
    "QUESTION_DELAY",
    "LocomoTurn",
    "LocomoSession",
    "LocomoConversation",
    "LocomoQuestion",
    "LoadSummary",
    "LocomoDataset",
    "load_locomo",
    "parse_locomo_date",
    "clean_evidence",
    "locomo_episodes",
]

ADVERSARIAL = 5
"""The category of adversarial (unanswerable) questions, excluded from evidence scores."""

CATEGORY_LABELS: Mapping[str, Mapping[int, str]] = {
    # The codes as the LoCoMo data and its evaluation code use them.
    "locomo": {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"},
    # Mem0's tables name the same codes differently (1 single-hop, 3 multi-hop,
    # 4 open-domain); printing these lets numbers be set beside theirs.
    "mem0": {1: "single-hop", 2: "temporal", 3: "multi-hop", 4: "open-domain", 5: "adversarial"},
}
"""Label sets for category codes: ``"locomo"`` (default) and ``"mem0"``."""

QUESTION_DELAY = timedelta(days=1)
"""Questions are asked this long after the start of a conversation's last session."""

_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_SESSION_KEY = re.compile(r"session_(\d+)")
_DATE_KEY = re.compile(r"session_(\d+)_date_time")
# A stray colon after the D ("D:11:26") is the one malformed shape that still names a turn.
_LOOSE_ID = re.compile(r"D:?(\d+):(\d+)")
_SPLIT = re.compile(r"[;,\s]+")


@dataclass(frozen=True, slots=True)
class LocomoTurn:
    """One dialogue turn as the file gives it."""

    turn_id: str
    """Globally unique id: ``"<sample_id>:<dia_id>"``."""
    dia_id: str
    """The file's dialogue id, normalised (``"D1:3"``)."""
    speaker: str
    """Speaker name."""
    text: str
    """What was said."""
    img_urls: tuple[str, ...] = ()
    """Image URLs shared with the turn (often dead links; never fetched)."""
    blip_caption: str | None = None
    """Machine caption of the shared image, when there is one."""


@dataclass(frozen=True, slots=True)
class LocomoSession:
    """One session of a conversation."""

    number: int
    """Session number N of ``session_N``."""
    date_text: str
    """The file's date string, e.g. ``"1:56 pm on 8 May, 2023"``."""
    started_at: datetime
    """``date_text`` parsed, timezone-aware (UTC)."""
    turns: tuple[LocomoTurn, ...]
    """The turns in file order."""


@dataclass(frozen=True, slots=True)
class LocomoConversation:
    """One conversation: two speakers over many sessions."""

    sample_id: str
    """The file's ``sample_id`` (e.g. ``"conv-26"``); also the user id in runs."""
    speaker_a: str
    """First speaker's name."""
    speaker_b: str
    """Second speaker's name."""
    sessions: tuple[LocomoSession, ...]
    """Sessions in order of their number."""

    @property
    def last_time(self) -> datetime:
        """Start of the latest session."""
        return max(s.started_at for s in self.sessions)


@dataclass(frozen=True, slots=True)
class LocomoQuestion:
    """One question with its gold answer and evidence."""

    question_id: str
    """``"<sample_id>:q<index>"``."""
    sample_id: str
    """The conversation it is about."""
    index: int
    """Position in the conversation's ``qa`` list (0-based)."""
    question: str
    """The question text."""
    answer: str
    """Gold answer as text (integers converted)."""
    answer_field: str
    """Where ``answer`` came from: ``"answer"`` or ``"adversarial_answer"``."""
    adversarial_answer: str | None
    """The file's ``adversarial_answer``, when present."""
    category: int
    """Category code 1-5 (see ``CATEGORY_LABELS``)."""
    raw_evidence: tuple[str, ...]
    """Evidence entries exactly as in the file."""
    evidence: tuple[str, ...]
    """Cleaned evidence turn ids (``"<sample_id>:D1:3"``) of turns that exist."""


@dataclass(frozen=True, slots=True)
class LoadSummary:
    """Counts of what was loaded and of every quirk met on the way."""

    conversations: int = 0
    """Conversations loaded."""
    sessions: int = 0
    """Sessions loaded."""
    turns: int = 0
    """Turns loaded."""
    turns_with_image: int = 0
    """Turns carrying ``img_url`` or ``blip_caption``."""
    questions: int = 0
    """Questions loaded."""
    questions_per_category: Mapping[int, int] = field(default_factory=dict)
    """Questions per category code."""
    answers_int: int = 0
    """Answers given as numbers, converted to text."""
    answers_from_adversarial: int = 0
    """Category-5 questions without ``answer`` that use ``adversarial_answer``."""
    evidence_entries: int = 0
    """Raw evidence entries read."""
    evidence_entries_split: int = 0
    """Entries that held several ids (``"D8:6; D9:17"``, ``"D9:1 D4:4"``)."""
    evidence_ids_reformatted: int = 0
    """Ids repaired by normalising (``"D:11:26"``, ``"D30:05"``)."""
    evidence_ids_unusable: int = 0
    """Ids that name no turn at all (``"D"``)."""
    evidence_ids_missing_turn: int = 0
    """Well-formed ids of turns the conversation does not have (dropped)."""
    evidence_ids_duplicate: int = 0
    """Ids listed twice for one question (kept once)."""
    questions_empty_evidence: int = 0
    """Questions whose evidence list is empty in the file."""
    questions_without_usable_evidence: int = 0
    """Questions left with no evidence turn after cleaning (empty lists included)."""
    orphan_session_dates: int = 0
    """``session_N_date_time`` keys without a ``session_N`` (ignored)."""

    def to_json(self) -> dict[str, Any]:
        """The summary as plain JSON data (category keys as strings)."""
        out = asdict(self)
        out["questions_per_category"] = {str(k): v for k, v in sorted(self.questions_per_category.items())}
        return out

    def lines(self) -> list[str]:
        """Human-readable lines, one per count, for the command line."""
        per_cat = ", ".join(f"{k}:{v}" for k, v in sorted(self.questions_per_category.items()))
        return [
            f"conversations {self.conversations}, sessions {self.sessions}, turns {self.turns} "
            f"({self.turns_with_image} with an image)",
            f"questions {self.questions} (per category {per_cat})",
            f"answers: {self.answers_int} numeric converted to text, "
            f"{self.answers_from_adversarial} taken from adversarial_answer",
            f"evidence: {self.evidence_entries} entries, {self.evidence_entries_split} split, "
            f"{self.evidence_ids_reformatted} ids reformatted, {self.evidence_ids_unusable} unusable, "
            f"{self.evidence_ids_missing_turn} of missing turns dropped, "
            f"{self.evidence_ids_duplicate} duplicates",
            f"questions with empty evidence {self.questions_empty_evidence}, "
            f"without usable evidence {self.questions_without_usable_evidence}",
            f"session dates without a session (ignored): {self.orphan_session_dates}",
        ]


@dataclass(frozen=True, slots=True)
class LocomoDataset:
    """A loaded LoCoMo file."""

    path: Path
    """Where it was read from."""
    sha256: str
    """SHA-256 of the file's bytes."""
    conversations: tuple[LocomoConversation, ...]
    """Conversations in file order."""
    questions: tuple[LocomoQuestion, ...]
    """Questions in file order (conversation by conversation)."""
    summary: LoadSummary
    """What was loaded and which quirks were met."""


def parse_locomo_date(text: str) -> datetime:
    """Parse a LoCoMo date string such as ``"1:56 pm on 8 May, 2023"`` (as UTC).

    Raises:
        ValueError: the text is not in that shape.
    """
    parsed = datetime.strptime(" ".join(text.split()), _DATE_FORMAT)
    return check_year(parsed.replace(tzinfo=timezone.utc))


def clean_evidence(raw: Sequence[str], known_dia_ids: set[str] | frozenset[str]) -> tuple[list[str], Counter[str]]:
    """Turn raw evidence entries into dialogue ids of turns that exist.

    Args:
        raw: the file's evidence entries for one question.
        known_dia_ids: normalised dialogue ids of the conversation's turns.

    Returns:
        The cleaned dialogue ids (file order, no duplicates) and counts of the
        repairs made under the ``LoadSummary`` field names.
    """
    counts: Counter[str] = Counter()
    out: list[str] = []
    for entry in raw:
        counts["evidence_entries"] += 1
        parts = [p for p in _SPLIT.split(entry.strip()) if p]
        if len(parts) > 1:
            counts["evidence_entries_split"] += 1
        for part in parts:
            m = _LOOSE_ID.fullmatch(part)
            if m is None:
                counts["evidence_ids_unusable"] += 1
                continue
            dia_id = f"D{int(m.group(1))}:{int(m.group(2))}"
            if dia_id != part:
                counts["evidence_ids_reformatted"] += 1
            if dia_id not in known_dia_ids:
                counts["evidence_ids_missing_turn"] += 1
            elif dia_id in out:
                counts["evidence_ids_duplicate"] += 1
            else:
                out.append(dia_id)
    return out, counts


def load_locomo(path: str | Path) -> LocomoDataset:
    """Load and check a LoCoMo file, repairing and counting its known quirks.

    Args:
        path: the ``locomo10.json`` file (or one of the same shape).

    Raises:
        UserError: the file is missing, unreadable, not JSON, or not
            LoCoMo-shaped (the message names the record and field).
    """
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path}: is a directory, expected the LoCoMo JSON file (locomo10.json)")
    if not path.exists():
        raise UserError(f"{path}: no such LoCoMo data file")
    try:
        # A regular file only (a FIFO or /dev/zero is refused unread), read up to the limit, UTF-8 only.
        data = read_limited(path, "LoCoMo data file", MAX_LOCOMO_BYTES)
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None
    problem = utf8_problem(data)
    if problem is not None:
        raise UserError(f"{path}: {problem}")
    NestingGuard(io.BytesIO(data), LOCOMO_DEPTH, str(path), "LoCoMo").read()
    try:
        records = json.loads(data, parse_constant=_not_json)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from None
    except ValueError as exc:  # NaN and Infinity, which Python's json accepts and JSON does not
        raise UserError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(records, list) or not records:
        raise UserError(
            f"{path}: not LoCoMo-shaped: expected a non-empty JSON list of conversation records, "
            f"got {type(records).__name__}"
        )
    counts: Counter[str] = Counter()
    per_category: Counter[int] = Counter()
    conversations: list[LocomoConversation] = []
    questions: list[LocomoQuestion] = []
    seen: set[str] = set()
    for index, record in enumerate(records):
        conv, qs = _load_record(path, index, record, counts, per_category)
        if conv.sample_id in seen:
            raise UserError(f"{path}: record {index}: duplicate sample_id {conv.sample_id!r}")
        seen.add(conv.sample_id)
        conversations.append(conv)
        questions.extend(qs)
        if len(questions) > MAX_LOCOMO_QUESTIONS and size_limits_on():
            raise UserError(f"{path}: record {index}: more than {MAX_LOCOMO_QUESTIONS:,} questions, over the limit "
                            f"(the published file has 1,986; memsim --no-size-limits lifts it)")
    summary = LoadSummary(
        conversations=len(conversations),
        sessions=sum(len(c.sessions) for c in conversations),
        turns=sum(len(s.turns) for c in conversations for s in c.sessions),
        questions=len(questions),
        questions_per_category=dict(sorted(per_category.items())),
        **counts,
    )
    return LocomoDataset(
        path=path,
        sha256=hashlib.sha256(data).hexdigest(),
        conversations=tuple(conversations),
        questions=tuple(questions),
        summary=summary,
    )


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _shape_error(path: Path, where: str, message: str) -> UserError:
    return UserError(f"{path}: not LoCoMo-shaped: {where}: {message}")


def _require(path: Path, where: str, obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in obj:
        raise _shape_error(path, where, f"missing field {key!r}")
    value = obj[key]
    # bool is an int subclass; a true/false where a number belongs is still wrong.
    if not isinstance(value, kind) or isinstance(value, bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _shape_error(path, where, f"field {key!r} must be {names}, got {type(value).__name__}")
    if isinstance(value, str) and not is_unicode(value):
        raise _shape_error(path, where, f"field {key!r} holds text that is not valid Unicode (a lone surrogate escape)")
    return value


def _load_record(
    path: Path,
    index: int,
    record: Any,
    counts: Counter[str],
    per_category: Counter[int],
) -> tuple[LocomoConversation, list[LocomoQuestion]]:
    where = f"record {index}"
    if not isinstance(record, dict):
        raise _shape_error(path, where, f"expected an object, got {type(record).__name__}")
    sample_id = _require(path, where, record, "sample_id", str)
    where = f"record {index} ({sample_id})"
    conv = _require(path, where, record, "conversation", dict)
    qa = _require(path, where, record, "qa", list)
    speaker_a = _require(path, f"{where} conversation", conv, "speaker_a", str)
    speaker_b = _require(path, f"{where} conversation", conv, "speaker_b", str)

    sessions: list[LocomoSession] = []
    known: set[str] = set()
    for key in conv:
        date_match = _DATE_KEY.fullmatch(key)
        if date_match is not None:
            if f"session_{date_match.group(1)}" not in conv:
                counts["orphan_session_dates"] += 1
            continue
        m = _SESSION_KEY.fullmatch(key)
        if m is not None:
            sessions.append(_session(path, where, sample_id, conv, key, int(m.group(1)), known, counts))
    if not sessions:
        raise _shape_error(path, f"{where} conversation", "no 'session_N' turn lists")
    sessions.sort(key=lambda s: s.number)
    questions = [_question(path, f"{where} qa[{q_index}]", sample_id, q_index, raw, known, counts, per_category)
                 for q_index, raw in enumerate(qa)]
    return LocomoConversation(sample_id, speaker_a, speaker_b, tuple(sessions)), questions


def _session(path: Path, where: str, sample_id: str, conv: dict[str, Any], key: str, number: int, known: set[str],
             counts: Counter[str]) -> LocomoSession:
    """One ``session_N`` of a conversation checked: its date and its turns (``known`` collects their dia_ids)."""
    turns_raw = _require(path, f"{where} conversation", conv, key, list)
    date_key = f"{key}_date_time"
    date_text = _require(path, f"{where} conversation", conv, date_key, str)
    try:
        started_at = parse_locomo_date(date_text)
    except ValueError:
        raise _shape_error(
            path,
            f"{where} conversation",
            f"field {date_key!r} = {date_text!r} is not a date like '1:56 pm on 8 May, 2023'",
        ) from None
    turns: list[LocomoTurn] = []
    for t_index, raw in enumerate(turns_raw):
        t_where = f"{where} {key}[{t_index}]"
        if not isinstance(raw, dict):
            raise _shape_error(path, t_where, f"expected a turn object, got {type(raw).__name__}")
        dia_raw = _require(path, t_where, raw, "dia_id", str)
        m_id = _LOOSE_ID.fullmatch(dia_raw.strip())
        if m_id is None:
            raise _shape_error(path, t_where, f"field 'dia_id' = {dia_raw!r} is not like 'D1:3'")
        dia_id = f"D{int(m_id.group(1))}:{int(m_id.group(2))}"
        if dia_id in known:
            raise _shape_error(path, t_where, f"duplicate dia_id {dia_id!r}")
        known.add(dia_id)
        speaker = _require(path, t_where, raw, "speaker", str)
        text = _require(path, t_where, raw, "text", str)
        img = raw.get("img_url")
        img_urls = tuple(str(u) for u in img) if isinstance(img, list) else ((str(img),) if img else ())
        caption = raw.get("blip_caption")
        caption = str(caption) if caption else None
        if img_urls or caption:
            counts["turns_with_image"] += 1
        turns.append(
            LocomoTurn(
                turn_id=f"{sample_id}:{dia_id}",
                dia_id=dia_id,
                speaker=speaker,
                text=text,
                img_urls=img_urls,
                blip_caption=caption,
            )
        )
    return LocomoSession(number, date_text, started_at, tuple(turns))


def _question(path: Path, q_where: str, sample_id: str, q_index: int, raw: Any, known: set[str],
              counts: Counter[str], per_category: Counter[int]) -> LocomoQuestion:
    """One ``qa`` entry checked: its category, evidence and answer (an adversarial answer where it has none)."""
    if not isinstance(raw, dict):
        raise _shape_error(path, q_where, f"expected a question object, got {type(raw).__name__}")
    question = _require(path, q_where, raw, "question", str)
    category = _require(path, q_where, raw, "category", int)
    if category not in CATEGORY_LABELS["locomo"]:
        raise _shape_error(path, q_where, f"field 'category' = {category!r}; valid: 1, 2, 3, 4, 5")
    evidence_raw = _require(path, q_where, raw, "evidence", list)
    if not all(isinstance(e, str) for e in evidence_raw):
        raise _shape_error(path, q_where, "field 'evidence' must be a list of strings like 'D1:3'")
    adversarial = raw.get("adversarial_answer")
    adversarial = None if adversarial is None else str(adversarial)
    if "answer" in raw and raw["answer"] is not None:
        answer_value = raw["answer"]
        if (isinstance(answer_value, bool) or not isinstance(answer_value, (str, int, float))
                or isinstance(answer_value, float) and not math.isfinite(answer_value)):
            raise _shape_error(
                path, q_where, f"field 'answer' must be a string or finite number, got {answer_value!r}"
            )
        if not isinstance(answer_value, str):
            counts["answers_int"] += 1
        answer, answer_field = str(answer_value), "answer"
    elif adversarial is not None:
        counts["answers_from_adversarial"] += 1
        answer, answer_field = adversarial, "adversarial_answer"
    else:
        raise _shape_error(path, q_where, "missing field 'answer' (and no 'adversarial_answer')")
    dia_ids, ev_counts = clean_evidence(evidence_raw, known)
    counts.update(ev_counts)
    if not evidence_raw:
        counts["questions_empty_evidence"] += 1
    if not dia_ids:
        counts["questions_without_usable_evidence"] += 1
    per_category[category] += 1
    return LocomoQuestion(
        question_id=f"{sample_id}:q{q_index}",
        sample_id=sample_id,
        index=q_index,
        question=question,
        answer=answer,
        answer_field=answer_field,
        adversarial_answer=adversarial,
        category=category,
        raw_evidence=tuple(evidence_raw),
        evidence=tuple(f"{sample_id}:{d}" for d in dia_ids),
    )


def _turn(conv: LocomoConversation, session: LocomoSession, turn: LocomoTurn, captions: bool) -> Turn:
    text = turn.text
    if captions and turn.blip_caption:
        text = f"{text} [image: {turn.blip_caption}]"
    metadata: dict[str, Any] = {"date_text": session.date_text, "dia_id": turn.dia_id}
    if turn.blip_caption:
        metadata["blip_caption"] = turn.blip_caption
    return Turn(
        turn_id=turn.turn_id,
        user_id=conv.sample_id,
        speaker=turn.speaker,
        text=text,
        # Every turn of a session carries the session's time: the file gives no finer clock.
        created_at=session.started_at,
        session_id=f"{conv.sample_id}:S{session.number}",
        metadata=metadata,
    )


def locomo_episodes(
    dataset: LocomoDataset,
    *,
    captions: bool = False,
    limit_conversations: int | None = None,
) -> list[Episode]:
    """The dataset as episodes: one per conversation, sessions then every question.

    Args:
        dataset: a loaded LoCoMo file.
        captions: append ``" [image: <blip_caption>]"`` to the text of turns
            that shared an image.
        limit_conversations: keep only the first N conversations.

    Returns:
        One ``Episode`` per conversation (id and user id = sample id):
        sessions in order at their times, then every question asked
        ``QUESTION_DELAY`` after the start of the last session. ``kind`` is the
        category's LoCoMo label, ``extra["category"]`` its code. Category-5
        questions are ``excluded`` from evidence scores as ``"adversarial"``
        and judged against an empty gold answer (the file's adversarial answer
        is kept in ``extra``); questions without a usable evidence id are
        excluded as ``"no_usable_evidence"``.
    """
    convs = dataset.conversations if limit_conversations is None else dataset.conversations[:limit_conversations]
    labels = CATEGORY_LABELS["locomo"]
    by_conv: dict[str, list[LocomoQuestion]] = {}
    for q in dataset.questions:
        by_conv.setdefault(q.sample_id, []).append(q)
    out: list[Episode] = []
    for conv in convs:
        uid = conv.sample_id
        sessions = [
            Session(
                session_id=f"{uid}:S{s.number}",
                user_id=uid,
                time=s.started_at,
                turns=tuple(_turn(conv, s, t, captions) for t in s.turns),
            )
            for s in conv.sessions
        ]
        asked_at = conv.last_time + QUESTION_DELAY
        questions = [
            Question(
                question_id=q.question_id,
                user_id=uid,
                time=asked_at,
                text=q.question,
                gold="" if q.category == ADVERSARIAL else q.answer,
                kind=labels[q.category],
                evidence=q.evidence,
                topic=q.question_id,
                excluded="adversarial" if q.category == ADVERSARIAL else None if q.evidence else "no_usable_evidence",
                extra={"category": str(q.category), **({"adversarial_answer": q.answer} if q.category == ADVERSARIAL else {})},
            )
            for q in by_conv.get(uid, [])
        ]
        out.append(Episode(uid, (*sessions, *questions)))
    return out
