"""Evidence scores read through provenance: no LLM needed.

A retrieved memory is relevant when its provenance (``source_turn_ids``)
meets the gold evidence turns. Definitions used everywhere in memsim:

- ``recall_any@k``: 1 if any gold turn is in the provenance of the top k.
- ``recall_all@k``: 1 if every gold turn is in the provenance of the top k.
- ``ndcg@k``: binary relevance per retrieved memory, discounted by
  ``log2(rank + 1)``, divided by the ideal DCG of ``min(k, |gold|)`` relevant
  memories in front; capped at 1 (a merged memory can cover several gold
  turns at one rank).

An empty gold set gives NaN (unscored), never zero.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence

__all__ = ["DEFAULT_KS", "evidence_scores", "first_evidence_rank", "stale_above_current"]

DEFAULT_KS: tuple[int, ...] = (1, 5, 10, 30, 50)


def evidence_scores(
    provenance: Sequence[Collection[str]],
    gold: Collection[str],
    ks: Iterable[int] = DEFAULT_KS,
) -> dict[str, float]:
    """Scores of one ranked list against the gold turn ids.

    Args:
        provenance: for each retrieved memory, best first, its source turn ids.
        gold: the gold evidence turn ids.
        ks: cut-offs.

    Returns:
        ``{"recall_any@k": ..., "recall_all@k": ..., "ndcg@k": ...}`` for each k.
    """
    gold_set = set(gold)
    out: dict[str, float] = {}
    for k in ks:
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        if not gold_set:
            out[f"recall_any@{k}"] = out[f"recall_all@{k}"] = out[f"ndcg@{k}"] = math.nan
            continue
        top = provenance[:k]
        covered: set[str] = set()
        dcg = 0.0
        for rank, sources in enumerate(top, start=1):
            hit = gold_set.intersection(sources)
            if hit:
                covered |= hit
                dcg += 1.0 / math.log2(rank + 1)
        ideal = sum(1.0 / math.log2(r + 1) for r in range(1, min(k, len(gold_set)) + 1))
        out[f"recall_any@{k}"] = float(bool(covered))
        out[f"recall_all@{k}"] = float(covered == gold_set)
        out[f"ndcg@{k}"] = min(1.0, dcg / ideal)
    return out


def first_evidence_rank(provenance: Sequence[Collection[str]], gold: Collection[str]) -> int | None:
    """1-based rank of the first retrieved memory that meets the gold set, or None."""
    gold_set = set(gold)
    for rank, sources in enumerate(provenance, start=1):
        if gold_set.intersection(sources):
            return rank
    return None


def stale_above_current(
    provenance: Sequence[Collection[str]],
    current: Collection[str],
    superseded: Collection[str],
) -> float:
    """1.0 if a memory stating a superseded value outranks every current-evidence memory.

    A memory counts as stale when its provenance meets ``superseded`` and not
    ``current``. Returns NaN when the question has no superseded turns, 1.0
    when a stale memory is retrieved and no current one is above it (or none
    is retrieved at all), else 0.0.
    """
    sup = set(superseded)
    cur = set(current)
    if not sup:
        return math.nan
    for sources in provenance:
        s = set(sources)
        if s & cur:
            return 0.0
        if s & sup:
            return 1.0
    return 0.0
