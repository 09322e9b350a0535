"""``memsim static longmemeval``: the retrieval protocol, or the QA protocol with a reader.

With ``--reader none`` (the default) the run is the offline retrieval
protocol and prints the official retrieval tables; with ``--reader short``
or ``cot`` each instance is answered from its top ``-k`` memories and judged
(by default with the LongMemEval rubric judge, ``llm_longmemeval``), and the
QA table is printed. A QA run resumes when pointed at its own ``--out``
folder again.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import itertools
import json
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from memory.registry import Resources, SystemSpec, UnknownSystemError, build_memory, parse_system
from sim.errors import UserError
from static_benchmarks import longmemeval as lme
from static_benchmarks.protocol import check_run_dir, default_run_dir, write_run

__all__ = [
    "DEFAULT_QA_K",
    "DEFAULT_QA_JUDGES",
    "add_arguments",
    "main",
    "Selection",
    "select",
    "run_retrieval_cli",
    "run_qa_cli",
]

DEFAULT_QA_K = 30
"""Memories handed to the reader per question unless ``-k`` says otherwise."""

DEFAULT_QA_JUDGES: tuple[str, ...] = ("llm_longmemeval", "contains")
"""Judges of a QA run when ``--judge`` is not given: the official rubric, plus a free check."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim static longmemeval``."""
    parser.add_argument(
        "--data",
        type=Path,
        required=True,
        help="a LongMemEval file: longmemeval_s.json, longmemeval_m.json, longmemeval_oracle.json "
        "or a *_cleaned.json release (streamed; see the README for where to get them)",
    )
    parser.add_argument("--system", default="naive", help="memory system: name or name:key=value,... (default naive)")
    parser.add_argument(
        "--granularity",
        choices=lme.GRANULARITIES,
        default="turn",
        help="retrieval keys: user turns (also reports session level) or sessions (default turn)",
    )
    parser.add_argument(
        "-k", type=int, default=DEFAULT_QA_K, help=f"memories the reader sees in a QA run (default {DEFAULT_QA_K})"
    )
    parser.add_argument(
        "--types",
        default=None,
        metavar="T1,T2",
        help=f"only these question types (comma-separated): {', '.join(lme.QUESTION_TYPES)}",
    )
    parser.add_argument("--sample", type=int, default=None, metavar="N", help="a stratified sample of N instances (by type)")
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample and of the run (default 0)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N (selected) instances")
    parser.add_argument(
        "--empty-gold",
        choices=("skip", "official"),
        default="skip",
        help="instances with no gold user turn (single-session-assistant): skip = unscored (default); "
        "official = scored 0 / 1 / 0 as the official script, whose averages include them",
    )
    parser.add_argument("--out", type=Path, default=None, help="run folder (default runs/static-longmemeval-<system>-<time>); "
                        "an unfinished QA run's folder resumes it")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    from sim.answer import add_answer_arguments

    add_answer_arguments(parser)


def _resolve_system(text: str) -> SystemSpec:
    try:
        return parse_system(text)
    except (UnknownSystemError, ValueError) as exc:
        raise UserError(f"--system: {exc}") from None


def _version() -> str:
    try:
        return importlib.metadata.version("memsim")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _embedder_stats(resources: Resources) -> dict[str, Any] | None:
    # The embedder is made lazily; a system that never embeds leaves it unset.
    embedder = getattr(resources, "_embedder", None)
    if embedder is None:
        return None
    stats = getattr(embedder, "stats", None)
    out: dict[str, Any] = {"model_id": getattr(embedder, "model_id", type(embedder).__name__)}
    if stats is not None:
        out.update(
            {name: getattr(stats, name) for name in ("requested", "unique_texts", "hits", "misses") if hasattr(stats, name)}
        )
    return out


class Selection:
    """Which instances of a file a run takes, and how they were chosen."""

    __slots__ = ("path", "indices", "total", "args")

    def __init__(self, path: Path, indices: list[int] | None, total: int | None, args: dict[str, Any]) -> None:
        self.path = path
        self.indices = indices
        """File positions to run (None: every instance, streamed in one pass)."""
        self.total = total
        """How many instances will run, when known before the run."""
        self.args = args
        """The selection options, for the run's spec."""

    def instances(self, warnings: lme.LoadWarnings) -> Iterator[lme.Instance]:
        """Stream the selected instances."""
        it = lme.iter_instances(self.path, warnings=warnings, indices=self.indices)
        limit = self.args.get("limit")
        if self.indices is None and limit is not None:
            return itertools.islice(it, limit)
        return it


def select(
    path: Path, *, types: Sequence[str] | None, sample: int | None, seed: int, limit: int | None
) -> Selection:
    """Resolve ``--types``, ``--sample`` and ``--limit``.

    Type filters and samples need the types of all instances first: a light
    scan of the file. ``--limit`` alone reads only as far as it needs.
    """
    args = {"types": list(types) if types else None, "sample": sample, "seed": seed, "limit": limit}
    if limit is not None and limit < 0:
        raise UserError(f"--limit must not be negative, got {limit}")
    if not types and sample is None:
        return Selection(path, None, None, args)
    index = lme.scan_instances(path)
    chosen = lme.select_indices(index, types=set(types) if types else None, sample=sample, seed=seed, limit=limit)
    return Selection(path, chosen, len(chosen), args)


def _types(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [t.strip() for t in text.split(",") if t.strip()]


def _make_system(spec: SystemSpec, resources: Resources) -> Any:
    def make() -> Any:
        try:
            return build_memory(spec.name, spec.args, resources=resources)
        except ValueError as exc:
            raise UserError(f"--system {spec.display}: {exc}") from None

    return make


def run_retrieval_cli(
    args: argparse.Namespace, system: SystemSpec, selection: Selection, resources: Resources, out: Path
) -> int:
    """The retrieval protocol: run, write the folder, print the tables."""
    warnings = lme.LoadWarnings()
    run = lme.run_retrieval(
        selection.instances(warnings),
        _make_system(system, resources),
        granularity=args.granularity,
        empty_gold=args.empty_gold,
        progress=False if args.no_progress else None,
        total=selection.total,
    )
    frame = lme.retrieval_frame(run, system=system.display)
    metrics = lme.summarise_retrieval(frame, ks=run.ks)
    n_inst = len(run.rows) + run.abstention_skipped
    spec = {
        "benchmark": "longmemeval",
        "protocol": "retrieval",
        "data": {"path": str(selection.path.resolve()), "sha256": _sha256(selection.path)},
        "system": system.to_json(),
        "granularity": args.granularity,
        "ks": list(run.ks),
        "empty_gold": args.empty_gold,
        "selection": selection.args,
        "memsim_version": _version(),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    full = {
        "benchmark": "longmemeval",
        "protocol": "retrieval",
        "system": system.display,
        **metrics,
        "instances": n_inst,
        "abstention_skipped": run.abstention_skipped,
        "texts": {"ingested": run.texts_ingested, "unique": run.unique_texts},
        "embedder": _embedder_stats(resources),
        "warnings": warnings.to_json(),
        "timings": {
            "wall_s": run.wall_s,
            "instances_per_s": (n_inst / run.wall_s) if run.wall_s > 0 else None,
            "ingest_s": sum(r["ingest_ms"] for r in run.rows) / 1000.0,
            "retrieve_s": sum(r["retrieve_ms"] for r in run.rows) / 1000.0,
        },
    }
    spec["embedder"] = full["embedder"]["model_id"] if full["embedder"] else None
    write_run(out, spec, frame, full)
    print(
        f"LongMemEval retrieval, {selection.path.name}: system {system.display}, granularity {args.granularity}, "
        f"{len(run.rows)} instances scored, {run.abstention_skipped} abstention skipped"
    )
    for line in warnings.lines():
        print(f"  {line}")
    print(lme.format_retrieval_table(metrics))
    emb = full["embedder"]
    extra = f"; embedder {emb['model_id']}: {emb.get('misses', '?')} computed, {emb.get('hits', '?')} from cache" if emb else ""
    print(f"texts: {run.texts_ingested} ingested, {run.unique_texts} unique{extra}")
    print(f"wall {run.wall_s:.1f} s ({full['timings']['instances_per_s'] or 0:.2f} instances/s); run folder: {out}")
    return 0


_RESUME_KEYS = ("data", "system", "k", "selection", "answers")


def _qa_spec_check(out: Path, spec: dict[str, Any]) -> None:
    """Write the spec of a new QA run, or check that a resumed run asks the same."""
    path = out / "spec.json"
    if not path.exists():
        if (out / "probes.parquet").exists() or (out / lme.QA_ROWS).exists():
            raise UserError(f"--out {out}: holds run files but no spec.json; choose another folder")
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spec, indent=2, default=str) + "\n")
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: unreadable ({exc}); choose another --out") from None
    if old.get("protocol") != "qa":
        raise UserError(f"--out {out}: holds a {old.get('protocol', 'different')} run, not a QA run; choose another folder")
    for key in _RESUME_KEYS:
        if json.dumps(old.get(key), sort_keys=True, default=str) != json.dumps(spec.get(key), sort_keys=True, default=str):
            raise UserError(
                f"--out {out}: resuming needs the same settings, but {key} differs "
                f"(run: {json.dumps(old.get(key), default=str)[:200]}; now: {json.dumps(spec.get(key), default=str)[:200]})"
            )


def run_qa_cli(
    args: argparse.Namespace,
    system: SystemSpec,
    selection: Selection,
    resources: Resources,
    out: Path,
    answers: Any,
) -> int:
    """The QA protocol: resume or start, write the folder, print the QA table."""
    judges = [c.removeprefix("answer_") for c in getattr(answers, "score_columns", [])]
    score_judge = "llm_longmemeval" if "llm_longmemeval" in judges or not judges else judges[0]
    describe = answers.describe() if hasattr(answers, "describe") else {"setup": type(answers).__name__}
    spec = {
        "benchmark": "longmemeval",
        "protocol": "qa",
        "data": {"path": str(selection.path.resolve()), "sha256": _sha256(selection.path)},
        "system": system.to_json(),
        "k": args.k,
        "selection": selection.args,
        "answers": describe,
        "score_judge": score_judge,
        "memsim_version": _version(),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    _qa_spec_check(out, spec)
    warnings = lme.LoadWarnings()
    try:
        run = lme.run_qa(
            selection.instances(warnings),
            _make_system(system, resources),
            answers,
            run_dir=out,
            k=args.k,
            progress=False if args.no_progress else None,
            total=selection.total,
        )
    except UserError as exc:
        raise UserError(f"{exc} (finished instances are kept in {out / lme.QA_ROWS}; rerun with --out {out} to resume)") from None
    except KeyboardInterrupt:
        print(f"interrupted; finished instances are kept in {out / lme.QA_ROWS}; rerun with --out {out} to resume")
        raise
    metrics = lme.summarise_qa(run.rows, score_key=f"answer_{score_judge}")
    import polars as pl

    rows = [{k: v for k, v in r.items() if k not in ("retrieved_ids", "retrieved_sources")} for r in run.rows]
    frame = pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
    frame.write_parquet(out / "probes.parquet")
    full = {
        "benchmark": "longmemeval",
        "protocol": "qa",
        "system": system.display,
        **metrics,
        "resumed_rows": run.resumed,
        "dropped_partial_line": run.dropped_partial_line,
        "texts": {"ingested_this_session": run.texts_ingested, "unique_this_session": run.unique_texts},
        "embedder": _embedder_stats(resources),
        "llm_this_session": answers.cost() if hasattr(answers, "cost") else None,
        "warnings": warnings.to_json(),
        "timings": {"wall_s_this_session": run.wall_s},
    }
    (out / "metrics.json").write_text(json.dumps(lme._json_safe(full), indent=2) + "\n")
    print(
        f"LongMemEval QA, {selection.path.name}: system {system.display}, k={args.k}, judge {score_judge}, "
        f"{len(run.rows)} instances ({run.resumed} resumed)"
    )
    for line in warnings.lines():
        print(f"  {line}")
    print(lme.format_qa_table(metrics))
    print(f"texts this session: {run.texts_ingested} ingested, {run.unique_texts} unique; wall {run.wall_s:.1f} s; run folder: {out}")
    return 0


def main(args: argparse.Namespace, *, resources: Resources | None = None, answers: Any | None = None) -> int:
    """Run ``memsim static longmemeval``.

    ``resources`` and ``answers`` let tests inject a fake embedder and a fake
    reader + judge; the command line builds the real ones from ``args``.
    """
    system = _resolve_system(args.system)
    if isinstance(args.k, bool) or args.k <= 0:
        raise UserError(f"-k must be a positive integer, got {args.k}")
    data = Path(args.data)
    if not data.is_file():
        raise UserError(f"--data {data}: no such file (get the LongMemEval files as the README says)")
    selection = select(data, types=_types(args.types), sample=args.sample, seed=args.seed, limit=args.limit)
    resources = resources if resources is not None else Resources(rng=np.random.default_rng(args.seed))
    qa = getattr(args, "reader", "none") not in (None, "none")
    out = args.out if args.out is not None else default_run_dir("longmemeval", system.display)
    if not qa:
        check_run_dir(out)
        return run_retrieval_cli(args, system, selection, resources, out)
    if answers is None:
        from sim.answer import answer_setup_from_args

        answers = answer_setup_from_args(args, default_judges=DEFAULT_QA_JUDGES)
    try:
        return run_qa_cli(args, system, selection, resources, out, answers)
    finally:
        close = getattr(answers, "close", None)
        if callable(close):
            close()
