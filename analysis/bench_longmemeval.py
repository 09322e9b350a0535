"""Benchmark of the LongMemEval loader and the static retrieval run on a large generated file.

``bench_longmemeval`` writes a file in the published schema (M-like: hundreds
of sessions per instance, drawn from a shared pool so that sessions recur
across instances as they do in the real files) of at least ``size_gb`` GB,
then, in a fresh child process so the numbers are its own:

1. streams it with the loader alone (MB/s, instances/s, peak memory);
2. plays the static retrieval spec of ``memsim static longmemeval --system
   naive -k 10`` on it, built the same way (the registered protocol's plan,
   ``memsim.analysis.pipeline.make_spec``) and played by ``execute``: the one
   engine, a fresh ``naive`` system per instance, the official scorers and
   the durable recorder writing a run folder in a temporary directory
   (instances/s, peak memory, unique texts; the timed part includes the summary).

Peak memory is the child's maximum resident set size, which includes the
interpreter and libraries. The default embedder is the hashing stand-in
behind an in-memory memo (standing in for the content-addressed cache, so
each distinct text is hashed once), so the figures measure the protocol
(parsing, ingest, index, ranking, scoring), not the embedding model; ``embedder="minilm"`` uses the real model and its
cache (slow on a CPU: every distinct text is embedded once).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from memsim.static_benchmarks.longmemeval import QUESTION_TYPES
from memsim.core.streams import seeded

__all__ = ["generate_file", "bench_longmemeval", "format_bench"]

_WORDS = (
    "the a to and of I you my we it is was for on with that this have be can at about "
    "weekend trip garden recipe dinner budget apartment meeting project deadline guitar piano "
    "marathon running shoes yoga coffee tea book novel movie museum flight hotel beach mountain "
    "hiking camera laptop phone car bike train bus doctor dentist sister brother mother father "
    "friend colleague manager team office salary rent insurance vacation birthday wedding party "
    "cake pasta salad chicken soup bread cheese wine garden tomato basil recommend suggest help "
    "plan schedule remember bought started finished moved visited learned tried loved prefer"
).split()
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _date(rng: np.random.Generator, lo_day: int, hi_day: int) -> tuple[int, str]:
    day = int(rng.integers(lo_day, hi_day))
    t = np.datetime64("2022-01-01") + np.timedelta64(day, "D")
    y, m, d = (int(x) for x in str(t).split("-"))
    weekday = _DAYS[(day + 5) % 7]  # 2022-01-01 was a Saturday
    return day, f"{y:04d}/{m:02d}/{d:02d} ({weekday}) {int(rng.integers(0, 24)):02d}:{int(rng.integers(0, 60)):02d}"


def _sentence(rng: np.random.Generator, lo: int, hi: int) -> str:
    n = int(rng.integers(lo, hi))
    return " ".join(_WORDS[i] for i in rng.integers(0, len(_WORDS), n)).capitalize() + "."


def _session(rng: np.random.Generator, turns: int, answer_turn: int | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(turns):
        role = "user" if i % 2 == 0 else "assistant"
        text = _sentence(rng, 15, 60) if role == "user" else _sentence(rng, 60, 220)
        turn: dict[str, Any] = {"role": role, "content": text}
        if answer_turn is not None:
            turn["has_answer"] = i == answer_turn
        out.append(turn)
    return out


def generate_file(
    path: str | Path,
    *,
    size_gb: float = 1.0,
    sessions_per_instance: int = 500,
    pool_sessions: int = 6000,
    seed: int = 0,
) -> dict[str, Any]:
    """Write a LongMemEval-schema file of at least ``size_gb`` GB; return what was written.

    Instances are written one at a time (the writer holds only the session
    pool), each with 1-3 answer sessions of its own (a user turn marked
    ``has_answer``), filler sessions from the pool at the pool's dates, one
    abstention instance in 30, and the six question types in turn.
    """
    rng = seeded(seed)
    target = int(size_gb * 1e9)
    pool_json: list[str] = []
    pool_day: list[int] = []
    pool_date: list[str] = []
    for j in range(pool_sessions):
        day, text = _date(rng, 0, 500)
        pool_day.append(day)
        pool_date.append(text)
        pool_json.append(json.dumps(_session(rng, 2 * int(rng.integers(2, 9)), None)))
    start = time.perf_counter()
    n = 0
    p = Path(path)
    with p.open("w", encoding="utf-8") as f:
        f.write("[")
        while f.tell() < target:
            qtype = QUESTION_TYPES[n % len(QUESTION_TYPES)]
            qid = f"gen{n:06d}" + ("_abs" if n % 30 == 29 else "")
            fill = rng.choice(pool_sessions, size=sessions_per_instance, replace=False)
            n_ans = 1 if qtype.startswith("single") else int(rng.integers(2, 4))
            sids, dates, bodies = [], [], []
            for i in fill:
                sids.append(f"pool_{int(i)}")
                dates.append(pool_date[int(i)])
                bodies.append(pool_json[int(i)])
            for a in range(n_ans):
                turns = 2 * int(rng.integers(2, 7))
                _, text = _date(rng, 0, 500)
                sids.append(f"answer_{n:06d}_{a}")
                dates.append(text)
                bodies.append(json.dumps(_session(rng, turns, 2 * int(rng.integers(0, turns // 2)))))
            order = rng.permutation(len(sids))  # file order is not date order
            _, qdate = _date(rng, 500, 520)
            head = {
                "question_id": qid,
                "question_type": qtype,
                "question": _sentence(rng, 6, 14)[:-1] + "?",
                "answer": int(rng.integers(1, 20)) if n % 4 == 0 else _sentence(rng, 2, 6),
                "question_date": qdate,
                "haystack_session_ids": [sids[i] for i in order],
                "haystack_dates": [dates[i] for i in order],
                "answer_session_ids": [s for s in sids if s.startswith("answer_")],
            }
            text = json.dumps(head)[:-1] + ', "haystack_sessions": [' + ", ".join(bodies[i] for i in order) + "]}"
            f.write(("," if n else "") + "\n" + text)
            n += 1
        f.write("\n]\n")
    return {
        "path": str(p),
        "bytes": p.stat().st_size,
        "instances": n,
        "sessions_per_instance": sessions_per_instance + 2,
        "pool_sessions": pool_sessions,
        "write_s": time.perf_counter() - start,
    }


class _MemoEmbedder:
    """The hashing stand-in behind an in-memory text -> vector memo.

    Plays the part of the content-addressed cache of the real embedder:
    sessions recur across instances, so each distinct text is hashed once.
    """

    def __init__(self, dim: int = 384) -> None:
        from memsim.memory.embed import HashEmbedder

        self._inner = HashEmbedder(dim=dim)
        self.dim = dim
        self.model_id = f"memo-{self._inner.model_id}"
        self._memo: dict[str, np.ndarray] = {}

    @property
    def stats(self) -> Any:
        return self._inner.stats

    def encode(self, texts: Any) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            for t, v in zip(missing, self._inner.encode(missing)):
                self._memo[t] = v
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._memo[t] for t in texts])

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


def _peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _child(path: str, mode: str, embedder: str) -> dict[str, Any]:
    """The measurement, run in a fresh interpreter."""
    from memsim.static_benchmarks import longmemeval as lme

    base_mb = _peak_rss_mb()
    size = os.path.getsize(path)
    if mode == "stream":
        start = time.perf_counter()
        n = turns = 0
        for inst in lme.iter_instances(path):
            n += 1
            turns += sum(len(s.turns) for s in inst.sessions)
        wall = time.perf_counter() - start
        return {
            "mode": mode,
            "instances": n,
            "turns": turns,
            "wall_s": wall,
            "instances_per_s": n / wall,
            "mb_per_s": size / 1e6 / wall,
            "start_rss_mb": base_mb,
            "peak_rss_mb": _peak_rss_mb(),
        }
    import tempfile

    from memsim.analysis.pipeline import execute, make_spec
    from memsim.memory.embed import Embedder
    from memsim.memory.registry import Resources, SystemSpec
    from memsim.scenarios.registry import static_protocol

    factory = _MemoEmbedder if embedder == "hash" else Embedder
    resources = Resources(embedder_factory=factory)
    # The spec `memsim static longmemeval --system naive -k 10` makes.
    planned = static_protocol("longmemeval").plan({}, systems=[SystemSpec("naive")], data=path, k=10)
    spec = make_spec("static", "longmemeval", planned.scenario_args, planned.systems, **planned.settings(),
                     n_boot=200, control=None)
    with tempfile.TemporaryDirectory(prefix="memsim-lme-bench-") as out:
        start = time.perf_counter()
        result = execute(spec, out_dir=Path(out), resources=resources).result
        wall = time.perf_counter() - start
    probes, timeline = result.probes, result.timeline
    recall = probes["turn_recall_any@5"].fill_nan(None).drop_nulls()
    made = resources.made_embedder
    n = result.info["totals"]["episodes"]
    return {
        "mode": mode,
        "embedder": embedder,
        "instances": n,
        "scored": recall.len(),
        "items_ingested": int(timeline["turns"].fill_null(0).sum()),
        "unique_texts": len(made._memo) if isinstance(made, _MemoEmbedder) else None,
        "wall_s": wall,
        "instances_per_s": n / wall,
        "mb_per_s": size / 1e6 / wall,
        "ingest_s": float(timeline["ingest_ms"].fill_null(0).sum()) / 1000.0,
        "retrieve_s": float(probes["retrieve_ms"].sum()) / 1000.0,
        "turn_recall_any@5": float(recall.mean()) if recall.len() else None,
        "start_rss_mb": base_mb,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _in_child(path: Path, mode: str, embedder: str) -> dict[str, Any]:
    code = (
        "import json, sys\n"
        "from memsim.analysis.bench_longmemeval import _child\n"
        f"print(json.dumps(_child({str(path)!r}, {mode!r}, {embedder!r})))\n"
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"benchmark child ({mode}) failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_longmemeval(
    *,
    size_gb: float = 1.0,
    path: str | Path | None = None,
    embedder: str = "hash",
    keep: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """Generate a large file, then measure streaming and the retrieval protocol on it.

    Args:
        size_gb: size of the generated file (at least this many GB).
        path: where to write it (default ``/tmp/memsim-longmemeval-bench.json``;
            never inside the repository). An existing file of at least that
            size is reused.
        embedder: ``"hash"`` (protocol cost only) or ``"minilm"`` (the real model).
        keep: keep the file afterwards.
        seed: seed of the generator.

    Returns:
        ``{"file": ..., "stream": ..., "retrieval": ...}`` with the figures.
    """
    if embedder not in ("hash", "minilm"):
        raise ValueError(f"embedder must be 'hash' or 'minilm', got {embedder!r}")
    p = Path(path) if path is not None else Path("/tmp/memsim-longmemeval-bench.json")
    if p.exists() and p.stat().st_size >= size_gb * 1e9:
        info: dict[str, Any] = {"path": str(p), "bytes": p.stat().st_size, "reused": True}
    else:
        info = generate_file(p, size_gb=size_gb, seed=seed)
    try:
        stream = _in_child(p, "stream", embedder)
        retrieval = _in_child(p, "retrieval", embedder)
    finally:
        if not keep:
            p.unlink(missing_ok=True)
    return {"file": info, "stream": stream, "retrieval": retrieval}


def format_bench(result: dict[str, Any]) -> str:
    """The figures as printable lines."""
    f, s, r = result["file"], result["stream"], result["retrieval"]
    return "\n".join(
        [
            f"file: {f['bytes'] / 1e9:.2f} GB, {s['instances']} instances, {s['turns']:,} turns ({f['path']})",
            f"stream (loader only): {s['instances_per_s']:.1f} instances/s, {s['mb_per_s']:.1f} MB/s, "
            f"peak RSS {s['peak_rss_mb']:.0f} MB (after imports {s['start_rss_mb']:.0f} MB)",
            f"retrieval protocol on the engine (naive, {r['embedder']} embedder, fresh system per instance): "
            f"{r['instances']} instances scored (abstention left out), {r['instances_per_s']:.2f} instances/s, "
            f"{r['mb_per_s']:.1f} MB/s, {r['items_ingested']:,} user turns ingested"
            + (f", {r['unique_texts']:,} unique texts embedded" if r["unique_texts"] is not None else "")
            + f", ingest {r['ingest_s']:.1f} s, retrieve {r['retrieve_s']:.1f} s (the rest: parsing, embedding, scoring, writing), "
            f"peak RSS {r['peak_rss_mb']:.0f} MB",
        ]
    )


if __name__ == "__main__":
    print(format_bench(bench_longmemeval(size_gb=float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)))
