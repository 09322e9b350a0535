"""``memsim static locomo|longmemeval``: the static protocols, played by the one engine.

A static run is a spec of kind ``static`` (fresh systems per episode,
questions after ingest, no feedback), executed by ``memsim.analysis.pipeline``
like every other run; this module only turns options into that spec and
prints its tables.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["static_arguments", "static_main", "locomo_spec"]

DEFAULT_LOCOMO_K = 30
"""The headline cut-off of static LoCoMo when ``-k`` is not given."""


def _common(p: argparse.ArgumentParser, *, default_k: int) -> None:
    from memsim.analysis.cli.options import add_answer_arguments

    p.add_argument("--data", type=Path, default=None, help="the benchmark file")
    p.add_argument("--system", action="append", default=None, metavar="NAME[:k=v,...]",
                   help="memory system (repeatable; default naive)")
    p.add_argument("-k", type=int, default=default_k, help=f"headline cut-off (default {default_k})")
    p.add_argument("--seed", type=int, default=0, help="seed (sampling, bootstrap; default 0)")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples per interval (default 2000)")
    p.add_argument("--out", type=Path, default=None,
                   help="run folder (default runs/static-<benchmark>-<time>); an unfinished run there is resumed")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="embedding cache folder (default $MEMSIM_CACHE_DIR or ~/.cache/memsim)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_answer_arguments(p)


def static_arguments(parser: argparse.ArgumentParser) -> None:
    """One sub-command per benchmark."""
    from memsim.static_benchmarks.locomo import CATEGORY_LABELS

    sub = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    p = sub.add_parser("locomo", help="LoCoMo: ingest each conversation, ask its questions")
    _common(p, default_k=DEFAULT_LOCOMO_K)
    p.add_argument("--labels", choices=sorted(CATEGORY_LABELS), default="locomo",
                   help="category names: locomo (the data's codes) or mem0 (Mem0's table names)")
    p.add_argument("--captions", action="store_true", help="append ' [image: <caption>]' to turns with an image")
    p.add_argument("--limit-conversations", type=int, default=None, metavar="N", help="only the first N conversations")
    p.add_argument("--per-speaker", action="store_true",
                   help="published retrieval: one store per speaker, top k of each (up to 2k memories to the reader), "
                        "evidence recall on the union")
    try:
        from memsim.analysis.cli.static_longmemeval import add_longmemeval_arguments
    except ImportError:  # pragma: no cover - the LongMemEval adapter is part of the package
        return
    add_longmemeval_arguments(sub, _common)


def _systems(args: argparse.Namespace) -> list[Any]:
    from memsim.memory.registry import parse_system
    from memsim.sim.core.errors import UserError

    try:
        return [parse_system(s) for s in (args.system or ["naive"])]
    except ValueError as exc:
        raise UserError(f"--system: {exc}") from None


def _resources(args: argparse.Namespace) -> Any:
    from memsim.memory.registry import Resources
    from memsim.sim.runner import random_streams

    def on_cache_dir() -> Any:
        from memsim.memory.embed import Embedder

        return Embedder(cache_dir=args.cache_dir)

    factory = on_cache_dir if args.cache_dir is not None else None
    return Resources(rng=random_streams(args.seed)["systems"], embedder_factory=factory)


def per_speaker_systems(systems: Any, k: int) -> list[Any]:
    """Each system as ``per-speaker`` over it: a store per speaker, the top ``k`` of each."""
    from memsim.memory.registry import SystemSpec

    return [
        SystemSpec(
            "per-speaker",
            {"inner": s.name, "inner_args": dict(s.args), "k_per_speaker": k},
            label=f"{s.display}/per-speaker",
        )
        for s in systems
    ]


def locomo_spec(args: argparse.Namespace) -> Any:
    """The static LoCoMo spec the options describe (every cut-off scored on one list of max(ks)).

    With ``--per-speaker`` each system keeps one store per speaker and
    returns the top ``k`` of each (LoCoMo has two speakers): the reader sees
    up to ``2k`` memories and the one cut-off scored is ``2k``, evidence
    recall on the union.
    """
    from memsim.analysis.pipeline import answer_options, make_spec
    from memsim.sim.spec import DEFAULT_KS

    scenario_args = {"captions": args.captions, "limit_conversations": args.limit_conversations}
    if args.data is not None:
        scenario_args["data"] = str(args.data)
    systems = _systems(args)
    k, ks, fetch = args.k, DEFAULT_KS, max(max(DEFAULT_KS), args.k)
    if getattr(args, "per_speaker", False):
        systems = per_speaker_systems(systems, args.k)
        k = fetch = 2 * args.k
        ks = (k,)
    return make_spec(
        "static",
        "locomo",
        scenario_args,
        systems,
        k=k,
        ks=ks,
        retrieve_k=fetch,
        scorers=("evidence",),
        seed=args.seed,
        n_boot=args.n_boot,
        control=None,
        answer=answer_options(args),
    )


def static_main(args: argparse.Namespace) -> int:
    """Run the chosen benchmark and print its tables."""
    from memsim.analysis.pipeline import default_out_dir, execute
    from memsim.analysis.cli.run import progress_bar
    from memsim.analysis.summary import format_tables
    from memsim.sim.answer.setup import DEFAULT_JUDGES, format_cost
    from memsim.sim.core.errors import UserError

    if args.k <= 0:
        raise UserError(f"-k must be a positive integer, got {args.k}")
    if args.benchmark == "locomo":
        from memsim.static_benchmarks.locomo import CATEGORY_LABELS

        spec = locomo_spec(args)
        print(f"LoCoMo {spec.scenario.args['data']} (sha256 {spec.scenario_meta['sha256'][:12]})")
        for line in spec.scenario_meta.get("load_lines", []):
            print(f"  {line}")
        names = {CATEGORY_LABELS["locomo"][c]: f"{c} {n}" for c, n in CATEGORY_LABELS[args.labels].items()}
        judges = DEFAULT_JUDGES["locomo"]
    else:
        from memsim.analysis.pipeline import answer_options, make_spec
        from memsim.analysis.cli.static_longmemeval import longmemeval_spec

        spec, names = longmemeval_spec(args, make_spec=make_spec, systems=_systems(args), answer=answer_options(args))
        print(f"LongMemEval {spec.scenario.args['data']} (sha256 {spec.scenario_meta['sha256'][:12]})")
        for line in spec.scenario_meta.get("load_lines", []):
            print(f"  {line}")
        judges = DEFAULT_JUDGES["longmemeval"]
    out = args.out or default_out_dir(f"static-{args.benchmark}")
    try:
        outcome = execute(
            spec,
            out_dir=out,
            resources=_resources(args),
            default_judges=judges,
            progress=None if args.no_progress else progress_bar(),
        )
    except UserError:
        print(f"stopped; every finished episode is in {out} (rerun the same command to resume)")
        raise
    m = outcome.summary.metrics
    totals = m["totals"]
    print(f"\n{totals.get('episodes')} episodes, {totals.get('questions')} questions, k={spec.k} "
          f"(retrieved {spec.fetch_k}), seed {spec.seed}")
    from memsim.analysis.cli.run import embedding_line

    line = embedding_line(outcome.result.info)
    if line:
        print(line)
    for system in m["systems"]:
        print(f"\nsystem {system}")
        print(format_tables(m, system, kind_names=names))
        if spec.answer is not None:
            from memsim.analysis.summary import format_answer_accuracy

            print(format_answer_accuracy(m, outcome.result.probes, system, column=spec.metric))
        lat = outcome.summary.timings["systems"][system]["retrieve_ms"]
        if lat["p50"] is not None:
            print(f"retrieve latency: p50 {lat['p50']:.2f} ms, p95 {lat['p95']:.2f} ms")
        report = m.get("system_reports", {}).get(system, {})
        if "kept" in report:
            print(f"stored {report['turns_stored']} of {report['turns_seen']} turns: "
                  f"kept {report['kept']:.3f}, compression {report['compression']:.3f}")
    if "llm" in outcome.result.info:
        print(format_cost(outcome.result.info["llm"]))
    print(f"wall {outcome.result.wall_seconds:.1f} s; run folder: {out}")
    return 0
