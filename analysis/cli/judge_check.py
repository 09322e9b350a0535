"""``memsim judge-check``: every judge on the labelled check set, printed and written to a folder."""

from __future__ import annotations

import argparse
from typing import Any

from memsim.analysis.cli.options import input_path, int_in, nonempty_path

__all__ = ["judge_check_arguments", "judge_check_main"]


def judge_check_arguments(parser: argparse.ArgumentParser) -> None:
    """Options: data files, judges, judge models, official prompts, output folder."""
    from memsim.analysis.judge_check import PER_KIND
    from memsim.sim.answer.judges import JUDGE_NAMES
    from memsim.sim.answer.llm import LLM_KINDS

    parser.add_argument("--locomo", type=input_path("LoCoMo data file", text=True), default=None,
                        help="LoCoMo file for items (default: $MEMSIM_LOCOMO or ../shared/data/locomo/locomo10.json "
                        "when it exists)")
    parser.add_argument("--no-locomo", action="store_true", help="no LoCoMo items")
    parser.add_argument("--longmemeval", type=input_path("LongMemEval data file", text=True), default=None, help="LongMemEval file for items (its first instances)")
    parser.add_argument("--judge", action="append", choices=JUDGE_NAMES, default=None, metavar="NAME",
                        help=f"judge to check (repeatable; default every registered judge: {', '.join(JUDGE_NAMES)})")
    parser.add_argument("--llm", choices=LLM_KINDS, default="local", help="client of the LLM judges (default: local)")
    parser.add_argument("--judge-model", action="append", default=None, metavar="MODEL",
                        help="model of the LLM judges (repeatable: each is checked); a GGUF path for --llm local "
                        "(default: the packaged SmolLM2-135M-Instruct), a model name for --llm openai")
    parser.add_argument("--llm-base-url", default=None, help="OpenAI-compatible API root for --llm openai")
    parser.add_argument("--llm-threads", type=int_in("llm_threads"), default=None, help="CPU threads of the local model")
    parser.add_argument("--judge-prompts", action="append", type=input_path("prompt file", path=False), default=None,
                        metavar="PATH",
                        help="official judge templates from your own copy (LongMemEval's evaluate_qa.py, "
                        "a Mem0 prompt file); repeatable")
    parser.add_argument("--per-kind", type=int_in("per_kind"), default=PER_KIND,
                        help=f"questions drawn per category / type / kind (default {PER_KIND})")
    parser.add_argument("--seed", type=int_in("seed"), default=0, help="seed of the draw (default 0)")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write cached check results")
    parser.add_argument("--out", type=nonempty_path, default=None, help="output folder (default runs/judge-check-<time>)")


def _judges(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """(column label, judge) for every judge and model asked for."""
    from memsim.sim.answer.judges import JUDGE_NAMES, LLM_JUDGES, make_judge
    from memsim.sim.answer.setup import build_llm, official_templates

    names = list(dict.fromkeys(args.judge or JUDGE_NAMES))
    official = official_templates(args.judge_prompts)
    out: list[tuple[str, Any]] = [(n, make_judge(n)) for n in names if n not in LLM_JUDGES]
    llm_names = [n for n in names if n in LLM_JUDGES]
    if not llm_names:
        return out
    models = args.judge_model or [None]
    for model in models:
        if args.llm == "local":
            llm = build_llm("local", model_path=model, threads=args.llm_threads)
        else:
            llm = build_llm("openai", model=model, base_url=args.llm_base_url)
        for name in llm_names:
            found = official.get(name)
            judge = make_judge(name, llm, templates=found.templates if found else None,
                               prompt_source=found.source if found else "")
            label = f"{name}/{llm.model}"
            out.append((label, judge))
    return out


def judge_check_main(args: argparse.Namespace) -> int:
    """Build the check set, check every judge, print the table, write the folder."""
    import logging
    import time

    from memsim.analysis.judge_check import (
        build_check_set,
        category_counts,
        check_judge,
        check_set_digest,
        format_check_table,
        stderr_progress,
        write_check,
    )
    from memsim.analysis.pipeline import default_out_dir
    from memsim.scenarios.locomo_stream import default_locomo_path

    locomo = None
    if not args.no_locomo:
        locomo = args.locomo or (default_locomo_path() if default_locomo_path().is_file() else None)
    items = build_check_set(locomo=locomo, longmemeval=args.longmemeval, per_kind=args.per_kind, seed=args.seed)
    digest = check_set_digest(items)
    sources = sorted({it.source for it in items})
    print(f"judge check: {len(items)} labelled items from {', '.join(sources)} (digest {digest})")
    print("  " + ", ".join(f"{c} {n}" for c, n in category_counts(items).items()))
    results: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    for label, judge in _judges(args):
        t0 = time.perf_counter()
        step = (lambda i, _l=label: stderr_progress(_l, i, len(items))) if hasattr(judge, "llm") else None
        result = check_judge(judge, items, digest=digest, cache=not args.no_cache, progress=step)
        seconds[label] = time.perf_counter() - t0
        results[label] = result
        how = "cached" if result.get("cached") else f"{seconds[label]:.1f} s"
        logging.getLogger(__name__).info("  %s: done (%s)", label, how)
    print()
    print(format_check_table(results, n_items=len(items)))
    for label, r in results.items():
        prompts = r.get("judge", {}).get("prompt_source")
        if prompts:
            print(f"{label}: prompts {prompts}")
    out = args.out or default_out_dir("judge-check")
    write_check(out, items, results, meta={"sources": sources, "locomo": str(locomo) if locomo else None,
                                            "longmemeval": str(args.longmemeval) if args.longmemeval else None,
                                            "seconds": seconds})
    print(f"written to {out}")
    return 0
