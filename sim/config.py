"""Run configuration files (TOML), validated at the edge.

A config file has a ``[scenario]`` table (``name`` plus the scenario's own
keys) and an optional ``[run]`` table (seed, k, systems, feedback and
maintenance schedule, control). Unknown keys, wrong types and impossible
values are errors that name the key and the file.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sim.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["RunSettings", "RunConfig", "load_config", "config_from_mapping", "validate_args", "CONFIG_DIR"]

CONFIG_DIR = Path(__file__).resolve().parent.parent / "scenarios" / "configs"
"""Ready configs shipped with memsim (users copy and edit them)."""


def validate_args(model: type[BaseModel], args: Mapping[str, Any], *, what: str, source: str) -> BaseModel:
    """Validate ``args`` with ``model``; errors name the key and the source file."""
    try:
        return model(**dict(args))
    except ValidationError as exc:
        where = f" in {source}" if source else ""
        parts = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "(arguments)"
            msg = err["msg"].removeprefix("Value error, ")
            parts.append(f"{what}.{key}: {msg}")
        raise UserError(f"bad {what} configuration{where}: " + "; ".join(parts)) from None


class RunSettings(BaseModel):
    """The ``[run]`` table: how the scenario is replayed and scored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = Field(0, ge=0, description="seed of the run's one random generator")
    k: int = Field(10, ge=1, description="memories retrieved per question; headline metric is recall_all@k")
    systems: tuple[str, ...] = Field((), description="systems under test (name or name:key=value,...)")
    control: str = Field("naive", description="static control for the difference in differences")
    feedback_delay_hours: float = Field(1.0, ge=0, description="delay before a question's feedback arrives")
    feedback_from: Literal["evidence", "answer"] = Field("evidence", description="what counts as correct in feedback")
    maintenance_every_hours: float = Field(24.0, ge=0, description="hours between maintenance ticks (0 = none)")
    n_boot: int = Field(2000, ge=100, description="bootstrap resamples per interval")


class RunConfig(BaseModel):
    """A whole config file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scenario: dict[str, Any]
    run: RunSettings = Field(default_factory=RunSettings)
    source: str = ""


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a TOML config; errors name the file and key."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"config file not found: {p}")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read config {p}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"config {p} is not valid TOML: {exc}") from None
    return config_from_mapping(data, source=str(p))


def config_from_mapping(data: Mapping[str, Any], *, source: str = "") -> RunConfig:
    """Validate an already parsed config."""
    from scenarios.base import build_scenario

    where = f" in {source}" if source else ""
    unknown = sorted(set(data) - {"scenario", "run"})
    if unknown:
        raise UserError(f"unknown table(s) {unknown}{where}; expected [scenario] and [run]")
    scen = data.get("scenario")
    if not isinstance(scen, Mapping) or "name" not in scen:
        raise UserError(f"missing [scenario] table with a 'name' key{where}")
    run = validate_args(RunSettings, data.get("run", {}), what="run", source=source)
    args = {k: v for k, v in scen.items() if k != "name"}
    build_scenario(str(scen["name"]), args, source=source)  # validates the scenario's keys now
    return RunConfig(scenario=dict(scen), run=run, source=source)  # type: ignore[arg-type]
