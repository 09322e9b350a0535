"""memsim: a longitudinal benchmark simulator for the long-term memory of conversational agents.

The packages below this one are ``memsim.sim`` (engine, runner, recorder,
scorers, run spec, answers), ``memsim.memory`` (the memory protocol and
systems), ``memsim.scenarios``, ``memsim.static_benchmarks`` and
``memsim.analysis`` (commands, statistics, reports).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("memsim")
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
