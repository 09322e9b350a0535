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
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from memsim.sim.answer.options import AnswerOptions
from memsim.core.errors import UserError
from memsim.sim.load import LoadSettings
from memsim.core.validate import bounded, validate_args
from memsim.memory.registry import SystemSpec

FEEDBACK_CHANNELS = ("evidence", "answer", "none", "noisy:P", "correction", "implicit", "implicit:P")
"""What a system is told after a question (``RunSpec.feedback_from``); see ``check_channel``."""


def check_channel(value: str) -> str:
    """Validate a feedback channel: ``evidence`` (the oracle bit), ``answer`` (the judged answer),
    ``noisy:P`` (the oracle bit flipped with probability P), ``none``, ``correction``, ``implicit``
    (the simulated user's reactions, ``memsim.sim.implicit``) or ``implicit:P`` (P: the chance a
    wrong answer gets no reaction).

    Raises:
        ValueError: an unknown channel or a bad P (the message lists the channels).
    """
    if value in ("evidence", "answer", "none", "correction", "implicit"):
        return value
    head, _, p = value.partition(":")
    if head in ("noisy", "implicit"):
        try:
            prob = float(p)
        except ValueError:
            prob = -1.0
        if 0.0 <= prob <= 1.0:
            return value
        raise ValueError(f"{head}:P needs 0 <= P <= 1, got {value!r}")
    raise ValueError(f"unknown feedback channel {value!r}; choose from {', '.join(FEEDBACK_CHANNELS)}")


def speaks_in_turns(channel: str) -> bool:
    """Whether the channel reaches systems as user turns (``correction``, ``implicit``), so every system can learn from it."""
    return channel.partition(":")[0] in ("correction", "implicit")


__all__ = [
    "FEEDBACK_CHANNELS",
    "check_channel", "speaks_in_turns", "DEFAULT_KS", "MAX_SEED", "DEFAULT_CALL_DEADLINE_S", "MAX_CALL_DEADLINE_S", "RunSettings", "SystemEntry", "ScenarioEntry", "RunSpec", "read_spec", "spec_diff", "system_entries"]

MAX_SEED = 2**63 - 1
"""Largest seed a run accepts (the bound ``--seed`` has): seeds are signed 64-bit integers in every file that records them."""
DEFAULT_CALL_DEADLINE_S = 600.0
"""Seconds one call to an in-process system may take by default: generous (a system may call an LLM), yet a hang ends."""
MAX_CALL_DEADLINE_S = 7 * 86400.0
"""Longest deadline a call may be given (a week): a finite deadline always ends a hang."""

DEFAULT_KS: tuple[int, ...] = (1, 5, 10, 30, 50)
"""Evidence cut-offs scored unless a run names others."""


class RunSettings(BaseModel):
    """How a scenario is replayed and scored: the ``[run]`` table of a config file, and the settings part of ``RunSpec``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = Field(0, ge=0, le=MAX_SEED, description="seed of the run's random streams (memsim.core.streams); "
                      "at most 2**63 - 1, as --seed")
    k: Annotated[int, bounded(10_000)] = Field(10, ge=1, description="memories a reader sees per question; the headline cut-off")
    retrieve_k: int | None = Field(None, ge=1, description="memories fetched per question (default: k); "
                                   "static runs fetch max(ks) and score prefixes")
    ks: tuple[int, ...] = Field(DEFAULT_KS, validate_default=True, description="evidence cut-offs scored (k is added; "
                                "cut-offs above the memories fetched are dropped)")
    scorers: tuple[str, ...] = Field(("evidence", "stale"), description="registered scorers (memsim list scorers) "
                                     "applied to every question")
    metric: str = Field("", validate_default=True, description="the headline column (default: recall_all@k)")
    control: str | None = Field("naive", description="static control for the difference in differences (none: no control)")
    feedback_delay_hours: Annotated[float, bounded(24 * 365 * 10)] = Field(1.0, ge=0, description="delay before a question's feedback arrives")
    feedback_from: str = Field("evidence", description="feedback channel: evidence, answer, noisy:P, none, "
                               "correction, implicit, implicit:P (memsim.sim.implicit)")
    maintenance_every_hours: Annotated[float, bounded(24 * 365 * 10, least=0.1)] = Field(24.0, ge=0, description="hours between maintenance ticks (0 = none)")
    n_boot: Annotated[int, bounded(100_000)] = Field(2000, ge=100, description="bootstrap resamples per interval")
    twins: bool = Field(True, description="also play each learning system's twin (same system, feedback withheld)")
    placebo: bool = Field(True, description="also play each learning system's placebo (its system's told bits, "
                                            "permuted within user and week: the same calls and the same number of "
                                            "True bits, unrelated to the question); false: no placebo")
    constant_arms: bool = Field(True, description="also play each learning system told always False (~false) and "
                                                  "always True (~true), on the same questions; false: neither")
    balance_kinds: bool = Field(False, description="weight questions so both halves have the same question-kind mix")
    call_deadline_s: float = Field(DEFAULT_CALL_DEADLINE_S, gt=0, le=MAX_CALL_DEADLINE_S,
                                   description="seconds one call to an in-process system may take before the system "
                                   "is failed (memsim.memory.guard); HTTP systems have their own timeout")
    keep_deleted_text: bool = Field(False, description="keep, in the run folder, the text of turns deleted later "
                                    "(default: redacted when the deletion comes; for debugging only)")

    _channel = field_validator("feedback_from")(classmethod(lambda cls, v: check_channel(v)))

    @field_validator("retrieve_k")
    @classmethod
    def _fetch_enough(cls, v: int | None, info: ValidationInfo) -> int | None:
        k = info.data.get("k")
        if v is not None and k is not None and v < k:
            raise ValueError(f"{v} fetches fewer memories than k = {k}")
        return v

    @field_validator("ks")
    @classmethod
    def _scored_cutoffs(cls, v: tuple[int, ...], info: ValidationInfo) -> tuple[int, ...]:
        if any(c <= 0 for c in v):
            raise ValueError(f"cut-offs must be positive, got {list(v)}")
        k = info.data.get("k")
        if k is None:  # k itself is bad (its error is reported)
            return v
        fetch = info.data.get("retrieve_k") or k
        # Only cut-offs that were retrieved are scored: recall@50 of 10 results would be recall@10.
        return tuple(sorted({*(c for c in v if c <= fetch), k}))

    @field_validator("metric")
    @classmethod
    def _headline(cls, v: str, info: ValidationInfo) -> str:
        k, ks = info.data.get("k"), info.data.get("ks")
        if k is None or ks is None:
            return v
        metric = v or f"recall_all@{k}"
        cut = metric.rpartition("@")[2]
        if cut.isdigit() and int(cut) not in ks:
            raise ValueError(f"{metric} is not scored (cut-offs {list(ks)}; raise retrieve_k to fetch more)")
        return metric

    @property
    def fetch_k(self) -> int:
        """Memories fetched per question."""
        return self.retrieve_k or self.k


SystemEntry = SystemSpec
"""A run's system: the registry's ``SystemSpec`` (one type from the command line to ``spec.json``)."""


class ScenarioEntry(BaseModel):
    """A scenario (or static benchmark) by registered name and resolved arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class RunSpec(RunSettings):
    """A complete, validated run definition (``spec.json``): what to play, against what, and the run settings."""

    kind: Literal["longitudinal", "static"] = "longitudinal"
    """``static``: fresh systems per episode, no feedback, no maintenance."""
    scenario: ScenarioEntry
    systems: tuple[SystemEntry, ...]
    answer: AnswerOptions | None = None
    """Reader and judge options (``memsim.sim.answer``); None: retrieval only."""
    load: LoadSettings | None = None
    """Bounded services and service times (``memsim.sim.load``); None: no queueing (left out of ``spec.json``)."""
    scenario_meta: dict[str, Any] = Field(default_factory=dict)
    """What the scenario reports about its data (file hash, exclusions); part of the spec so a changed file is seen."""
    memsim_version: str = ""

    @field_validator("systems")
    @classmethod
    def _distinct(cls, v: tuple[SystemEntry, ...]) -> tuple[SystemEntry, ...]:
        labels = [s.display for s in v]
        if len(set(labels)) != len(labels):
            raise ValueError(f"the same system is listed twice: {labels}")
        if not v:
            raise ValueError("at least one system is needed")
        return v

    @model_validator(mode="after")
    def _answer_feedback(self) -> RunSpec:
        if self.feedback_from == "answer" and self.answer is None and self.kind == "longitudinal":
            raise ValueError('feedback_from = "answer" needs a reader (--reader short or cot)')
        return self

    @property
    def fresh_per_episode(self) -> bool:
        """Whether each episode gets freshly built systems (static runs)."""
        return self.kind == "static"

    def to_json(self) -> dict[str, Any]:
        """The spec as JSON data (what ``spec.json`` holds).

        A spec without load leaves the key out, so that its file is the same
        as before load existed (and a folder of such a run still resumes);
        so does one with the default call deadline (it changes no number).
        """
        exclude = {"load"} if self.load is None else set()
        if self.call_deadline_s == DEFAULT_CALL_DEADLINE_S:
            exclude.add("call_deadline_s")
        return self.model_dump(mode="json", exclude=exclude)

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


def system_entries(specs: Sequence[SystemSpec]) -> tuple[SystemSpec, ...]:
    """The systems as a run records them: each with its label fixed to its display (``SystemSpec.display``)."""
    return tuple(SystemSpec(s.name, dict(s.args), s.display) for s in specs)
