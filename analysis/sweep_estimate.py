"""A sweep's dry run: each cell's size and its estimated wall time, LLM calls and tokens.

``estimate`` measures rates (``Timings``: each distinct system played alone
with the hash embedder, and the embedder on a sample of texts) and scales
them to every cell; ``format_estimate`` is its total line. Estimates, not
measurements. Re-exported by ``memsim.analysis.sweep``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memsim.analysis.sweep_plan import Cell, SweepSpec

__all__ = ["Timings", "estimate", "format_estimate"]


def _arms(spec: Mapping[str, Any], system: Mapping[str, Any]) -> int:
    """How many times a cell plays one system: itself, plus its twin (placebo, constant arms) when it uses feedback."""
    from memsim.memory.registry import learns_from_feedback
    from memsim.sim.spec import speaks_in_turns

    if spec.get("twins", True) and spec.get("feedback_from") != "none" and (
        speaks_in_turns(spec.get("feedback_from", "evidence")) or learns_from_feedback(system["name"], system["args"])
    ):
        return 2 + bool(spec.get("placebo")) + 2 * bool(spec.get("constant_arms"))
    return 1


def _played(cell: Cell) -> int:
    """Systems played in a cell, twins and placebos included."""
    return sum(_arms(cell.spec, s) for s in cell.spec["systems"])


def _system_key(system: Mapping[str, Any]) -> str:
    """A system of a cell spec as the timing table keys it (name and arguments)."""
    return json.dumps({"name": system["name"], "args": system.get("args") or {}}, sort_keys=True)


def _work(cell: Cell) -> tuple[dict[str, Any], list[Any], Any]:
    from memsim.analysis.pipeline import scenario_stream
    from memsim.sim.runner import episode_totals

    stream = scenario_stream(cell.spec["scenario"]["name"], cell.spec["scenario"]["args"], cell.seed)
    episodes = list(stream.episodes())
    totals = episode_totals(episodes)
    played = _played(cell)
    return {**totals, "played": played, "units": (totals["turns"] + totals["questions"]) * played}, episodes, stream


@dataclass(frozen=True, slots=True)
class Timings:
    """The measured rates a dry run's estimate is made of."""

    unit_s: Mapping[str, float]
    """Warm engine seconds per unit of work (a turn or a question, for one arm), per system (``_system_key``)."""
    text_s: float
    """Embedding seconds per text with the cache off (paid once per scenario point and seed)."""
    first_use_s: Mapping[str, float] = field(default_factory=dict)
    """Seconds a fresh process pays once before a system runs warm (imports, models loaded on first use)."""


def _timed_play(spec: Any, episodes: list[Any], stream: Any, budget_s: float) -> tuple[float, float]:
    """(seconds, fraction done) of playing ``spec`` with the hash embedder, stopped after ``budget_s``."""
    from memsim.memory.embed import HashEmbedder
    from memsim.memory.registry import Resources
    from memsim.core.streams import streams
    from memsim.sim.runner import iter_run

    resources = Resources(rng=streams(spec.seed)["systems"], embedder_factory=lambda: HashEmbedder(256))
    t0 = time.perf_counter()
    frac = 0.0
    for cp in iter_run(spec, episodes, start=stream.start, end=stream.end, resources=resources):
        frac = cp.done / cp.total if cp.total else 1.0
        if time.perf_counter() - t0 > budget_s:
            break
    return time.perf_counter() - t0, frac


def _warm_rate(spec: Any, episodes: list[Any], stream: Any, units: int, budget_s: float) -> tuple[float, float]:
    """(warm seconds per unit, first-use seconds) of one system alone.

    It is played twice: the first play pays what a process pays once (imports, models loaded on
    first use), the second is timed as the warm rate; the difference is the first-use cost.
    """
    cold_s, cold_frac = _timed_play(spec, episodes, stream, budget_s / 2)
    warm_s, warm_frac = _timed_play(spec, episodes, stream, budget_s / 2)
    if warm_frac <= 0 or not units:
        return math.nan, 0.0
    rate = warm_s / warm_frac / units
    return rate, max(0.0, cold_s - rate * units * cold_frac)


def _calibrate(cells: Sequence[Cell], sized: Sequence[tuple[dict[str, Any], list[Any], Any]],
               calibrate_s: float) -> Timings:
    """Each distinct system played alone (hash embedder) on the first cell that has it, then the embedder on 128 texts."""
    from memsim.memory.embed import Embedder, HashEmbedder
    from memsim.sim.runner import upfront_texts
    from memsim.sim.spec import RunSpec

    first: dict[str, int] = {}
    for i, c in enumerate(cells):
        for system in c.spec["systems"]:
            first.setdefault(_system_key(system), i)
    unit_s: dict[str, float] = {}
    first_use_s: dict[str, float] = {}
    for key, i in first.items():
        cell, (w, episodes, stream) = cells[i], sized[i]
        system = next(s for s in cell.spec["systems"] if _system_key(s) == key)
        alone = RunSpec.model_validate(cell.spec).model_copy(update={"answer": None})
        alone = alone.model_copy(update={"systems": tuple(s for s in alone.systems if _system_key({"name": s.name, "args": dict(s.args), "label": s.label}) == key)})
        units = (w["turns"] + w["questions"]) * _arms(cell.spec, system)
        unit_s[key], first_use_s[key] = _warm_rate(alone, episodes, stream, units, calibrate_s / len(first))
    texts = upfront_texts(sized[0][1])
    sample = texts[:128]
    dim = cells[0].embedder.get("dim", 256)
    embedder = HashEmbedder(dim) if cells[0].embedder.get("kind") == "hash" else Embedder(use_cache=False)
    embedder.encode(sample[:2])  # loads the model outside the timing
    t1 = time.perf_counter()
    embedder.encode(sample)
    return Timings(unit_s=unit_s, text_s=(time.perf_counter() - t1) / max(1, len(sample)), first_use_s=first_use_s)


def estimate(
    spec: SweepSpec, cells: Sequence[Cell], *, calibrate_s: float = 10.0, timings: Timings | None = None
) -> list[dict[str, Any]]:
    """Per cell: its size and estimated wall time on one worker, LLM calls and tokens.

    Time is measured rates (``timings``, else calibrated now): per system,
    the engine's warm seconds per unit of work (turns + questions, per arm
    played: itself, its twin, its placebo), from playing it alone twice with
    the hash embedder on the first cell that has it (``calibrate_s`` split
    between the systems; the first play pays the process's first-use costs,
    the second is timed); and the embedder's seconds per text, from
    embedding up to 128 texts with the cache off. A cell's ``seconds`` is
    its systems' warm time; the embedding of its texts into a cold cache is
    ``embed_seconds``, charged once per scenario point and seed (to the
    first such cell: the others find the texts in the shared cache; a warm
    cache makes it pessimistic), so two cells with the same systems get the
    same ``seconds`` wherever they come. LLM calls: one reader call per
    question and system played, plus one per LLM judge; tokens: the
    reader's prompt (``k`` retrieved turns of the scenario's mean turn
    length, at 1.3 tokens a word, plus 150) per call. Estimates, not
    measurements.
    """
    from memsim.sim.runner import upfront_texts

    if not cells:
        return []
    sized = [_work(c) for c in cells]
    timings = timings or _calibrate(cells, sized, calibrate_s)
    texts = upfront_texts(sized[0][1])
    words = sum(len(t.split()) for t in texts) / max(1, len(texts))
    judges_llm = 0
    reader = spec.answer is not None
    if reader:
        from memsim.sim.answer.judges import LLM_JUDGES

        judges_llm = sum(1 for j in (spec.answer.judge or ()) if j in LLM_JUDGES)
    out = []
    embedded: set[str] = set()
    for c, (w, eps, _) in zip(cells, sized):
        group = json.dumps([c.spec["scenario"], c.seed], sort_keys=True)
        n_texts = len(upfront_texts(eps)) if group not in embedded else 0
        embedded.add(group)
        k = int(c.spec.get("k", 10))
        calls = w["questions"] * w["played"] * (1 + judges_llm) if reader else 0
        tokens = int(calls * (k * words * 1.3 + 150)) if reader else 0
        per_arm = w["turns"] + w["questions"]
        seconds = sum(timings.unit_s[_system_key(s)] * per_arm * _arms(c.spec, s) for s in c.spec["systems"])
        out.append({"cell": c.cell_id, "turns": w["turns"], "questions": w["questions"], "played": w["played"],
                    "seconds": seconds, "embed_seconds": timings.text_s * n_texts, "llm_calls": calls,
                    "tokens": tokens})
    if out:  # first-use costs are paid once per process: shown with the first cell, apart from its seconds
        out[0]["first_use_seconds"] = sum(timings.first_use_s.values())
    return out


def format_estimate(cells: Sequence[Cell], costs: Sequence[Mapping[str, Any]]) -> str:
    """The dry run's total line: warm CPU time of the cells, the cold embedding once, LLM calls and tokens."""
    warm = sum(c["seconds"] for c in costs)
    cold = sum(c.get("embed_seconds", 0.0) for c in costs)
    first = sum(c.get("first_use_seconds", 0.0) for c in costs)
    return (f"{len(cells)} cells; estimated {(warm + cold + first) / 60:.1f} CPU-minutes: {warm / 60:.1f} playing the "
            f"cells (warm rates per system), {cold / 60:.1f} embedding their texts once into a cold cache, "
            f"{first:.0f} s loading the systems once per worker process; "
            f"{sum(c['llm_calls'] for c in costs)} LLM calls, {sum(c['tokens'] for c in costs)} tokens")
