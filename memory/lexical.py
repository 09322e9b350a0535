"""Lexical retrieval: BM25 per user, and BM25 fused with dense retrieval.

``bm25`` is the baseline every reviewer asks for next to embeddings: exact
words (names, numbers, rare terms) are where dense retrieval is weakest.
``hybrid`` fuses the two rankings by reciprocal rank, which needs no score
calibration between them. ``bm25s`` is an optional dependency, imported on
first use.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from memsim.memory.base import FixedMemory, Memory, MemoryStats, Retrieved, Turn, meta_bytes, render_turn, text_bytes
from memsim.memory.dense import DenseIndex
from memsim.memory.registration import Registration
from memsim.core.errors import UserError

if TYPE_CHECKING:
    from memsim.memory.resources import Resources

__all__ = ["BM25Memory", "HybridMemory", "BM25Index", "rrf_fuse"]


def _bm25s() -> Any:
    try:
        import bm25s
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise UserError("bm25/hybrid need the 'bm25s' package: pip install 'memsim[lexical]'") from exc
    return bm25s


def _tokenize(texts: Sequence[str]) -> list[list[str]]:
    bm25s = _bm25s()
    return bm25s.tokenize(list(texts), return_ids=False, show_progress=False, stopwords="english")


# The dtype numpy gives a float64 scalar plus a float32 array: float64 under NEP 50 (numpy 2), float32 under
# numpy 1's value-based casting. bm25s adds its per-document float64 length norm (a scalar) to float32 term
# counts; ``BM25Index`` adds arrays of norms, so it casts them to this dtype first to compute the same values.
_NORM_DTYPE = (np.float64(0.0) + np.zeros(1, dtype=np.float32)).dtype


class BM25Index:
    """Per-user BM25 over ``(int id, text)`` documents, with deletion, scored as ``bm25s`` scores them.

    ``bm25s`` indexes are immutable: one built per search after every change
    cost a rebuild of the user's whole index each time a question followed a
    session. This index keeps per-user postings (term -> document -> count)
    and document lengths as documents come and go, and scores only the query's
    terms at search time, with ``bm25s``'s default method (Lucene's BM25:
    ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, term part ``tf / (tf + k1 (1
    - b + b dl / avgdl))``), the same float32 values in the same order of
    addition, so scores equal ``bm25s.BM25(k1, b).get_scores`` on the same
    corpus exactly (``tests/test_lexical.py`` checks this against ``bm25s``).
    Tokenisation (``bm25s.tokenize``, English stopwords) is done once per
    document.
    """

    def __init__(self, *, k1: float = 1.5, b: float = 0.75) -> None:
        """Make an empty index with BM25 constants ``k1`` and ``b``."""
        self.k1 = k1
        self.b = b
        self._tokens: dict[str, dict[int, list[str]]] = {}
        self._postings: dict[str, dict[str, dict[int, int]]] = {}
        self._positions: dict[str, tuple[np.ndarray, dict[int, int], np.ndarray]] = {}

    def _unpost(self, user_id: str, doc: int, toks: list[str]) -> None:
        postings = self._postings[user_id]
        for term in set(toks):
            docs = postings[term]
            del docs[doc]
            if not docs:
                del postings[term]

    def add(self, user_id: str, ids: Sequence[int], texts: Sequence[str]) -> None:
        """Index ``texts`` under ``ids`` for ``user_id`` (an id indexed before is replaced)."""
        docs = self._tokens.setdefault(user_id, {})
        postings = self._postings.setdefault(user_id, {})
        for i, toks in zip(ids, _tokenize(texts), strict=True):
            doc = int(i)
            if doc in docs:  # replaced in place: it keeps its position, as a dict assignment does
                self._unpost(user_id, doc, docs[doc])
            docs[doc] = toks
            for term in toks:
                counts = postings.setdefault(term, {})
                counts[doc] = counts.get(doc, 0) + 1
        self._positions.pop(user_id, None)

    def remove(self, user_id: str, ids: Collection[int]) -> None:
        """Drop documents ``ids`` of ``user_id`` (unknown ids are ignored)."""
        docs = self._tokens.get(user_id)
        if not docs:
            return
        for i in ids:
            toks = docs.pop(int(i), None)
            if toks is not None:
                self._unpost(user_id, int(i), toks)
        self._positions.pop(user_id, None)

    def _layout(self, user_id: str) -> tuple[np.ndarray, dict[int, int], np.ndarray]:
        """The user's ids in insertion order, each id's position, and the document lengths (cached until a change)."""
        layout = self._positions.get(user_id)
        if layout is None:
            docs = self._tokens[user_id]
            ids = np.fromiter(docs.keys(), dtype=np.int64, count=len(docs))
            lengths = np.fromiter((len(t) for t in docs.values()), dtype=np.int64, count=len(docs))
            layout = (ids, {int(d): p for p, d in enumerate(ids)}, lengths)
            self._positions[user_id] = layout
        return layout

    def scores(self, user_id: str, query: str) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, scores)`` of every document of ``user_id`` for ``query``."""
        docs = self._tokens.get(user_id)
        if not docs:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        ids, position, lengths = self._layout(user_id)
        scores = np.zeros(len(ids), dtype=np.float32)
        postings = self._postings[user_id]
        known = [t for t in _tokenize([query])[0] if t in postings]
        if not known:
            return ids, scores
        n = len(ids)
        avg = lengths.mean()
        for term in known:  # in query order, a repeated term counted again, as bm25s sums them
            counts = postings[term]
            where = np.fromiter((position[d] for d in counts), dtype=np.int64, count=len(counts))
            tf = np.fromiter(counts.values(), dtype=np.float32, count=len(counts))
            idf = np.float32(math.log(1 + (n - len(counts) + 0.5) / (len(counts) + 0.5)))
            norm = (self.k1 * ((1 - self.b) + self.b * lengths[where] / avg)).astype(_NORM_DTYPE)
            scores[where] += (idf * (tf / (norm + tf))).astype(np.float32)
        return ids, scores


def _top(ids: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    # Ties broken by id so that equal inputs always give the same order.
    order = np.lexsort((ids, -scores))[:k]
    return [(int(ids[i]), float(scores[i])) for i in order]


class _TextRecords:
    """Per-user memories by int id, with provenance lookup (shared by bm25 and hybrid)."""

    def __init__(self) -> None:
        self.mem: dict[str, dict[int, Memory]] = {}
        self.next_id = 0
        self.text_bytes = 0
        self.count = 0
        self.meta_bytes = 0

    def add(self, user_id: str, turns: Sequence[Turn]) -> tuple[list[int], list[str]]:
        mems = self.mem.setdefault(user_id, {})
        ids, texts = [], []
        for turn in turns:
            i = self.next_id
            self.next_id += 1
            text = render_turn(turn)
            m = mems[i] = Memory(f"m{i}", text, turn.created_at, (turn.turn_id,))
            self.text_bytes += text_bytes(text)
            self.count += 1
            self.meta_bytes += meta_bytes(m)
            ids.append(i)
            texts.append(text)
        return ids, texts

    def derived(self, user_id: str, turn_ids: Collection[str]) -> list[int]:
        gone = set(turn_ids)
        return [i for i, m in self.mem.get(user_id, {}).items() if gone.intersection(m.source_turn_ids)]

    def remove(self, user_id: str, ids: Collection[int]) -> None:
        mems = self.mem.get(user_id, {})
        for i in ids:
            m = mems.pop(i, None)
            if m is not None:
                self.text_bytes -= text_bytes(m.text)
                self.count -= 1
                self.meta_bytes -= meta_bytes(m)

    def items(self) -> int:
        """Memories held (a running total)."""
        return self.count

    def metadata_bytes(self) -> int:
        """Ids, timestamp and provenance bytes of the memories held (a running total)."""
        return self.meta_bytes

    def retrieved(self, user_id: str, i: int, score: float) -> Retrieved:
        m = self.mem[user_id][i]
        return Retrieved(m.memory_id, m.text, score, m.created_at, m.source_turn_ids)


class BM25Memory(FixedMemory):
    """Lexical baseline: every turn stored verbatim, ranked by BM25 per user.

    Only documents sharing at least one (non-stopword) term with the query
    are returned. Defaults: ``k1=1.5``, ``b=0.75``; English stopwords removed,
    no stemming.
    """

    def __init__(self, *, resources: Resources | None = None, k1: float = 1.5, b: float = 0.75) -> None:
        """Make an empty store (``resources`` is unused: no embedder needed)."""
        self.k1 = k1
        self.b = b
        self._records = _TextRecords()
        self._index = BM25Index(k1=k1, b=b)

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Store each turn as one document."""
        if turns:
            ids, texts = self._records.add(user_id, turns)
            self._index.add(user_id, ids, texts)

    def ranked(self, query: str, *, user_id: str, now: datetime, k: int) -> list[tuple[int, float]]:
        """Top ``k`` ``(id, bm25 score)`` with a positive score and created at or before ``now``."""
        ids, scores = self._index.scores(user_id, query)
        if not len(ids):
            return []
        mems = self._records.mem[user_id]
        ok = np.array([mems[int(i)].created_at <= now for i in ids], dtype=bool) & (scores > 0)
        return _top(ids[ok], scores[ok], k)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The ``k`` best BM25 matches."""
        return [self._records.retrieved(user_id, i, s) for i, s in self.ranked(query, user_id=user_id, now=now, k=k)]

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """What ``retrieve`` returns: no learning, so a probe is a retrieval.

        A probe may build the user's BM25 index where ``retrieve`` would have;
        the index is a function of the documents alone, so later scores are
        the same either way.
        """
        return self.retrieve(query, user_id=user_id, now=now, k=k)

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Remove the documents of the given turns."""
        gone = self._records.derived(user_id, turn_ids)
        self._records.remove(user_id, gone)
        self._index.remove(user_id, gone)

    def stats(self) -> MemoryStats:
        """Documents held and their bytes (token lists counted as metadata)."""
        return MemoryStats(
            items=self._records.items(),
            text_bytes=self._records.text_bytes,
            metadata_bytes=self._records.metadata_bytes(),
        )


def rrf_fuse(rankings: Sequence[Sequence[int]], *, rrf_k: int = 60) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: ``score(d) = sum over rankings of 1 / (rrf_k + rank)``.

    Args:
        rankings: each a list of ids, best first (rank 1 is the first).
        rrf_k: the damping constant (60 in the original formulation).

    Returns:
        ``(id, fused score)`` best first; ties broken by id.
    """
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, i in enumerate(ranking, start=1):
            fused[i] = fused.get(i, 0.0) + 1.0 / (rrf_k + rank)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


class HybridMemory(FixedMemory):
    """BM25 and dense cosine retrieval over the same turns, fused by reciprocal rank.

    Each side proposes its top ``candidates`` (created at or before ``now``);
    the fused score is ``1/(rrf_k + rank_bm25) + 1/(rrf_k + rank_dense)``.
    Defaults: ``candidates=50``, ``rrf_k=60``, BM25 ``k1=1.5``, ``b=0.75``;
    the embedder is the run's shared one.
    """

    def __init__(
        self,
        *,
        resources: Resources,
        candidates: int = 50,
        rrf_k: int = 60,
        k1: float = 1.5,
        b: float = 0.75,
    ) -> None:
        """Make an empty store that embeds with ``resources.embedder``."""
        if candidates <= 0 or rrf_k <= 0:
            raise UserError(f"hybrid: candidates and rrf_k must be positive, got {candidates!r}, {rrf_k!r}")
        self.candidates = candidates
        self.rrf_k = rrf_k
        self._embedder = resources.embedder
        self._dense = DenseIndex(self._embedder.dim)
        self._index = BM25Index(k1=k1, b=b)

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Store each turn in both indexes."""
        if not turns:
            return
        texts = [render_turn(t) for t in turns]
        vecs = self._embedder.encode(texts)
        ids = self._dense.add(
            user_id,
            [Memory("", text, t.created_at, (t.turn_id,)) for t, text in zip(turns, texts, strict=True)],
            vecs,
        )
        self._index.add(user_id, ids, texts)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Top ``k`` by fused rank."""
        if not self._dense.count(user_id):
            return []
        n = max(k, self.candidates)
        dense = [i for i, _ in self._dense.search(user_id, self._embedder.encode_one(query), n, now=now)]
        ids, scores = self._index.scores(user_id, query)
        ok = np.array([self._dense.get(user_id, int(i)).created_at <= now for i in ids], dtype=bool)
        ok &= scores > 0
        lexical = [i for i, _ in _top(ids[ok], scores[ok], n)]
        fused = rrf_fuse([lexical, dense], rrf_k=self.rrf_k)[:k]
        return [self._dense.retrieved(user_id, i, s) for i, s in fused]

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """What ``retrieve`` returns: no learning, so a probe is a retrieval (see ``BM25Memory.probe``)."""
        return self.retrieve(query, user_id=user_id, now=now, k=k)

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Remove the given turns from both indexes."""
        gone = self._dense.derived(user_id, turn_ids)
        self._dense.remove(user_id, gone)
        self._index.remove(user_id, gone)

    def stats(self) -> MemoryStats:
        """Memories held, vector and text bytes."""
        return self._dense.stats()


REGISTRATIONS = (
    Registration(
        "bm25",
        BM25Memory,
        description="every turn stored; top-k by BM25 per user (bm25s)",
        learns=False,
        role="baseline",
        requires=("bm25s", "lexical"),
    ),
    Registration(
        "hybrid",
        HybridMemory,
        description="BM25 and dense cosine rankings fused by reciprocal rank",
        learns=False,
        role="baseline",
        requires=("bm25s", "lexical"),
    ),
)
"""The systems this module registers, in order (``memsim.memory.registry.BUILTIN_MODULES``)."""
