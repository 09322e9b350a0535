"""The static benchmarks as episode streams: LoCoMo conversations, LongMemEval instances.

A static benchmark is the engine with two settings (``RunSpec.kind =
"static"``): fresh systems per episode and questions after ingest. These
scenarios only read the official files into episodes (through the loaders of
``static_benchmarks``, with their quirk reports); the engine, recorder,
scorers and summariser are the same as for every longitudinal run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from scenarios.base import ScenarioStream
from sim.errors import UserError
from sim.validate import validate_args

__all__ = ["LocomoConfig", "LocomoBenchmark", "LongMemEvalBenchmark", "default_locomo_path"]


def default_locomo_path() -> Path:
    """``$MEMSIM_LOCOMO``, else ``../shared/data/locomo/locomo10.json`` next to the repository."""
    from scenarios.locomo_stream import default_locomo_path as default

    return default()


class LocomoConfig(BaseModel):
    """Arguments of the static ``locomo`` benchmark."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: str = Field("", description="locomo10.json path (empty: $MEMSIM_LOCOMO or ../shared/data/locomo/)")
    captions: bool = Field(False, description="append ' [image: <caption>]' to turns that shared an image")
    limit_conversations: int | None = Field(None, ge=1, description="only the first N conversations")

    def path(self) -> Path:
        """The data file to read."""
        return Path(self.data) if self.data else default_locomo_path()


class LocomoBenchmark:
    """Static LoCoMo: one episode per conversation, every question after its last session.

    ``spec_args`` records the file's sha256, so a run folder names the exact data it read.
    """

    name = "locomo"

    def __init__(self, config: LocomoConfig, *, source: str = "") -> None:
        self.config = config
        path = config.path()
        if not path.exists():
            raise UserError(f"no such LoCoMo data file: {path}; give --data (or scenario.data), or set MEMSIM_LOCOMO")
        from static_benchmarks.locomo import load_locomo

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
        from static_benchmarks.locomo import locomo_episodes

        eps = locomo_episodes(
            self.dataset, captions=self.config.captions, limit_conversations=self.config.limit_conversations
        )
        return ScenarioStream(start=None, end=None, meta=self.meta(), streamed=eps)


class LongMemEvalBenchmark:  # pragma: no cover - replaced below when the LongMemEval adapter is built
    """Static LongMemEval (see ``static_benchmarks.longmemeval``)."""

    name = "longmemeval"
