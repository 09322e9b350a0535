"""The judge check's agreement statistics: a judge's verdicts on the labelled items against their labels.

For every judge: accuracy against the labels (an unjudged item, NaN, counts
as a miss), false-accept rate (fail items it accepted), false-reject rate
(pass items it rejected), Cohen's kappa of its verdicts against the labels
(judged items), the unjudged count, and the same per category and source. A
judge below ``RELIABLE_ACCURACY`` is marked unreliable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from memsim.analysis.judge_check_items import CheckItem

__all__ = ["RELIABLE_ACCURACY", "score_judge", "cohen_kappa", "check_metrics"]

RELIABLE_ACCURACY = 0.90
"""A judge whose check accuracy is below this is marked unreliable."""


def score_judge(judge: Any, items: Sequence[CheckItem], progress: Callable[[int], None] | None = None) -> list[float]:
    """The judge's score of every item (NaN: no readable verdict, a miss whatever the label)."""
    from memsim.sim.answer.judges import judge_verdict

    out = []
    for i, it in enumerate(items):
        verdict = judge_verdict(judge, question=it.question, gold=it.gold, answer=it.answer, category=it.kind,
                                question_id=it.question_id)
        # A run scores an unreadable reply wrong; the check must not credit it with rejecting a fail item.
        out.append(float(verdict.score) if verdict.readable else math.nan)
        if progress is not None:
            progress(i + 1)
    return out


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's kappa of two binary raters; None with no items; 1.0 when both are constant and equal."""
    x, y = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if x.size == 0:
        return None
    po = float((x == y).mean())
    px, py = float(x.mean()), float(y.mean())
    pe = px * py + (1 - px) * (1 - py)
    if pe >= 1.0:
        return 1.0 if po == 1.0 else 0.0
    return (po - pe) / (1 - pe)


def _rates(labels: np.ndarray, scores: np.ndarray) -> dict[str, Any]:
    from memsim.sim.answer.judges import JUDGE_PASS

    judged = ~np.isnan(scores)
    verdict = np.where(judged, scores >= JUDGE_PASS, False)
    right = judged & (verdict == labels)
    fails, passes = ~labels, labels
    return {
        "n": int(labels.size),
        "unjudged": int((~judged).sum()),
        "accuracy": float(right.mean()) if labels.size else None,
        "false_accept": float((judged & fails & verdict).sum() / fails.sum()) if fails.any() else None,
        "false_reject": float((judged & passes & ~verdict).sum() / passes.sum()) if passes.any() else None,
        "kappa": cohen_kappa(verdict[judged].tolist(), labels[judged].tolist()),
    }


def check_metrics(items: Sequence[CheckItem], scores: Sequence[float]) -> dict[str, Any]:
    """Accuracy, false-accept and false-reject rates, kappa and unjudged count: overall, per category, per source.

    Accuracy counts an unjudged item as a miss; kappa is over judged items;
    the rates divide by every fail (pass) item.
    """
    labels = np.array([it.label for it in items], dtype=bool)
    x = np.array(scores, dtype=float)
    out = _rates(labels, x)
    for group in ("category", "source"):
        keys = list(dict.fromkeys(getattr(it, group) for it in items))
        out[f"per_{group}"] = {
            k: _rates(labels[[getattr(it, group) == k for it in items]], x[[getattr(it, group) == k for it in items]])
            for k in keys
        }
    out["reliable"] = out["accuracy"] is not None and out["accuracy"] >= RELIABLE_ACCURACY
    return out
