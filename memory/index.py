"""Index choice for the vector store: exact flat, HNSW, or IVF with product quantisation.

An ``IndexSpec`` names a FAISS index and its parameters; ``make_index``
builds it (inner product: cosine on unit vectors) and ``train_index`` trains
it on a sample where the kind needs training. ``VectorStore`` keeps each
user's partition exact until it holds ``switch_at`` vectors, then rebuilds
it as the chosen index: small partitions stay exact (an approximation buys
nothing below a few thousand vectors), large ones stop paying a scan of
every vector per query.

- ``flat``: exact, one dot product per stored vector per query.
- ``hnsw``: a navigable small-world graph (``IndexHNSWFlat``): ``hnsw_m``
  links per node, ``ef_construction`` candidates while building,
  ``ef_search`` while searching. Vectors are kept whole, so removal
  rebuilds the graph from them.
- ``ivfpq``: ``nlist`` inverted lists (k-means cells), vectors compressed to
  ``pq_m`` codes of ``pq_bits`` bits; ``nprobe`` cells are scanned per query.
  With ``refine > 0`` the ``refine x k`` best candidates are re-ranked on the
  exact vectors (``IndexRefineFlat``), which restores recall at the cost of
  keeping the vectors.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from memsim.core.streams import seeded

if TYPE_CHECKING:
    import faiss

__all__ = ["IndexSpec", "make_index", "train_index", "tune_index", "index_bytes", "FLAT", "load_faiss", "FAISS_THREADS_ENV"]

FAISS_THREADS_ENV = "MEMSIM_FAISS_THREADS"
"""Environment variable: OpenMP threads FAISS may use (default 1)."""


@functools.cache
def load_faiss() -> Any:
    """FAISS, imported on first use (listing or looking up systems does not load it), its threads set.

    Per-user flat indexes are small and searched one query at a time: FAISS's
    OpenMP threads only add overhead there, and on a busy machine they made a
    single search about 100x slower. One thread unless ``$MEMSIM_FAISS_THREADS`` asks for more.
    """
    import faiss

    faiss.omp_set_num_threads(max(1, int(os.environ.get(FAISS_THREADS_ENV, "1") or 1)))
    return faiss


class IndexSpec(BaseModel):
    """A FAISS index and its parameters (JSON-serialisable, part of a system's arguments)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["flat", "hnsw", "ivfpq"] = "flat"
    switch_at: int = Field(20_000, ge=1, description="vectors in a partition before it leaves exact search")
    hnsw_m: int = Field(32, ge=2, description="HNSW: links per node")
    ef_construction: int = Field(80, ge=1, description="HNSW: candidate list while building")
    ef_search: int = Field(96, ge=1, description="HNSW: candidate list while searching")
    nlist: int = Field(1024, ge=1, description="IVF: inverted lists (k-means cells)")
    nprobe: int = Field(32, ge=1, description="IVF: cells scanned per query")
    pq_m: int = Field(48, ge=1, description="PQ: sub-quantisers (must divide the dimension)")
    pq_bits: int = Field(8, ge=1, le=16, description="PQ: bits per code")
    refine: int = Field(8, ge=0, description="IVF-PQ: re-rank refine x k candidates on exact vectors (0: none)")
    train_size: int = Field(65_536, ge=1, description="IVF-PQ: most vectors the k-means and PQ training see")

    @model_validator(mode="after")
    def _check(self) -> IndexSpec:
        if self.kind == "ivfpq" and self.switch_at < self.nlist:
            raise ValueError(f"ivfpq: switch_at ({self.switch_at}) must be at least nlist ({self.nlist}) to train")
        return self

    @property
    def exact(self) -> bool:
        """Whether searches are exact."""
        return self.kind == "flat"


FLAT = IndexSpec()
"""The default: exact search."""


def make_index(spec: IndexSpec, dim: int) -> faiss.Index:
    """An empty inner-product index of ``spec`` (untrained for ``ivfpq``).

    Raises:
        ValueError: ``pq_m`` does not divide ``dim``.
    """
    faiss = load_faiss()
    if spec.kind == "flat":
        return faiss.IndexFlatIP(dim)
    if spec.kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, spec.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = spec.ef_construction
        index.hnsw.efSearch = spec.ef_search
        return index
    if dim % spec.pq_m:
        raise ValueError(f"ivfpq: pq_m ({spec.pq_m}) must divide the dimension ({dim})")
    quantizer = faiss.IndexFlatIP(dim)
    ivf = faiss.IndexIVFPQ(quantizer, dim, spec.nlist, spec.pq_m, spec.pq_bits, faiss.METRIC_INNER_PRODUCT)
    ivf.nprobe = spec.nprobe
    # FAISS's Python layer keeps the quantiser (and the base index below) alive with the index.
    if spec.refine <= 0:
        return ivf
    refined = faiss.IndexRefineFlat(ivf)
    refined.k_factor = float(spec.refine)
    return refined


def train_index(index: faiss.Index, spec: IndexSpec, vectors: np.ndarray, *, seed: int = 0) -> None:
    """Train ``index`` on at most ``spec.train_size`` of ``vectors`` (chosen with ``seed``); no-op when not needed."""
    if index.is_trained:
        return
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    if x.shape[0] > spec.train_size:
        pick = np.sort(seeded(seed).choice(x.shape[0], size=spec.train_size, replace=False))
        x = x[pick]
    index.train(x)


def tune_index(index: faiss.Index, spec: IndexSpec) -> None:
    """Set the search-time parameters of ``spec`` on a built index (also one read from disk)."""
    faiss = load_faiss()
    inner = faiss.downcast_index(index.index) if isinstance(index, faiss.IndexIDMap2) else index
    if isinstance(inner, faiss.IndexHNSWFlat):
        inner.hnsw.efSearch = spec.ef_search
    elif isinstance(inner, faiss.IndexRefineFlat):
        inner.k_factor = float(spec.refine)
        faiss.downcast_index(inner.base_index).nprobe = spec.nprobe
    elif isinstance(inner, faiss.IndexIVF):
        inner.nprobe = spec.nprobe


def index_bytes(index: faiss.Index) -> int:
    """Bytes of the index as FAISS writes it (vectors or codes, graph links, lists, ids)."""
    faiss = load_faiss()
    return int(faiss.serialize_index(index).nbytes)
