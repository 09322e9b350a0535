"""Novelty arithmetic of the write gates: exact max cosines, sorted percentiles, BLAS threads.

A gate scores a batch of turns in one matrix product against a speaker's
stored memories, then rescores the near-best cosines exactly (correctly
rounded), so batched and one-by-one ingest decide alike to the last bit.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from memsim.memory.index import load_faiss

__all__ = ["SCORE_CHUNK", "SLACK", "blas_threads", "exact_dot", "percentile_sorted", "max_cosines"]

SCORE_CHUNK = 65_536
"""Stored vectors scored per matrix product (bounds the score matrix of a large store)."""

SLACK = 1e-4
"""float32 scores within this of the best are rescored exactly (float32 error on 384-d unit vectors < 3e-5)."""


@functools.lru_cache(maxsize=1)
def _blas_controller() -> Any:
    """threadpoolctl's handle on the BLAS libraries loaded (found once)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def blas_threads() -> Any:
    """A context in which BLAS uses as many threads as FAISS searches do (``MEMSIM_FAISS_THREADS``, default 1).

    The novelty product is a few queries against a large store, bound by
    memory bandwidth: BLAS threads only add hand-offs there, and on a busy
    machine two of them halved ingest throughput.
    """
    return _blas_controller().limit(limits=max(1, load_faiss().omp_get_max_threads()), user_api="blas")


def exact_dot(a: np.ndarray, b: np.ndarray) -> float:
    """The inner product of float32 vectors ``a`` and ``b``, correctly rounded to float64.

    Products of float32 values are exact in float64 and ``math.fsum`` rounds
    their sum once, so the value does not depend on summation order, BLAS or
    how many turns were scored together: batched and one-by-one ingest
    compute the same novelty to the last bit.
    """
    return math.fsum((a.astype(np.float64) * b.astype(np.float64)).tolist())


def percentile_sorted(values: Sequence[float], q: float) -> float:
    """``numpy.percentile(values, q)`` (linear method) of already sorted ``values``."""
    # The virtual index as numpy computes it, so results match to the last bit.
    h = (len(values) - 1) * (q / 100.0)
    lo = int(math.floor(h))
    hi = min(lo + 1, len(values) - 1)
    a, b, t = values[lo], values[hi], h - lo
    # numpy's lerp: from the nearer end, so that t = 0 and t = 1 give the elements themselves.
    return float(b - (b - a) * (1.0 - t) if t >= 0.5 else a + (b - a) * t)


def max_cosines(stored: np.ndarray, queries: np.ndarray) -> list[float | None]:
    """Exact max cosine of each of ``queries`` to the rows of ``stored`` (None each when ``stored`` is empty).

    One matrix product per ``SCORE_CHUNK`` stored rows for all queries, then
    the near-best rows of each (within ``SLACK``) are rescored exactly (``exact_dot``).
    """
    out: list[float | None] = [None] * len(queries)
    if not len(stored) or not len(queries):
        return out
    # Per query: candidate rows within SLACK of the float32 best, kept across chunks.
    best = np.full(len(queries), -np.inf, dtype=np.float32)
    cands: list[list[int]] = [[] for _ in range(len(queries))]
    for start in range(0, len(stored), SCORE_CHUNK):
        sims = queries @ stored[start : start + SCORE_CHUNK].T
        top = sims.max(axis=1)
        for q in range(len(queries)):
            if top[q] < best[q] - SLACK:
                continue
            best[q] = max(best[q], top[q])
            cands[q].extend((np.flatnonzero(sims[q] >= top[q] - SLACK) + start).tolist())
    for q in range(len(queries)):
        out[q] = max(exact_dot(queries[q], stored[r]) for r in cands[q])
    return out
