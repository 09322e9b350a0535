"""``memsim bench systems``: ingest throughput and retrieval latency per system and store size.

For each system and each store size N (default 1k, 10k, 100k memories of one
user, the worst case, since stores are per user) the bench

1. fills the store with N synthetic turns (``bulk_load`` where a system has
   one, so gates and revision are not what is timed, else ``ingest`` in
   sessions of 500 turns),
2. ingests one untimed session of 20 turns (lazy loads: spaCy, indexes),
   then times ``ingest`` of ``ingest_turns`` further turns in sessions of 20
   (turns per second, gates, NER and revision included),
3. times ``queries`` retrievals at ``k`` (p50 / p95 in milliseconds) and,
   separately, the first retrieval after the ingest (lexical indexes rebuild
   there).

Texts come from a seeded template generator. A sample of base texts is
embedded once with the real embedder (all-MiniLM-L6-v2 by default, through
the on-disk cache); every turn's vector is its base vector plus seeded noise
(cosine ~0.8 to the base), looked up from memory, so 100k turns cost no model
time and are still spread like real sentence vectors. The real embedder's own
throughput is measured on the sample and reported beside the table: add it
to ingest and query costs for an uncached deployment.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

from memsim.memory.base import Turn
from memsim.memory.registry import Resources, build_memory, parse_system
from memsim.core.errors import UserError
from memsim.core.streams import streams

__all__ = ["BenchRow", "EmbedderFigure", "DEFAULT_SYSTEMS", "bench_systems", "format_rows"]

DEFAULT_SYSTEMS: tuple[str, ...] = (
    "naive",
    "surprise",
    "multisignal",
    "neuroplastic",
    "fullcontext",
    "bm25",
    "hybrid",
    "naive+recency",
)
"""Systems benched when none are named (rerank needs a model folder: name it explicitly)."""

_T0 = datetime(2023, 1, 1, 9, 0, tzinfo=timezone.utc)
_WARMUP = 20

_PEOPLE = ("Maria", "Tom", "Aisha", "Kenji", "Lena", "Omar", "Sofia", "Ravi", "Chloe", "Diego")
_PLACES = ("the lake", "Lisbon", "the gym", "my office", "the farmers market", "Kyoto", "the library", "the beach")
_ACTS = (
    "went hiking", "cooked dinner", "started a pottery class", "watched a film", "painted a mural",
    "adopted a cat", "ran a half marathon", "planted tomatoes", "fixed my bike", "learned some Spanish",
)
_WHEN = ("yesterday", "last weekend", "on Friday", "two weeks ago", "this morning", "in March", "after work")
_FEEL = ("It was great.", "I am still tired.", "We laughed a lot.", "It rained all day.", "I want to do it again.")


@dataclass(frozen=True, slots=True)
class BenchRow:
    """One system at one store size."""

    system: str
    """System as named on the command line."""
    size: int
    """Turns loaded before timing."""
    items: int
    """Memories the system held after loading (gates store fewer than they see)."""
    fill_s: float
    """Seconds to load the store (not a figure of merit: bulk paths differ)."""
    ingest_turns_per_s: float
    """Turns per second of ``ingest`` at this size."""
    first_retrieve_ms: float
    """The first retrieval after that ingest (index rebuilds show here)."""
    retrieve_p50_ms: float
    """Median retrieval latency."""
    retrieve_p95_ms: float
    """95th percentile retrieval latency."""


@dataclass(frozen=True, slots=True)
class EmbedderFigure:
    """The real embedder's throughput on the sample."""

    model_id: str
    """Which model."""
    texts_per_s: float
    """Texts embedded per second, model computing (no cache)."""
    query_ms: float
    """Median time to embed one query."""


def _base_texts(n: int, rng: np.random.Generator) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        t = (
            f"I {_ACTS[rng.integers(len(_ACTS))]} with {_PEOPLE[rng.integers(len(_PEOPLE))]} "
            f"at {_PLACES[rng.integers(len(_PLACES))]} {_WHEN[rng.integers(len(_WHEN))]}. "
            f"{_FEEL[rng.integers(len(_FEEL))]}"
        )
        if t in seen:
            # The template space is finite; a counter keeps texts distinct beyond it.
            t = f"{t} ({len(out)})"
        seen.add(t)
        out.append(t)
    return out


class _LookupEmbedder:
    """Vectors looked up by turn text (the part after ``"<date> | <speaker>: "``) or query text."""

    def __init__(self, model_id: str, dim: int, cache_dir: Any = None) -> None:
        self.model_id = f"bench-lookup:{model_id}"
        self.dim = dim
        self.table: dict[str, np.ndarray] = {}
        # Systems that keep caches beside the embedder's (multisignal's entity cache) use this folder.
        self.cache_dir = cache_dir

    def _one(self, text: str) -> np.ndarray:
        v = self.table.get(text)
        if v is None:
            _, bar, rest = text.partition(" | ")
            v = self.table.get(rest.split(": ", 1)[1]) if bar and ": " in rest else None
        if v is None:
            raise KeyError(f"bench embedder has no vector for {text[:60]!r}")
        return v

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not len(texts):
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._one(t) for t in texts])

    def encode_one(self, text: str) -> np.ndarray:
        return self._one(text)


def _make_corpus(
    total: int, base: list[str], base_vecs: np.ndarray, rng: np.random.Generator, noise: float
) -> tuple[list[str], np.ndarray]:
    which = rng.integers(len(base), size=total)
    vecs = base_vecs[which] + rng.normal(0.0, noise, size=(total, base_vecs.shape[1])).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    texts = [f"{base[w]} #{i}" for i, w in enumerate(which.tolist())]
    return texts, vecs.astype(np.float32)


def _turns(texts: Sequence[str], start: int, user: str, session_size: int) -> list[Turn]:
    return [
        Turn(
            turn_id=f"{user}:{start + n}",
            user_id=user,
            speaker=("Ann", "Ben")[(start + n) % 2],
            text=text,
            created_at=_T0 + timedelta(minutes=start + n),
            session_id=f"s{(start + n) // session_size}",
        )
        for n, text in enumerate(texts)
    ]


def bench_systems(
    systems: Sequence[str] = DEFAULT_SYSTEMS,
    sizes: Sequence[int] = (1_000, 10_000, 100_000),
    *,
    sample: int = 1_000,
    ingest_turns: int = 200,
    queries: int = 200,
    k: int = 10,
    seed: int = 0,
    embedder: Any = None,
    threads: int | None = 1,
    progress: Callable[[str], None] | None = None,
    cache_dir: Any = None,
) -> tuple[list[BenchRow], EmbedderFigure]:
    """Time every system at every size.

    Args:
        systems: system specs as on the command line (``name`` or ``name:key=value``).
        sizes: store sizes (turns loaded before timing).
        sample: base texts embedded with the real embedder.
        ingest_turns: turns timed through ``ingest`` at each size.
        queries: retrievals timed at each size.
        k: memories per retrieval.
        seed: seed of texts, noise and query choice.
        embedder: the real embedder (default: the packaged all-MiniLM-L6-v2).
        threads: FAISS and torch threads while timing (restored after); 1 by
            default, because single queries gain little from threads and lose
            a lot to thread hand-offs on a busy machine. None leaves them.
        progress: called with one line per finished row.
        cache_dir: folder of the caches systems keep beside the embedder's
            (multisignal's entity cache); None: none, so NER is timed cold.
            A second run with the same folder and seed times it warm.

    Returns:
        The rows, and the real embedder's throughput.
    """
    if threads is None:
        return _bench(systems, sizes, sample, ingest_turns, queries, k, seed, embedder, progress, cache_dir)
    import torch

    from memsim.memory.index import load_faiss

    faiss = load_faiss()  # FAISS's own thread setting first, so that a store made later keeps the bench's
    before = (faiss.omp_get_max_threads(), torch.get_num_threads())
    faiss.omp_set_num_threads(threads)
    torch.set_num_threads(threads)
    try:
        return _bench(systems, sizes, sample, ingest_turns, queries, k, seed, embedder, progress, cache_dir)
    finally:
        faiss.omp_set_num_threads(before[0])
        torch.set_num_threads(before[1])


def _bench(
    systems: Sequence[str],
    sizes: Sequence[int],
    sample: int,
    ingest_turns: int,
    queries: int,
    k: int,
    seed: int,
    embedder: Any,
    progress: Callable[[str], None] | None,
    cache_dir: Any = None,
) -> tuple[list[BenchRow], EmbedderFigure]:
    if not sizes or min(sizes) < 1:
        raise UserError(f"bench systems: sizes must be positive, got {list(sizes)}")
    specs = [parse_system(s) for s in systems]
    rng = streams(seed)["texts"]
    probe_embedder = embedder
    if embedder is None:
        from memsim.memory.embed import Embedder

        embedder = Embedder()
        # Throughput is measured without the cache, which would otherwise serve a second run.
        probe_embedder = Embedder(use_cache=False)
    base = _base_texts(sample, rng)
    base_vecs = np.asarray(embedder.encode(base), dtype=np.float32)
    figure = _embedder_figure(str(embedder.model_id), probe_embedder, base)

    biggest = max(sizes)
    # noise 0.033/dim-component gives cosine ~0.8 to the base vector for 384-d vectors.
    noise = 0.5 / np.sqrt(base_vecs.shape[1])
    texts, vecs = _make_corpus(biggest + _WARMUP + ingest_turns, base, base_vecs, rng, noise)
    lookup = _LookupEmbedder(str(embedder.model_id), base_vecs.shape[1], cache_dir)
    lookup.table = {x: v for x, v in zip(texts, vecs, strict=True)}
    lookup.table.update({b: v for b, v in zip(base, base_vecs, strict=True)})
    qidx = rng.integers(len(base), size=queries)
    qtexts = [base[i] for i in qidx.tolist()]

    rows: list[BenchRow] = []
    for spec in specs:
        for size in sorted(sizes):
            system = build_memory(spec.name, spec.args, resources=Resources(rng=streams(seed)["systems"], embedder_factory=lambda: lookup))
            row = _time_system(system, spec.display, size, texts, vecs, ingest_turns, qtexts, k)
            rows.append(row)
            if progress is not None:
                progress(format_rows([row], header=False))
            del system
            gc.collect()
    return rows, figure


def _embedder_figure(model_id: str, probe_embedder: Any, base: list[str]) -> EmbedderFigure:
    """The real embedder's throughput on texts made from ``base`` (model load and warm-up left out)."""
    probe = [f"{b} (probe)" for b in base[: min(256, len(base))]]
    probe_embedder.encode(probe[:8])  # model load and warm-up are not throughput
    encode = probe_embedder.encode
    t = time.perf_counter()
    encode(probe)
    rate = len(probe) / max(time.perf_counter() - t, 1e-9)
    one = []
    for q in probe[:20]:
        t = time.perf_counter()
        encode([q + "?"])
        one.append(time.perf_counter() - t)
    return EmbedderFigure(model_id, rate, 1000 * float(np.median(one)))


def _time_system(
    system: Any,
    label: str,
    size: int,
    texts: Sequence[str],
    vecs: np.ndarray,
    ingest_turns: int,
    qtexts: Sequence[str],
    k: int,
) -> BenchRow:
    """Fill ``system`` with ``size`` turns, then time its ingest of ``ingest_turns`` more and its retrievals."""
    user = "bench"
    t = time.perf_counter()
    bulk = getattr(system, "bulk_load", None)
    for start in range(0, size, 500):
        chunk = _turns(texts[start : min(size, start + 500)], start, user, 500)
        if callable(bulk):
            bulk(chunk, user_id=user, vectors=vecs[start : start + len(chunk)])
        else:
            system.ingest(chunk, user_id=user, now=chunk[-1].created_at)
    # One untimed session first: lazy loads (spaCy, indexes) are not throughput.
    warm = _turns(texts[size : size + _WARMUP], size, user, _WARMUP)
    system.ingest(warm, user_id=user, now=warm[-1].created_at)
    fill_s = time.perf_counter() - t
    first, end = size + _WARMUP, size + _WARMUP + ingest_turns
    t = time.perf_counter()
    for start in range(first, end, 20):
        chunk = _turns(texts[start : min(end, start + 20)], start, user, 20)
        system.ingest(chunk, user_id=user, now=chunk[-1].created_at)
    ingest_rate = ingest_turns / max(time.perf_counter() - t, 1e-9)
    now = _T0 + timedelta(minutes=end + 1)
    lat = []
    for q in qtexts:
        t = time.perf_counter()
        system.retrieve(q, user_id=user, now=now, k=k)
        lat.append(time.perf_counter() - t)
    return BenchRow(
        system=label,
        size=size,
        items=int(system.stats().items),
        fill_s=round(fill_s, 3),
        ingest_turns_per_s=round(ingest_rate, 1),
        first_retrieve_ms=round(1000 * lat[0], 3),
        retrieve_p50_ms=round(1000 * float(np.percentile(lat[1:] or lat, 50)), 3),
        retrieve_p95_ms=round(1000 * float(np.percentile(lat[1:] or lat, 95)), 3),
    )


def format_rows(rows: Sequence[BenchRow], *, header: bool = True) -> str:
    """A fixed-width table of ``rows``."""
    cols = ("system", "size", "items", "ingest turns/s", "first ms", "p50 ms", "p95 ms", "fill s")
    widths = (22, 7, 7, 14, 10, 9, 9, 8)
    lines = []
    if header:
        lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cols, widths))))
    for r in rows:
        vals = (
            r.system, r.size, r.items, f"{r.ingest_turns_per_s:.0f}", f"{r.first_retrieve_ms:.2f}",
            f"{r.retrieve_p50_ms:.2f}", f"{r.retrieve_p95_ms:.2f}", f"{r.fill_s:.1f}",
        )
        lines.append("  ".join(str(v).rjust(w) if i else str(v).ljust(w) for i, (v, w) in enumerate(zip(vals, widths))))
    return "\n".join(lines)
