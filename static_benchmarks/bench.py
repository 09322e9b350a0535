"""``memsim bench locomo``: how long the static LoCoMo retrieval run takes, cold and warm.

The run is done twice with the same system: first on a fresh, empty
embedding cache in a temporary folder (cold: every turn and question is
embedded by the model), then again on that same cache (warm: every text is
a cache hit, the model is never loaded). Reported: wall time of each run,
texts embedded per second in the cold run (texts the model computed divided
by the time spent inside the embedder, with and without the first computing
call, which loads the model), and
``retrieve`` latency p50/p95 of each run.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memory.registry import Resources, SystemSpec
from sim.errors import UserError
from static_benchmarks.locomo import LocomoDataset, load_locomo
from static_benchmarks.locomo_cli import DEFAULT_K, LocomoRun, default_data_path, resolve_system, run_locomo
from static_benchmarks.protocol import check_run_dir, format_tables, resolve_ks, write_run

__all__ = ["PhaseTiming", "TimedEmbedder", "bench_locomo", "add_arguments", "main"]


class TimedEmbedder:
    """Wraps an embedder and adds up the wall time spent inside ``encode``.

    Args:
        inner: any embedder with ``model_id``, ``dim``, ``stats``, ``encode``.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.encode_s = 0.0
        # The first call that computes anything also loads the model: kept apart
        # so that the steady embedding rate can be told from the start-up cost.
        self.first_compute_s: float | None = None
        self.first_compute_texts = 0

    @property
    def model_id(self) -> str:
        """The wrapped embedder's model id."""
        return str(self.inner.model_id)

    @property
    def dim(self) -> int:
        """The wrapped embedder's vector length."""
        return int(self.inner.dim)

    @property
    def stats(self) -> Any:
        """The wrapped embedder's counts."""
        return self.inner.stats

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` with the wrapped embedder, timing the call."""
        before = self.inner.stats.misses
        start = time.perf_counter()
        try:
            return self.inner.encode(texts)
        finally:
            elapsed = time.perf_counter() - start
            self.encode_s += elapsed
            computed = self.inner.stats.misses - before
            if self.first_compute_s is None and computed:
                self.first_compute_s, self.first_compute_texts = elapsed, computed

    def encode_one(self, text: str) -> np.ndarray:
        """Embed one text (timed through ``encode``)."""
        return self.encode([text])[0]


@dataclass(frozen=True, slots=True)
class PhaseTiming:
    """One timed run of the static LoCoMo protocol."""

    phase: str
    """``"cold"`` or ``"warm"``."""
    wall_s: float
    """Wall time of the whole run (systems built, model loaded if needed)."""
    ingest_s: float
    """Time in ``ingest`` calls."""
    retrieve_s: float
    """Time in ``retrieve`` calls."""
    questions: int
    """Questions asked."""
    texts_requested: int
    """Texts handed to the embedder (0 when the system uses none)."""
    texts_embedded: int
    """Texts the model computed (cache misses)."""
    cache_hits: int
    """Texts served from the cache."""
    encode_s: float
    """Time inside the embedder."""
    first_compute_s: float
    """The first computing call (model load + one batch), 0 when nothing was computed."""
    first_compute_texts: int
    """Texts computed in that first call."""
    retrieve_p50_ms: float
    """Median ``retrieve`` latency."""
    retrieve_p95_ms: float
    """95th percentile ``retrieve`` latency."""

    @property
    def embedded_per_s(self) -> float | None:
        """Texts computed per second of embedder time (None when nothing was computed)."""
        return self.texts_embedded / self.encode_s if self.texts_embedded and self.encode_s > 0 else None

    @property
    def embedded_per_s_loaded(self) -> float | None:
        """The same rate leaving out the first computing call, i.e. with the model already loaded."""
        texts = self.texts_embedded - self.first_compute_texts
        seconds = self.encode_s - self.first_compute_s
        return texts / seconds if texts > 0 and seconds > 0 else None


def _phase(
    phase: str,
    dataset: LocomoDataset,
    system: SystemSpec,
    *,
    k: int,
    cache_dir: Path,
    limit_conversations: int | None,
    progress: bool | None,
    make_embedder: Callable[[Path], Any],
    keep: list[LocomoRun],
) -> PhaseTiming:
    timed: list[TimedEmbedder] = []

    def embedder() -> TimedEmbedder:
        timed.append(TimedEmbedder(make_embedder(cache_dir)))
        return timed[-1]

    resources = Resources(rng=np.random.default_rng(0), embedder_factory=embedder)
    start = time.perf_counter()
    run = run_locomo(
        dataset,
        system,
        k=k,
        limit_conversations=limit_conversations,
        resources=resources,
        progress=progress,
    )
    wall = time.perf_counter() - start
    keep.append(run)
    stats = timed[0].stats if timed else None
    latency = run.metrics["retrieve_ms"]
    return PhaseTiming(
        phase=phase,
        wall_s=wall,
        ingest_s=run.metrics["timings"]["ingest_s"],
        retrieve_s=run.metrics["timings"]["retrieve_s"],
        questions=run.frame.height,
        texts_requested=stats.requested if stats else 0,
        texts_embedded=stats.misses if stats else 0,
        cache_hits=stats.hits if stats else 0,
        encode_s=timed[0].encode_s if timed else 0.0,
        first_compute_s=(timed[0].first_compute_s or 0.0) if timed else 0.0,
        first_compute_texts=timed[0].first_compute_texts if timed else 0,
        retrieve_p50_ms=float(latency["p50"] or 0.0),
        retrieve_p95_ms=float(latency["p95"] or 0.0),
    )


def bench_locomo(
    dataset: LocomoDataset,
    system: SystemSpec,
    *,
    k: int = DEFAULT_K,
    limit_conversations: int | None = None,
    progress: bool | None = None,
    make_embedder: Callable[[Path], Any] | None = None,
    runs: list[LocomoRun] | None = None,
) -> tuple[PhaseTiming, PhaseTiming]:
    """Time the static LoCoMo run on a fresh cache (cold), then on the same cache (warm).

    Args:
        dataset: a loaded LoCoMo file.
        system: the system under test.
        k: headline cut-off.
        limit_conversations: only the first N conversations.
        progress: progress bar (None: only on a terminal).
        make_embedder: builds the embedder on a cache folder; default the
            packaged all-MiniLM-L6-v2 (``memory.embed.Embedder``).
        runs: when given, the cold and warm ``LocomoRun`` are appended to it.

    The temporary cache folder is removed afterwards; the user's own cache
    is never touched.
    """
    resolve_ks(k)
    if make_embedder is None:

        def make_embedder(cache_dir: Path) -> Any:
            from memory.embed import Embedder

            return Embedder(cache_dir=cache_dir)

    keep: list[LocomoRun] = runs if runs is not None else []
    with tempfile.TemporaryDirectory(prefix="memsim-bench-") as tmp:
        phases = tuple(
            _phase(
                name,
                dataset,
                system,
                k=k,
                cache_dir=Path(tmp),
                limit_conversations=limit_conversations,
                progress=progress,
                make_embedder=make_embedder,
                keep=keep,
            )
            for name in ("cold", "warm")
        )
    return phases[0], phases[1]


def _report(dataset: LocomoDataset, system: SystemSpec, cold: PhaseTiming, warm: PhaseTiming) -> str:
    turns = dataset.summary.turns
    lines = [f"bench locomo: system {system.display}, {cold.questions} questions ({turns} turns in the file)"]
    for p in (cold, warm):
        lines.append(
            f"  {p.phase:<4} wall {p.wall_s:8.1f} s  (ingest {p.ingest_s:.1f} s, retrieve {p.retrieve_s:.1f} s); "
            f"embedder: {p.texts_requested} texts, {p.texts_embedded} computed, {p.cache_hits} cached"
        )
    rate = cold.embedded_per_s
    loaded = cold.embedded_per_s_loaded
    lines.append(
        "  texts embedded per second (cold): "
        + (f"{rate:.1f} ({cold.texts_embedded} texts in {cold.encode_s:.1f} s, model load included)" if rate else "n/a")
        + (f"; {loaded:.1f} once loaded (first call {cold.first_compute_s:.1f} s)" if loaded else "")
    )
    lines.append(
        f"  retrieve latency ms: cold p50 {cold.retrieve_p50_ms:.2f} p95 {cold.retrieve_p95_ms:.2f}; "
        f"warm p50 {warm.retrieve_p50_ms:.2f} p95 {warm.retrieve_p95_ms:.2f}"
    )
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim bench locomo``."""
    p.add_argument("--data", type=Path, default=None, help="the LoCoMo file (locomo10.json)")
    p.add_argument("--system", default="naive", help="memory system: name or name:key=value,... (default naive)")
    p.add_argument("-k", type=int, default=DEFAULT_K, help=f"headline cut-off (default {DEFAULT_K})")
    p.add_argument("--limit-conversations", type=int, default=None, metavar="N", help="only the first N conversations")
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the figures as JSON")
    p.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="also write the warm run as a run folder and print its tables"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def main(args: argparse.Namespace) -> int:
    """Run ``memsim bench locomo``."""
    data = args.data if args.data is not None else default_data_path()
    if data is None:
        raise UserError("--data: no LoCoMo file given and ../shared/data/locomo/locomo10.json not found")
    resolve_ks(args.k)
    if args.limit_conversations is not None and args.limit_conversations <= 0:
        raise UserError(f"--limit-conversations must be positive, got {args.limit_conversations}")
    system = resolve_system(args.system)
    if args.out is not None:
        check_run_dir(args.out)
    dataset = load_locomo(data)
    runs: list[LocomoRun] = []
    cold, warm = bench_locomo(
        dataset,
        system,
        k=args.k,
        limit_conversations=args.limit_conversations,
        progress=False if args.no_progress else None,
        runs=runs,
    )
    if args.out is not None:
        # Both runs retrieve the same lists (same texts, same vectors); the warm
        # one is written because its latencies are those of a cached setup.
        warm_run = runs[-1]
        write_run(args.out, warm_run.spec, warm_run.frame, warm_run.metrics)
        print(format_tables(warm_run.metrics, warm_run.result.ks))
        print(f"run folder (warm run): {args.out}")
    print(_report(dataset, system, cold, warm))
    if args.json is not None:
        payload = {
            "benchmark": "locomo",
            "data_sha256": dataset.sha256,
            "system": system.to_json(),
            "k": args.k,
            "limit_conversations": args.limit_conversations,
            "phases": [
                {**asdict(p), "embedded_per_s": p.embedded_per_s, "embedded_per_s_loaded": p.embedded_per_s_loaded}
                for p in (cold, warm)
            ],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0
