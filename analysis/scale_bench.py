"""``memsim bench scale``: exact flat, HNSW and IVF-PQ at 10k / 100k / 1M memories of one user.

Each index is built over the same vectors and asked the same queries one at a
time (as a memory system asks them), with FAISS on one thread (as
``memsim.memory.store`` runs it). Reported per index and size: build time (training
included), the index's bytes as FAISS writes it, retrieve p50/p95 in ms, and
recall@10 / recall@30 against exact search (the share of exact search's top
k that the index also returns in its top k).

The vectors are synthetic, not embedded text: embedding a million sentences
with MiniLM takes hours on two cores. They are made to look like sentence
embeddings where it matters for an index: unit length, 384 dimensions,
clustered around topics with a low intrinsic dimension, so every vector has
close neighbours (uniform random directions would have none, and no index
would find them). Queries are fresh draws from the same distribution.
``scenarios/configs/scale.toml`` holds the sizes and each index's parameters.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memsim.core.errors import UserError
from memsim.core.validate import validate_args
from memsim.core.streams import seeded

if TYPE_CHECKING:  # faiss and the index module load only when a benchmark runs (memsim bench --help stays light)
    from memsim.memory.index import IndexSpec

__all__ = ["realistic_vectors", "bench_index", "bench_scale", "format_scale"]


def realistic_vectors(
    n: int, dim: int, rng: np.random.Generator, *, topics: int = 256, latent: int = 24, chunk: int = 100_000
) -> np.ndarray:
    """``n`` unit vectors like sentence embeddings: topic clusters in a ``latent``-dimensional subspace plus noise.

    The subspace, the topic centres and the draws all come from ``rng``.
    """
    latent = min(latent, dim)
    basis = np.linalg.qr(rng.standard_normal((dim, latent)))[0].T.astype(np.float32)  # latent x dim, orthonormal rows
    centres = rng.standard_normal((topics, latent)).astype(np.float32)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        z = centres[rng.integers(topics, size=m)] + 0.45 * rng.standard_normal((m, latent)).astype(np.float32)
        x = z @ basis + 0.08 * rng.standard_normal((m, dim)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        out[start : start + m] = x
    return out


def _recall(found: np.ndarray, truth: np.ndarray, k: int) -> float:
    return float(np.mean([len(set(f[:k].tolist()) & set(t[:k].tolist())) / k for f, t in zip(found, truth)]))


def bench_index(
    *, n: int, dim: int = 384, queries: int = 200, seed: int = 0, specs: Mapping[str, IndexSpec]
) -> list[dict[str, Any]]:
    """Build every index of ``specs`` over ``n`` vectors and measure it on ``queries`` more (one row per index)."""
    both = realistic_vectors(n + queries, dim, seeded(seed))
    return _bench_split(both, n, queries, specs, seed)


def bench_scale(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Run every size of a scale config (see ``scenarios/configs/scale.toml``)."""
    from memsim.memory.index import IndexSpec

    sizes = config.get("sizes")
    if not isinstance(sizes, list) or not sizes:
        raise UserError("scale config: [scale] sizes must be a list of memory counts")
    dim = int(config.get("dim", 384))
    seed = int(config.get("seed", 0))
    queries = int(config.get("queries", 200))
    rows: list[dict[str, Any]] = []
    for n in sizes:
        table = config.get("indexes", {}).get(str(n))
        if not isinstance(table, Mapping):
            raise UserError(f"scale config: missing [scale.indexes.{n}] table of index parameters")
        specs = {
            name: validate_args(IndexSpec, {"switch_at": 1 << 30, **args}, what=f"scale.indexes.{n}.{name}", source="scale config")
            for name, args in table.items()
        }
        # Queries drawn with the data: the last `queries` of n + queries vectors from one generator.
        both = realistic_vectors(int(n) + queries, dim, seeded(seed))
        rows.extend(_bench_split(both, int(n), queries, specs, seed, echo=True))
        del both
        gc.collect()
    return rows


def _bench_split(
    both: np.ndarray, n: int, queries: int, specs: Mapping[str, IndexSpec], seed: int, *, echo: bool = False
) -> list[dict[str, Any]]:
    """Measure each index over the first ``n`` rows of ``both``, asked the last ``queries`` rows."""
    import faiss

    from memsim.memory.index import index_bytes, make_index, train_index

    x, q = both[:n], both[n:]
    dim = both.shape[1]
    faiss.omp_set_num_threads(1)
    exact = faiss.IndexFlatIP(dim)
    exact.add(x)
    truth = exact.search(q, 30)[1]
    del exact
    rows = []
    for name, spec in specs.items():
        t0 = time.perf_counter()
        index = make_index(spec, dim)
        train_index(index, spec, x, seed=seed)
        index.add(x)
        build = time.perf_counter() - t0
        size = index_bytes(index)
        times, found10 = [], []
        for i in range(queries):
            t = time.perf_counter()
            found10.append(index.search(q[i : i + 1], 10)[1][0])
            times.append((time.perf_counter() - t) * 1000.0)
        found30 = index.search(q, 30)[1]
        row = {
            "n": n,
            "index": name,
            "build_s": round(build, 3),
            "bytes": size,
            "p50_ms": float(np.percentile(times, 50)),
            "p95_ms": float(np.percentile(times, 95)),
            "recall@10": _recall(np.asarray(found10), truth, 10),
            "recall@30": _recall(found30, truth, 30),
        }
        if echo:
            print(format_scale([row], header=not rows), flush=True)
        rows.append(row)
        del index
        gc.collect()
    return rows


def format_scale(rows: Sequence[Mapping[str, Any]], *, header: bool = True) -> str:
    """The benchmark's table: one line per size and index."""
    lines = [f"{'memories':>9} {'index':<8} {'build s':>8} {'MB':>8} {'p50 ms':>8} {'p95 ms':>8} {'recall@10':>9} {'recall@30':>9}"] if header else []
    for r in rows:
        lines.append(
            f"{r['n']:>9} {r['index']:<8} {r['build_s']:>8.2f} {r['bytes'] / 1e6:>8.1f} {r['p50_ms']:>8.3f} "
            f"{r['p95_ms']:>8.3f} {r['recall@10']:>9.3f} {r['recall@30']:>9.3f}"
        )
    return "\n".join(lines)
