"""One user's plasticity state in ``PublishedNeuroplasticMemory``: weights, inhibitions, co-retrievals, links.

Kept by memory id; ``state_bytes`` is what the state counts in a system's ``stats``.
"""

from __future__ import annotations

from collections.abc import Collection

__all__ = ["UserPlasticity", "state_bytes"]


class UserPlasticity:
    """One user's plasticity state, by memory id."""

    __slots__ = (
        "weight", "stamp", "used", "inhibition", "revised", "session", "speaker",
        "co", "links", "fresh", "questions", "decays", "extra_decays", "clustered",
    )

    def __init__(self) -> None:
        # Weight as last set, and the user's (decays, extra_decays) counts at that moment.
        self.weight: dict[int, float] = {}
        self.stamp: dict[int, tuple[int, int]] = {}
        self.used: set[int] = set()
        self.inhibition: dict[int, float] = {}
        self.revised: set[int] = set()
        self.session: dict[int, str] = {}
        self.speaker: dict[int, str] = {}
        # Co-retrieval counts, symmetric: co[a][b] == co[b][a]; links: the pairs at or above the threshold.
        self.co: dict[int, dict[int, int]] = {}
        self.links: dict[int, dict[int, int]] = {}
        # Memories stored since the last inhibition / consolidation pass, in id order.
        self.fresh: list[int] = []
        self.questions = 0
        self.decays = 0
        self.extra_decays = 0
        # Memories already in an abstraction's cluster (members only, not the abstractions).
        self.clustered: set[int] = set()

    def drop(self, ids: Collection[int]) -> None:
        """Forget the memories ``ids``: their weights, inhibitions, sessions, co-retrievals and links."""
        gone = set(ids)
        for i in gone:
            for table in (self.weight, self.stamp, self.inhibition, self.session, self.speaker):
                table.pop(i, None)  # type: ignore[attr-defined]
            self.used.discard(i)
            self.revised.discard(i)
            self.clustered.discard(i)
            for graph in (self.co, self.links):
                for j in graph.pop(i, {}):
                    peers = graph.get(j)
                    if peers is not None:
                        peers.pop(i, None)
                        if not peers:
                            del graph[j]
        if gone:
            self.fresh = [i for i in self.fresh if i not in gone]


def state_bytes(u: UserPlasticity) -> int:
    """One user's plasticity state in bytes: weight (float64), two decay stamps (int64) and
    inhibition (float64) per memory with its session id; two ids and a count per co-retrieval pair."""
    return 32 * len(u.weight) + sum(len(s) for s in u.session.values()) + 12 * sum(len(v) for v in u.co.values())
