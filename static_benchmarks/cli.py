"""``memsim static BENCHMARK``: the static protocols.

Each benchmark module exposes ``add_arguments(parser)`` and ``main(args)``.
"""

from __future__ import annotations

import argparse
import importlib

__all__ = ["add_arguments", "main"]

# (benchmark, module, help)
_BENCHMARKS: tuple[tuple[str, str, str], ...] = (
    ("locomo", "static_benchmarks.locomo_cli", "LoCoMo: ingest each conversation, ask its questions"),
    ("longmemeval", "static_benchmarks.longmemeval_cli", "LongMemEval: retrieval protocol, or QA with a reader"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one sub-command per benchmark."""
    sub = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    for name, module, help_text in _BENCHMARKS:
        p = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module).add_arguments(p)
        p.set_defaults(_benchmark_module=module)


def main(args: argparse.Namespace) -> int:
    """Run the chosen benchmark."""
    return int(importlib.import_module(args._benchmark_module).main(args) or 0)
