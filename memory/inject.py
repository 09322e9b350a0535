"""Effect injection: run any system with a known learning effect added.

``InjectedEffect`` (registered as ``control-inject``) wraps a registered
system. For each question, with a probability that rises linearly over the
run, an oracle puts one gold evidence turn the inner system missed at the top
of its results. The injected effect is known, so a run shows whether the
halves comparison finds it and how big it reads.

The gold side channel
---------------------
Memory systems never see gold. Instruments are the one exception, and the
engine decides who is one: a system gets gold only when its registered name
starts with ``INSTRUMENT_PREFIX`` (``control-``) *and* it has the
``GoldOracle`` method ``oracle``. The harness then calls ``oracle(question_id,
evidence, user_id=..., t_days=...)`` immediately before ``retrieve`` for that
question; nothing else receives it. A normal system that happened to define
``oracle`` gets nothing, and neither does a ``control-`` system without it.
``probe`` never uses the gold: the oracle acts on ``retrieve`` alone.

The same injection on recorded rows
-----------------------------------
``inject_rows`` applies the identical rule to a run's probe rows (the
inner system's recorded provenance), so power can be estimated by simulation
without replaying retrieval. Each question's coin is a keyed hash of its id
(``unit_hash(seed, question_id)``), so the engine wrapper and ``inject_rows``
decide every question alike; for an inner system that ignores feedback (naive)
the two give identical scores.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memsim.memory.base import MemoryStats, Retrieved, Turn, render_turn
from memsim.memory.registration import Registration

if TYPE_CHECKING:
    import polars as pl

    from memsim.memory.base import MemorySystem
    from memsim.memory.resources import Resources

__all__ = [
    "INSTRUMENT_PREFIX",
    "ORACLE_ID_PREFIX",
    "GoldOracle",
    "unit_hash",
    "receives_gold",
    "InjectedEffect",
    "oracle_probability",
    "promote_gold",
    "inject_rows",
]

INSTRUMENT_PREFIX = "control-"
"""Registered names of instruments start with this; only they may receive gold."""
ORACLE_ID_PREFIX = "oracle:"
"""Memory ids of oracle-promoted results start with this."""


def unit_hash(salt: int, key: str) -> float:
    """A number in [0, 1) fixed by ``salt`` and ``key`` (the same in every process)."""
    digest = hashlib.sha256(f"{salt}\x1f{key}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


@runtime_checkable
class GoldOracle(Protocol):
    """The side channel through which the engine hands gold evidence to an instrument."""

    def oracle(self, question_id: str, evidence: tuple[str, ...], *, user_id: str, t_days: float) -> None:
        """Gold evidence turn ids of the question about to be retrieved for, and the run's clock in days."""
        ...


def receives_gold(name: str, system: object) -> bool:
    """Whether the engine hands gold to ``system`` built from registered ``name``."""
    return name.startswith(INSTRUMENT_PREFIX) and isinstance(system, GoldOracle)


def oracle_probability(t_days: float, p_end: float, span_days: float) -> float:
    """Probability that the oracle acts at ``t_days``: ``p_end x min(1, t_days / span_days)``."""
    return min(1.0, max(0.0, p_end * min(1.0, max(0.0, t_days) / span_days)))


def promote_gold(
    sources: Sequence[Sequence[str]], evidence: Sequence[str], k: int
) -> tuple[str | None, list[tuple[str, ...]]]:
    """Provenance after the oracle puts the first missed evidence turn on top.

    Args:
        sources: provenance of the inner results, best first.
        evidence: gold evidence turn ids.
        k: results returned.

    Returns:
        ``(turn promoted or None, provenance of the returned results)``. When
        every evidence turn is already among the results nothing changes.
    """
    covered = {t for s in sources for t in s}
    missed = [t for t in evidence if t not in covered]
    if not missed:
        return None, [tuple(s) for s in sources[:k]]
    gold = missed[0]
    rest = [tuple(s) for s in sources if tuple(s) != (gold,)]
    return gold, [(gold,), *rest][:k]


class InjectedEffect:
    """Any registered system with an oracle learning effect added (an instrument).

    With probability ``oracle_probability(t_days, p_end, span_days)`` (a coin
    keyed by ``seed`` and the question id) the oracle puts the first gold
    evidence turn the inner results miss at the top, as the rendered turn
    (``memory_id`` ``"oracle:<turn_id>"``); the inner results follow and the
    list is cut to ``k``. Feedback reaches the inner system with the oracle
    ids removed. Everything else is the inner system's.

    Args:
        resources: Run resources, shared with the inner system.
        inner: Registered name of the wrapped system.
        inner_args: Its arguments.
        p_end: Oracle probability reached at ``span_days`` (0..1).
        span_days: Days over which the probability rises (> 0).
        seed: Key of the per-question coins.
    """

    def __init__(
        self,
        *,
        resources: Resources,
        inner: str = "naive",
        inner_args: Mapping[str, Any] | None = None,
        p_end: float = 0.2,
        span_days: float = 180.0,
        seed: int = 0,
    ) -> None:
        if not 0 <= p_end <= 1:
            raise ValueError(f"p_end must be in [0, 1], got {p_end}")
        if not span_days > 0:
            raise ValueError(f"span_days must be positive, got {span_days}")
        if inner.startswith(INSTRUMENT_PREFIX):
            raise ValueError(f"inner must be a memory system, not the instrument {inner!r}")
        self.inner_name = inner
        self.p_end = float(p_end)
        self.span_days = float(span_days)
        self.seed = int(seed)
        self.inner: MemorySystem = resources.build(inner, inner_args)
        self._turns: dict[str, dict[str, Turn]] = {}
        self._pending: dict[str, tuple[str, tuple[str, ...], float]] = {}
        self.fired = 0
        """Questions the oracle changed."""

    def __repr__(self) -> str:
        return f"InjectedEffect(inner={self.inner_name!r}, p_end={self.p_end}, span_days={self.span_days})"

    def oracle(self, question_id: str, evidence: tuple[str, ...], *, user_id: str, t_days: float) -> None:
        """Keep the gold of the question about to be retrieved for (used by the next ``retrieve``)."""
        self._pending[user_id] = (question_id, tuple(evidence), float(t_days))

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Ingest into the inner system; keep the turns so the oracle can show them."""
        self.inner.ingest(turns, user_id=user_id, now=now)
        mine = self._turns.setdefault(user_id, {})
        for t in turns:
            mine[t.turn_id] = t

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The inner results, with a missed gold turn on top when the oracle acts."""
        got = self.inner.retrieve(query, user_id=user_id, now=now, k=k)
        pending = self._pending.pop(user_id, None)
        if pending is None:
            return got
        question_id, evidence, t_days = pending
        if unit_hash(self.seed, question_id) >= oracle_probability(t_days, self.p_end, self.span_days):
            return got
        gold, _ = promote_gold([r.source_turn_ids for r in got], evidence, k)
        turn = self._turns.get(user_id, {}).get(gold) if gold is not None else None
        if turn is None or turn.created_at > now:
            return got
        self.fired += 1
        top = max((r.score for r in got), default=0.0) + 1.0
        promoted = Retrieved(ORACLE_ID_PREFIX + turn.turn_id, render_turn(turn), top, turn.created_at, (turn.turn_id,))
        rest = [r for r in got if tuple(r.source_turn_ids) != (turn.turn_id,)]
        return [promoted, *rest][:k]

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The inner system's probe: the oracle neither acts nor tosses its coin.

        A pending oracle call stays for the next ``retrieve`` and ``fired``
        does not move, so measuring the instrument never changes the effect
        it injects.
        """
        return self.inner.probe(query, user_id=user_id, now=now, k=k)

    def feedback(
        self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime
    ) -> None:
        """Pass the signal on, without the oracle's ids."""
        own = [m for m in retrieved if not m.startswith(ORACLE_ID_PREFIX)]
        self.inner.feedback(question_id, own, correct, user_id=user_id, now=now)

    def maintain(self, *, now: datetime) -> None:
        """Maintain the inner system."""
        self.inner.maintain(now=now)

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Forget in the inner system and drop the turns the oracle could show."""
        self.inner.forget(turn_ids, user_id=user_id, now=now)
        mine = self._turns.get(user_id)
        if mine is not None:
            for t in turn_ids:
                mine.pop(t, None)
            if not mine:
                del self._turns[user_id]

    def stats(self) -> MemoryStats:
        """The inner system's figures (the oracle's turn copies are the instrument's, not the system's)."""
        return self.inner.stats()

    def report(self) -> dict[str, Any]:
        """How often the oracle acted, and its settings."""
        return {"inner": self.inner_name, "p_end": self.p_end, "span_days": self.span_days, "fired": self.fired}


def inject_rows(
    probes: pl.DataFrame,
    *,
    system: str,
    p_end: float,
    span_days: float,
    seed: int,
    k: int,
    metric: str,
    label: str | None = None,
) -> pl.DataFrame:
    """``system``'s probe rows as ``InjectedEffect`` around it would have scored them.

    Only the ``metric`` column is recomputed, as recall_all at ``k`` (every
    gold turn in the provenance of the top ``k``), from each row's
    ``retrieved_sources`` and ``evidence_ids``; pass the run's
    ``recall_all@k`` column. Exact for an inner system that ignores feedback;
    for a learning one it leaves out that the oracle's help would also change
    the feedback it learns from.

    Args:
        probes: probe rows of a run.
        system: label of the system to inject into.
        p_end: oracle probability reached at ``span_days``.
        span_days: days over which it rises.
        seed: key of the per-question coins.
        k: results per question in that run.
        metric: the score column to recompute (the run's ``recall_all@k``).
        label: system label of the returned rows (default ``"<system>+inject"``).

    Returns:
        The system's rows with ``system`` relabelled and ``metric`` updated.

    Raises:
        UserError: the rows lack ``metric`` or a column the injection reads.
    """
    import polars as pl

    from memsim.core.errors import UserError

    missing = [c for c in ("question_id", "t_days", "retrieved_sources", "evidence_ids", metric) if c not in probes.columns]
    if missing:
        raise UserError(f"probes: no column(s) {', '.join(map(repr, missing))} to inject an effect into")
    rows = probes.filter(pl.col("system") == system)
    qids = rows["question_id"].to_list()
    t_days = rows["t_days"].to_list()
    sources = rows["retrieved_sources"].to_list()
    evidence = rows["evidence_ids"].to_list()
    old = rows[metric].cast(pl.Float64).to_numpy()
    new = old.copy()
    for i, (qid, t, src, ev) in enumerate(zip(qids, t_days, sources, evidence, strict=True)):
        if not ev or unit_hash(seed, qid) >= oracle_probability(t, p_end, span_days):
            continue
        gold, after = promote_gold(src or [], ev, k)
        if gold is None:
            continue
        covered = {x for s in after for x in s}
        new[i] = 1.0 if all(x in covered for x in ev) else 0.0
    return rows.with_columns(
        pl.lit(label or f"{system}+inject").alias("system"), pl.Series(metric, new, dtype=pl.Float64)
    )


REGISTRATIONS = (
    Registration(
        "control-inject",
        InjectedEffect,
        description="instrument: any system (inner=NAME) plus an oracle that puts missed gold on top, p rising over time",
        learns=None,
        role="instrument",
    ),
)
"""The instrument this module registers (``memsim.memory.registry.BUILTIN_MODULES``)."""
