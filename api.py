"""The Python API: play a run from a notebook or a script and read its figures as typed objects and polars frames.

``memsim.run`` plays a longitudinal config (a TOML file, a shipped config's
name such as ``"life_quick"``, a loaded ``RunConfig`` or a ``RunSpec``);
``memsim.static`` plays a registered static benchmark; ``memsim.open_run``
reads a finished run folder. Each returns a ``Run``: its spec, its typed
``metrics``, its per-question ``rows()`` and its learning table as a frame
(``contrasts()``). The figures are the ones ``memsim run`` writes to
``metrics.json`` for the same spec: the API and the command share one
pipeline (``memsim.analysis.pipeline.execute``).

Example:
    >>> import memsim
    >>> run = memsim.run("life_quick", systems=["naive", "control-learner"], seed=0)  # doctest: +SKIP
    >>> run.metrics["naive"].headline.mean  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # polars and the pipeline load on first use, so ``import memsim`` stays light
    import polars as pl

    from memsim.memory.registry import SystemSpec
    from memsim.scenarios.config import RunConfig
    from memsim.sim.spec import RunSpec

__all__ = ["Run", "Metrics", "SystemMetrics", "Score", "run", "static", "open_run"]


@dataclass(frozen=True, slots=True)
class Score:
    """A mean with its 95% interval (fractions: 0.62 is 62%); ``None`` where nothing was scored."""

    mean: float | None
    lo: float | None
    hi: float | None

    @classmethod
    def of(cls, entry: Mapping[str, Any] | None) -> Score:
        """The ``{"mean", "lo", "hi"}`` entry of ``metrics.json`` (absent keys are ``None``)."""
        entry = entry or {}
        return cls(entry.get("mean"), entry.get("lo"), entry.get("hi"))


@dataclass(frozen=True, slots=True)
class SystemMetrics:
    """One system's (or arm's) figures, as ``metrics.json`` holds them under ``systems.<label>``."""

    label: str
    """The system's key in rows and tables (twins and placebos are arms with labels of their own)."""
    questions: int
    """Rows of this system (scored and excluded)."""
    scored: int
    """Rows that count towards the scores (not excluded)."""
    headline: Score
    """The run's headline metric over every scored question, with a 95% interval resampling episodes."""
    scores: Mapping[str, Score]
    """Every score column's overall mean and interval (the headline among them)."""
    first_half: float | None
    """Headline mean over the first half of each user's questions (longitudinal runs; else None)."""
    second_half: float | None
    """Headline mean over the second half of each user's questions (longitudinal runs; else None)."""
    stale_above_current: float | None
    """Share of changed-fact questions where a superseded value outranks the current one (lower is better)."""
    final_items: int | None
    """Memories held at the end of the run."""
    final_bytes: int | None
    """Bytes held at the end of the run (vectors, text, metadata)."""
    deleted_leaks: int
    """Memories derived from forgotten turns that came back (must be 0)."""
    failed: str | None
    """Why the system failed mid-run (its figures are then absent), else None."""
    raw: Mapping[str, Any] = field(repr=False)
    """The whole ``metrics.json`` entry, for the figures this class does not name."""


def _system(label: str, e: Mapping[str, Any], metric: str) -> SystemMetrics:
    overall = e.get("overall") or {}
    scores = {col: Score.of(s) for col, s in (overall.get("scores") or {}).items()}
    return SystemMetrics(
        label=label, questions=int(e.get("questions") or 0), scored=int(overall.get("scored") or 0),
        headline=scores.get(metric, Score(None, None, None)), scores=MappingProxyType(scores),
        first_half=e.get("first"), second_half=e.get("second"), stale_above_current=e.get("stale_above_current"),
        final_items=e.get("final_items"), final_bytes=e.get("final_bytes"), deleted_leaks=int(e.get("deleted_leaks") or 0),
        failed=e.get("failed"), raw=MappingProxyType(dict(e)),
    )


@dataclass(frozen=True, slots=True)
class Metrics:
    """A run's ``metrics.json``, typed: the headline metric, its settings and one ``SystemMetrics`` per arm.

    ``metrics["naive"]`` is the figures of the system labelled ``naive``;
    ``raw`` is the JSON itself (NaN written as ``None``), byte for byte what
    the command writes for the same spec.
    """

    kind: str
    """``longitudinal`` or ``static``."""
    metric: str
    """The headline column (e.g. ``recall_all@10``: every gold evidence turn among the top 10 memories' provenance)."""
    k: int
    """Memories a reader sees per question."""
    control: str | None
    """The static control of the DiD column (longitudinal runs that played it), else None."""
    feedback: str | None
    """The feedback channel (longitudinal runs), else None."""
    systems: Mapping[str, SystemMetrics]
    """Per arm label: the systems in the spec's order, each followed by its arms (as the rows list them)."""
    twins: Mapping[str, str]
    """Feedback-using system -> its twin's label."""
    placebos: Mapping[str, str]
    """Placebo label -> the twin it is compared with."""
    raw: Mapping[str, Any] = field(repr=False)
    """The whole ``metrics.json``."""

    def __getitem__(self, label: str) -> SystemMetrics:
        """The figures of one arm; an unknown label names the known ones."""
        try:
            return self.systems[label]
        except KeyError:
            raise KeyError(f"no system {label!r} in this run; systems: {', '.join(self.systems)}") from None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, order: Sequence[str] = ()) -> Metrics:
        """Type a ``metrics.json`` mapping; ``systems`` in ``order`` (labels), then the file's order."""
        metric = str(data.get("metric", ""))
        entries = dict(data.get("systems") or {})
        labels = [label for label in order if label in entries] + [label for label in entries if label not in order]
        systems = {label: _system(label, entries[label], metric) for label in labels}
        return cls(
            kind=str(data.get("kind", "")), metric=metric, k=int(data.get("k") or 0), control=data.get("control"),
            feedback=data.get("feedback"), systems=MappingProxyType(systems),
            twins=MappingProxyType(dict(data.get("twins") or {})), placebos=MappingProxyType(dict(data.get("placebos") or {})),
            raw=MappingProxyType(dict(data)),
        )


_CONTRAST_FIELDS = ("first", "first_lo", "first_hi", "first_p", "first_mde", "second", "second_lo", "second_hi",
                    "second_p", "second_mde", "did", "did_lo", "did_hi", "did_p")
"""The figures of one contrast in ``metrics.json`` (differences as fractions: 0.05 is 5 percentage points)."""


@dataclass(frozen=True)
class Run:
    """A finished run: its spec, its typed metrics, its rows and its learning table.

    Built by ``memsim.run``, ``memsim.static`` or ``memsim.open_run``; nothing
    in it is recomputed on reading (the rows are kept as played, the metrics
    as summarised).
    """

    spec: RunSpec
    """The validated run spec (what ``spec.json`` holds; ``memsim rerun`` plays it again)."""
    metrics: Metrics
    """The run's figures (``metrics.json``), typed."""
    out_dir: Path | None
    """The run folder, or None for a run kept in memory (``out=None``)."""
    _rows: Any = field(repr=False)

    def rows(self) -> pl.DataFrame:
        """One row per question per arm (``probes.parquet``'s columns).

        Score columns are NaN where a question was not scored (``excluded``
        says why, e.g. an abstention question has no evidence to recall), and
        NaN propagates through a polars mean: take means over
        ``pl.col(m).fill_nan(None).mean()`` (nulls are skipped), or filter on
        ``pl.col("excluded").is_null()`` first, as the summariser does.
        """
        return self._rows

    def contrasts(self) -> pl.DataFrame:
        """The learning table: one row per feedback-using system and contrast, as ``metrics.json`` holds it.

        Columns: ``system`` (the feedback-using system), ``contrast`` (its key
        in ``metrics.json``: ``learning_from_feedback``,
        ``effect_of_feedback_calls``, ``effect_of_use``, ...), ``minus`` and
        ``reference`` (the two arms subtracted), then per half (``first``,
        ``second``) the difference, its 95% interval (``_lo``, ``_hi``), its
        sign-flip p (``_p``) and its design-based MDE (``_mde``), the DiD
        across halves (``did``, ``did_lo``, ``did_hi``, ``did_p``), and
        ``paired`` (questions both arms scored). Differences are fractions of
        the headline metric (0.05 is 5 percentage points). A run without
        feedback-using systems (or a static run) gives an empty frame with
        these columns.
        """
        import polars as pl

        rows: list[dict[str, Any]] = []
        for label, e in (self.metrics.raw.get("systems") or {}).items():
            for key, c in (e.get("contrasts") or {}).items():
                rows.append({"system": label, "contrast": key, "minus": c.get("system"), "reference": c.get("reference"),
                             **{f: _float(c.get(f)) for f in _CONTRAST_FIELDS}, "paired": c.get("paired")})
        schema = {"system": pl.String, "contrast": pl.String, "minus": pl.String, "reference": pl.String,
                  **{f: pl.Float64 for f in _CONTRAST_FIELDS}, "paired": pl.Int64}
        return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)

    def systems(self) -> pl.DataFrame:
        """One row per arm: the headline's mean and 95% interval, each half, stale>cur, memories and bytes held."""
        import polars as pl

        schema = {"system": pl.String, "questions": pl.Int64, "scored": pl.Int64, "mean": pl.Float64,
                  "lo": pl.Float64, "hi": pl.Float64, "first_half": pl.Float64, "second_half": pl.Float64,
                  "stale_above_current": pl.Float64, "final_items": pl.Int64, "final_bytes": pl.Int64}
        rows = [(s.label, s.questions, s.scored, s.headline.mean, s.headline.lo, s.headline.hi, s.first_half,
                 s.second_half, s.stale_above_current, s.final_items, s.final_bytes) for s in self.metrics.systems.values()]
        return pl.DataFrame(rows, schema=schema, orient="row")


def _float(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _config(config: str | Path | RunConfig) -> RunConfig:
    """A loaded config: a ``RunConfig`` as is, a TOML path, or a shipped config's name (``life_quick``)."""
    from memsim.scenarios.config import CONFIG_DIR, RunConfig, load_config
    from memsim.core.errors import UserError

    if isinstance(config, RunConfig):
        return config
    path = Path(config)
    if path.suffix == "" and not path.exists():
        shipped = CONFIG_DIR / f"{path.name}.toml"
        if not shipped.is_file():
            known = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.toml")))
            raise UserError(f"memsim.run: {config!r} is neither a config file nor a shipped config; shipped: {known}")
        path = shipped
    return load_config(path)


def _systems(systems: Sequence[str | SystemSpec] | None) -> tuple[SystemSpec, ...]:
    from memsim.memory.registry import SystemSpec, parse_system
    from memsim.core.errors import UserError

    out = []
    for s in systems or ():
        if isinstance(s, SystemSpec):
            out.append(s)
            continue
        try:
            out.append(parse_system(str(s)))
        except ValueError as exc:
            raise UserError(f"systems: {exc}") from None
    return tuple(out)


def _embedder(cache_dir: str | Path | None) -> Any:
    from memsim.analysis.cli.run import cache_dir_embedder

    return cache_dir_embedder(None if cache_dir is None else Path(cache_dir))


def _finish(outcome: Any) -> Run:
    # The JSON round trip gives exactly what metrics.json holds (tuples as lists, keys as strings,
    # anything else as its text, as write_summary writes it).
    data = json.loads(json.dumps(outcome.summary.metrics, sort_keys=True, default=str))
    order = list(outcome.summary.metrics.get("systems") or {})  # the rows' order: systems as listed, then their arms
    return Run(outcome.spec, Metrics.from_json(data, order=order), outcome.out_dir, outcome.result.probes)


def run(
    config_or_spec: str | Path | RunConfig | RunSpec,
    systems: Sequence[str | SystemSpec] | None = None,
    seed: int | None = None,
    out: str | Path | None = None,
    *,
    k: int | None = None,
    placebo: bool | None = None,
    report: bool = False,
    cache_dir: str | Path | None = None,
    workers: int = 0,
    scheduler: str | None = None,
) -> Run:
    """Play a longitudinal run, as ``memsim run CONFIG --system ... --seed ...`` does, and return it.

    Args:
        config_or_spec: a config file (``scenarios/configs/life_quick.toml``), the name of a config
            shipped with memsim (``"life_quick"``, ``"demo"``, ...), a loaded ``RunConfig``, or a
            ``RunSpec`` (``memsim.sim.spec.read_spec(folder)`` reads one from a run folder).
        systems: systems under test, as on the command line (``"naive"``,
            ``"neuroplastic:ltp_rate=0.2"``, ``"mine:MyMemory:label=mine"``) or as ``SystemSpec``;
            default: the config's ``[run] systems`` (or the spec's).
        seed: the seed of every random stream (default: the config's, or the spec's).
        out: the run folder to write (an unfinished run there is resumed); None keeps the run in
            memory and writes nothing.
        k: memories a reader sees per question (default: the config's).
        placebo: play each learning system's placebo beside its twin (default: the config's, else on).
        report: also write ``report.html`` and ``report.md`` into ``out``.
        cache_dir: the embedding cache's folder (default: memsim's cache).
        workers: worker processes that play the run's arms at once (default 0: in this process; 1 or more
            start worker processes, so a script calling this needs the ``if __name__ == "__main__":`` guard).
            The figures are the same for any count.
        scheduler: ``"local"`` (a Dask LocalCluster of ``workers``) or ``"dask://HOST:PORT"``.

    Returns:
        The finished run.

    Raises:
        memsim.core.errors.UserError: an unknown config or system, a bad setting, no systems.
    """
    from memsim.analysis.pipeline import execute, spec_from_config
    from memsim.memory.http_health import check_http_systems
    from memsim.core.errors import UserError
    from memsim.sim.spec import RunSpec, system_entries

    chosen = _systems(systems)
    if isinstance(config_or_spec, RunSpec):
        spec = config_or_spec
        overrides: dict[str, Any] = {"seed": seed, "k": k, "placebo": placebo}
        overrides = {key: v for key, v in overrides.items() if v is not None}
        if chosen:
            overrides["systems"] = system_entries(chosen)
        if overrides:  # validated again, so that a bad override is refused as a config's would be
            spec = RunSpec.model_validate({**spec.model_dump(), **overrides})
    else:
        config = _config(config_or_spec)
        if not chosen and not config.run.systems:
            raise UserError(f"memsim.run: no systems: give systems=[...] or [run] systems in {config.source or 'the config'}")
        spec = spec_from_config(config, systems=chosen, seed=seed, k=k, placebo=placebo)
    if report and out is None:
        raise UserError("memsim.run: report=True needs a run folder (out=...)")
    check_http_systems(spec.systems)
    from memsim.sim.workers import parse_scheduler

    outcome = execute(spec, out_dir=None if out is None else Path(out), report=report, embedder_factory=_embedder(cache_dir),
                      workers=workers, scheduler=parse_scheduler(scheduler))
    return _finish(outcome)


def static(
    benchmark: str,
    systems: Sequence[str | SystemSpec] | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    *,
    data: str | Path | None = None,
    k: int | None = None,
    n_boot: int = 2000,
    report: bool = False,
    cache_dir: str | Path | None = None,
    **options: Any,
) -> Run:
    """Play a registered static benchmark, as ``memsim static BENCHMARK ...`` does, and return it.

    Args:
        benchmark: a registered protocol (``memsim list static``: ``locomo``, ``longmemeval``, ...).
        systems: systems under test as on the command line (default: ``naive``).
        seed: the seed (sampling, bootstrap).
        out: the run folder (an unfinished run there is resumed); None keeps the run in memory.
        data: the benchmark's file, a path or a ``memsim data`` name (default: where the protocol finds it).
        k: the headline cut-off (default: the protocol's).
        n_boot: bootstrap resamples per interval.
        report: also write ``report.html`` and ``report.md`` into ``out``.
        cache_dir: the embedding cache's folder (default: memsim's cache).
        **options: the protocol's own options, by field name (``memsim static BENCHMARK --help``
            lists them as flags: ``--limit-dialogues`` is ``limit_dialogues``).

    Raises:
        memsim.core.errors.UserError: an unknown benchmark, option or system, a missing file.
    """
    from memsim.analysis.pipeline import execute, make_spec
    from memsim.memory.http_health import check_http_systems
    from memsim.memory.registry import Resources, parse_system
    from memsim.scenarios.registry import static_protocol
    from memsim.core.errors import UserError
    from memsim.core.streams import streams

    protocol = static_protocol(benchmark)
    if k is not None and k <= 0:
        raise UserError(f"memsim.static: k must be a positive integer, got {k}")
    unknown = sorted(set(options) - set(protocol.options_model().model_fields))
    if unknown:
        raise UserError(f"memsim.static: {benchmark} has no option {', '.join(unknown)}; options: "
                        f"{', '.join(protocol.options_model().model_fields)}")
    planned = protocol.plan(options, systems=_systems(systems) or (parse_system("naive"),),
                            data=None if data is None else str(data), k=k, seed=seed, answer=None)
    spec = make_spec("static", protocol.name, planned.scenario_args, planned.systems, **planned.settings(),
                     n_boot=n_boot, control=None, answer=None)
    if report and out is None:
        raise UserError("memsim.static: report=True needs a run folder (out=...)")
    check_http_systems(spec.systems)
    resources = Resources(rng=streams(seed)["systems"], embedder_factory=_embedder(cache_dir))
    outcome = execute(spec, out_dir=None if out is None else Path(out), resources=resources,
                      default_judges=protocol.judges, report=report)
    return _finish(outcome)


def open_run(path: str | Path) -> Run:
    """Read a finished run folder (``spec.json``, the rows, ``metrics.json``; a folder without it is summarised).

    Raises:
        memsim.core.errors.UserError: not a run folder, or a damaged file (named).
    """
    from memsim.analysis.load import read_run
    from memsim.analysis.summary import with_metrics

    data = with_metrics(read_run(path))
    metrics = json.loads(json.dumps(data.metrics, sort_keys=True, default=str))
    order = list(dict.fromkeys(data.probes["system"].to_list())) if data.probes.height else data.systems
    return Run(data.spec, Metrics.from_json(metrics, order=order), Path(path), data.probes)
