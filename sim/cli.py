"""The ``memsim`` command line.

Each subcommand lives in the module that implements it; that module exposes
``add_arguments(parser)`` and ``main(args) -> int``. Bad input raises
``UserError``, printed here as one line with exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from sim.errors import UserError

__all__ = ["main"]

# (command, module implementing it, help)
_COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("demo", "sim.demo_cli", "the persona demo against every registered system (offline)"),
    ("run", "sim.run_cli", "replay a scenario config against memory systems"),
    ("static", "static_benchmarks.cli", "run a static benchmark (LoCoMo, LongMemEval)"),
    ("report", "analysis.report_cli", "write report.html and report.md for a run folder"),
    ("compare", "analysis.compare_cli", "compare run folders: per-seed intervals, rankings"),
    ("bench", "sim.bench_cli", "benchmarks that print figures: locomo, longmemeval, systems, llm, engine, demo"),
    ("power", "analysis.power_cli", "power curve and minimum detectable effect of a scenario (injected effects)"),
    ("sensitivity", "analysis.sensitivity_cli", "how a system's DiD moves with re-ask rate, topic skew, change rate, feedback delay"),
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser."""
    parser = argparse.ArgumentParser(
        prog="memsim",
        description="Longitudinal benchmark simulator for conversational memory systems.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module, help_text in _COMMANDS:
        p = sub.add_parser(name, help=help_text, description=help_text)
        mod = importlib.import_module(module)
        mod.add_arguments(p)
        p.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memsim`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    mod = importlib.import_module(args._module)
    try:
        return int(mod.main(args) or 0)
    except UserError as exc:
        if args.debug:
            raise
        print(f"memsim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memsim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
