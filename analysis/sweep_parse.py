"""Reading a sweep spec: from TOML (``load_sweep``), a parsed mapping (``sweep_from_mapping``) or a run config.

Every table, scenario point, run setting and system name is checked when
the spec is read, so a bad spec fails before any cell runs, with an error
that names the file and the dotted key. ``config_sweep`` expresses the runs
of ``memsim power`` and ``memsim sensitivity`` as a sweep. Re-exported by
``memsim.analysis.sweep``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from memsim.analysis.sweep_plan import ScenarioGrid, SweepSettings, SweepSpec, SystemGrid, expand, in_source
from memsim.sim.answer.options import AnswerOptions
from memsim.core.errors import UserError
from memsim.core.files import read_toml

__all__ = ["load_sweep", "sweep_from_mapping", "config_sweep"]


def _model(model: type[BaseModel], data: Any, *, key: str, source: str) -> Any:
    """Validate one table; errors name the dotted key and the file."""
    if not isinstance(data, Mapping):
        raise UserError(f"bad sweep spec{in_source(source)}: {key}: expected a table, got {type(data).__name__}")
    try:
        return model(**dict(data))
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            parts.append(f"{key}.{loc}: {err['msg'].removeprefix('Value error, ')}" if loc else f"{key}: {err['msg']}")
        raise UserError(f"bad sweep spec{in_source(source)}: " + "; ".join(parts)) from None


def _grid(data: Any, *, key: str, source: str) -> dict[str, tuple[Any, ...]]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise UserError(f"bad sweep spec{in_source(source)}: {key}: expected a table of lists")
    out = {}
    for k, v in data.items():
        if not isinstance(v, list) or not v:
            raise UserError(f"bad sweep spec{in_source(source)}: {key}.{k}: expected a non-empty list of values, got {v!r}")
        out[str(k)] = tuple(v)
    return out


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and validate a sweep spec (TOML); errors name the file and the key."""
    p = Path(path)
    return sweep_from_mapping(read_toml(p, "sweep spec"), source=str(p))


def sweep_from_mapping(data: Mapping[str, Any], *, source: str = "") -> SweepSpec:
    """Validate a parsed sweep spec: tables ``sweep``, ``scenario``, ``systems``, ``run``, ``answer``.

    Every table, every scenario point (its arguments and values), every run
    setting and every system name is checked here, so a bad spec fails
    before any cell runs. A system's own arguments are checked when a cell
    builds it (that can load models); a bad one fails its cells, recorded.

    Raises:
        UserError: naming the file and the dotted key at fault.
    """
    from memsim.memory.registry import memory_target
    from memsim.sim.spec import RunSettings

    bad = f"bad sweep spec{in_source(source)}"
    unknown = sorted(set(data) - {"sweep", "scenario", "systems", "run", "answer"})
    if unknown:
        raise UserError(f"{bad}: unknown table(s) {unknown}; expected sweep, scenario, systems, run, answer")
    settings = _model(SweepSettings, data.get("sweep", {}), key="sweep", source=source)

    raw_scen = data.get("scenario")
    if raw_scen is None:
        raise UserError(f"{bad}: scenario: missing (a [scenario] table with a 'name' key, or [[scenario]] tables)")
    scen_list = raw_scen if isinstance(raw_scen, list) else [raw_scen]
    scenarios = []
    for i, s in enumerate(scen_list):
        key = "scenario" if not isinstance(raw_scen, list) else f"scenario[{i}]"
        if not isinstance(s, Mapping) or "name" not in s:
            raise UserError(f"{bad}: {key}.name: missing (the registered scenario to run)")
        args = {k: v for k, v in s.items() if k not in ("name", "grid")}
        scenarios.append(ScenarioGrid(name=str(s["name"]), args=args, grid=_grid(s.get("grid"), key=f"{key}.grid", source=source)))

    raw_sys = data.get("systems")
    if not raw_sys or not isinstance(raw_sys, list):
        raise UserError(f"{bad}: systems: missing (a list of names, or [[systems]] tables with a 'name' key)")
    systems = []
    for i, s in enumerate(raw_sys):
        key = f"systems[{i}]"
        if isinstance(s, str):
            from memsim.memory.registry import parse_system

            try:
                ps = parse_system(s)
            except ValueError as exc:
                raise UserError(f"{bad}: {key}: {exc}") from None
            s = {"name": ps.name, "args": dict(ps.args)}
        entry = _model(SystemGrid, {**s, "grid": _grid(s.get("grid"), key=f"{key}.grid", source=source)} if isinstance(s, Mapping) else s,
                       key=key, source=source)
        try:
            memory_target(entry.name)  # a registered name, an entry point or package.module:Class
        except ValueError as exc:
            raise UserError(f"{bad}: {key}.name: {exc}") from None
        systems.append(entry)

    if not isinstance(data.get("run", {}), Mapping):
        raise UserError(f"{bad}: run: expected a table")
    raw_run = dict(data.get("run", {}))
    run_grid = _grid(raw_run.pop("grid", None), key="run.grid", source=source)
    if "systems" in raw_run:
        raise UserError(f"{bad}: run.systems: list the systems in the top-level 'systems' array instead")
    for k in run_grid:
        if k not in RunSettings.model_fields or k in ("seed", "systems"):
            valid = sorted(set(RunSettings.model_fields) - {"seed", "systems"})
            raise UserError(f"{bad}: run.grid.{k}: not a run setting; valid: {', '.join(valid)}")
    _model(RunSettings, raw_run, key="run", source=source)

    answer = data.get("answer")
    if answer is not None:
        answer = _answer_options(answer, bad, source)

    spec = SweepSpec(sweep=settings, scenarios=tuple(scenarios), systems=tuple(systems), run=raw_run,
                     run_grid=run_grid, answer=answer, source=source)
    expand(spec)  # builds every scenario point and run spec now: bad values fail here, naming their key
    return spec


def _answer_options(table: Any, bad: str, source: str) -> AnswerOptions | None:
    """The ``[answer]`` table as ``AnswerOptions`` (None when the reader is none); errors name the key."""
    if not isinstance(table, Mapping):
        raise UserError(f"{bad}: answer: expected a table")
    known = sorted(set(AnswerOptions.model_fields) - {"judge_checks"})
    for k in table:
        if k not in known:
            raise UserError(f"{bad}: answer.{k}: unknown option; valid: {', '.join(known)}")
    options = _model(AnswerOptions, table, key="answer", source=source)
    return options if options.enabled else None


def config_sweep(
    config: Any,
    *,
    systems: Sequence[Any],
    seeds: int,
    embedder: str = "minilm",
    name: str = "sweep",
    scenario_grid: Mapping[str, Sequence[Any]] | None = None,
    run_grid: Mapping[str, Sequence[Any]] | None = None,
    design: str = "one-at-a-time",
    **run_overrides: Any,
) -> SweepSpec:
    """A sweep over a loaded run config: its scenario, ``systems`` in one cell, ``seeds`` seeds from its own.

    This is how ``memsim power`` and ``memsim sensitivity`` express their runs
    (every system in one cell, so that the DiD against the control is paired).

    Args:
        config: a loaded config (``memsim.scenarios.config.RunConfig``).
        systems: ``memsim.memory.registry.SystemSpec`` values, the control among them or not (it is added first).
        seeds: consecutive seeds from ``config.run.seed``.
        embedder: ``minilm`` or ``hash`` (256 dimensions).
        name: the sweep's name.
        scenario_grid: scenario knob -> values.
        run_grid: run setting -> values.
        design: ``one-at-a-time`` or ``factorial``.
        **run_overrides: run settings for every cell (``n_boot``...).

    Raises:
        UserError: a bad knob or value (named).
    """
    scen = dict(config.scenario)
    if scenario_grid:
        scen["grid"] = {k: list(v) for k, v in scenario_grid.items()}
    run = config.run.model_dump(mode="json", exclude={"systems", "workers", "scheduler"})
    run.update({k: v for k, v in run_overrides.items() if v is not None})
    if run_grid:
        run["grid"] = {k: list(v) for k, v in run_grid.items()}
    data = {
        "sweep": {"name": name, "seeds": seeds, "embedder": embedder, "design": design, "split": "together"},
        "scenario": scen,
        "systems": [{"name": s.name, "args": dict(s.args), "label": s.label} for s in systems],
        "run": run,
    }
    return sweep_from_mapping(data, source=config.source)
