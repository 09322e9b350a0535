"""The run spec: everything that defines a run, validated, written to ``spec.json``.

One spec shape for every run kind. A longitudinal scenario plays its
episodes (one per user) at once against systems built once, with feedback
and maintenance; a static benchmark plays its episodes (a conversation, an
instance) one after another, each against fresh systems, questions after
ingest, no feedback. ``memsim rerun RUN_DIR`` rebuilds a run from this file
alone, and a run folder is refused for a spec that differs from its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memsim.sim.core.errors import UserError
from memsim.sim.load import LoadSettings
from memsim.sim.core.validate import validate_args

FEEDBACK_CHANNELS = ("evidence", "answer", "none", "noisy:P", "correction")
"""What a system is told after a question (``RunSpec.feedback_from``); see ``check_channel``."""


def check_channel(value: str) -> str:
    """Validate a feedback channel: ``evidence`` (the oracle bit), ``answer`` (the judged answer),
    ``noisy:P`` (the oracle bit flipped with probability P), ``none``, ``correction``.

    Raises:
        ValueError: an unknown channel or a bad P (the message lists the channels).
    """
    if value in ("evidence", "answer", "none", "correction"):
        return value
    head, _, p = value.partition(":")
    if head == "noisy":
        try:
            prob = float(p)
        except ValueError:
            prob = -1.0
        if 0.0 <= prob <= 1.0:
            return value
        raise ValueError(f"noisy:P needs 0 <= P <= 1, got {value!r}")
    raise ValueError(f"unknown feedback channel {value!r}; choose from {', '.join(FEEDBACK_CHANNELS)}")


__all__ = [
    "FEEDBACK_CHANNELS",
    "check_channel","DEFAULT_KS", "RunSettings", "SystemEntry", "ScenarioEntry", "RunSpec", "read_spec", "spec_diff", "system_entries"]

DEFAULT_KS: tuple[int, ...] = (1, 5, 10, 30, 50)
"""Evidence cut-offs scored unless a run names others."""


class RunSettings(BaseModel):
    """The ``[run]`` table of a config file: how a scenario is replayed and scored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = Field(0, ge=0, description="seed of the run's one random generator")
    k: int = Field(10, ge=1, description="memories retrieved per question; headline metric is recall_all@k")
    systems: tuple[str, ...] = Field((), description="systems under test (name or name:key=value,...)")
    control: str = Field("naive", description="static control for the difference in differences")
    feedback_delay_hours: float = Field(1.0, ge=0, description="delay before a question's feedback arrives")
    feedback_from: str = Field("evidence", description="feedback channel: evidence, answer, noisy:P, none, correction")
    maintenance_every_hours: float = Field(24.0, ge=0, description="hours between maintenance ticks (0 = none)")
    n_boot: int = Field(2000, ge=100, description="bootstrap resamples per interval")
    twins: bool = Field(True, description="also play each learning system's twin (same system, feedback withheld)")
    placebo: bool = Field(False, description="also play each learning system's placebo twin (feedback shuffled)")
    balance_kinds: bool = Field(False, description="weight questions so both halves have the same question-kind mix")

    _channel = field_validator("feedback_from")(classmethod(lambda cls, v: check_channel(v)))


class SystemEntry(BaseModel):
    """A system under test: registered name, arguments, and its label in tables."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    label: str = ""

    @property
    def display(self) -> str:
        """The key of the system in rows and tables."""
        return self.label or self.name


class ScenarioEntry(BaseModel):
    """A scenario (or static benchmark) by registered name and resolved arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class RunSpec(BaseModel):
    """A complete, validated run definition (``spec.json``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["longitudinal", "static"] = "longitudinal"
    """``static``: fresh systems per episode, no feedback, no maintenance."""
    scenario: ScenarioEntry
    systems: tuple[SystemEntry, ...]
    seed: int = Field(0, ge=0)
    k: int = Field(10, ge=1)
    """Memories a reader sees; the headline cut-off."""
    ks: tuple[int, ...] = DEFAULT_KS
    """Cut-offs scored (``k`` is added; cut-offs above the memories fetched are dropped)."""
    retrieve_k: int | None = Field(None, ge=1)
    """Memories fetched per question (None: ``k``); static runs fetch ``max(ks)`` and score prefixes."""
    scorers: tuple[str, ...] = ("evidence", "stale")
    """Registered scorers (``memsim.sim.scorers``) applied to every question."""
    metric: str = ""
    """The headline column (default ``recall_all@k``)."""
    control: str | None = "naive"
    feedback_delay_hours: float = Field(1.0, ge=0)
    feedback_from: str = "evidence"
    """The feedback channel (``FEEDBACK_CHANNELS``)."""
    maintenance_every_hours: float = Field(24.0, ge=0)
    n_boot: int = Field(2000, ge=100)
    twins: bool = True
    """Play each system that learns from feedback twice more: its twin (feedback withheld) and, with ``placebo``, a twin with shuffled feedback."""
    placebo: bool = False
    balance_kinds: bool = False
    """Weight questions so that both halves count the question kinds in the same proportions."""

    _channel = field_validator("feedback_from")(classmethod(lambda cls, v: check_channel(v)))
    answer: dict[str, Any] | None = None
    """Reader and judge options (``memsim.sim.answer``); None: retrieval only."""
    load: LoadSettings | None = None
    """Bounded services and service times (``memsim.sim.load``); None: no queueing (left out of ``spec.json``)."""
    scenario_meta: dict[str, Any] = Field(default_factory=dict)
    """What the scenario reports about its data (file hash, exclusions); part of the spec so a changed file is seen."""
    memsim_version: str = ""

    @model_validator(mode="after")
    def _resolve(self) -> RunSpec:
        if any(k <= 0 for k in self.ks):
            raise ValueError(f"ks: cut-offs must be positive, got {list(self.ks)}")
        if self.retrieve_k is not None and self.retrieve_k < self.k:
            raise ValueError(f"retrieve_k: {self.retrieve_k} fetches fewer memories than k = {self.k}")
        # Only cut-offs that were retrieved are scored: recall@50 of 10 results would be recall@10.
        object.__setattr__(self, "ks", tuple(sorted({*(c for c in self.ks if c <= self.fetch_k), self.k})))
        if not self.metric:
            object.__setattr__(self, "metric", f"recall_all@{self.k}")
        cut = self.metric.rpartition("@")[2]
        if cut.isdigit() and int(cut) not in self.ks:
            raise ValueError(f"metric: {self.metric} is not scored (cut-offs {list(self.ks)}; raise retrieve_k to fetch more)")
        labels = [s.display for s in self.systems]
        if len(set(labels)) != len(labels):
            raise ValueError(f"systems: the same system is listed twice: {labels}")
        if not self.systems:
            raise ValueError("systems: at least one system is needed")
        if self.feedback_from == "answer" and self.answer is None and self.kind == "longitudinal":
            raise ValueError('feedback_from = "answer" needs a reader (--reader short or cot)')
        return self

    @property
    def fetch_k(self) -> int:
        """Memories fetched per question."""
        return self.retrieve_k or self.k

    @property
    def fresh_per_episode(self) -> bool:
        """Whether each episode gets freshly built systems (static runs)."""
        return self.kind == "static"

    def to_json(self) -> dict[str, Any]:
        """The spec as JSON data (what ``spec.json`` holds).

        A spec without load leaves the key out, so that its file is the same
        as before load existed (and a folder of such a run still resumes).
        """
        return self.model_dump(mode="json", exclude={"load"} if self.load is None else set())

    def write(self, path: Path) -> None:
        """Write ``spec.json``."""
        path.write_text(json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_spec(path: str | Path) -> RunSpec:
    """Read and validate a ``spec.json`` (a run folder or the file itself)."""
    p = Path(path)
    if p.is_dir():
        p = p / "spec.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"no run spec at {p}: not a run folder") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read run spec {p}: {exc}") from None
    if not isinstance(data, Mapping):
        raise UserError(f"run spec {p}: expected a JSON object")
    return validate_args(RunSpec, data, what="spec", source=str(p))  # type: ignore[return-value]


def spec_diff(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two spec dicts (for a clear refusal)."""
    out: list[str] = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        name = f"{prefix}{key}"
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            out.extend(spec_diff(va, vb, name + "."))
        elif va != vb:
            out.append(name)
    return out


def system_entries(specs: Sequence[Any]) -> tuple[SystemEntry, ...]:
    """``SystemEntry`` values from registry ``SystemSpec`` objects (name, args, display label)."""
    return tuple(SystemEntry(name=s.name, args=dict(s.args), label=s.display) for s in specs)
