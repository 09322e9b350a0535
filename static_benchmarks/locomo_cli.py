"""``memsim static locomo``: the static LoCoMo retrieval run.

Loads the file, prints its load summary, runs the static protocol with the
chosen system (a fresh one per conversation, one shared embedder and cache),
prints per-category and overall evidence tables, and writes a run folder.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from memory.registry import Resources, SystemSpec, UnknownSystemError, build_memory, parse_system
from sim.answer import DEFAULT_JUDGES, add_answer_arguments, answer_setup_from_args, format_cost
from sim.errors import UserError
from sim.scoring import DEFAULT_KS
from static_benchmarks.locomo import (
    CATEGORY_LABELS,
    QUESTION_DELAY,
    LocomoDataset,
    load_locomo,
    to_static,
)
from static_benchmarks.protocol import (
    PartialRunError,
    StaticRunResult,
    check_run_dir,
    default_run_dir,
    format_tables,
    probes_frame,
    resolve_ks,
    run_static,
    summarise,
    write_run,
)

__all__ = [
    "LocomoRun",
    "add_arguments",
    "main",
    "run_locomo",
    "resolve_system",
    "default_data_path",
    "make_resources",
]

DEFAULT_K = 30
"""The headline cut-off when ``-k`` is not given."""


@dataclass(frozen=True, slots=True)
class LocomoRun:
    """A finished static LoCoMo run, ready to print or write."""

    spec: Mapping[str, Any]
    """The resolved spec (``spec.json``)."""
    result: StaticRunResult
    """Probes and per-conversation costs."""
    frame: pl.DataFrame
    """One row per question (``probes.parquet``)."""
    metrics: Mapping[str, Any]
    """Score tables, load summary and timings (``metrics.json``)."""


def default_data_path() -> Path | None:
    """The LoCoMo file next to the checkout (``../shared/data/locomo/locomo10.json``), if present."""
    candidate = Path.cwd().parent / "shared" / "data" / "locomo" / "locomo10.json"
    return candidate if candidate.is_file() else None


def resolve_system(text: str) -> SystemSpec:
    """Parse ``--system`` (``name`` or ``name:key=value,...``).

    Raises:
        UserError: unknown name (the message lists the known ones) or bad args.
    """
    try:
        return parse_system(text)
    except UnknownSystemError as exc:
        raise UserError(f"--system: {exc}") from None
    except ValueError as exc:
        raise UserError(f"--system: {exc}") from None


def make_resources(cache_dir: Path | None = None) -> Resources:
    """Run resources: rng seeded 0, the packaged embedder on ``cache_dir`` (default cache when None)."""
    if cache_dir is None:
        return Resources(rng=np.random.default_rng(0))

    def embedder() -> Any:
        from memory.embed import Embedder

        return Embedder(cache_dir=cache_dir)

    return Resources(rng=np.random.default_rng(0), embedder_factory=embedder)


def _version() -> str:
    try:
        return importlib.metadata.version("memsim")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _system_report(result: Any) -> dict[str, Any]:
    """The system's own ``report()`` per conversation, and the compression ratio over all of them."""
    reports = {c.user_id: dict(c.report) for c in result.conversations if c.report}
    if not reports:
        return {}
    out: dict[str, Any] = {"system_report": reports}
    seen = sum(r.get("turns_seen", 0) for r in reports.values())
    stored = sum(r.get("turns_stored", 0) for r in reports.values())
    if seen:
        out["compression_ratio"] = stored / seen
        out["turns_seen"], out["turns_stored"] = seen, stored
    return out


def _embedder_id(resources: Resources) -> str | None:
    # The embedder is made lazily; a system that never embeds leaves it unset.
    embedder = resources.made_embedder
    if embedder is None:
        return None
    for attr in ("model_id", "model_name", "name"):
        value = getattr(embedder, attr, None)
        if isinstance(value, str):
            return value
    return type(embedder).__name__


def run_locomo(
    dataset: LocomoDataset,
    system: SystemSpec,
    *,
    k: int = DEFAULT_K,
    captions: bool = False,
    labels: str = "locomo",
    limit_conversations: int | None = None,
    resources: Resources | None = None,
    progress: bool | None = None,
    answer_setup: Any | None = None,
) -> LocomoRun:
    """Run the static LoCoMo retrieval protocol.

    Args:
        dataset: a loaded LoCoMo file.
        system: the system under test; a fresh one is built per conversation.
        k: headline cut-off; every cut-off in ``sim.scoring.DEFAULT_KS`` is
            scored too, from one retrieved list of ``max(k, 50)`` memories.
        captions: append image captions to turn text.
        labels: category label set, a key of ``CATEGORY_LABELS``.
        limit_conversations: run only the first N conversations.
        resources: shared run resources (embedder and its cache); a default
            one (packaged model, default cache, rng seed 0) when None.
        progress: progress bar (None: only on a terminal).
        answer_setup: optional reader + judges (``sim.answer.AnswerSetup``);
            the reader sees each question's top ``k`` memories. Adversarial
            (category 5) questions are judged with an empty gold answer, so the
            judges score whether the answer says the information is not there.

    Raises:
        UserError: bad ``k``, ``labels`` or ``limit_conversations``, or
            arguments the system does not take.
    """
    ks = resolve_ks(k, DEFAULT_KS)
    if labels not in CATEGORY_LABELS:
        raise UserError(f"--labels {labels!r}; valid: {', '.join(CATEGORY_LABELS)}")
    if limit_conversations is not None and limit_conversations <= 0:
        raise UserError(f"--limit-conversations must be positive, got {limit_conversations}")
    resources = resources if resources is not None else make_resources()

    def make_system() -> Any:
        try:
            return build_memory(system.name, system.args, resources=resources)
        except ValueError as exc:
            raise UserError(f"--system {system.display}: {exc}") from None

    conversations = to_static(dataset, captions=captions, limit_conversations=limit_conversations)
    answer = None
    if answer_setup is not None:

        def answer(q: Any, memories: Any) -> Any:
            gold = "" if q.category == "5" else q.answer
            return answer_setup.answer_and_judge(q.question, q.now, memories, gold, q.category, q.question_id)

    # A PartialRunError carries the finished questions; main() writes them.
    result = run_static(conversations, make_system, k=k, ks=ks, progress=progress, answer=answer)
    label_map = {str(code): name for code, name in CATEGORY_LABELS[labels].items()}
    frame = probes_frame(result, system=system.display, category_labels=label_map)
    spec = {
        "benchmark": "locomo",
        "data": {"path": str(dataset.path.resolve()), "sha256": dataset.sha256},
        "system": system.to_json(),
        "k": k,
        "retrieve_k": result.retrieve_k,
        "ks": list(result.ks),
        "captions": captions,
        "labels": labels,
        "limit_conversations": limit_conversations,
        "question_delay_s": QUESTION_DELAY.total_seconds(),
        "memsim_version": _version(),
        "embedder": _embedder_id(resources),
        "reader": answer_setup.describe() if answer_setup is not None else None,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    metrics = {
        "benchmark": "locomo",
        "system": system.display,
        "k": k,
        "ks": list(result.ks),
        **summarise(frame),
        "load_summary": dataset.summary.to_json(),
        **({"llm": answer_setup.cost()} if answer_setup is not None else {}),
        **_system_report(result),
        "timings": {
            "wall_s": result.wall_s,
            "ingest_s": sum(c.ingest_s for c in result.conversations),
            "retrieve_s": sum(c.retrieve_s for c in result.conversations),
            "per_conversation": [
                {
                    "conversation": c.user_id,
                    "sessions": c.sessions,
                    "turns": c.turns,
                    "questions": c.questions,
                    "ingest_s": c.ingest_s,
                    "retrieve_s": c.retrieve_s,
                    "memory_items": c.memory_items,
                    "memory_bytes": c.memory_bytes,
                }
                for c in result.conversations
            ],
        },
    }
    return LocomoRun(spec=spec, result=result, frame=frame, metrics=metrics)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim static locomo``."""
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="the LoCoMo file (locomo10.json); default ../shared/data/locomo/locomo10.json when present",
    )
    parser.add_argument(
        "--system", default="naive", help="memory system: name or name:key=value,... (default naive)"
    )
    parser.add_argument(
        "-k",
        type=int,
        default=DEFAULT_K,
        help=f"headline cut-off (default {DEFAULT_K}); @1,5,10,30,50 are always reported",
    )
    parser.add_argument("--out", type=Path, default=None, help="run folder (default runs/static-locomo-<system>-<time>)")
    parser.add_argument(
        "--labels",
        choices=sorted(CATEGORY_LABELS),
        default="locomo",
        help="category names: locomo (the data's codes) or mem0 (Mem0's table names)",
    )
    parser.add_argument("--captions", action="store_true", help="append ' [image: <caption>]' to turns with an image")
    parser.add_argument("--limit-conversations", type=int, default=None, metavar="N", help="only the first N conversations")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="embedding cache folder (default $MEMSIM_CACHE_DIR or ~/.cache/memsim)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_answer_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """Run ``memsim static locomo``."""
    data = args.data if args.data is not None else default_data_path()
    if data is None:
        raise UserError("--data: no LoCoMo file given and ../shared/data/locomo/locomo10.json not found")
    resolve_ks(args.k)
    system = resolve_system(args.system)
    start = time.perf_counter()
    dataset = load_locomo(data)
    load_s = time.perf_counter() - start
    print(f"LoCoMo {dataset.path} (sha256 {dataset.sha256[:12]}), loaded in {load_s:.2f} s")
    for line in dataset.summary.lines():
        print(f"  {line}")
    out = check_run_dir(args.out if args.out is not None else default_run_dir("locomo", system.display))
    setup = answer_setup_from_args(args, DEFAULT_JUDGES["locomo"])
    try:
        run = run_locomo(
            dataset,
            system,
            k=args.k,
            captions=args.captions,
            labels=args.labels,
            limit_conversations=args.limit_conversations,
            resources=make_resources(args.cache_dir),
            progress=False if args.no_progress else None,
            answer_setup=setup,
        )
    except PartialRunError as exc:
        labels = {str(c): n for c, n in CATEGORY_LABELS[args.labels].items()}
        frame = probes_frame(exc.partial, system=system.display, category_labels=labels)
        spec = {"benchmark": "locomo", "system": system.to_json(), "k": args.k, "partial": True,
                "reader": setup.describe() if setup is not None else None}
        write_run(out, spec, frame, {"benchmark": "locomo", "partial": True, **summarise(frame)})
        print(f"stopped after {frame.height} questions; what was done is in {out}")
        if isinstance(exc.cause, UserError):
            raise exc.cause from None
        raise UserError(f"the answer step failed: {exc.cause}") from None
    metrics = dict(run.metrics)
    metrics["timings"] = {"load_s": load_s, **run.metrics["timings"]}
    write_run(out, run.spec, run.frame, metrics)
    n_conv = len(run.result.conversations)
    print(
        f"\nsystem {system.display}, {n_conv} conversations, {run.frame.height} questions, "
        f"k={args.k} (retrieved {run.result.retrieve_k}), labels {args.labels}"
    )
    print(format_tables(run.metrics, run.result.ks))
    if "compression_ratio" in run.metrics:
        m = run.metrics
        print(f"stored {m['turns_stored']} of {m['turns_seen']} turns: compression ratio {m['compression_ratio']:.3f}")
    if setup is not None:
        print(format_cost(setup.cost()))
    print(f"wall {run.result.wall_s:.1f} s; run folder: {out}")
    return 0
