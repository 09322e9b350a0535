"""memsim's daily-decay neuroplastic variant (``neuroplastic-daily-decay``).

The default ``neuroplastic`` is the published mechanism
(``memsim.memory.neuroplastic_published``). This module keeps memsim's earlier port,
registered as ``neuroplastic-daily-decay``, with its behaviour unchanged. It
differs from the published system in: every turn is stored (no write gate);
weights decay at every ``maintain`` (memsim's daily tick) rather than every
10 questions, and the extra decay of never-retrieved memories (a memory
counts as retrieved once any ``retrieve`` returned it) runs at every tick
too; the weight cap is 2.0 and the candidate pool 50; co-retrievals are
counted on correct answers only, over the first 10 ids, and a link adds a
fixed bonus to the neighbour's own score; each new memory inhibits, at
ingest, every older memory from another session among its 5 nearest above
the threshold (any speaker); near-duplicates are merged into one memory
(union of provenance, the originals deleted); the past-state cues are four
("used to", "originally", "before", "previously").

Four mechanisms, each switchable so that every ablation is one flag away:

- ``ltp`` (retrieval strengthening): memories retrieved for a question that
  was then answered correctly get ``weight *= ltp_factor`` (capped at
  ``weight_cap``); every ``maintain`` multiplies all weights by ``decay``
  (never below ``weight_floor``).
- ``associations``: memories retrieved together for a correct answer count
  a co-retrieval per pair; after ``link_after`` co-retrievals the pair is
  linked, and retrieval adds the linked neighbours of its top results with a
  ``link_bonus``.
- ``inhibition`` (belief revision): a new memory with cosine above
  ``revision_threshold`` to an older memory from a different session
  inhibits it (``+inhibition_step``, capped at ``inhibition_cap``): the newer
  statement supersedes the older. Queries with past-state cues ("used to",
  "originally", "before", "previously") lift ``past_cue_relief`` of the
  inhibition, since they ask for the old state.
- ``consolidation`` on ``maintain``: near-duplicates (cosine above
  ``merge_threshold``) merge into one memory whose provenance is the union of
  theirs; never-retrieved memories decay by an extra ``unretrieved_decay``;
  with ``abstractions=True``, clusters of related memories also get an
  abstraction memory whose provenance is its members.

The ranking score is ``cosine x weight x (1 - inhibition)`` (+ the link
bonus). The feedback loop is the learning signal: the engine calls
``feedback`` with the ids it retrieved and whether the answer was correct.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from memsim.memory.base import Memory, MemoryStats, PerUserTally, Retrieved, Turn, render_turn
from memsim.memory.dense import DenseIndex, parse_memory_id
from memsim.memory.registration import Registration
from memsim.core.errors import UserError

if TYPE_CHECKING:
    from memsim.memory.resources import Resources

__all__ = ["DailyDecayNeuroplasticMemory", "NeuroplasticMemory", "has_past_cue"]

_PAST_CUE = re.compile(r"\b(?:used to|originally|before|previously)\b", re.IGNORECASE)


def has_past_cue(query: str) -> bool:
    """Whether ``query`` asks about a past state ("used to", "originally", "before", "previously")."""
    return _PAST_CUE.search(query) is not None


class _User:
    """Everything the mechanisms keep for one user, by memory id."""

    __slots__ = ("weight", "inhibition", "hits", "session", "abstract", "co", "links", "fresh")

    def __init__(self) -> None:
        self.weight: dict[int, float] = {}
        self.inhibition: dict[int, float] = {}
        self.hits: dict[int, int] = {}
        self.session: dict[int, str] = {}
        self.abstract: set[int] = set()
        self.co: dict[tuple[int, int], int] = {}
        self.links: dict[int, set[int]] = {}
        # Memories not yet checked for merging by consolidation.
        self.fresh: set[int] = set()

    def add(self, i: int, session: str, *, weight: float = 1.0, inhibition: float = 0.0, hits: int = 0) -> None:
        self.weight[i] = weight
        self.inhibition[i] = inhibition
        self.hits[i] = hits
        self.session[i] = session

    def drop(self, ids: Collection[int]) -> None:
        gone = set(ids)
        for i in gone:
            self.weight.pop(i, None)
            self.inhibition.pop(i, None)
            self.hits.pop(i, None)
            self.session.pop(i, None)
            self.abstract.discard(i)
            self.fresh.discard(i)
            for j in self.links.pop(i, set()):
                peers = self.links.get(j)
                if peers is not None:
                    peers.discard(i)
                    if not peers:
                        del self.links[j]
        if gone:
            self.co = {p: n for p, n in self.co.items() if p[0] not in gone and p[1] not in gone}


def _state_bytes(u: _User) -> int:
    """One user's plasticity state in bytes: weight, inhibition (float64) and hits (int64) per memory
    with its session id; two ids and a count per co-retrieval pair; a link per linked neighbour."""
    return 24 * len(u.weight) + sum(len(s) for s in u.session.values()) + 24 * len(u.co) + 8 * sum(
        len(v) for v in u.links.values()
    )


class DailyDecayNeuroplasticMemory:
    """Every turn stored; ranking and contents adapt through feedback and maintenance.

    See the module docstring for the four mechanisms. Defaults: all four on;
    ``ltp_factor=1.05``, ``weight_cap=2.0``, ``decay=0.99``,
    ``weight_floor=0.1``; ``link_after=3``, ``link_bonus=0.05``,
    ``link_top=10``; ``revision_threshold=0.85``, ``inhibition_step=0.7``,
    ``inhibition_cap=0.95``, ``past_cue_relief=0.7``,
    ``revision_neighbors=5``; ``merge_threshold=0.92``,
    ``unretrieved_decay=0.95``, ``abstractions=False``,
    ``abstraction_threshold=0.75``, ``abstraction_min_size=3``,
    ``abstraction_max_size=8``; ``candidates=50`` memories re-scored per
    retrieval.
    """

    def __init__(
        self,
        *,
        resources: Resources,
        ltp: bool = True,
        associations: bool = True,
        inhibition: bool = True,
        consolidation: bool = True,
        ltp_factor: float = 1.05,
        weight_cap: float = 2.0,
        decay: float = 0.99,
        weight_floor: float = 0.1,
        link_after: int = 3,
        link_bonus: float = 0.05,
        link_top: int = 10,
        revision_threshold: float = 0.85,
        inhibition_step: float = 0.7,
        inhibition_cap: float = 0.95,
        past_cue_relief: float = 0.7,
        revision_neighbors: int = 5,
        merge_threshold: float = 0.92,
        unretrieved_decay: float = 0.95,
        abstractions: bool = False,
        abstraction_threshold: float = 0.75,
        abstraction_min_size: int = 3,
        abstraction_max_size: int = 8,
        candidates: int = 50,
    ) -> None:
        """Make an empty memory that embeds with ``resources.embedder``."""
        for name, value in (("decay", decay), ("unretrieved_decay", unretrieved_decay)):
            if not 0.0 < value <= 1.0:
                raise UserError(f"neuroplastic: {name} must be in (0, 1], got {value!r}")
        for name, value in (("inhibition_cap", inhibition_cap), ("past_cue_relief", past_cue_relief)):
            if not 0.0 <= value <= 1.0:
                raise UserError(f"neuroplastic: {name} must be in [0, 1], got {value!r}")
        for name, value in (
            ("link_after", link_after),
            ("link_top", link_top),
            ("revision_neighbors", revision_neighbors),
            ("abstraction_min_size", abstraction_min_size),
            ("abstraction_max_size", abstraction_max_size),
            ("candidates", candidates),
        ):
            if not isinstance(value, int) or value < 1:
                raise UserError(f"neuroplastic: {name} must be a positive integer, got {value!r}")
        if ltp_factor < 1.0 or weight_cap < 1.0 or not 0.0 < weight_floor <= 1.0:
            raise UserError(
                "neuroplastic: need ltp_factor >= 1, weight_cap >= 1 and weight_floor in (0, 1], "
                f"got {ltp_factor!r}, {weight_cap!r}, {weight_floor!r}"
            )
        self.ltp = bool(ltp)
        self.associations = bool(associations)
        self.inhibition = bool(inhibition)
        self.consolidation = bool(consolidation)
        self.ltp_factor = float(ltp_factor)
        self.weight_cap = float(weight_cap)
        self.decay = float(decay)
        self.weight_floor = float(weight_floor)
        self.link_after = int(link_after)
        self.link_bonus = float(link_bonus)
        self.link_top = int(link_top)
        self.revision_threshold = float(revision_threshold)
        self.inhibition_step = float(inhibition_step)
        self.inhibition_cap = float(inhibition_cap)
        self.past_cue_relief = float(past_cue_relief)
        self.revision_neighbors = int(revision_neighbors)
        self.merge_threshold = float(merge_threshold)
        self.unretrieved_decay = float(unretrieved_decay)
        self.abstractions = bool(abstractions)
        self.abstraction_threshold = float(abstraction_threshold)
        self.abstraction_min_size = int(abstraction_min_size)
        self.abstraction_max_size = int(abstraction_max_size)
        self.candidates = int(candidates)
        self._embedder = resources.embedder
        self._rng = resources.rng.spawn(1)[0]
        self._index = DenseIndex(self._embedder.dim)
        self._users: dict[str, _User] = {}
        self._meta = PerUserTally()
        self._counts = {"merges": 0, "merged_memories": 0, "inhibitions": 0, "links": 0, "strengthened": 0}

    def _user(self, user_id: str) -> _User:
        u = self._users.get(user_id)
        if u is None:
            u = self._users[user_id] = _User()
        return u

    # -- ingest: belief revision -----------------------------------------------

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Store every turn; with ``inhibition``, newer statements inhibit older similar ones."""
        self._meta.touch(user_id)
        if not turns:
            return
        u = self._user(user_id)
        texts = [render_turn(t) for t in turns]
        vecs = self._embedder.encode(texts)
        for turn, text, vec in zip(turns, texts, vecs, strict=True):
            if self.inhibition and self._index.count(user_id):
                for j, cos in self._index.search(user_id, vec, self.revision_neighbors):
                    if (
                        cos > self.revision_threshold
                        and j not in u.abstract
                        and u.session[j] != turn.session_id
                        and self._index.get(user_id, j).created_at <= turn.created_at
                    ):
                        u.inhibition[j] = min(self.inhibition_cap, u.inhibition[j] + self.inhibition_step)
                        self._counts["inhibitions"] += 1
            (i,) = self._index.add(user_id, [Memory("", text, turn.created_at, (turn.turn_id,))], vec[None, :])
            u.add(i, turn.session_id)
            u.fresh.add(i)

    def bulk_load(self, turns: Sequence[Turn], *, user_id: str, vectors: np.ndarray | None = None) -> None:
        """Store ``turns`` without belief revision (snapshots, large benchmark stores).

        Args:
            turns: the turns to store.
            user_id: whose memories they become.
            vectors: unit vectors of ``render_turn(turn)``, one per turn;
                embedded with the run's embedder when None.
        """
        self._meta.touch(user_id)
        if not turns:
            return
        u = self._user(user_id)
        texts = [render_turn(t) for t in turns]
        vecs = self._embedder.encode(texts) if vectors is None else np.asarray(vectors, dtype=np.float32)
        new = self._index.add(
            user_id, [Memory("", x, t.created_at, (t.turn_id,)) for t, x in zip(turns, texts, strict=True)], vecs
        )
        for i, t in zip(new, turns, strict=True):
            u.add(i, t.session_id)
            u.fresh.add(i)

    # -- retrieval -----------------------------------------------------------------

    def _score(self, u: _User, i: int, cos: float, relief: float) -> float:
        inh = u.inhibition[i] * relief if self.inhibition else 0.0
        return cos * u.weight[i] * (1.0 - inh)

    def _rank(self, query: str, *, user_id: str, now: datetime, k: int) -> list[tuple[int, float]]:
        """Top ``k`` ``(id, score)`` at this moment; reads the mechanisms' state, changes none of it."""
        if not self._index.count(user_id) or k <= 0:
            return []
        u = self._users[user_id]
        q = self._embedder.encode_one(query)
        relief = 1.0 - self.past_cue_relief if has_past_cue(query) else 1.0
        hits = self._index.search(user_id, q, max(k, self.candidates), now=now)
        scores = {i: self._score(u, i, cos, relief) for i, cos in hits}
        if self.associations and u.links:
            seeds = sorted(scores, key=lambda i: (-scores[i], i))[:k]
            neighbours = sorted({j for i in seeds for j in u.links.get(i, ())})
            for j in neighbours:
                if self._index.get(user_id, j).created_at > now:
                    continue
                if j not in scores:
                    cos = float(np.dot(q, self._index.vector(user_id, j)))
                    scores[j] = self._score(u, j, cos, relief)
                scores[j] += self.link_bonus
        top = sorted(scores, key=lambda i: (-scores[i], i))[:k]
        return [(i, scores[i]) for i in top]

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Top ``k`` by ``cosine x weight x (1 - inhibition)``, plus linked neighbours' bonus.

        Each memory returned counts a hit, which spares it the decay of
        never-retrieved memories in consolidation.
        """
        self._meta.touch(user_id)
        top = self._rank(query, user_id=user_id, now=now, k=k)
        if top:
            hits = self._users[user_id].hits
            for i, _ in top:
                hits[i] += 1
        return [self._index.retrieved(user_id, i, s) for i, s in top]

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The ranking ``retrieve`` gives at this moment, without counting hits."""
        return [self._index.retrieved(user_id, i, s) for i, s in self._rank(query, user_id=user_id, now=now, k=k)]

    # -- learning ------------------------------------------------------------------

    def feedback(
        self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime
    ) -> None:
        """Strengthen and co-link the memories that served a correct answer."""
        self._meta.touch(user_id)
        u = self._users.get(user_id)
        if u is None or not correct:
            return
        ids: list[int] = []
        for mid in retrieved:
            i = parse_memory_id(mid)
            # Ids of other users or of forgotten memories are ignored, never an error.
            if i is not None and i in u.weight and i not in ids:
                ids.append(i)
        if self.ltp:
            for i in ids:
                u.weight[i] = min(self.weight_cap, u.weight[i] * self.ltp_factor)
                self._counts["strengthened"] += 1
        if self.associations:
            top = ids[: self.link_top]
            for a_pos, a in enumerate(top):
                for b in top[a_pos + 1 :]:
                    pair = (a, b) if a < b else (b, a)
                    n = u.co.get(pair, 0) + 1
                    u.co[pair] = n
                    if n == self.link_after:
                        u.links.setdefault(a, set()).add(b)
                        u.links.setdefault(b, set()).add(a)
                        self._counts["links"] += 1

    # -- maintenance ---------------------------------------------------------------

    def maintain(self, *, now: datetime) -> None:
        """Decay weights (``ltp``); merge, decay unused and abstract (``consolidation``)."""
        self._meta.touch_all(self._users)
        for user_id in sorted(self._users):
            u = self._users[user_id]
            if self.ltp:
                for i, w in u.weight.items():
                    u.weight[i] = max(self.weight_floor, w * self.decay)
            if self.consolidation:
                self._merge_duplicates(user_id, u)
                for i, n in u.hits.items():
                    if n == 0:
                        u.weight[i] = max(self.weight_floor, u.weight[i] * self.unretrieved_decay)
                if self.abstractions:
                    self._abstract(user_id, u)
            u.fresh.clear()

    def _merge_duplicates(self, user_id: str, u: _User) -> None:
        parent: dict[int, int] = {}

        def find(x: int) -> int:
            while parent.get(x, x) != x:
                x = parent[x]
            return x

        for i in sorted(u.fresh):
            if i in u.abstract or not self._index.has(user_id, i):
                continue
            for j, cos in self._index.search(user_id, self._index.vector(user_id, i), 8):
                if j != i and cos > self.merge_threshold and j not in u.abstract:
                    ri, rj = find(i), find(j)
                    if ri != rj:
                        parent[max(ri, rj)] = min(ri, rj)
        groups: dict[int, list[int]] = {}
        for x in parent:
            groups.setdefault(find(x), []).append(x)
        for root in sorted(groups):
            members = sorted(set(groups[root]) | {root})
            self._merge(user_id, u, members)

    def _merge(self, user_id: str, u: _User, members: list[int]) -> None:
        recs = sorted((self._index.get(user_id, i) for i in members), key=lambda m: (m.created_at, m.memory_id))
        newest = max(members, key=lambda i: (self._index.get(user_id, i).created_at, i))
        texts: list[str] = []
        sources: list[str] = []
        for m in recs:
            if m.text not in texts:
                texts.append(m.text)
            sources.extend(t for t in m.source_turn_ids if t not in sources)
        vec = np.mean([self._index.vector(user_id, i) for i in members], axis=0)
        vec /= max(float(np.linalg.norm(vec)), 1e-12)
        merged = Memory("", "\n".join(texts), recs[-1].created_at, tuple(sources))
        links = set().union(*(u.links.get(i, set()) for i in members)) - set(members)
        weight = max(u.weight[i] for i in members)
        hits = sum(u.hits[i] for i in members)
        inhibition, session = u.inhibition[newest], u.session[newest]
        u.drop(members)
        self._index.remove(user_id, members)
        (new,) = self._index.add(user_id, [merged], vec[None, :])
        u.add(new, session, weight=weight, inhibition=inhibition, hits=hits)
        for j in sorted(links):
            u.links.setdefault(new, set()).add(j)
            u.links.setdefault(j, set()).add(new)
        self._counts["merges"] += 1
        self._counts["merged_memories"] += len(members)

    def _abstract(self, user_id: str, u: _User) -> None:
        # Abstractions are rebuilt from the current memories on each pass.
        old = sorted(u.abstract)
        u.drop(old)
        self._index.remove(user_id, old)
        pool = [i for i in self._index.ids(user_id)]
        order = self._rng.permutation(len(pool))
        taken: set[int] = set()
        for pos in order:
            seed = pool[int(pos)]
            if seed in taken:
                continue
            near = self._index.search(user_id, self._index.vector(user_id, seed), self.abstraction_max_size + 1)
            members = [j for j, cos in near if j not in taken and (j == seed or cos >= self.abstraction_threshold)]
            if seed not in members:
                members.insert(0, seed)
            members = members[: self.abstraction_max_size]
            if len(members) < self.abstraction_min_size:
                continue
            taken.update(members)
            recs = sorted((self._index.get(user_id, j) for j in members), key=lambda m: (m.created_at, m.memory_id))
            sources: list[str] = []
            for m in recs:
                sources.extend(t for t in m.source_turn_ids if t not in sources)
            vec = np.mean([self._index.vector(user_id, j) for j in members], axis=0)
            vec /= max(float(np.linalg.norm(vec)), 1e-12)
            text = "Related memories:\n" + "\n".join(m.text for m in recs)
            (a,) = self._index.add(user_id, [Memory("", text, recs[-1].created_at, tuple(sources))], vec[None, :])
            u.add(a, u.session[members[-1]])
            u.abstract.add(a)

    # -- deletion and accounting ---------------------------------------------------

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Remove every memory whose provenance meets ``turn_ids`` (merged and abstractions too)."""
        self._meta.touch(user_id)
        gone = self._index.derived(user_id, turn_ids)
        if not gone:
            return
        self._users[user_id].drop(gone)
        self._index.remove(user_id, gone)

    def stats(self) -> MemoryStats:
        """Memories held; weights, inhibition, counters and links counted as metadata."""
        return self._index.stats().with_metadata(self._meta.total(self._users, _state_bytes))

    def report(self) -> dict[str, Any]:
        """Mechanism counters for a run's metrics.

        Returns:
            ``merges``, ``merged_memories``, ``inhibitions``, ``links``,
            ``strengthened`` (cumulative), plus ``abstractions``,
            ``inhibited_now`` and ``mean_weight`` over the memories held.
        """
        weights = [w for u in self._users.values() for w in u.weight.values()]
        out: dict[str, Any] = dict(self._counts)
        out["abstractions"] = sum(len(u.abstract) for u in self._users.values())
        out["inhibited_now"] = sum(1 for u in self._users.values() for v in u.inhibition.values() if v > 0)
        out["mean_weight"] = float(np.mean(weights)) if weights else float("nan")
        return out


NeuroplasticMemory = DailyDecayNeuroplasticMemory
"""The daily-decay variant under its earlier class name (the registered ``neuroplastic`` is
``memsim.memory.neuroplastic_published.PublishedNeuroplasticMemory``)."""


REGISTRATIONS = (
    Registration(
        "neuroplastic-daily-decay",
        DailyDecayNeuroplasticMemory,
        description="memsim's earlier port: every turn stored, decay at every daily tick, merges that delete",
    ),
)
"""The system this module registers (``memsim.memory.registry.BUILTIN_MODULES``)."""
