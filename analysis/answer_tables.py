"""The answer tables of a run: each judge's mark (how far it can be trusted) and the answers' outcomes by kind.

``memsim.analysis.summary`` puts them in ``metrics.json``; a figure from an
unreliable judge carries its mark wherever it is printed.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import polars as pl

from memsim.sim.spec import RunSpec

__all__ = ["judge_marks", "answer_table", "llm_columns", "left_out_mask"]


def left_out_mask(rows: pl.DataFrame, answer_excluded: Collection[str]) -> np.ndarray:
    """Rows excluded for a reason the protocol leaves out of answer accuracy."""
    return np.array([e in answer_excluded for e in rows["excluded"].to_list()], dtype=bool)


def llm_columns(spec: RunSpec) -> set[str]:
    """The answer columns of LLM judges in this run."""
    from memsim.sim.answer.judges import LLM_JUDGES

    return {f"answer_{n}" for n in LLM_JUDGES}


def judge_marks(spec: RunSpec, answer_cols: Sequence[str]) -> dict[str, Any]:
    """Per answer column: the judge, whether it is an LLM judge, its check result and its mark.

    An LLM judge's mark says whether its check passed (``unreliable`` below
    90%), whether it judges the reader's own model (``self-judging``) and
    whether its prompt is memsim's paraphrase. A run recorded before checks
    existed has no check: its LLM judges are marked unreliable (no check).
    A deterministic judge is marked unreliable when its check on the
    file-free set (``deterministic_check``) is below the bar.
    """
    from memsim.analysis.judge_check import deterministic_check, judge_mark
    from memsim.sim.answer.judges import JUDGE_NAMES, LLM_JUDGES, PARAPHRASE_NOTE

    answer = spec.answer.model_dump() if spec.answer is not None else {}
    checks = (answer.get("judge_checks") or {}).get("judges", {})
    official = bool(answer.get("judge_prompts"))
    out: dict[str, Any] = {}
    for col in answer_cols:
        name = col.removeprefix("answer_")
        if name not in LLM_JUDGES:
            found = checks.get(name) or (deterministic_check(name) if name in JUDGE_NAMES else None)
            out[col] = {"judge": name, "llm": False, "mark": judge_mark(found)}
            if found:
                out[col].update(check=dict(found), reliable=bool(found.get("reliable")))
            continue
        check = checks.get(name) or {
            "accuracy": None,
            "reliable": False,
            "self_judging": bool((answer.get("judge_checks") or {}).get("self_judging")),
            "prompts": "official" if official else "paraphrase",
        }
        out[col] = {
            "judge": name,
            "llm": True,
            "check": dict(check),
            "reliable": bool(check.get("reliable")),
            "self_judging": bool(check.get("self_judging")),
            "prompts": check.get("prompts", "paraphrase"),
            "note": "" if check.get("prompts") == "official" else PARAPHRASE_NOTE,
            "mark": judge_mark(check),
        }
    return out


def answer_table(
    rows: pl.DataFrame, cols: Sequence[str], *, llm_judges: set[str] | frozenset[str] = frozenset(),
    answer_excluded: Collection[str] = (),
) -> dict[str, Any]:
    """Every judge side by side on one system's rows: accuracy, unjudged with reasons, agreement, spread.

    Questions excluded for a reason in ``answer_excluded`` (the protocol's: Mem0's
    LoCoMo protocol leaves the adversarial category out) do not count in
    ``accuracy`` or ``judged``; they are reported in the ``abstention`` entry only.

    Every question counts: rows whose answer failed are unjudged
    (``answer error``); a NaN score is unjudged with its reason (an LLM
    judge's reply without a verdict; a deterministic judge without a gold
    answer). Agreement is over questions both judges judged, verdicts read
    at ``JUDGE_PASS``; kappa is Cohen's.
    """
    from memsim.analysis.judge_check import cohen_kappa
    from memsim.sim.answer.judges import JUDGE_PASS

    errors = rows["error"].is_not_null().to_numpy() if "error" in rows.columns else np.zeros(rows.height, bool)
    abstention = np.zeros(rows.height, dtype=bool)
    left_out = np.zeros(rows.height, dtype=bool)
    if "excluded" in rows.columns:
        abstention = rows["excluded"].is_in(["abstention", "adversarial"]).fill_null(False).to_numpy()
        left_out = left_out_mask(rows, answer_excluded)
    judges: dict[str, Any] = {}
    verdicts: dict[str, np.ndarray] = {}
    for col in cols:
        x = rows[col].cast(pl.Float64).fill_null(math.nan).to_numpy() if col in rows.columns else np.full(rows.height, math.nan)
        x = np.where(errors, math.nan, x)
        judged = ~np.isnan(x)
        counted = judged & ~left_out
        reasons: dict[str, int] = {}
        if (errors & ~left_out).any():
            reasons["answer error"] = int((errors & ~left_out).sum())
        blank = int((~judged & ~errors & ~left_out).sum())
        if blank:
            reasons["no verdict in the judge's reply" if col in llm_judges else "no gold answer"] = blank
        flag = "unreadable_" + col.removeprefix("answer_")
        unreadable = (rows[flag].cast(pl.Boolean).fill_null(False).to_numpy() & ~errors & ~left_out
                      if flag in rows.columns else np.zeros(rows.height, dtype=bool))
        judges[col] = {
            # LLM judge replies without a readable verdict: scored wrong (in accuracy), counted here.
            "unreadable": int(unreadable.sum()),
            "questions": int((~left_out).sum()),
            "judged": int(counted.sum()),
            "unjudged": int((~judged & ~left_out).sum()),
            "unjudged_reasons": reasons,
            "accuracy": float(x[counted].mean()) if counted.any() else None,
            "abstention": {
                "questions": int(abstention.sum()),
                "judged": int((judged & abstention).sum()),
                "accuracy": float(x[judged & abstention].mean()) if (judged & abstention).any() else None,
            },
        }
        verdicts[col] = x
    agreement = []
    for i, a in enumerate(cols):
        for b in cols[i + 1:]:
            both = ~np.isnan(verdicts[a]) & ~np.isnan(verdicts[b])
            va, vb = verdicts[a][both] >= JUDGE_PASS, verdicts[b][both] >= JUDGE_PASS
            agreement.append({
                "a": a,
                "b": b,
                "n": int(both.sum()),
                "agreement": float((va == vb).mean()) if both.any() else None,
                "kappa": cohen_kappa(va.tolist(), vb.tolist()),
            })
    accs = [j["accuracy"] for j in judges.values() if j["accuracy"] is not None]
    return {
        "judges": judges,
        "agreement": agreement,
        "spread": (max(accs) - min(accs)) if len(accs) >= 2 else None,
    }
