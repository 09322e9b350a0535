"""LongMemEval's official retrieval metrics: turn keys, rankings scored at each cut-off, the two scorers.

``recall_any@k``, ``recall_all@k`` and ``ndcg_any@k`` with the official DCG,
at turn and at session level (``score_turn2session`` derives session figures
from a turn ranking as the official evaluation does); ``TurnScorer`` and
``SessionScorer`` are the run's scorers (``memsim.sim.scorers``). See
``memsim.static_benchmarks.longmemeval`` for the protocol.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memsim.sim.events import Question

if TYPE_CHECKING:
    from memsim.memory.base import Retrieved

__all__ = ["RETRIEVAL_KS", "official_dcg", "score_ranking", "score_turn2session", "TurnScorer", "SessionScorer", "turn_key", "session_of"]

RETRIEVAL_KS: tuple[int, ...] = (1, 3, 5, 10, 30, 50)
"""Cut-offs of the official retrieval evaluation."""

_METRICS: tuple[str, ...] = ("recall_any", "recall_all", "ndcg_any")


def turn_key(session_id: str, index: int) -> str:
    """The official turn key: ``<session_id>_<index + 1>``."""
    return f"{session_id}_{index + 1}"


def session_of(key: str) -> str:
    """The session id of a turn key ``<session_id>_<n>``."""
    return key.rpartition("_")[0]


def official_dcg(relevances: Sequence[float]) -> float:
    """DCG as the official evaluation computes it: rank 1 weighs 1, rank r >= 2 weighs ``1/log2(r)``."""
    total = 0.0
    for rank, rel in enumerate(relevances, start=1):
        if rel:
            total += rel if rank == 1 else rel / math.log2(rank)
    return total


def _empty_gold(ks: Iterable[int], empty_gold: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in ks:
        if empty_gold == "official":
            # What the official script yields for an empty gold list: any([]) / all([]) / ideal DCG 0.
            out[f"recall_any@{k}"], out[f"recall_all@{k}"], out[f"ndcg_any@{k}"] = 0.0, 1.0, 0.0
        else:
            out[f"recall_any@{k}"] = out[f"recall_all@{k}"] = out[f"ndcg_any@{k}"] = math.nan
    return out


def score_ranking(
    ranked: Sequence[Collection[str]],
    gold: Collection[str],
    *,
    n_relevant: int | None = None,
    ks: Iterable[int] = RETRIEVAL_KS,
    empty_gold: str = "skip",
) -> dict[str, float]:
    """Official ``recall_any@k``, ``recall_all@k`` and ``ndcg_any@k`` of one ranking.

    Args:
        ranked: for each retrieved item, best first, the keys it covers (its
            provenance mapped to the level being scored).
        gold: the gold keys.
        n_relevant: relevant items in the whole corpus, for the ideal DCG
            (default ``len(gold)``); raised to the relevant items ranked when
            a system returns more (merged or duplicated memories).
        ks: cut-offs.
        empty_gold: ``"skip"`` (NaN when gold is empty) or ``"official"``.
    """
    gold_set = set(gold)
    if not gold_set:
        return _empty_gold(ks, empty_gold)
    rel = [1.0 if gold_set.intersection(keys) else 0.0 for keys in ranked]
    n_ideal = max(n_relevant if n_relevant is not None else len(gold_set), int(sum(rel)))
    out: dict[str, float] = {}
    for k in ks:
        covered: set[str] = set()
        for keys in ranked[:k]:
            covered.update(gold_set.intersection(keys))
        ideal = official_dcg([1.0] * min(k, n_ideal))
        out[f"recall_any@{k}"] = float(bool(covered))
        out[f"recall_all@{k}"] = float(covered == gold_set)
        out[f"ndcg_any@{k}"] = official_dcg(rel[:k]) / ideal if ideal else 0.0
    return out


def score_turn2session(
    ranked_sessions: Sequence[Collection[str]],
    gold_sessions: Collection[str],
    *,
    n_relevant: int,
    ks: Iterable[int] = RETRIEVAL_KS,
    empty_gold: str = "skip",
) -> dict[str, float]:
    """Session-level figures of a turn-level ranking, as the official ``turn2session``.

    Each cut-off k grows to the shortest prefix that covers k distinct
    sessions (or the whole ranking); recall is over the sessions covered;
    nDCG keeps one relevance per ranked item (a turn of a gold session is
    relevant), with the ideal DCG over the ``n_relevant`` corpus items that
    belong to gold sessions.

    Args:
        ranked_sessions: for each ranked item, the sessions of its provenance.
        gold_sessions: gold session ids.
        n_relevant: corpus items (ingested turns) that belong to gold sessions.
        ks: cut-offs.
        empty_gold: ``"skip"`` or ``"official"``.
    """
    gold_set = set(gold_sessions)
    if not gold_set:
        return _empty_gold(ks, empty_gold)
    rel = [1.0 if gold_set.intersection(keys) else 0.0 for keys in ranked_sessions]
    n_ideal = max(n_relevant, int(sum(rel)))
    # first_reach[j]: prefix length at which j + 1 distinct sessions are covered.
    first_reach: list[int] = []
    seen: set[str] = set()
    for pos, keys in enumerate(ranked_sessions, start=1):
        for key in keys:
            if key not in seen:
                seen.add(key)
                first_reach.append(pos)
    out: dict[str, float] = {}
    for k in ks:
        eff = max(k, first_reach[k - 1]) if k <= len(first_reach) else max(k, len(ranked_sessions))
        covered: set[str] = set()
        for keys in ranked_sessions[:eff]:
            covered.update(gold_set.intersection(keys))
        ideal = official_dcg([1.0] * min(eff, n_ideal))
        out[f"recall_any@{k}"] = float(bool(covered))
        out[f"recall_all@{k}"] = float(covered == gold_set)
        out[f"ndcg_any@{k}"] = official_dcg(rel[:eff]) / ideal if ideal else 0.0
    return out


def _nan(columns: Iterable[str]) -> dict[str, float]:
    return dict.fromkeys(columns, math.nan)


@dataclass(frozen=True, slots=True)
class TurnScorer:
    """Official turn-level ``turn_recall_any@k``, ``turn_recall_all@k``, ``turn_ndcg_any@k``.

    Scores the provenance of the ranking against the question's evidence (the
    gold user-turn keys); NaN for an excluded question and for a run at
    session granularity (it has no turn ranking).
    """

    name: str = "lme_turn"

    def columns(self, ks: Sequence[int]) -> list[str]:
        """One column per metric and cut-off."""
        return [f"turn_{m}@{k}" for k in ks for m in _METRICS]

    def score(self, question: Question, retrieved: Sequence[Retrieved], *, ks: Sequence[int]) -> dict[str, Any]:
        """The official figures of one ranking."""
        extra = question.extra
        if question.excluded is not None or extra.get("granularity", "turn") != "turn":
            return _nan(self.columns(ks))
        scores = score_ranking(
            [m.source_turn_ids for m in retrieved], question.evidence, ks=ks, empty_gold=extra.get("empty_gold", "skip")
        )
        return {f"turn_{name}": v for name, v in scores.items()}


@dataclass(frozen=True, slots=True)
class SessionScorer:
    """Official session-level ``session_recall_any@k``, ``session_recall_all@k``, ``session_ndcg_any@k``.

    At session granularity the ranking is of sessions (``score_ranking``); at
    turn granularity the session figures of the turn ranking
    (``score_turn2session``), which grow a cut-off until it covers k distinct
    sessions. When the fetched list is shorter than the system's store and
    covers fewer than k sessions, the official figure depends on memories
    that were not fetched: that cut-off is NaN (unscored), never a guess.
    Fetch deeper (``retrieve_k``) to score it.
    """

    name: str = "lme_session"

    def columns(self, ks: Sequence[int]) -> list[str]:
        """One column per metric and cut-off."""
        return [f"session_{m}@{k}" for k in ks for m in _METRICS]

    def score(self, question: Question, retrieved: Sequence[Retrieved], *, ks: Sequence[int]) -> dict[str, Any]:
        """The official session-level figures of one ranking."""
        if question.excluded is not None:
            return _nan(self.columns(ks))
        extra = question.extra
        gold = extra.get("gold_sessions", ())
        empty_gold = extra.get("empty_gold", "skip")
        if extra.get("granularity", "turn") == "session":
            scores = score_ranking([m.source_turn_ids for m in retrieved], gold, ks=ks, empty_gold=empty_gold)
            return {f"session_{name}": v for name, v in scores.items()}
        # A memory's sessions, in provenance order, without repeats.
        ranked = [tuple(dict.fromkeys(session_of(t) for t in m.source_turn_ids)) for m in retrieved]
        scores = score_turn2session(
            ranked, gold, n_relevant=int(extra.get("n_gold_items", 0)), ks=ks, empty_gold=empty_gold
        )
        # Fewer memories than max(ks) came back only when the store ran out: the ranking is whole.
        truncated = len(retrieved) < int(extra.get("n_items", 0)) and len(retrieved) >= max(ks, default=0)
        if gold and truncated:
            covered = len({sid for sids in ranked for sid in sids})
            for k in ks:
                if k > covered:
                    for m in _METRICS:
                        scores[f"{m}@{k}"] = math.nan
        return {f"session_{name}": v for name, v in scores.items()}
