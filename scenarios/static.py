"""The static benchmarks as episode streams: LoCoMo conversations, LongMemEval instances.

A static benchmark is the engine with two settings (``RunSpec.kind =
"static"``): fresh systems per episode and questions after ingest. These
scenarios only read the official files into episodes (through the loaders of
``static_benchmarks``, with their quirk reports); the engine, recorder,
scorers and summariser are the same as for every longitudinal run.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from memsim.scenarios.base import ScenarioStream
from memsim.scenarios.longmemeval_stream import LongMemEvalFileArgs
from memsim.sim.core.errors import UserError
from memsim.sim.core.validate import validate_args
from memsim.static_benchmarks.data import fetch_hint, resolve_given

__all__ = ["LocomoConfig", "LocomoBenchmark", "LongMemEvalConfig", "LongMemEvalBenchmark", "default_locomo_path"]


def default_locomo_path() -> Path:
    """``$MEMSIM_LOCOMO``, else the fetched copy, else ``../shared/data/locomo/locomo10.json`` next to the repository."""
    from memsim.scenarios.locomo_stream import default_locomo_path as default

    return default()


class LocomoConfig(BaseModel):
    """Arguments of the static ``locomo`` benchmark."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: str = Field("", description="locomo10.json path (empty: $MEMSIM_LOCOMO or ../shared/data/locomo/)")
    captions: bool = Field(False, description="append ' [image: <caption>]' to turns that shared an image")
    limit_conversations: int | None = Field(None, ge=1, description="only the first N conversations")

    def path(self) -> Path:
        """The data file to read."""
        return resolve_given(self.data, "locomo") if self.data else default_locomo_path()


class LocomoBenchmark:
    """Static LoCoMo: one episode per conversation, every question after its last session.

    ``spec_args`` records the file's sha256, so a run folder names the exact data it read.
    """

    name = "locomo"

    def __init__(self, config: LocomoConfig, *, source: str = "") -> None:
        self.config = config
        path = config.path()
        if not path.exists():
            raise UserError(
                f"no such LoCoMo data file: {path}; give --data (or scenario.data), or set MEMSIM_LOCOMO, "
                f"or {fetch_hint('locomo')}"
            )
        from memsim.static_benchmarks.locomo import load_locomo

        self.dataset = load_locomo(path)

    @classmethod
    def from_args(cls, args: Mapping[str, Any], *, source: str = "") -> LocomoBenchmark:
        """Build from arguments; bad keys or values, or a missing file, raise ``UserError``."""
        return cls(validate_args(LocomoConfig, args, what="scenario", source=source), source=source)  # type: ignore[arg-type]

    def spec_args(self) -> dict[str, Any]:
        """Resolved arguments: the path actually read."""
        out = self.config.model_dump(mode="json")
        out["data"] = str(self.config.path().resolve())
        return out

    def meta(self) -> dict[str, Any]:
        """The file's hash and its load summary (quirks)."""
        summary = self.dataset.summary
        return {"sha256": self.dataset.sha256, "load_summary": summary.to_json(), "load_lines": summary.lines()}

    def generate(self, rng: np.random.Generator) -> ScenarioStream:
        """The conversations as episodes (no random draws)."""
        from memsim.static_benchmarks.locomo import locomo_episodes

        eps = locomo_episodes(
            self.dataset, captions=self.config.captions, limit_conversations=self.config.limit_conversations
        )
        return ScenarioStream(start=None, end=None, meta=self.meta(), streamed=eps)


class LongMemEvalConfig(LongMemEvalFileArgs):
    """Arguments of the static ``longmemeval`` benchmark (``data`` and ``types`` as the stream's)."""

    granularity: Literal["turn", "session"] = Field(
        "turn", description="memory items: user turns (also scored at session level) or whole sessions"
    )
    user_only: bool = Field(True, description="ingest only user turns (the official retrieval corpus); false: every turn")
    sample: int | None = Field(None, ge=1, description="a sample of N instances, stratified by question type")
    sample_seed: int = Field(0, ge=0, description="seed of the sample (the run's seed)")
    limit: int | None = Field(None, ge=0, description="only the first N selected instances")
    include_abstention: bool = Field(False, description="also ask abstention (_abs) questions (judged, not scored)")
    empty_gold: Literal["skip", "official"] = Field(
        "skip", description="no gold user turn: skip = unscored; official = 0 / 1 / 0 as the official script"
    )


# One survey per file version and selection per process: a spec is made and then
# executed in the same process, and the survey reads the whole selection.
_SURVEYS: dict[tuple[Any, ...], dict[str, Any]] = {}


class LongMemEvalBenchmark:
    """Static LongMemEval: one episode per instance, its haystack then its question.

    Instances stream from the file one at a time (``memsim.static_benchmarks.longmemeval``),
    so memory stays flat on the 2.7 GB M file. ``meta`` (recorded in the spec)
    holds the file's sha256, the load warnings and what the selection holds.
    """

    name = "longmemeval"

    def __init__(self, config: LongMemEvalConfig, *, source: str = "") -> None:
        self.config = config
        where = f" in {source}" if source else ""
        path = config.path()
        if path is None:
            raise UserError(
                f"name a LongMemEval file with --data or scenario.data{where} (or set MEMSIM_LONGMEMEVAL), "
                f"or {fetch_hint('longmemeval')}"
            )
        if not path.is_file():
            raise UserError(f"--data {path}: no such file; {fetch_hint('longmemeval')} (or another release: memsim data list)")
        self.path = path
        from memsim.static_benchmarks.longmemeval import select

        self.selection = select(
            path,
            types=config.types or None,
            sample=config.sample,
            seed=config.sample_seed,
            limit=config.limit,
        )

    @classmethod
    def from_args(cls, args: Mapping[str, Any], *, source: str = "") -> LongMemEvalBenchmark:
        """Build from arguments; bad keys or values, or a missing file, raise ``UserError``."""
        return cls(validate_args(LongMemEvalConfig, args, what="scenario", source=source), source=source)  # type: ignore[arg-type]

    def spec_args(self) -> dict[str, Any]:
        """Resolved arguments: the path actually read."""
        out = self.config.model_dump(mode="json")
        out["data"] = str(self.path.resolve())
        return out

    def meta(self) -> dict[str, Any]:
        """The file's sha256, its load warnings and the selection's counts (one pass over the selection)."""
        from memsim.memory.embed import file_sha256

        st = self.path.stat()
        key = (str(self.path.resolve()), st.st_size, st.st_mtime_ns, self.config.model_dump_json())
        if key not in _SURVEYS:
            _SURVEYS[key] = {"sha256": file_sha256(self.path), **self._survey()}
        return copy.deepcopy(_SURVEYS[key])

    def _survey(self) -> dict[str, Any]:
        from memsim.static_benchmarks.longmemeval import QUESTION_TYPES, LoadWarnings, gold_session_ids

        warnings = LoadWarnings()
        per_type: dict[str, int] = {}
        abstention = no_gold = 0
        for inst in self.selection.instances(self.path, warnings=warnings):
            if inst.is_abstention:
                abstention += 1
                if not self.config.include_abstention:
                    continue
            elif not gold_session_ids(inst):
                no_gold += 1
            per_type[inst.question_type] = per_type.get(inst.question_type, 0) + 1
        episodes = sum(per_type.values())
        lines = [
            f"{episodes} instances"
            + (f", {abstention} abstention" if self.config.include_abstention else f", {abstention} abstention left out")
            + f", {no_gold} without a gold user turn ({'unscored' if self.config.empty_gold == 'skip' else 'scored as officially'})",
            *warnings.lines(),
        ]
        return {
            "selection": {
                "instances": episodes,
                "per_type": {t: per_type[t] for t in QUESTION_TYPES if t in per_type},
                "abstention": abstention,
                "abstention_included": self.config.include_abstention,
                "no_gold_user_turn": no_gold,
            },
            "load_warnings": warnings.to_json(),
            "load_lines": lines,
        }

    def generate(self, rng: np.random.Generator) -> ScenarioStream:
        """The selected instances as streamed episodes (``rng`` is not drawn from: the sample has its own seed)."""
        from memsim.static_benchmarks.longmemeval import iter_episodes

        cfg = self.config
        episodes = iter_episodes(
            self.path,
            self.selection,
            granularity=cfg.granularity,
            user_only=cfg.user_only,
            include_abstention=cfg.include_abstention,
            empty_gold=cfg.empty_gold,
        )
        return ScenarioStream(start=None, end=None, meta=self.meta(), streamed=episodes)
