"""``memsim bench WHAT``: benchmarks that print figures (speed and memory are measured here, not in tests).

- ``locomo``: the static LoCoMo retrieval run, cold and warm embedding cache.
- ``longmemeval``: streaming and retrieval-protocol throughput and peak memory on a generated file.
- ``systems``: ingest turns/s and retrieve p50/p95 per memory system at 1k, 10k, 100k memories.
- ``llm``: answers per second of the local model with the ``short`` and ``cot`` readers.
- ``engine``: events per second of the simulator with a memory that does nothing.
- ``demo``: wall time of ``memsim demo``, cold and warm cache.
- ``sweep``: cells per minute of a sweep with 1 and 2 workers, Dask's overhead per cell.
- ``scale``: flat, HNSW and IVF-PQ at 10k / 100k / 1M memories (``memsim.analysis.scale_bench``).
- ``compare``: the plain reference pipeline and memsim on the same static LoCoMo workload, stage by stage.
- ``backends``: the embedding backends on LoCoMo's texts: speed, cosine to torch, recall.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from memsim.analysis.cli.options import float_in, int_in, nonempty_path

__all__ = ["bench_arguments", "bench_main"]


def _add_longmemeval(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size-gb", type=float_in("size_gb"), default=1.0, help="size of the generated file (default 1.0)")
    p.add_argument("--embedder", choices=("hash", "minilm"), default="hash", help="hash: protocol cost only; minilm: the real model")
    p.add_argument("--keep", action="store_true", help="keep the generated file in /tmp")


def _longmemeval(args: argparse.Namespace) -> int:
    from memsim.analysis.bench_longmemeval import bench_longmemeval, format_bench

    print(format_bench(bench_longmemeval(size_gb=args.size_gb, embedder=args.embedder, keep=args.keep)))
    return 0


def _add_engine(p: argparse.ArgumentParser) -> None:
    p.add_argument("--users", type=int_in("users"), default=20, help="persona users (default 20)")
    p.add_argument("--months", type=float_in("months"), default=12.0, help="simulated months (default 12)")
    p.add_argument("--systems", type=int_in("systems"), default=3, help="null systems fed in parallel (default 3)")


def _engine(args: argparse.Namespace) -> int:
    from memsim.analysis.bench import bench_engine

    _print(bench_engine(users=args.users, months=args.months, systems=args.systems))
    return 0


def _add_demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--system", action="append", default=[], help="limit the demo to these systems (repeatable)")
    p.add_argument("--config", default=None, help="scenario config (default: the demo's, scenarios/configs/demo.toml)")
    p.add_argument("--quick", action="store_true", help="the quick size (scenarios/configs/life_quick.toml)")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="the demo's --workers (default: its own, the cores)")
    p.add_argument("--json", type=nonempty_path, default=None, metavar="FILE", help="also write the figures as JSON")


def _demo(args: argparse.Namespace) -> int:
    from memsim.analysis.bench import bench_demo, format_demo

    extra = [x for s in args.system for x in ("--system", s)]
    extra += ["--config", args.config] if args.config else []
    extra += ["--quick"] if args.quick else []
    extra += ["--workers", str(args.workers)] if args.workers else []
    figures = bench_demo(extra_args=extra)
    print(format_demo(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


def _add_systems(p: argparse.ArgumentParser) -> None:
    from memsim.memory.bench import DEFAULT_SYSTEMS

    p.add_argument("--system", action="append", dest="systems", metavar="SPEC",
                   help=f"system to bench (repeatable; default: {', '.join(DEFAULT_SYSTEMS)})")
    p.add_argument("--sizes", default="1000,10000,100000", help="store sizes, comma-separated")
    p.add_argument("--sample", type=int_in("sample"), default=1000, help="base texts embedded with the real model")
    p.add_argument("--ingest-turns", type=int_in("items"), default=200, help="turns timed through ingest per size")
    p.add_argument("--queries", type=int_in("items"), default=200, help="retrievals timed per size")
    p.add_argument("--k", type=int_in("k"), default=10, help="memories per retrieval")
    p.add_argument("--seed", type=int_in("seed"), default=0)
    p.add_argument("--threads", type=int_in("threads"), default=1, help="FAISS/torch threads while timing (0: leave as is)")
    p.add_argument("--json", dest="json_out", default=None, help="also write rows as JSON to this file")
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="cache folder for what systems cache beside embeddings (multisignal's entities); "
                        "default none (NER timed cold); run twice with one folder to time it warm")


def _systems(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from memsim.memory.bench import DEFAULT_SYSTEMS, bench_systems, format_rows
    from memsim.memory.registry import memory_names
    from memsim.core.errors import UserError

    try:
        sizes = [int(s) for s in str(args.sizes).split(",") if s.strip()]
    except ValueError:
        raise UserError(f"--sizes: expected comma-separated integers, got {args.sizes!r}") from None
    systems = args.systems or list(DEFAULT_SYSTEMS)
    for s in systems:
        if s.partition(":")[0] not in memory_names():
            raise UserError(f"--system: unknown system {s.partition(':')[0]!r}; known: {', '.join(memory_names())}")
    print(format_rows([]), flush=True)
    rows, fig = bench_systems(
        systems, sizes, sample=args.sample, ingest_turns=args.ingest_turns, queries=args.queries,
        k=args.k, seed=args.seed, threads=args.threads or None, progress=lambda line: print(line, flush=True),
        cache_dir=args.cache_dir,
    )
    print(f"embedder {fig.model_id}: {fig.texts_per_s:.0f} texts/s computing, "
          f"{fig.query_ms:.1f} ms per query (not included above: vectors were looked up)")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"rows": [asdict(r) for r in rows], "embedder": asdict(fig)}, indent=1),
                                       encoding="utf-8")
    return 0


def _add_llm(p: argparse.ArgumentParser) -> None:
    from memsim.sim.answer.readers import READER_VARIANTS

    p.add_argument("--variant", action="append", choices=READER_VARIANTS, default=None,
                   help="reader variant to time (repeatable; default: all)")
    p.add_argument("--questions", type=int_in("items"), default=8, help="timed questions per variant")
    p.add_argument("--memories", type=int_in("k"), default=10, help="memories per question")
    p.add_argument("--llm-model-path", default=None, metavar="GGUF", help="GGUF model (default: SmolLM2-135M)")
    p.add_argument("--llm-threads", type=int_in("llm_threads"), default=None, help="CPU threads")
    p.add_argument("--max-answer-tokens", type=int_in("max_answer_tokens"), default=None, help="reply budget per answer")
    p.add_argument("--json", action="store_true", help="print the results as JSON")


def _llm(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from memsim.sim.answer.bench import bench_llm, format_bench
    from memsim.sim.answer.readers import READER_VARIANTS
    from memsim.core.errors import UserError

    if args.questions < 1 or args.memories < 0:
        raise UserError("--questions must be >= 1 and --memories >= 0")
    results = bench_llm(args.variant or READER_VARIANTS, n_questions=args.questions, n_memories=args.memories,
                        max_answer_tokens=args.max_answer_tokens, model_path=args.llm_model_path,
                        n_threads=args.llm_threads)
    print(json.dumps([asdict(r) for r in results], indent=2) if args.json else format_bench(results))
    return 0


def _print(figures: dict[str, Any]) -> None:
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {json.dumps(value) if isinstance(value, (dict, list)) else value}")


def _add_locomo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=None, help="the LoCoMo file (default: $MEMSIM_LOCOMO or ../shared/...)")
    p.add_argument("--system", default="naive", help="memory system: name or name:key=value,... (default naive)")
    p.add_argument("-k", type=int_in("k"), default=30, help="headline cut-off (default 30)")
    p.add_argument("--limit-conversations", type=int_in("limit_conversations"), default=None, metavar="N", help="only the first N conversations")
    p.add_argument("--json", type=nonempty_path, default=None, metavar="FILE", help="also write the figures as JSON")
    p.add_argument("--out", type=nonempty_path, default=None, metavar="DIR", help="also write the warm run's folder")


def _locomo(args: argparse.Namespace) -> int:
    from memsim.analysis.bench import bench_locomo, format_locomo_bench
    from memsim.memory.registry import parse_system
    from memsim.scenarios.static import default_locomo_path

    figures = bench_locomo(
        args.data or default_locomo_path(), parse_system(args.system), k=args.k,
        limit_conversations=args.limit_conversations, out_dir=args.out,
    )
    print(format_locomo_bench(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


_BACKENDS = ("onnx", "onnx-int8", "torch")  # memory.embed.BACKENDS, without importing it for --help


def _add_compare(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=None, help="the LoCoMo file (default: $MEMSIM_LOCOMO or ../shared/...)")
    p.add_argument("--system", action="append", default=[],
                   help="memsim system, repeatable: all in one run, compared with the reference run once per system (default naive)")
    p.add_argument("-k", type=int_in("k"), default=30, help="cut-off (default 30)")
    p.add_argument("--backend", choices=_BACKENDS, default=None, help="memsim's embedding backend (default: $MEMSIM_EMBED_BACKEND or onnx)")
    p.add_argument("--limit-conversations", type=int_in("limit_conversations"), default=None, metavar="N", help="only the first N conversations")
    p.add_argument("--cold-export", action="store_true", help="also export the ONNX graph afresh (first use on a machine)")
    p.add_argument("--order", choices=("reference-first", "memsim-first"), default="reference-first",
                   help="which pipeline runs first and pays for the imports both use (default reference-first)")
    p.add_argument("--repeat", type=int_in("repeat", floor=False), default=1, metavar="N",
                   help="run the two N times, interleaved (A B A B ...), and report the median ratio and its range (default 1)")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   help="write the figures as JSON to FILE, or to stdout instead of the table when no FILE is given")


def _compare(args: argparse.Namespace) -> int:
    from memsim.analysis.bench import bench_compare, format_compare
    from memsim.memory.registry import parse_system
    from memsim.scenarios.static import default_locomo_path
    from memsim.core.errors import UserError

    try:
        systems = [parse_system(s) for s in (args.system or ["naive"])]
    except ValueError as exc:
        raise UserError(f"--system: {exc}") from None
    if args.repeat < 1:
        raise UserError(f"--repeat: must be at least 1, got {args.repeat}")
    figures = bench_compare(
        args.data or default_locomo_path(), systems, k=args.k, backend=args.backend,
        limit_conversations=args.limit_conversations, cold_export=args.cold_export, order=args.order,
        repeat=args.repeat,
    )
    _emit(figures, args.json, format_compare)
    return 0


def _add_backends(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=None, help="the LoCoMo file (default: $MEMSIM_LOCOMO or ../shared/...)")
    p.add_argument("--backend", action="append", choices=_BACKENDS, default=[],
                   help="backends to run, the first is the yardstick of cosine (default: torch onnx onnx-int8)")
    p.add_argument("-k", type=int_in("k"), default=30, help="recall cut-off (default 30)")
    p.add_argument("--limit-conversations", type=int_in("limit_conversations"), default=None, metavar="N", help="only the first N conversations")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   help="write the figures as JSON to FILE, or to stdout instead of the table when no FILE is given")


def _backends(args: argparse.Namespace) -> int:
    from memsim.analysis.bench import bench_backends, format_backends
    from memsim.scenarios.static import default_locomo_path

    figures = bench_backends(
        args.data or default_locomo_path(), backends=args.backend or ("torch", "onnx", "onnx-int8"), k=args.k,
        limit_conversations=args.limit_conversations,
    )
    _emit(figures, args.json, format_backends)
    return 0


def _emit(figures: dict[str, Any], json_to: str | None, fmt: Any) -> None:
    """Print the table, or JSON to stdout (``-``), or the table and JSON to a file."""
    text = json.dumps(figures, indent=2) + "\n"
    if json_to == "-":
        print(text, end="")
        return
    print(fmt(figures))
    if json_to is not None:
        Path(json_to).write_text(text, encoding="utf-8")


def _add_run_scale(p: argparse.ArgumentParser) -> None:
    p.add_argument("--users", type=int, action="append", default=[], help="users (repeatable; default 30, 300, 3000)")
    p.add_argument("--months", type=float, default=1.0, help="simulated months (default 1)")
    p.add_argument("--workers", action="append", default=[], metavar="N|local:N",
                   help="worker processes (0: in the run's process), or local:N for a Dask LocalCluster "
                        "(repeatable; default 1, 2, local:2)")
    p.add_argument("--system", action="append", default=[], help="systems (repeatable; default naive, neuroplastic)")
    p.add_argument("--cache", default=None, metavar="DIR",
                   help="embedding cache to use and keep (default: a fresh temporary one, removed after): "
                        "embed a large world once, time its rows in later invocations")
    p.add_argument("--no-warm-up", action="store_true",
                   help="no untimed warm-up run (with a --cache an earlier invocation warmed for these users and systems)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the figures as JSON ('-': only JSON)")


def _run_scale(args: argparse.Namespace) -> int:
    from memsim.analysis.bench import bench_scale, format_scale
    from memsim.core.errors import UserError

    if args.no_warm_up and not args.cache:
        raise UserError("--no-warm-up needs --cache DIR (a cache an earlier invocation warmed)")

    figures = bench_scale(users=args.users or (30, 300, 3000), months=args.months,
                          workers=args.workers or ("1", "2", "local:2"), systems=args.system or ("naive", "neuroplastic"), cache=args.cache,
                          warm_up=not args.no_warm_up)
    _emit(figures, args.json, format_scale)
    return 0


def _add_sweep_bench(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim bench sweep``."""
    parser.add_argument("--users", type=int, default=4, help="persona users per cell (default 4)")
    parser.add_argument("--months", type=float, default=2.0, help="simulated months per cell (default 2)")
    parser.add_argument("--seeds", type=int, default=4, help="seeds (cells = 3 systems x seeds; default 4)")
    parser.add_argument("--repeat", type=int, default=2,
                        help="rounds of the three runs, interleaved; the best wall time of each is kept (default 2)")
    parser.add_argument("--no-dask", action="store_true", help="skip the Dask run")


def _sweep_bench(args: argparse.Namespace) -> int:
    """Run and print the figures."""
    from memsim.analysis.sweep_bench import bench_sweep

    figures = bench_sweep(users=args.users, months=args.months, seeds=args.seeds, dask=not args.no_dask, repeat=args.repeat)
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {json.dumps(value) if isinstance(value, list) else value}")
    return 0


def _add_scale_bench(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim bench scale``."""
    default = Path(__file__).resolve().parents[2] / "scenarios" / "configs" / "scale.toml"
    parser.add_argument("config", type=Path, nargs="?", default=default, help="scale config (default scenarios/configs/scale.toml)")
    parser.add_argument("--max-n", type=int, default=None, metavar="N", help="only sizes up to N memories")


def _scale_bench(args: argparse.Namespace) -> int:
    """Run the scale benchmark and print its table (each row as it is measured)."""
    from memsim.analysis.scale_bench import bench_scale, format_scale
    from memsim.core.files import read_toml

    data = read_toml(args.config, "scale config")
    config = dict(data.get("scale") or {})
    if args.max_n is not None:
        config["sizes"] = [n for n in config.get("sizes", []) if n <= args.max_n]
    print("synthetic 384-d unit vectors (topic clusters, low intrinsic dimension); one query at a time, one thread")
    rows = bench_scale(config)
    print()
    print(format_scale(rows))
    exact = {r["n"]: r for r in rows if r["index"] == "flat"}
    for r in rows:
        base = exact.get(r["n"])
        if base is not None and r is not base and r["p95_ms"] > 0:
            print(f"{r['n']:>9} {r['index']:<8} p95 {base['p95_ms'] / r['p95_ms']:.1f}x below exact at recall@10 {r['recall@10']:.3f}")
    return 0


# (name, help, (add arguments, main))
_BENCHES: tuple[tuple[str, str, tuple[Any, Any]], ...] = (
    ("locomo", "static LoCoMo retrieval run, cold and warm cache", (_add_locomo, _locomo)),
    ("longmemeval", "LongMemEval streaming and retrieval on a generated 1 GB file", (_add_longmemeval, _longmemeval)),
    ("systems", "ingest and retrieve speed per memory system at 1k/10k/100k", (_add_systems, _systems)),
    ("llm", "answers per second of the local model (short, cot)", (_add_llm, _llm)),
    ("engine", "simulator events per second with a null memory", (_add_engine, _engine)),
    ("run-scale", "user-months per second and peak memory against users and workers (MiniLM, warm cache)", (_add_run_scale, _run_scale)),
    ("demo", "memsim demo cold and warm: wall, texts embedded per second, turns ingested per second per arm", (_add_demo, _demo)),
    ("sweep", "sweep cells per minute with 1 and 2 workers, Dask overhead per cell", (_add_sweep_bench, _sweep_bench)),
    ("scale", "flat / HNSW / IVF-PQ at 10k, 100k, 1M memories: build, bytes, p50/p95, recall",
     (_add_scale_bench, _scale_bench)),
    ("compare", "the plain pipeline (sentence-transformers + FAISS) and memsim on static LoCoMo, cold, stage by stage",
     (_add_compare, _compare)),
    ("backends", "embedding backends on LoCoMo's texts: speed, cosine to torch, recall", (_add_backends, _backends)),
)


def bench_arguments(parser: argparse.ArgumentParser) -> None:
    """One sub-command per benchmark."""
    sub = parser.add_subparsers(dest="bench", required=True, metavar="BENCHMARK")
    for name, help_text, target in _BENCHES:
        p = sub.add_parser(name, help=help_text, description=help_text)
        target[0](p)
        p.set_defaults(_bench_main=target[1])


# Benches whose figures carry the machine's load themselves (in their table and JSON).
_REPORT_LOAD = frozenset({"locomo", "compare", "backends", "run-scale", "demo"})


def bench_main(args: argparse.Namespace) -> int:
    """Run the chosen benchmark; end with the machine's load before and after it (``analysis.bench.load_report``)."""
    from memsim.analysis.bench import format_load, load_report, machine_load

    before = machine_load()
    code = int(args._bench_main(args) or 0)
    if args.bench not in _REPORT_LOAD:
        print(format_load(load_report(before, machine_load())))
    return code
