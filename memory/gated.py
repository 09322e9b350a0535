"""Write-gated memories: store a turn only when it tells something new.

``surprise`` stores a turn when it is far from everything its speaker has
already had stored (``1 - max cosine >= threshold``). ``multisignal`` also
stores turns that carry temporal markers ("3 months ago", "last week",
"started", "moved") or name an entity the speaker has not named before,
since those are exactly the turns that later questions about *when* and
*who* need, however unsurprising their wording. Both keep why each turn was
stored and how much they kept (``report()``).

The defaults are the gates of the published gated-memory systems:

- one gate per speaker (per user): novelty is ``1 - max cosine`` to that
  speaker's stored memories, the first ``warmup=3`` turns of a gate are
  stored unconditionally, the fixed threshold is 0.2;
- adaptive mode: the threshold is the ``threshold x 100``-th percentile of
  every novelty the gate has scored, the current turn's included;
- temporal markers: the published list of date, relative-time and clock
  patterns plus the whole words started, began, moved, changed, recently,
  just, ago and since (``temporal_markers``);
- entities: spaCy NER, an entity is the pair (lower-cased text, label) of a
  label in ``ENTITY_LABELS``; every turn after warm-up is checked and its
  entities are marked seen for its speaker *whether or not the turn is
  stored*; warm-up turns are stored without being checked.

memsim's earlier choices stay available as arguments (``markers="extended"``,
``entity_key="text"``, ``entity_seen="stored"``, ``window=N``; see the
README's table of differences).
"""

from __future__ import annotations

import bisect
from collections import Counter, deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from memsim.memory.base import FixedMemory, Memory, MemoryStats, Retrieved, Turn, render_turn
from memsim.memory.dense import DenseIndex
from memsim.memory.entities import (
    ENTITY_LABELS,
    EntityRecognizer,
    deferred_purges,
    entity_keys,
    load_spacy,
    recognise_into_cache,
    spacy_model_id,
)
from memsim.memory.novelty import SLACK, blas_threads, exact_dot, max_cosines, percentile_sorted
from memsim.memory.registration import Registration
from memsim.memory.temporal import TEMPORAL_VOCABULARIES, temporal_markers
from memsim.core.errors import UserError

if TYPE_CHECKING:
    from memsim.memory.resources import Resources

__all__ = [
    "SurpriseMemory",
    "MultiSignalMemory",
    "GateDecision",
    "EntityRecognizer",
    "temporal_markers",
    "entity_keys",
    "ENTITY_LABELS",
    "TEMPORAL_VOCABULARIES",
    "load_spacy",
    "spacy_model_id",
    "deferred_purges",
    "recognise_into_cache",
]

_percentile_sorted = percentile_sorted  # its earlier name, still imported from here


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
    """Signals that fired: ``warmup`` (alone: warm-up turns are not checked further), else any of
    ``surprise``, ``temporal``, ``entity``."""


class _Gate:
    """Per-(user, speaker) gate state: turns seen, memories stored, novelty scores."""

    __slots__ = ("seen", "stored", "scores")

    def __init__(self, window: int | None) -> None:
        self.seen = 0
        self.stored = 0
        self.scores: list[float] | deque[float] = [] if window is None else deque(maxlen=window)


class SurpriseMemory(FixedMemory):
    """Surprise-gated store: a turn is kept when ``1 - max cos(new, stored) >= threshold``.

    Each (user, speaker) pair has its own gate: novelty is measured against
    the memories of that speaker alone, and while a gate holds fewer than
    ``warmup`` memories its turns are stored unconditionally. Memories are
    the turns as ``render_turn`` writes them; retrieval is top-k cosine.

    Adaptive mode (``adaptive=True``), as published: the threshold is the
    ``percentile``-th percentile (default ``threshold x 100``) of every
    novelty the gate has scored, the current turn's included (0 while fewer
    than ``warmup`` were scored). memsim's earlier variant is ``window=N``:
    the percentile of the gate's last N novelties before the current one,
    never below ``min_threshold``.

    Defaults: ``threshold=0.2``, ``warmup=3``, ``adaptive=False``,
    ``percentile=None``, ``window=None``, ``min_threshold=0.0``.

    An ingest call scores all its turns of one speaker in one matrix product
    against that speaker's memories as they were before the call, plus the
    cosines among the call's own turns, so a turn still sees the turns of the
    same call stored before it; the near-best cosines are rescored exactly
    (correctly rounded), so the decisions and novelties are those of one
    turn at a time, to the last bit.
    """

    name = "surprise"

    def __init__(
        self,
        *,
        resources: Resources,
        threshold: float = 0.2,
        warmup: int = 3,
        adaptive: bool = False,
        percentile: float | None = None,
        window: int | None = None,
        min_threshold: float = 0.0,
    ) -> None:
        """Make an empty store that embeds with ``resources.embedder``."""
        if not 0.0 <= threshold <= 2.0:
            raise UserError(f"{self.name}: threshold must be in [0, 2], got {threshold!r}")
        if warmup < 0 or (window is not None and window < 1):
            raise UserError(f"{self.name}: warmup must be >= 0 and window >= 1, got {warmup!r}, {window!r}")
        if percentile is None and adaptive and threshold > 1.0:
            raise UserError(f"{self.name}: adaptive mode reads threshold as a quantile in [0, 1], got {threshold!r}")
        if percentile is not None and not 0.0 <= percentile <= 100.0:
            raise UserError(f"{self.name}: percentile must be in [0, 100], got {percentile!r}")
        self.threshold = float(threshold)
        self.warmup = int(warmup)
        self.adaptive = bool(adaptive)
        self.percentile = float(percentile) if percentile is not None else 100.0 * self.threshold
        self.window = None if window is None else int(window)
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

    def _prior_max(self, user_id: str, speaker: str, queries: np.ndarray) -> list[float | None]:
        """Exact max cosine of each query to ``speaker``'s stored memories (None: none stored; ``max_cosines``)."""
        _, stored = self._index.matrix(user_id, speaker)
        return max_cosines(stored, queries)

    def _score(self, gate: _Gate, novelty: float) -> float:
        """Record ``novelty`` in the gate and return the threshold it is held to."""
        if not self.adaptive:
            return self.threshold  # a fixed gate needs no history
        if self.window is not None:
            # memsim's variant: the percentile of the window of earlier novelties, the current one left out.
            past = list(gate.scores)
            gate.scores.append(novelty)
            if not past:
                return self.threshold
            return max(self.min_threshold, float(np.percentile(np.asarray(past, dtype=float), self.percentile)))
        scores = gate.scores
        assert isinstance(scores, list)
        # Kept sorted, so a turn costs one insertion, not a percentile over the whole history.
        bisect.insort(scores, novelty)
        if len(scores) < self.warmup:
            return 0.0
        return max(self.min_threshold, percentile_sorted(scores, self.percentile))

    def _warm(self, turns: Sequence[Turn], user_id: str) -> list[bool]:
        """Whether each turn falls in its gate's warm-up (warm-up turns are always stored)."""
        held: dict[str, int] = {}
        out: list[bool] = []
        for t in turns:
            n = held.get(t.speaker)
            if n is None:
                n = self._gate(user_id, t.speaker).stored
            warm = n < self.warmup
            held[t.speaker] = n + 1 if warm else n
            out.append(warm)
        return out

    @property
    def entity_recognizer(self) -> EntityRecognizer | None:
        """The recogniser whose cache this gate reads, when it recognises entities (a run fills it up front)."""
        return None

    def _prepare(self, turns: Sequence[Turn], user_id: str, warm: Sequence[bool]) -> None:
        """Batch work before the gate loop (none here)."""

    def _signals(self, user_id: str, turn: Turn, n: int) -> list[str]:
        """Signals besides surprise for the ``n``-th turn of the batch, after warm-up (none here)."""
        return []

    def _decided(self, user_id: str, turn: Turn, n: int, stored: bool) -> None:
        """Hook after each decision (none here)."""

    def _on_stored(self, user_id: str, turn: Turn, memory_id: int) -> None:
        """Hook for state kept per stored memory (none here)."""

    @property
    def index(self) -> DenseIndex:
        """The memories this gate stored; a system built on the gate may read them (and its ids) here."""
        return self._index

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Gate each turn in order; store the ones that pass."""
        self.ingest_kept(turns, user_id=user_id, now=now)

    def ingest_kept(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> list[tuple[Turn, int]]:
        """``ingest``, handing back ``(turn, id in index)`` of every turn stored, in order.

        A system on top of the gate keeps its own state by these ids and
        reads texts and vectors from ``index``: nothing is embedded or stored twice.
        """
        if not turns:
            return []
        out: list[tuple[Turn, int]] = []
        texts = [render_turn(t) for t in turns]
        vecs = np.ascontiguousarray(self._embedder.encode(texts), dtype=np.float32)
        warm = self._warm(turns, user_id)
        decisions = self._decisions.setdefault(user_id, {})
        # Novelty in one pass per speaker: the store as it was before the batch, searched for all the
        # batch's turns at once, and the batch's own cosines; a turn then takes the max over what was
        # stored before it (earlier turns of the batch only if they were stored), as one by one.
        rows: dict[str, list[int]] = {}
        for n, t in enumerate(turns):
            rows.setdefault(t.speaker, []).append(n)
        prior: list[float | None] = [None] * len(turns)
        pos: dict[int, int] = {}
        inner: dict[str, np.ndarray] = {}
        with blas_threads():
            for speaker, ns in rows.items():
                for p, (n, c) in enumerate(zip(ns, self._prior_max(user_id, speaker, vecs[ns]), strict=True)):
                    prior[n] = c
                    pos[n] = p
                inner[speaker] = vecs[ns] @ vecs[ns].T
        kept: dict[str, list[int]] = {}  # speaker -> batch rows stored so far
        try:
            self._prepare(turns, user_id, warm)
            for n, (turn, text, vec) in enumerate(zip(turns, texts, vecs, strict=True)):
                gate = self._gate(user_id, turn.speaker)
                best = prior[n]
                earlier = kept.setdefault(turn.speaker, [])
                if earlier:
                    sims = inner[turn.speaker][pos[n], earlier]
                    top = float(sims.max())
                    here = max(
                        exact_dot(vec, vecs[rows[turn.speaker][earlier[j]]])
                        for j in np.flatnonzero(sims >= top - SLACK).tolist()
                    )
                    best = here if best is None else max(best, here)
                novelty = 1.0 if best is None else 1.0 - best
                threshold = self._score(gate, novelty)
                if warm[n]:
                    reasons = ["warmup"]
                else:
                    reasons = ["surprise"] if novelty >= threshold else []
                    reasons.extend(self._signals(user_id, turn, n))
                gate.seen += 1
                self._seen += 1
                stored = bool(reasons)
                if stored:
                    (mid,) = self._index.add(
                        user_id,
                        [Memory("", text, turn.created_at, (turn.turn_id,))],
                        vec[None, :],
                        partition=turn.speaker,
                    )
                    gate.stored += 1
                    earlier.append(pos[n])
                    out.append((turn, mid))
                    self._on_stored(user_id, turn, mid)
                    self._stored += 1
                    for r in reasons:
                        self._reason_counts[r] = self._reason_counts.get(r, 0) + 1
                self._decided(user_id, turn, n, stored)
                decisions[turn.turn_id] = GateDecision(turn.turn_id, stored, float(novelty), tuple(reasons))
        finally:
            self._finish()
        return out

    def _finish(self) -> None:
        """Drop per-batch state (none here)."""

    def bulk_load(self, turns: Sequence[Turn], *, user_id: str, vectors: np.ndarray | None = None) -> list[int]:
        """Store ``turns`` as memories without gating (snapshots, large benchmark stores); their ids, in turn order.

        Not part of the protocol and not counted in ``report()``; the gates
        count the turns as seen and stored, so warm-up is over for loaded
        speakers.

        Args:
            turns: the turns to store.
            user_id: whose memories they become.
            vectors: unit vectors of ``render_turn(turn)``, one per turn;
                embedded with the run's embedder when None.
        """
        if not turns:
            return []
        texts = [render_turn(t) for t in turns]
        vecs = self._embedder.encode(texts) if vectors is None else np.asarray(vectors, dtype=np.float32)
        ids = self._index.add_turns(user_id, turns, vecs)
        for t in turns:
            gate = self._gate(user_id, t.speaker)
            gate.seen += 1
            gate.stored += 1
        return ids

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

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Remove the memories of ``turn_ids`` and the gate's record of them.

        A gate left with fewer than ``warmup`` memories is in warm-up again.
        """
        gone = self._index.derived(user_id, turn_ids)
        for i in gone:
            gate = self._gates.get((user_id, self._index.partition(user_id, i)))
            if gate is not None:
                gate.stored = max(0, gate.stored - 1)
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
            ``turns_seen``, ``turns_stored``, ``kept`` (stored / seen),
            ``compression`` (1 - stored / seen: the published "compression"),
            both NaN before any turn, and ``stored_because_<reason>`` for each
            reason (a turn stored for two reasons counts in both).
        """
        kept = self._stored / self._seen if self._seen else float("nan")
        out: dict[str, Any] = {
            "turns_seen": self._seen,
            "turns_stored": self._stored,
            "kept": kept,
            "compression": 1.0 - kept,
        }
        for reason in ("warmup", "surprise", "temporal", "entity"):
            out[f"stored_because_{reason}"] = self._reason_counts.get(reason, 0)
        return out


_MARKERS = ("published", "extended")
_ENTITY_KEYS = ("text_label", "text")
_ENTITY_SEEN = ("checked", "stored")


class MultiSignalMemory(SurpriseMemory):
    """Multi-signal gate: store a turn on surprise OR temporal markers OR a novel entity.

    Surprise is the ``surprise`` gate (same arguments). Temporal markers are
    the patterns of ``temporal_markers(text, markers)`` over the turn's own
    text. Entities come from spaCy NER (``EntityRecognizer``: one
    ``nlp.pipe`` call per ingested batch, NER alone, cached on disk beside the
    embedding cache when the embedder has one and ``ner_cache`` is on); an
    entity is novel when the speaker (of the same user) has not named it
    before. Each signal can be switched off.

    Published defaults: ``markers="published"``, ``entity_key="text_label"``
    (lower-cased text and label), ``entity_seen="checked"`` (every turn after
    warm-up marks its entities seen, stored or not; warm-up turns are not
    checked). memsim's earlier variant: ``markers="extended"``,
    ``entity_key="text"``, ``entity_seen="stored"`` (only stored turns,
    warm-up ones included, make an entity known). Forgetting a turn takes
    back the marks it made.
    """

    name = "multisignal"

    def __init__(
        self,
        *,
        resources: Resources,
        threshold: float = 0.2,
        warmup: int = 3,
        adaptive: bool = False,
        percentile: float | None = None,
        window: int | None = None,
        min_threshold: float = 0.0,
        temporal: bool = True,
        entities: bool = True,
        markers: str = "published",
        entity_key: str = "text_label",
        entity_seen: str = "checked",
        ner_cache: bool = True,
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
        for arg, value, known in (
            ("markers", markers, _MARKERS),
            ("entity_key", entity_key, _ENTITY_KEYS),
            ("entity_seen", entity_seen, _ENTITY_SEEN),
        ):
            if value not in known:
                raise UserError(f"{self.name}: {arg} must be one of {', '.join(known)}; got {value!r}")
        self.temporal = bool(temporal)
        self.entities = bool(entities)
        self.markers = markers
        self.entity_key = entity_key
        self.entity_seen = entity_seen
        cache_dir = getattr(self._embedder, "cache_dir", None) if ner_cache else None
        if cache_dir is not None and getattr(self._embedder, "cache", True) is None:
            cache_dir = None  # an embedder run without its cache gets no entity cache either
        # Its computed / cached counts are left out of report(): a report is the same cold or warm.
        self.recognizer = EntityRecognizer(cache_dir)
        # (user, speaker) -> entity key -> marks by live turns; user -> turn -> (speaker, keys, text).
        self._known: dict[tuple[str, str], Counter[tuple[str, str]]] = {}
        self._marks: dict[str, dict[str, tuple[str, frozenset[tuple[str, str]], str]]] = {}
        self._pending: dict[int, frozenset[tuple[str, str]]] = {}

    @property
    def entity_recognizer(self) -> EntityRecognizer | None:
        """The recogniser whose cache this gate reads, when it recognises entities (a run fills it up front)."""
        return self.recognizer if self.entities else None

    def _prepare(self, turns: Sequence[Turn], user_id: str, warm: Sequence[bool]) -> None:
        if not self.entities:
            return
        need = [n for n, w in enumerate(warm) if self.entity_seen == "stored" or not w]
        found = self.recognizer.entities([turns[n].text for n in need])
        self._pending = {n: entity_keys(ents, self.entity_key) for n, ents in zip(need, found, strict=True)}

    def _mark(self, user_id: str, turn: Turn, keys: frozenset[tuple[str, str]]) -> None:
        known = self._known.setdefault((user_id, turn.speaker), Counter())
        known.update(keys)
        self._marks.setdefault(user_id, {})[turn.turn_id] = (turn.speaker, keys, turn.text)

    def _signals(self, user_id: str, turn: Turn, n: int) -> list[str]:
        signals: list[str] = []
        if self.temporal and temporal_markers(turn.text, self.markers):
            signals.append("temporal")
        if self.entities:
            keys = self._pending.get(n, frozenset())
            known = self._known.get((user_id, turn.speaker), {})
            if any(k not in known for k in keys):
                signals.append("entity")
            if self.entity_seen == "checked":
                self._mark(user_id, turn, keys)
        return signals

    def _decided(self, user_id: str, turn: Turn, n: int, stored: bool) -> None:
        if self.entities and self.entity_seen == "stored" and stored:
            self._mark(user_id, turn, self._pending.get(n, frozenset()))

    def _finish(self) -> None:
        self._pending = {}

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Remove the memories of ``turn_ids``, the entity marks those turns made, and their cached entities."""
        super().forget(turn_ids, user_id=user_id, now=now)
        marks = self._marks.get(user_id, {})
        texts: list[str] = []
        for t in turn_ids:
            rec = marks.pop(t, None)
            if rec is None:
                continue
            speaker, keys, text = rec
            texts.append(text)
            known = self._known.get((user_id, speaker))
            if known is not None:
                known.subtract(keys)
                for k in keys:
                    if known[k] <= 0:
                        del known[k]
        self.recognizer.purge(texts)


REGISTRATIONS = (
    Registration(
        "surprise",
        SurpriseMemory,
        description="as published: turn stored when 1 - max cosine to its speaker's memories >= 0.2; first 3 per speaker kept",
        learns=False,
    ),
    Registration(
        "surprise-adaptive",
        SurpriseMemory,
        description="as published, adaptive: threshold = the 50th percentile of every novelty the speaker's gate scored",
        defaults={"adaptive": True, "threshold": 0.5},
        learns=False,
    ),
    Registration(
        "surprise-adaptive-window",
        SurpriseMemory,
        description="memsim's adaptive gate: median of the last 200 earlier novelties (current one left out)",
        defaults={"adaptive": True, "percentile": 50.0, "window": 200},
        learns=False,
    ),
    Registration(
        "multisignal",
        MultiSignalMemory,
        description="as published: surprise OR temporal markers OR a novel (text, label) entity (spaCy), seen once checked",
        learns=False,
        requires=("spacy", "nlp"),
    ),
    Registration(
        "multisignal-extended",
        MultiSignalMemory,
        description="memsim's multisignal: wider temporal vocabulary, entities by text, known only from stored turns",
        defaults={"markers": "extended", "entity_key": "text", "entity_seen": "stored"},
        learns=False,
        requires=("spacy", "nlp"),
    ),
)
"""The systems this module registers, in order (``memsim.memory.registry.BUILTIN_MODULES``)."""
