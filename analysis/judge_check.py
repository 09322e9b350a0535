"""Judges are checked before they are believed: a labelled set of answers, and how each judge does on it.

The check set is built deterministically from the benchmark files the user
has and from the persona scenario's gold (no file needed); its items and
categories are ``memsim.analysis.judge_check_items``'s. Each item is a
(question, gold answer, candidate answer, label) where the label says
whether a careful grader would accept the candidate.

A judge below ``RELIABLE_ACCURACY`` on the check
(``memsim.analysis.judge_check_stats``) is marked unreliable wherever its
figures appear, deterministic judges included: their check
(``deterministic_check``) is made on the file-free set (persona items only,
what ``memsim judge-check --no-locomo`` checks), so the same code gives the
same mark on every machine and ``metrics.json`` stays a function of the rows.

A run with an LLM judge records the check result in its spec
(``judge_checks_for_run``); the result is cached by judge, model, prompt
hash and check-set digest in ``judge_checks.sqlite`` (a ``memsim.memory.kvcache``
store), so the check runs once per judge configuration. A run sizes its
check with ``--judge-check N`` (N items drawn from the set, 0: no check,
the judge is then marked unreliable) or reuses an earlier ``memsim
judge-check`` result (``--judge-check-from``); a dry run counts the check's
calls (``judge_check_estimate``).

This module checks one judge (``check_judge``, cached) and the judges of a
run; it re-exports the set (``judge_check_items``), the statistics
(``judge_check_stats``) and the report (``judge_check_report``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memsim.analysis.judge_check_items import (
    CATEGORIES,
    CHECK_VERSION,
    PER_KIND,
    CheckItem,
    build_check_set,
    category_counts,
    check_set_digest,
    draw_items,
)
from memsim.analysis.judge_check_report import format_check_table, write_check
from memsim.analysis.judge_check_stats import RELIABLE_ACCURACY, check_metrics, cohen_kappa, score_judge
from memsim.core.errors import UserError

__all__ = [
    "CHECK_VERSION",
    "CATEGORIES",
    "RELIABLE_ACCURACY",
    "CheckItem",
    "build_check_set",
    "check_set_digest",
    "score_judge",
    "check_metrics",
    "cohen_kappa",
    "check_judge",
    "judge_checks_for_run",
    "judge_check_estimate",
    "format_check_estimate",
    "draw_items",
    "read_check_result",
    "format_check_table",
    "write_check",
    "judge_mark",
    "deterministic_check",
    "stderr_progress",
    "category_counts",
    "PER_KIND",
]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- one judge, cached


def _judge_key(judge: Any, digest: str) -> bytes:
    desc = dict(judge.describe()) if hasattr(judge, "describe") else {"name": judge.name}
    desc.pop("endpoint", None) if desc.get("kind") == "local" else None
    # The settings that shape replies (sampling, the model file) live on the client under any wrappers.
    llm = getattr(judge, "llm", None)
    while llm is not None and not callable(getattr(llm, "request_settings", None)):
        llm = getattr(llm, "inner", None)
    settings = getattr(llm, "request_settings", None)
    payload = {
        "version": CHECK_VERSION,
        "judge": desc,
        "prompt_hash": getattr(judge, "prompt_hash", ""),
        "settings": settings() if callable(settings) else None,
        "items": digest,
    }
    blob = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).digest()


def check_judge(
    judge: Any,
    items: Sequence[CheckItem],
    *,
    digest: str | None = None,
    cache: bool = True,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """A judge's check result, from the cache when the same judge, model, prompts and items were checked before.

    Deterministic judges are never cached (they are fast). The result holds
    ``check_metrics`` plus ``scores`` (per item, in order), the judge's
    description, ``items`` (the digest) and ``cached``.
    """
    from memsim.sim.answer.judges import LLM_JUDGES

    digest = digest or check_set_digest(items)
    store = None
    key = _judge_key(judge, digest)
    if cache and judge.name in LLM_JUDGES:
        from memsim.memory.kvcache import KVCache, default_cache_dir

        store = KVCache(default_cache_dir() / "judge_checks.sqlite", label="judge check cache").open()
        hit = store.get(key)
        if hit is not None:
            store.close()
            result = json.loads(hit)
            result["cached"] = True
            return result
    scores = score_judge(judge, items, progress)
    result = {
        **check_metrics(items, scores),
        "judge": dict(judge.describe()) if hasattr(judge, "describe") else {"name": judge.name},
        "items": digest,
        "scores": [None if math.isnan(s) else s for s in scores],
        "cached": False,
    }
    if store is not None:
        store.put(key, json.dumps(result).encode("utf-8"))
        store.close()
    return result


def read_check_result(path: str | Path) -> dict[str, Any]:
    """An earlier ``memsim judge-check`` result: its folder or its ``judge_check.json``.

    Raises:
        UserError: the file is missing or is not a judge-check result.
    """
    p = Path(path)
    file = p / "judge_check.json" if p.is_dir() else p
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"--judge-check-from {path}: cannot read a judge-check result ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("judges"), dict) or "items" not in data:
        raise UserError(f"--judge-check-from {file}: not a memsim judge-check result (no 'judges' and 'items')")
    return data


_MATCHED = ("name", "kind", "model", "temperature", "max_tokens", "prompt_ids", "prompts")
"""What a reused check must share with the run's judge (the endpoint and the prompt file's path may differ)."""


def _reused(judge: Any, data: Mapping[str, Any], path: str | Path) -> dict[str, Any]:
    """The entry of ``data`` that checked this judge (same name, model, settings and prompts)."""
    want = {k: judge.describe().get(k) for k in _MATCHED}
    for entry in data["judges"].values():
        desc = entry.get("judge") or {}
        if {k: desc.get(k) for k in _MATCHED} == want:
            return dict(entry)
    held = ", ".join(data["judges"]) or "none"
    raise UserError(f"--judge-check-from {path}: no check of {judge.name} with model {want['model']} and "
                    f"{want['prompts']} prompts in it (it holds: {held}); run memsim judge-check with them")


def _run_judges(options: Any, default_judges: Sequence[str]) -> tuple[Any, list[str]]:
    """The options (validated) and the LLM judges they name."""
    from memsim.sim.answer.judges import LLM_JUDGES
    from memsim.sim.answer.options import AnswerOptions

    options = AnswerOptions.model_validate(options)  # an AnswerOptions, or a mapping of its fields
    return options, [n for n in (options.judge or default_judges) if n in LLM_JUDGES]


def judge_checks_for_run(
    options: Any,
    *,
    default_judges: Sequence[str],
    locomo: str | Path | None = None,
    longmemeval: str | Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """The check result of every LLM judge a run's answer options name, as its spec records it.

    Builds the judges exactly as the run will (model, official prompts), runs
    or reuses each check on ``options.judge_check`` items of the set (all by
    default), or takes it from ``options.judge_check_from``, and returns
    ``{"items": digest, "n_items": n, "sources": [...], "self_judging": bool,
    "judges": {name: summary}}`` (``"from"``: the file reused); ``{}`` when the
    options name no LLM judge, ask for a dry run or for no check
    (``judge_check`` 0).

    Raises:
        UserError: as ``answer_setup`` (self-judging without the flag, bad prompt files, ...); a reused
            result that lacks one of the run's judges.
    """
    from memsim.sim.answer.judges import LLM_JUDGES
    from memsim.sim.answer.setup import answer_setup

    options, llm_names = _run_judges(options, default_judges)
    if not llm_names or options.dry_run or options.judge_check == 0:
        return {}
    setup = answer_setup(options.model_copy(update={"no_cache": True}), default_judges=default_judges)
    if setup is None:
        return {}
    try:
        llm_judges = [j for j in setup.judges if j.name in LLM_JUDGES]
        if options.judge_check_from:
            data = read_check_result(options.judge_check_from)
            return {
                "items": data["items"],
                "n_items": data.get("n_items"),
                "sources": list((data.get("meta") or {}).get("sources") or []),
                "threshold": RELIABLE_ACCURACY,
                "self_judging": setup.self_judging,
                "from": str(options.judge_check_from),
                "judges": {j.name: _summary_of(_reused(j, data, options.judge_check_from),
                                               self_judging=setup.self_judging) for j in llm_judges},
            }
        items = draw_items(build_check_set(locomo=locomo, longmemeval=longmemeval), options.judge_check)
        digest = check_set_digest(items)
        judges: dict[str, Any] = {}
        for judge in llm_judges:
            step = (lambda i, _n=judge.name: progress(_n, i, len(items))) if progress else None
            result = check_judge(judge, items, digest=digest, cache=not options.no_cache, progress=step)
            judges[judge.name] = _summary_of(result, self_judging=setup.self_judging)
        return {
            "items": digest,
            "n_items": len(items),
            "sources": sorted({it.source for it in items}),
            "threshold": RELIABLE_ACCURACY,
            "self_judging": setup.self_judging,
            "judges": judges,
        }
    finally:
        setup.close()


def judge_check_estimate(
    options: Any,
    *,
    default_judges: Sequence[str],
    locomo: str | Path | None = None,
    longmemeval: str | Path | None = None,
) -> dict[str, Any]:
    """What the run's judge check would spend, counted by the dry-run clients (no model is called).

    Returns ``{}`` when the options name no LLM judge, else ``{"n_items": n,
    "judges": [...], "calls", "prompt_tokens", "completion_tokens",
    "cost_usd"}`` (``"skipped"``: ``judge_check`` 0; ``"from"``: a reused
    result, which costs nothing). Like the run's estimate it ignores the
    caches: a check cached before makes no call.
    """
    from memsim.sim.answer.judges import LLM_JUDGES
    from memsim.sim.answer.setup import answer_setup

    options, llm_names = _run_judges(options, default_judges)
    if not llm_names:
        return {}
    none = {"n_items": 0, "judges": llm_names, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    if options.judge_check == 0:
        return {**none, "skipped": True}
    if options.judge_check_from:
        read_check_result(options.judge_check_from)  # a bad file fails now, not after the dry run
        return {**none, "from": str(options.judge_check_from)}
    setup = answer_setup(options.model_copy(update={"dry_run": True, "no_cache": True}), default_judges=default_judges)
    if setup is None:
        return {}
    try:
        items = draw_items(build_check_set(locomo=locomo, longmemeval=longmemeval), options.judge_check)
        for judge in setup.judges:
            if judge.name in LLM_JUDGES:
                score_judge(judge, items)
        spent = setup.meter.summary()
    finally:
        setup.close()
    return {**none, **{k: spent.get(k, 0) for k in ("calls", "prompt_tokens", "completion_tokens", "cost_usd")},
            "n_items": len(items)}


def format_check_estimate(estimate: Mapping[str, Any] | None) -> str:
    """The dry run's line about the judge check ("" when the run has no LLM judge)."""
    if not estimate:
        return ""
    judges = ", ".join(estimate["judges"])
    if estimate.get("skipped"):
        return f"  judge check: skipped (--judge-check 0): {judges} will be marked unreliable (no check)"
    if estimate.get("from"):
        return f"  judge check: reused from {estimate['from']}: 0 calls"
    cost = estimate["cost_usd"]
    cost_text = "unknown (no price)" if isinstance(cost, float) and math.isnan(cost) else f"${cost:.4f}"
    return (
        f"  judge check before the run ({judges} on {estimate['n_items']} labelled items, --judge-check N to size it): "
        f"{estimate['calls']} calls, {estimate['prompt_tokens']:,} prompt tokens, at most "
        f"{estimate['completion_tokens']:,} completion tokens, at most {cost_text}; none if cached"
    )


def stderr_progress(judge: str, done: int, total: int) -> None:
    """Progress of a judge check, logged at INFO (standard error at the command line): at the start and every 100 items."""
    if done == 1 or done % 100 == 0 or done == total:
        log.info("judge check %s: %d/%d items", judge, done, total)


def _summary_of(result: Mapping[str, Any], *, self_judging: bool) -> dict[str, Any]:
    # Whether the result came from the cache is left out: a resumed run must record the same spec.
    desc = result.get("judge", {})
    return {
        "accuracy": result["accuracy"],
        "false_accept": result["false_accept"],
        "false_reject": result["false_reject"],
        "kappa": result["kappa"],
        "unjudged": result["unjudged"],
        "n": result["n"],
        "reliable": bool(result["reliable"]),
        "self_judging": self_judging,
        "model": desc.get("model"),
        "prompts": desc.get("prompts", "paraphrase"),
        "prompt_source": desc.get("prompt_source", ""),
    }


@functools.lru_cache(maxsize=None)
def _file_free_items() -> tuple[CheckItem, ...]:
    return tuple(build_check_set())


@functools.lru_cache(maxsize=None)
def _deterministic_check(name: str) -> tuple[tuple[str, Any], ...]:
    from memsim.sim.answer.judges import make_judge

    items = _file_free_items()
    result = check_judge(make_judge(name), items, cache=False)
    summary = {k: result[k] for k in ("accuracy", "false_accept", "false_reject", "kappa", "unjudged", "n")}
    return tuple({**summary, "reliable": bool(result["reliable"]), "deterministic": True,
                  "items": result["items"]}.items())


def deterministic_check(name: str) -> dict[str, Any]:
    """A deterministic judge's check on the file-free set (persona items), in the shape a run records an LLM judge's.

    Computed once per process (a fraction of a second): the judge is code, so
    its check is the same for every run and needs no record in the spec.
    """
    return dict(_deterministic_check(name))


def judge_mark(check: Mapping[str, Any] | None) -> str:
    """The marks beside a judge's figures: unreliable, self-judging, paraphrase; "" when none apply.

    A deterministic judge (``check["deterministic"]``) is marked only when it is below the bar.
    """
    if not check:
        return ""
    from memsim.sim.answer.judges import PARAPHRASE_NOTE

    marks = []
    acc = check.get("accuracy")
    if not check.get("reliable"):
        acc_text = "no check" if acc is None else f"check {100 * acc:.1f}% < {100 * RELIABLE_ACCURACY:.0f}%"
        marks.append(f"unreliable ({acc_text})")
    elif check.get("deterministic"):
        return ""
    else:
        marks.append(f"check {100 * acc:.1f}%")
    if check.get("self_judging"):
        marks.append("self-judging")
    if not check.get("deterministic") and check.get("prompts", "paraphrase") != "official":
        marks.append(PARAPHRASE_NOTE)
    return "; ".join(marks)
