"""A scorer in one file: whether the gold answer's words are in the top k memories' text."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memsim.memory.base import Retrieved
from memsim.sim.events import Question


@dataclass(frozen=True, slots=True)
class GoldInTopScorer:
    """``gold_in_top@k``: 1 if a memory among the top k states the gold answer; NaN for an excluded question."""

    name: str = "gold_in_top"

    def columns(self, ks: Sequence[int]) -> list[str]:
        """One column per cut-off."""
        return [f"gold_in_top@{k}" for k in ks]

    def score(self, question: Question, retrieved: Sequence[Retrieved], *, ks: Sequence[int]) -> dict[str, Any]:
        """The column of each cut-off."""
        if question.excluded is not None:
            return {c: math.nan for c in self.columns(ks)}
        hits = [question.gold.lower() in m.text.lower() for m in retrieved]
        return {f"gold_in_top@{k}": float(any(hits[:k])) for k in ks}
