"""A tiny static benchmark in one module: the loader of ``fixtures/tiny_static.json`` and its options.

The file holds dialogues (a date, a few turns, questions with the indices of
their evidence turns); each dialogue is one episode of the event vocabulary
of ``memsim.sim.events``: one session of its turns, then its questions an
hour later. ``test_static_registry`` registers it as protocol ``tiny``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from memsim.memory.base import Turn
from memsim.scenarios.base import ScenarioStream, StaticOptions
from memsim.core.errors import UserError
from memsim.core.validate import validate_args
from memsim.sim.events import Episode, Question, Session

DEFAULT = Path(__file__).parent / "fixtures" / "tiny_static.json"


class TinyOptions(StaticOptions):
    """The options of ``memsim static tiny``: every field is an argument of the loader."""

    kind: str | None = Field(None, description="only the questions of this kind (pets, family, hobbies)")
    limit_dialogues: int | None = Field(None, description="only the first N dialogues")


class TinyConfig(TinyOptions):
    """The loader's arguments: the options and the file."""

    data: str = Field("", description="a tiny_static.json file (empty: the fixture)")


class TinyBenchmark:
    """One episode per dialogue: its session, then its questions."""

    name = "tiny"

    def __init__(self, config: TinyConfig) -> None:
        self.config = config
        self.path = Path(config.data) if config.data else DEFAULT
        if not self.path.is_file():
            raise UserError(f"--data {self.path}: no such tiny benchmark file")
        self.raw = self.path.read_bytes()

    @classmethod
    def from_args(cls, args: Mapping[str, Any], *, source: str = "") -> TinyBenchmark:
        """Build from arguments; bad ones raise ``UserError``."""
        return cls(validate_args(TinyConfig, args, what="scenario", source=source))  # type: ignore[arg-type]

    def spec_args(self) -> dict[str, Any]:
        """Resolved arguments: the path actually read."""
        return {**self.config.model_dump(mode="json"), "data": str(self.path.resolve())}

    def meta(self) -> dict[str, Any]:
        """The file's hash and one load line."""
        dialogues = json.loads(self.raw)["dialogues"]
        return {"sha256": hashlib.sha256(self.raw).hexdigest(), "load_lines": [f"{len(dialogues)} dialogues"]}

    def _episodes(self) -> Iterator[Episode]:
        dialogues = json.loads(self.raw)["dialogues"][: self.config.limit_dialogues]
        for d in dialogues:
            at = datetime.fromisoformat(d["date"])
            uid, sid = d["id"], f"{d['id']}:S1"
            turns = tuple(Turn(f"{uid}:T{i}", uid, "user", text, at, sid) for i, text in enumerate(d["turns"]))
            questions = tuple(
                Question(f"{uid}:q{j}", uid, at + timedelta(hours=1), q["q"], q["a"], q["kind"],
                         tuple(f"{uid}:T{i}" for i in q["evidence"]))
                for j, q in enumerate(d["questions"])
                if self.config.kind in (None, q["kind"])
            )
            yield Episode(uid, (Session(sid, uid, at, turns), *questions))

    def generate(self, rng: np.random.Generator) -> ScenarioStream:
        """The dialogues as streamed episodes (no random draws)."""
        return ScenarioStream(start=None, end=None, meta=self.meta(), streamed=self._episodes())
