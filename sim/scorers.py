"""Scorers: what a question's retrieval (and answer) is worth, as named columns.

A scorer turns one asked question and the ranked memories a system returned
into score columns. Scorers are an extension point with a strict registry,
like memory systems and judges: a run names its scorers and its headline
column in its spec; tables pick up every column a scorer declares.

Evidence scores are read through provenance: no LLM needed. A retrieved
memory is relevant when its provenance (``source_turn_ids``) meets the gold
evidence turns. Definitions used everywhere in memsim:

- ``recall_any@k``: 1 if any gold turn is in the provenance of the top k.
- ``recall_all@k``: 1 if every gold turn is in the provenance of the top k.
- ``ndcg@k``: a retrieved memory's gain is the number of gold turns in its
  provenance not already covered by a memory ranked above it (a duplicate of
  evidence already served gains nothing), discounted by ``log2(rank + 1)``,
  divided by the ideal DCG of ``min(k, |gold|)`` single-turn relevant
  memories in front; capped at 1 (a merged memory can cover several gold
  turns at one rank).

An empty gold set, or a question marked ``excluded``, gives NaN (unscored),
never zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memsim.core.registry import Registry, caller_origin
from memsim.sim.spec import DEFAULT_KS

if TYPE_CHECKING:
    from memsim.memory.base import Retrieved
    from memsim.sim.events import Question

__all__ = [
    "DEFAULT_KS",
    "Scorer",
    "EvidenceScorer",
    "StaleScorer",
    "SupportScorer",
    "register_scorer",
    "unregister_scorer",
    "scorer_names",
    "scorer_description",
    "build_scorer",
    "evidence_scores",
    "first_evidence_rank",
    "stale_above_current",
]


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
            # Gain counts gold turns not already covered higher up: a second copy of the same
            # evidence is not relevant again, and a memory merged from two gold turns counts two.
            new = gold_set.intersection(sources) - covered
            if new:
                covered |= new
                dcg += len(new) / math.log2(rank + 1)
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


def _provenance(retrieved: Sequence[Retrieved]) -> list[tuple[str, ...]]:
    """Source turn ids of each retrieved memory (the engine has already read a restatement as the turn it restates)."""
    return [tuple(m.source_turn_ids) for m in retrieved]


@runtime_checkable
class Scorer(Protocol):
    """Scores one asked question from what was retrieved for it."""

    name: str

    def columns(self, ks: Sequence[int]) -> list[str]:
        """The numeric score columns this scorer fills (they appear in every table)."""
        ...

    def score(self, question: Question, retrieved: Sequence[Retrieved], *, ks: Sequence[int]) -> dict[str, Any]:
        """Score columns for one question; NaN where the question is not scored."""
        ...


_EVIDENCE_METRICS: tuple[str, ...] = ("recall_all", "recall_any", "ndcg")


@dataclass(frozen=True, slots=True)
class EvidenceScorer:
    """``recall_all@k``, ``recall_any@k``, ``ndcg@k`` through provenance, and the rank of the first hit."""

    name: str = "evidence"

    def columns(self, ks: Sequence[int]) -> list[str]:
        """One column per metric and cut-off."""
        return [f"{m}@{k}" for k in ks for m in _EVIDENCE_METRICS]

    def score(self, question: Question, retrieved: Sequence[Retrieved], *, ks: Sequence[int]) -> dict[str, Any]:
        """Evidence scores; NaN for an excluded question."""
        if question.excluded is not None:
            return {**{c: math.nan for c in self.columns(ks)}, "first_rank": None}
        prov = _provenance(retrieved)
        return {**evidence_scores(prov, question.evidence, ks), "first_rank": first_evidence_rank(prov, question.evidence)}


@dataclass(frozen=True, slots=True)
class StaleScorer:
    """``stale_above_current``: a superseded value outranks the current one."""

    name: str = "stale"

    def columns(self, ks: Sequence[int]) -> list[str]:
        """The one column."""
        return ["stale_above_current"]

    def score(self, question: Question, retrieved: Sequence[Retrieved], *, ks: Sequence[int]) -> dict[str, Any]:
        """NaN unless the question has superseded turns."""
        prov = _provenance(retrieved)
        return {"stale_above_current": stale_above_current(prov, question.evidence, question.superseded)}


@dataclass(frozen=True, slots=True)
class SupportScorer:
    """``recall_support@k``: every part of the answer is met by one of the turns that could give it.

    A world that knows every turn supporting each evidence turn (its
    ``extra["support"]``: one group per evidence turn, e.g. each statement of
    the current city) scores a hit when each group has a turn in the
    provenance of the top k. Where one turn answers (``current``, ``latest``,
    ``since``, ``as_of``, ``preference``, ``assistant``) that is any of its
    statements; where several must be combined (``previous``, ``hop``,
    ``count``) one of each. NaN for an excluded question or one without groups.
    """

    name: str = "support"

    def columns(self, ks: Sequence[int]) -> list[str]:
        """One column per cut-off."""
        return [f"recall_support@{k}" for k in ks]

    def score(self, question: Question, retrieved: Sequence[Retrieved], *, ks: Sequence[int]) -> dict[str, Any]:
        """1 when each support group meets the top k's provenance."""
        groups = [set(g) for g in question.extra.get("support", ())]
        if question.excluded is not None or not groups:
            return {c: math.nan for c in self.columns(ks)}
        prov = _provenance(retrieved)
        out: dict[str, Any] = {}
        for k in ks:
            seen = {t for sources in prov[:k] for t in sources}
            out[f"recall_support@{k}"] = float(all(g & seen for g in groups))
        return out


SCORERS = Registry("scorer", group="memsim.scorers")
"""Scorers by name (``memsim.core.registry``); a package adds its own through the ``memsim.scorers`` entry points."""


def register_scorer(name: str, target: str | Callable[[], Scorer], *, description: str) -> None:
    """Register a scorer: ``"module:attribute"`` (imported when first built) or a factory.

    A duplicate name is an error.
    """
    SCORERS.register(name, target, description=description, origin=caller_origin(1))


def unregister_scorer(name: str) -> None:
    """Remove a registered scorer (a test undoes its registration with it)."""
    SCORERS.unregister(name)


def scorer_names() -> list[str]:
    """Scorer names, sorted (those installed packages add last)."""
    return SCORERS.names()


def scorer_description(name: str) -> str:
    """One line of help for a scorer."""
    return SCORERS.description(name)


def build_scorer(name: str) -> Scorer:
    """Build the scorer ``name``; an unknown name lists the known ones."""
    return SCORERS.load(name)()  # type: ignore[no-any-return]


register_scorer("evidence", EvidenceScorer, description="recall_all@k, recall_any@k, nDCG@k through provenance, first evidence rank")
register_scorer("support", SupportScorer, description="recall_support@k: each part of the answer met by any turn that supports it")
register_scorer("stale", StaleScorer, description="stale_above_current: a superseded value outranks the current one")
