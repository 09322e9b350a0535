"""Run configuration files (TOML), validated at the edge.

A config file has a ``[scenario]`` table (``name`` plus the scenario's own
keys) and an optional ``[run]`` table (``RunTable``: the run settings of
``memsim.sim.spec.RunSettings``, seed, k, scorers, metric, feedback and
maintenance schedule, control, and the systems). Unknown keys, wrong
types and impossible values are errors that name the key and the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memsim.scenarios.registry import check_scenario_args
from memsim.core.errors import UserError
from memsim.core.files import read_toml
from memsim.sim.load import LoadSettings
from memsim.sim.spec import RunSettings
from memsim.core.validate import validate_args

__all__ = ["RunConfig", "RunTable", "load_config", "config_from_mapping", "CONFIG_DIR"]

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
"""Ready configs shipped with memsim (users copy and edit them)."""


class RunTable(RunSettings):
    """The ``[run]`` table: the run settings, and the systems under test by name."""

    systems: tuple[str, ...] = Field((), description="systems under test (name or name:key=value,...)")
    workers: int | None = Field(None, ge=1, le=1024, description="processes that play the run's arms at once (default: the "
                                "machine's cores); how the run is played, not what: not part of the spec")
    scheduler: str | None = Field(None, description="'local' (a Dask LocalCluster) or 'dask://HOST:PORT' to play the "
                                  "arms on Dask; not part of the spec")


class RunConfig(BaseModel):
    """A whole config file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scenario: dict[str, Any]
    run: RunTable = Field(default_factory=RunTable)
    load: LoadSettings | None = None
    """The optional ``[load]`` table (``memsim.sim.load``): bounded services, service times, a deadline."""
    source: str = ""


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a TOML config; errors name the file and key."""
    p = Path(path)
    return config_from_mapping(read_toml(p, "config", missing="config file"), source=str(p))


def _check_systems(run: RunTable, where: str) -> None:
    """Every ``[run] systems`` entry parses with valid arguments and the control is a registered system."""
    from memsim.memory.registry import UnknownSystemError, memory_names, parse_system

    for i, entry in enumerate(run.systems):
        try:
            parse_system(entry)
        except (UnknownSystemError, ValueError) as exc:
            raise UserError(f"run.systems[{i}] = {entry!r}{where}: {exc}") from None
    if run.control not in (None, "none") and ":" not in run.control and run.control not in memory_names():
        raise UserError(
            f"run.control = {run.control!r}{where}: not a registered system; "
            f"known: {', '.join(memory_names())} (or \"none\" for no control)"
        )


def config_from_mapping(data: Mapping[str, Any], *, source: str = "") -> RunConfig:
    """Validate an already parsed config."""
    where = f" in {source}" if source else ""
    # [scale] belongs to ``memsim bench scale`` (analysis.scale_bench), which reads the same file.
    unknown = sorted(set(data) - {"scenario", "run", "load", "scale"})
    if unknown:
        raise UserError(f"unknown table(s) {unknown}{where}; expected [scenario], [run] and optionally [load], [scale]")
    scen = data.get("scenario")
    if not isinstance(scen, Mapping) or "name" not in scen:
        raise UserError(f"missing [scenario] table with a 'name' key{where}")
    run = validate_args(RunTable, data.get("run", {}), what="run", source=source)
    _check_systems(run, where)
    load = validate_args(LoadSettings, data["load"], what="load", source=source) if "load" in data else None
    args = {k: v for k, v in scen.items() if k != "name"}
    check_scenario_args(str(scen["name"]), args, source=source)  # the scenario's keys, now
    return RunConfig(scenario=dict(scen), run=run, load=load, source=source)  # type: ignore[arg-type]
