"""How the harness plays a deletion: every arm forgets, what is left is audited, memsim's own copies are purged.

``Forgetting`` is mixed into ``memsim.sim.engine.Harness``; its methods read
and write the harness's state. What counts as a copy of a deleted text, and
the audits of systems and caches, are in ``memsim.sim.erasure``.
"""

from __future__ import annotations

from typing import Any

from memsim.sim.erasure import CopyFinder, audit_caches, audit_system, cache_texts, leak_count, purge_caches
from memsim.sim.events import Deletion

__all__ = ["Forgetting"]


class Forgetting:
    """The harness's deletions (mixed into ``Harness``)."""

    caches: Any
    erasures: list[dict[str, Any]]
    purges: list[dict[str, Any]]

    def deletion(self, event: Deletion) -> None:
        """Forget the turns in every system, then probe that nothing derived from them comes back.

        Restatements of a forgotten turn (correction channel) are forgotten with it.
        """
        deleted_texts = [self.turn_text[tid] for tid in event.turn_ids if tid in self.turn_text]
        # memsim's own rows keep no text of them, found by provenance and by text (unless the spec says keep).
        self.recorder.redact(event.turn_ids, deleted_texts)
        self._gone.setdefault(event.user_id, set()).update(event.turn_ids)
        gone_texts = self._deleted_texts.setdefault(event.user_id, [])
        gone_texts += deleted_texts
        # What the user said again in a turn they kept is theirs to keep: only the rest of a deleted text is a copy.
        kept = self._gone[event.user_id]
        said = [self.turn_text[t] for t in self._user_turns.get(event.user_id, ()) if t not in kept]
        finder = self._user_finder[event.user_id] = CopyFinder(gone_texts, said=said)
        for sut in self._live():
            restated = {r for tid in event.turn_ids for r in self._restated.get((sut.label, tid), ())}
            turn_ids = (*event.turn_ids, *sorted(restated))
            gone = set(turn_ids)
            queued = self._corrections.get((sut.label, event.user_id))
            if queued:  # a restatement not yet said is dropped with what it restates
                self._corrections[(sut.label, event.user_id)] = [t for t in queued if gone.isdisjoint(self._restates[t.turn_id])]
            deleted = {tid: self.turn_text[tid] for tid in event.turn_ids if tid in self.turn_text}
            try:
                sut.system.forget(turn_ids, user_id=event.user_id, now=event.time)
                # What is left, place by place (sim.erasure); read-only.
                places = audit_system(sut.system, deleted, user_id=event.user_id, now=event.time, k=self.config.k,
                                      said=said)
                stats = sut.system.stats()
            except Exception as exc:
                self._fail(sut, "forget", exc)
                continue
            self._deleted.setdefault((sut.label, event.user_id), set()).update(gone)
            self._deleted_text[(sut.label, event.user_id)] = finder
            # Every copy in every place leaks: a text kept without provenance as much as a memory that names the turn.
            leaked = leak_count(places)
            self._timeline(
                sut, event.user_id, "forget", stats, leaked=leaked, turns=len(gone),
                **{f"leaked_{place}": n for place, n in places.items()},
            )
        if self.caches is not None:
            self._purge_caches(event)
        else:
            # Played apart from the run's other arms (memsim.sim.workers): the run purges once every arm has played.
            self.purges.append({"deletion_id": event.deletion_id, "user_id": event.user_id, "time": str(event.time),
                                "texts": self.purge_texts(event)})

    def purge_texts(self, event: Deletion) -> list[str]:
        """The texts memsim may hold in its own caches for a deletion: its turns, rendered, and this harness's restatements."""
        restated = {r for label in {s.label for s in self.systems} for tid in event.turn_ids
                    for r in self._restated.get((label, tid), ())}
        turns = [self._turns[t] for t in event.turn_ids if t in self._turns]
        return cache_texts(turns) + [self.turn_text[r] for r in sorted(restated) if r in self.turn_text]

    def _purge_caches(self, event: Deletion) -> None:
        """Drop memsim's own cached copies of the deleted turns (embeddings, LLM replies) and check they are gone."""
        texts = self.purge_texts(event)
        assert self.caches is not None
        before = audit_caches(texts, **self.caches)
        purged = purge_caches(texts, **self.caches)
        after = audit_caches(texts, **self.caches)
        self.erasures.append(
            {"deletion_id": event.deletion_id, "user_id": event.user_id, "time": str(event.time),
             "held_before": before, "purged": purged, "held_after": after}
        )
