"""memsim: a longitudinal benchmark simulator for the long-term memory of conversational agents.

The packages below this one are ``memsim.core`` (the ground floor: errors,
validation, files, random streams, tables), ``memsim.sim`` (engine, runner, recorder,
scorers, run spec, answers), ``memsim.memory`` (the memory protocol and
systems), ``memsim.scenarios``, ``memsim.static_benchmarks`` and
``memsim.analysis`` (commands, statistics, reports).

From Python, ``memsim.run`` plays a config, ``memsim.static`` a static
benchmark and ``memsim.open_run`` reads a run folder; each returns a
``memsim.Run`` (``memsim.api``).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("memsim")
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__", "run", "static", "open_run", "Run", "Metrics", "SystemMetrics", "Score"]

_API = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> object:
    # The API loads on first use: ``import memsim`` (and the command line's start) stays free of polars and the pipeline.
    if name in _API:
        from memsim import api

        return getattr(api, name)
    raise AttributeError(f"module 'memsim' has no attribute {name!r}")
