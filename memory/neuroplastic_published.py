"""Neuroplastic memory as published: four plasticity mechanisms on top of the multi-signal gate.

This is the default ``neuroplastic``. It stores what its write gate stores
(the multi-signal gate by default) and adapts the ranking of those memories
through four mechanisms, each switchable for the published ablations:

- ``ltp`` (strengthening and decay): on a correct answer every memory that
  was retrieved for it gets ``weight *= 1 + ltp_boost`` (capped at
  ``weight_cap``); every ``decay_every`` questions of a user all of that
  user's weights are multiplied by ``decay`` (never below ``weight_floor``).
  The periodic decay belongs to this mechanism, so ``ltp=False`` stops both;
  ``strengthen=False`` stops the boost but keeps the decay, which separates
  learning from feedback from ageing.
- ``associations`` (Hebbian links): every feedback, right or wrong, counts a
  co-retrieval for each pair of memories retrieved together; a pair with at
  least ``link_after`` co-retrievals is linked. At retrieval the linked
  neighbours of the top ``expand_top`` candidates that are not already among
  the candidates are added, scored ``link_bonus x count``.
- ``inhibition`` (belief revision): one pass over new memories in which an
  older memory of the same speaker gets ``+inhibition_step`` (capped at
  ``inhibition_cap``) when a later memory from a different session, among
  the later one's ``revision_neighbors`` nearest, has cosine above
  ``revision_threshold``; each memory is revised at most once. Queries
  with a past-state cue (whole words: "used to", "originally", "before", ...)
  see only ``1 - past_cue_relief`` of any inhibition.
- ``consolidation``: near-duplicates of the same speaker (cosine above
  ``merge_threshold``, among a new memory's ``merge_neighbors`` nearest)
  are merged by inhibiting the loser (the lower weight; the older on a tie)
  by ``inhibition_step``; nothing is deleted. Memories never strengthened
  decay by an extra ``unretrieved_decay`` once per consolidation (a user's
  consolidation runs at a ``maintain`` that finds memories stored since the
  last one). With ``abstractions`` (on, as the published code runs them),
  each new memory whose speaker has at least ``abstraction_min_size - 1``
  other memories not yet in a cluster with cosine of at least
  ``abstraction_threshold`` among its ``abstraction_neighbors`` nearest forms
  a cluster with them: an abstraction memory is added whose vector is the
  members' normalised centroid, whose weight is ``abstraction_weight``,
  whose text is a fixed template over the members' texts, and whose
  provenance is the union of theirs (so forgetting a member's turn removes it).
- ``inhibition_fixed`` (the published "inhibition only" mode): instead of
  the stepped revision, every older memory of the speaker above
  ``revision_threshold`` to a later one is set to this inhibition (once
  set, it stays), whatever their sessions.

Ranking: the ``candidate_factor x k`` nearest memories by cosine are scored
``cosine x weight x (1 - inhibition)``, link neighbours are added, and the
best ``k`` are returned.

How the published loop maps onto memsim's protocol:

- "a question" is one ``retrieve`` (the engine retrieves once per question;
  ``probe`` is a measurement and is not counted). The decay clock counts
  retrieves per user, so a twin with feedback withheld ages exactly like the
  system it shadows.
- "a correct answer" is ``feedback(..., correct=True)``; "the memories
  retrieved for it" are the ids that ``feedback`` names (the engine passes
  what ``retrieve`` served).
- "never retrieved" means never strengthened (the published retrieval
  count grows only with a correct answer).
- the inhibition and consolidation passes run in ``maintain`` (the published
  code runs them once after encoding; a longitudinal run calls ``maintain``
  at every maintenance tick, and a static run acts on them only if it calls
  ``maintain`` after an episode's ingest) and examine only the memories
  stored since the last pass, each through a nearest-neighbour search of the
  vector index. Until a pass has run, memories rank by cosine alone.

Weights decay lazily: a memory keeps its weight and the user's decay counts
at the moment it was last set, and its current weight is computed when it is
read. Decay is a multiplication with a floor, so k steps at once equal k
steps one by one, and nothing costs time per memory at a question or a tick.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from memsim.memory.base import Memory, MemoryStats, PerUserTally, Retrieved, Turn, render_turn
from memsim.memory.dense import DenseIndex, parse_memory_id
from memsim.memory.gated import SurpriseMemory
from memsim.memory.neuroplastic_args import GATES, build_gate, check_args
from memsim.memory.neuroplastic_state import UserPlasticity, state_bytes
from memsim.memory.registration import Registration

if TYPE_CHECKING:
    from memsim.memory.resources import Resources

__all__ = ["PublishedNeuroplasticMemory", "PAST_STATE_CUES", "past_state_cue", "GATES", "ABSTRACTION_TEMPLATE"]

PAST_STATE_CUES: tuple[str, ...] = (
    "used to", "originally", "before", "previously", "at first",
    "initially", "back when", "former", "old", "earlier",
)
"""The published past-state cues; a query asks about a past state when one occurs as whole words."""

_PAST_RE = re.compile(r"\b(?:" + "|".join(re.escape(c) for c in PAST_STATE_CUES) + r")\b", re.IGNORECASE)
_state_bytes = state_bytes  # its earlier name, still read from here

ABSTRACTION_TEMPLATE = "Pattern across {n} related memories: {texts}"
"""memsim's wording of an abstraction's text (the published code also fills a fixed template with the members)."""

def past_state_cue(query: str) -> str | None:
    """The first past-state cue in ``query`` as whole words ("used to" yes, "refused to" no), else None."""
    m = _PAST_RE.search(query)
    return m.group(0).lower() if m else None


class PublishedNeuroplasticMemory:
    """Neuroplastic memory with the published mechanisms and defaults (see the module docstring).

    Defaults: ``gate="multisignal"`` (``gate_args`` go to the gate);
    ``ltp_boost=0.05``, ``weight_cap=5.0``, ``decay=0.99``,
    ``weight_floor=0.1``, ``decay_every=10``; ``link_after=3``,
    ``link_bonus=0.05``, ``expand_top=10``; ``revision_threshold=0.85``,
    ``inhibition_step=0.7``, ``inhibition_cap=0.95``, ``past_cue_relief=0.7``,
    ``revision_neighbors=9``; ``merge_threshold=0.92``,
    ``merge_neighbors=4``, ``unretrieved_decay=0.95``;
    ``abstractions=True``, ``abstraction_threshold=0.88``,
    ``abstraction_min_size=3``, ``abstraction_weight=1.5``,
    ``abstraction_neighbors=10``; ``inhibition_fixed=None`` (the stepped
    revision); ``candidate_factor=3``.
    """

    ABSTRACTION_PARTITION = "\0abstraction"
    """The index partition of abstractions: apart from every speaker's, so gates and passes compare turns only."""

    def __init__(
        self,
        *,
        resources: Resources,
        gate: str = "multisignal",
        gate_args: Mapping[str, Any] | None = None,
        ltp: bool = True,
        strengthen: bool = True,
        associations: bool = True,
        inhibition: bool = True,
        consolidation: bool = True,
        ltp_boost: float = 0.05,
        weight_cap: float = 5.0,
        decay: float = 0.99,
        weight_floor: float = 0.1,
        decay_every: int = 10,
        link_after: int = 3,
        link_bonus: float = 0.05,
        expand_top: int = 10,
        revision_threshold: float = 0.85,
        inhibition_step: float = 0.7,
        inhibition_cap: float = 0.95,
        past_cue_relief: float = 0.7,
        revision_neighbors: int = 9,
        merge_threshold: float = 0.92,
        merge_neighbors: int = 4,
        unretrieved_decay: float = 0.95,
        abstractions: bool = True,
        abstraction_threshold: float = 0.88,
        abstraction_min_size: int = 3,
        abstraction_weight: float = 1.5,
        abstraction_neighbors: int = 10,
        inhibition_fixed: float | None = None,
        candidate_factor: int = 3,
    ) -> None:
        """Make an empty memory; the gate is built from the registry (``gate``, ``gate_args``)."""
        check_args(locals())
        self.gate_name = gate
        self.ltp, self.strengthen = ltp, strengthen
        self.associations, self.inhibition, self.consolidation = associations, inhibition, consolidation
        self.ltp_boost, self.weight_cap = float(ltp_boost), float(weight_cap)
        self.decay, self.weight_floor, self.decay_every = float(decay), float(weight_floor), int(decay_every)
        self.link_after, self.link_bonus, self.expand_top = int(link_after), float(link_bonus), int(expand_top)
        self.revision_threshold, self.inhibition_step = float(revision_threshold), float(inhibition_step)
        self.inhibition_cap, self.past_cue_relief = float(inhibition_cap), float(past_cue_relief)
        self.revision_neighbors = int(revision_neighbors)
        self.merge_threshold, self.merge_neighbors = float(merge_threshold), int(merge_neighbors)
        self.unretrieved_decay, self.candidate_factor = float(unretrieved_decay), int(candidate_factor)
        self.abstractions, self.abstraction_threshold = abstractions, float(abstraction_threshold)
        self.abstraction_min_size, self.abstraction_weight = int(abstraction_min_size), float(abstraction_weight)
        self.abstraction_neighbors = int(abstraction_neighbors)
        self.inhibition_fixed = None if inhibition_fixed is None else float(inhibition_fixed)
        self._embedder = resources.embedder
        self._gate: SurpriseMemory | None = None if gate == "none" else build_gate(resources, gate, gate_args)
        # On a gate, the memories are the gate's own (its index, its ids): one copy of each vector and text.
        self._index = self._gate.index if self._gate is not None else DenseIndex(self._embedder.dim)
        self._users: dict[str, UserPlasticity] = {}
        self._meta = PerUserTally()
        self._counts = {
            "questions": 0, "decay_rounds": 0, "strengthened": 0, "links": 0, "expansions": 0,
            "inhibitions": 0, "merges": 0, "consolidations": 0, "abstractions": 0,
        }

    # -- weights -------------------------------------------------------------

    def _weight(self, u: UserPlasticity, i: int) -> float:
        """The current weight of ``i``: its last set weight with the decays since, floored."""
        w = u.weight[i]
        d, e = u.stamp[i]
        factor = 1.0
        if u.decays > d:
            factor *= self.decay ** (u.decays - d)
        if u.extra_decays > e and i not in u.used:
            factor *= self.unretrieved_decay ** (u.extra_decays - e)
        return w if factor == 1.0 else max(self.weight_floor, w * factor)

    def _set_weight(self, u: UserPlasticity, i: int, w: float) -> None:
        u.weight[i] = w
        u.stamp[i] = (u.decays, u.extra_decays)

    # -- ingest --------------------------------------------------------------

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Pass the turns through the gate and keep the ones it stores (weight 1, no inhibition)."""
        self._meta.touch(user_id)
        if not turns:
            return
        if self._gate is not None:
            kept = self._gate.ingest_kept(turns, user_id=user_id, now=now)
            self._register(user_id, [(i, t) for t, i in kept], fresh=True)
        else:
            self._store(list(turns), user_id, None, fresh=True)

    def bulk_load(self, turns: Sequence[Turn], *, user_id: str, vectors: np.ndarray | None = None) -> None:
        """Store ``turns`` without gating (snapshots, large benchmark stores).

        Loaded memories count as already revised and consolidated: the next
        passes compare only later memories with them.

        Args:
            turns: the turns to store.
            user_id: whose memories they become.
            vectors: unit vectors of ``render_turn(turn)``, one per turn;
                embedded with the run's embedder when None.
        """
        self._meta.touch(user_id)
        if not turns:
            return
        if self._gate is not None:
            ids = self._gate.bulk_load(turns, user_id=user_id, vectors=vectors)
            self._register(user_id, list(zip(ids, turns, strict=True)), fresh=False)
        else:
            self._store(list(turns), user_id, vectors, fresh=False)

    def _store(self, turns: Sequence[Turn], user_id: str, vectors: np.ndarray | None, *, fresh: bool) -> None:
        """Embed and store ``turns`` in this system's own index (no gate)."""
        if not turns:
            return
        texts = [render_turn(t) for t in turns]
        vecs = self._embedder.encode(texts) if vectors is None else np.asarray(vectors, dtype=np.float32)
        # One partition per speaker, as the gates keep them: revision and merging compare a speaker's memories.
        ids = self._index.add_turns(user_id, turns, vecs)
        # Registered speaker by speaker, in the order the index stored them (ids ascending).
        self._register(user_id, sorted(zip(ids, turns, strict=True), key=lambda pair: pair[0]), fresh=fresh)

    def _register(self, user_id: str, added: Sequence[tuple[int, Turn]], *, fresh: bool) -> None:
        """Plasticity state (weight 1, no inhibition) for memories ``(id, turn)`` just stored in the index."""
        if not added:
            return
        u = self._users.get(user_id)
        if u is None:
            u = self._users[user_id] = UserPlasticity()
        for i, t in added:
            self._set_weight(u, i, 1.0)
            u.inhibition[i] = 0.0
            u.session[i] = t.session_id
            u.speaker[i] = t.speaker
        if fresh:
            # Ids only grow, so the new ones all come after those already waiting.
            u.fresh.extend(sorted(i for i, _ in added))

    # -- retrieval -----------------------------------------------------------

    def _rank(self, query: str, *, user_id: str, now: datetime, k: int) -> tuple[list[tuple[int, float]], int]:
        """Top ``k`` ``(id, score)`` and how many link neighbours were added; changes nothing."""
        u = self._users.get(user_id)
        if u is None or k <= 0 or not self._index.count(user_id):
            return [], 0
        q = self._embedder.encode_one(query)
        keep = 1.0 - self.past_cue_relief if self.inhibition and past_state_cue(query) else 1.0
        pool = self._index.search(user_id, q, self.candidate_factor * k, now=now)
        scored = [(cos * self._weight(u, i) * (1.0 - u.inhibition[i] * keep), i) for i, cos in pool]
        scored.sort(key=lambda p: (-p[0], p[1]))
        added = 0
        if self.associations and u.links:
            taken = {i for _, i in scored}
            extra: list[tuple[float, int]] = []
            for _, parent in scored[: self.expand_top]:
                for j, count in sorted(u.links.get(parent, {}).items()):
                    if j in taken or self._index.get(user_id, j).created_at > now:
                        continue
                    taken.add(j)
                    extra.append((self.link_bonus * count, j))
            if extra:
                added = len(extra)
                scored.extend(extra)
                scored.sort(key=lambda p: (-p[0], p[1]))
        return [(i, s) for s, i in scored[:k]], added

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The best ``k`` memories; counts a question, and every ``decay_every`` questions decays weights."""
        self._meta.touch(user_id)
        top, added = self._rank(query, user_id=user_id, now=now, k=k)
        self._counts["questions"] += 1
        self._counts["expansions"] += added
        u = self._users.get(user_id)
        if u is not None:
            u.questions += 1
            if self.ltp and u.questions % self.decay_every == 0:
                u.decays += 1
                self._counts["decay_rounds"] += 1
        return [self._index.retrieved(user_id, i, s) for i, s in top]

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The ranking ``retrieve`` gives at this moment; counts no question."""
        top, _ = self._rank(query, user_id=user_id, now=now, k=k)
        return [self._index.retrieved(user_id, i, s) for i, s in top]

    # -- learning ------------------------------------------------------------

    def feedback(
        self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime
    ) -> None:
        """Count co-retrievals (always); on a correct answer strengthen what was retrieved."""
        self._meta.touch(user_id)
        u = self._users.get(user_id)
        if u is None:
            return
        ids: list[int] = []
        for mid in retrieved:
            i = parse_memory_id(mid)
            # Ids of other users or of forgotten memories are ignored, never an error.
            if i is not None and i in u.weight and i not in ids:
                ids.append(i)
        if self.associations:
            for pos, a in enumerate(ids):
                for b in ids[pos + 1 :]:
                    n = u.co.setdefault(a, {}).get(b, 0) + 1
                    u.co[a][b] = n
                    u.co.setdefault(b, {})[a] = n
                    if n >= self.link_after:
                        if n == self.link_after:
                            self._counts["links"] += 1
                        u.links.setdefault(a, {})[b] = n
                        u.links.setdefault(b, {})[a] = n
        if correct and self.ltp and self.strengthen:
            for i in ids:
                self._set_weight(u, i, min(self.weight_cap, self._weight(u, i) * (1.0 + self.ltp_boost)))
                u.used.add(i)
                self._counts["strengthened"] += 1

    # -- maintenance ---------------------------------------------------------

    def maintain(self, *, now: datetime) -> None:
        """The inhibition pass, then consolidation, for each user who stored something since the last call.

        The published system consolidates once after encoding; a tick that
        finds nothing new for a user is not a consolidation, so it brings no
        extra decay (else a daily tick would age idle users' memories by
        ``unretrieved_decay`` a day).
        """
        self._meta.touch_all(self._users)
        for user_id in sorted(self._users):
            u = self._users[user_id]
            fresh = [i for i in u.fresh if self._index.has(user_id, i)]
            u.fresh = []
            if not fresh:
                continue
            # One nearest-neighbour search per new memory serves both passes (no memory is added between them).
            near: dict[int, list[tuple[int, float]]] = {}
            if self.inhibition or self.consolidation:
                k = max(self.revision_neighbors if self.inhibition else 0, self.merge_neighbors,
                        self.abstraction_neighbors if self.consolidation and self.abstractions else 0)
                near = {j: self._neighbours(user_id, u, j, k) for j in fresh}
            if self.inhibition:
                self._revise(user_id, u, fresh, near)
            if self.consolidation:
                self._merge(user_id, u, fresh, near)
                if self.abstractions:
                    self._abstract(user_id, u, fresh, near)
                u.extra_decays += 1
                self._counts["consolidations"] += 1

    def _neighbours(self, user_id: str, u: UserPlasticity, i: int, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest other memories of ``i``'s speaker, by cosine."""
        vec = self._index.vector(user_id, i)
        hits = self._index.search(user_id, vec, k + 1, partition=u.speaker[i])
        return [(j, cos) for j, cos in hits if j != i][:k]

    def _revise(self, user_id: str, u: UserPlasticity, fresh: list[int], near: Mapping[int, list[tuple[int, float]]]) -> None:
        """Each new memory inhibits the older memories of its speaker it revises (once each).

        With ``inhibition_fixed`` (inhibition only): every older one above the threshold, any session, gets that value.
        """
        fixed = self.inhibition_fixed
        for j in fresh:
            newer = self._index.get(user_id, j)
            for i, cos in near[j][: self.revision_neighbors]:
                if cos <= self.revision_threshold:
                    break
                if i in u.revised or (fixed is None and u.session[i] == u.session[j]):
                    continue
                older = self._index.get(user_id, i)
                if (older.created_at, i) >= (newer.created_at, j):
                    continue
                step = min(self.inhibition_cap, u.inhibition[i] + self.inhibition_step)
                u.inhibition[i] = step if fixed is None else fixed
                u.revised.add(i)
                self._counts["inhibitions"] += 1

    def _abstract(self, user_id: str, u: UserPlasticity, fresh: list[int], near: Mapping[int, list[tuple[int, float]]]) -> None:
        """Clusters of a new memory and its close unclustered neighbours become abstraction memories."""
        for j in fresh:
            if j in u.clustered:
                continue
            members = [j] + [i for i, cos in near[j][: self.abstraction_neighbors]
                             if cos >= self.abstraction_threshold and i not in u.clustered]
            if len(members) < self.abstraction_min_size:
                continue
            u.clustered.update(members)
            recs = sorted((self._index.get(user_id, i) for i in members), key=lambda m: (m.created_at, m.memory_id))
            sources = tuple(dict.fromkeys(t for m in recs for t in m.source_turn_ids))
            vec = np.mean([self._index.vector(user_id, i) for i in members], axis=0)
            vec /= max(float(np.linalg.norm(vec)), 1e-12)
            text = ABSTRACTION_TEMPLATE.format(n=len(recs), texts="; ".join(m.text for m in recs))
            (a,) = self._index.add(user_id, [Memory("", text, recs[-1].created_at, sources)], vec[None, :],
                                   partition=self.ABSTRACTION_PARTITION)
            self._set_weight(u, a, self.abstraction_weight)
            u.inhibition[a] = 0.0
            u.session[a] = u.session[members[-1]]
            u.speaker[a] = self.ABSTRACTION_PARTITION
            self._counts["abstractions"] += 1

    def _merge(self, user_id: str, u: UserPlasticity, fresh: list[int], near: Mapping[int, list[tuple[int, float]]]) -> None:
        """Each new memory against its near-duplicates: the weaker of a pair is inhibited, none deleted."""
        lost: set[int] = set()
        new = set(fresh)
        for j in fresh:
            if j in lost:
                continue
            for i, cos in near[j][: self.merge_neighbors]:
                if cos <= self.merge_threshold:
                    break
                if i in lost or (i > j and i in new):
                    # A pair of two new memories is handled once, from the later one.
                    continue
                older, newer = (i, j) if i < j else (j, i)
                loser = newer if self._weight(u, older) >= self._weight(u, newer) else older
                u.inhibition[loser] = min(self.inhibition_cap, u.inhibition[loser] + self.inhibition_step)
                lost.add(loser)
                self._counts["merges"] += 1
                if loser == j:
                    break

    # -- deletion and accounting ---------------------------------------------

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Remove every memory whose provenance meets ``turn_ids``, here and in the gate."""
        self._meta.touch(user_id)
        gone = self._index.derived(user_id, turn_ids)
        if self._gate is not None:
            self._gate.forget(turn_ids, user_id=user_id, now=now)  # removes them from the shared index
        else:
            self._index.remove(user_id, gone)
        if gone and user_id in self._users:
            self._users[user_id].drop(gone)

    @property
    def entity_recognizer(self) -> Any:
        """Its gate's entity recogniser, if the gate recognises entities (a run fills its cache up front)."""
        return getattr(self._gate, "entity_recognizer", None)

    def stats(self) -> MemoryStats:
        """Memories held; weights, inhibition, sessions and co-retrieval counts as metadata."""
        return self._index.stats().with_metadata(self._meta.total(self._users, state_bytes))

    def report(self) -> dict[str, Any]:
        """Mechanism counters and the gate's figures for a run's metrics.

        Returns:
            ``questions``, ``decay_rounds``, ``strengthened``, ``links``,
            ``expansions``, ``inhibitions``, ``merges``, ``consolidations``,
            ``abstractions`` (cumulative); ``inhibited_now`` and ``mean_weight`` over the
            memories held; the gate's ``report()`` keys prefixed ``gate_``.
        """
        weights = [self._weight(u, i) for u in self._users.values() for i in u.weight]
        out: dict[str, Any] = dict(self._counts)
        out["inhibited_now"] = sum(1 for u in self._users.values() for v in u.inhibition.values() if v > 0)
        out["mean_weight"] = float(np.mean(weights)) if weights else float("nan")
        gate_report = getattr(self._gate, "report", None)
        if callable(gate_report):
            out.update({f"gate_{key}": value for key, value in gate_report().items()})
        return out


REGISTRATIONS = (
    Registration(
        "neuroplastic",
        PublishedNeuroplasticMemory,
        description="published mechanism on the multi-signal gate: strengthening with decay every 10 questions, "
        "Hebbian links, belief revision by inhibition, consolidation by inhibiting near-duplicates",
        requires=("spacy", "nlp"),
    ),
    # Ablations as published: each mechanism off in turn (no-ltp also stops the periodic decay).
    *(
        Registration(
            f"neuroplastic-no-{mechanism}",
            PublishedNeuroplasticMemory,
            description=f"neuroplastic with {mechanism} switched off"
            + (" (and with it the periodic decay)" if mechanism == "ltp" else ""),
            defaults={mechanism: False},
            role="ablation",
            requires=("spacy", "nlp"),
        )
        for mechanism in ("ltp", "associations", "inhibition", "consolidation")
    ),
    Registration(
        "neuroplastic-no-abstractions",
        PublishedNeuroplasticMemory,
        description="neuroplastic whose consolidation adds no abstraction memories",
        defaults={"abstractions": False},
        role="ablation",
    ),
    Registration(
        "neuroplastic-inhibition-only",
        PublishedNeuroplasticMemory,
        description="the published inhibition-only mode: on the gate, only revision, a fixed 0.8 for every older "
        "memory above 0.85 to a later one",
        defaults={"ltp": False, "associations": False, "consolidation": False, "inhibition_fixed": 0.8},
        role="ablation",
    ),
    Registration(
        "neuroplastic-decay-only",
        PublishedNeuroplasticMemory,
        description="neuroplastic without strengthening from feedback, decay kept (ageing without learning)",
        defaults={"strengthen": False},
        role="ablation",
        requires=("spacy", "nlp"),
    ),
)
"""The system and its ablations this module registers, in order (``memsim.memory.registry.BUILTIN_MODULES``)."""
