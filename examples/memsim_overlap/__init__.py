"""A memsim plugin: turns ranked by the words they share with the question, plus credit from feedback."""

from __future__ import annotations

import re
from typing import Any

from memsim.memory.base import MemoryStats, Retrieved


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class OverlapMemory:
    """Every turn kept; turns sharing a word with the question score shared words + bonus x net helpful feedback."""

    def __init__(self, *, resources: Any = None, bonus: float = 0.5) -> None:
        self.bonus = bonus
        self.turns: dict[str, dict[str, Any]] = {}  # user -> turn id -> turn
        self.credit: dict[tuple[str, str], float] = {}  # (user, turn id) -> feedback credit

    def ingest(self, turns, *, user_id, now):
        self.turns.setdefault(user_id, {}).update((t.turn_id, t) for t in turns)

    def retrieve(self, query, *, user_id, now, k):
        q = _words(query)
        shared = {i: len(q & _words(t.text)) for i, t in self.turns.get(user_id, {}).items() if t.created_at <= now}
        scored = [(n + self.bonus * self.credit.get((user_id, i), 0.0), i, self.turns[user_id][i])
                  for i, n in shared.items() if n]  # only turns that share a word are candidates
        scored.sort(key=lambda s: (-s[0], s[1]))
        scored = scored[:k]
        return [Retrieved(i, t.text, float(s), t.created_at, (i,)) for s, i, t in scored]

    probe = retrieve  # retrieve changes nothing here, so it is its own read-only probe

    def feedback(self, question_id, retrieved, correct, *, user_id, now):
        for i in retrieved:
            self.credit[user_id, i] = self.credit.get((user_id, i), 0.0) + (1.0 if correct else -1.0)

    def maintain(self, *, now):
        pass

    def forget(self, turn_ids, *, user_id, now):
        for i in turn_ids:
            self.turns.get(user_id, {}).pop(i, None)
            self.credit.pop((user_id, i), None)

    def stats(self):
        texts = [t.text for ts in self.turns.values() for t in ts.values()]
        return MemoryStats(items=len(texts), text_bytes=sum(len(x.encode()) for x in texts))
