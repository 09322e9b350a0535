"""The long-context control: no retrieval, just the most recent turns that fit.

Every memory paper reports this baseline: instead of retrieving, the reader
gets as much of the recent conversation as its context window holds. It
tells whether a memory system beats simply reading the transcript.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memsim.memory.base import FixedMemory, MemoryStats, Retrieved, Turn, render_turn, text_bytes
from memsim.memory.registration import Registration
from memsim.core.errors import UserError

if TYPE_CHECKING:
    from memsim.memory.resources import Resources

__all__ = ["FullContextMemory", "estimate_tokens"]


def _meta_bytes(item: tuple[str, str, datetime, int, str]) -> int:
    """Metadata bytes of one held turn: its id, provenance id, timestamp and token count."""
    return len(item[0]) + len(item[4]) + 16


def estimate_tokens(text: str) -> int:
    """Cheap token estimate: words x 1.3, rounded up (at least 1 for non-empty text).

    English subword tokenisers produce about 1.3 tokens per whitespace word;
    the estimate is only used to decide how many turns fit a budget.
    """
    words = len(text.split())
    return math.ceil(words * 1.3) if words else 0


class FullContextMemory(FixedMemory):
    """Full-context control: the newest turns (<= ``now``) that fit ``budget_tokens``.

    The query and ``k`` are ignored: the token budget alone decides how many
    turns are returned. Results are newest first (score 1.0 for the newest,
    1/2 for the one before, ...), so evidence scores at k mean "among the k
    most recent turns"; readers put memories back in time order. Turns are
    stored verbatim as ``render_turn(turn)``.

    Defaults: ``budget_tokens=2048``; tokens estimated as words x 1.3, or
    counted with the tokenizer at ``tokenizer`` (a local Hugging Face
    tokenizer folder) when one is given.
    """

    def __init__(
        self,
        *,
        resources: Resources | None = None,
        budget_tokens: int = 2048,
        tokenizer: str | None = None,
    ) -> None:
        """Make an empty store.

        Args:
            resources: run resources (unused: no embedder is needed).
            budget_tokens: how many tokens of turns one retrieval may return.
            tokenizer: optional local tokenizer folder for exact counts.
        """
        if not isinstance(budget_tokens, int) or budget_tokens <= 0:
            raise UserError(f"fullcontext: budget_tokens must be a positive integer, got {budget_tokens!r}")
        self.budget_tokens = budget_tokens
        self.tokenizer = tokenizer
        self._tok: Any = None
        # Per user: parallel lists sorted by (created_at, arrival order).
        self._keys: dict[str, list[tuple[datetime, int]]] = {}
        self._items: dict[str, list[tuple[str, str, datetime, int, str]]] = {}
        self._seq = 0
        self._text_bytes = 0
        self._held = 0
        self._meta_bytes = 0

    def _count(self, text: str) -> int:
        if self.tokenizer is None:
            return estimate_tokens(text)
        if self._tok is None:
            from transformers import AutoTokenizer

            try:
                self._tok = AutoTokenizer.from_pretrained(self.tokenizer, local_files_only=True)
            except OSError as exc:
                raise UserError(f"fullcontext: cannot load tokenizer from {self.tokenizer!r}: {exc}") from exc
        return len(self._tok.encode(text, add_special_tokens=False))

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """Keep every turn, in time order."""
        keys = self._keys.setdefault(user_id, [])
        items = self._items.setdefault(user_id, [])
        for turn in turns:
            text = render_turn(turn)
            key = (turn.created_at, self._seq)
            pos = bisect.bisect_right(keys, key)
            keys.insert(pos, key)
            item = (f"t{self._seq}", text, turn.created_at, self._count(text), turn.turn_id)
            items.insert(pos, item)
            self._seq += 1
            self._text_bytes += text_bytes(text)
            self._held += 1
            self._meta_bytes += _meta_bytes(item)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The newest turns up to ``now`` that fit the budget, newest first, at most ``k``.

        Rank is recency, so evidence scores at k read "among the k most recent
        turns"; readers put memories in time order themselves. A run that
        wants the whole budget in context asks for a large enough k.
        """
        keys = self._keys.get(user_id)
        if not keys:
            return []
        # Everything at or before ``now``: the sequence number never limits the cut.
        end = bisect.bisect_right(keys, (now, math.inf))
        items = self._items[user_id]
        chosen: list[tuple[str, str, datetime, int, str]] = []
        used = 0
        for i in range(end - 1, max(end - k, 0) - 1, -1):
            item = items[i]
            if used + item[3] > self.budget_tokens:
                break
            used += item[3]
            chosen.append(item)
        return [
            Retrieved(memory_id=mid, text=text, score=1.0 / (pos + 1), created_at=created, source_turn_ids=(tid,))
            for pos, (mid, text, created, _, tid) in enumerate(chosen)
        ]

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """What ``retrieve`` returns: retrieval changes nothing here, so a probe is a retrieval."""
        return self.retrieve(query, user_id=user_id, now=now, k=k)

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """Drop the given turns."""
        gone = set(turn_ids)
        items = self._items.get(user_id)
        if not items or not gone:
            return
        keep = [i for i, item in enumerate(items) if item[4] not in gone]
        for i, item in enumerate(items):
            if item[4] in gone:
                self._text_bytes -= text_bytes(item[1])
                self._held -= 1
                self._meta_bytes -= _meta_bytes(item)
        self._keys[user_id] = [self._keys[user_id][i] for i in keep]
        self._items[user_id] = [items[i] for i in keep]

    def stats(self) -> MemoryStats:
        """Turns held and their text bytes (running totals)."""
        return MemoryStats(items=self._held, text_bytes=self._text_bytes, metadata_bytes=self._meta_bytes)


REGISTRATIONS = (
    Registration(
        "fullcontext",
        FullContextMemory,
        description="no retrieval: the newest turns that fit 2048 tokens, newest first",
        learns=False,
        role="baseline",
    ),
)
"""The system this module registers (``memsim.memory.registry.BUILTIN_MODULES``)."""
