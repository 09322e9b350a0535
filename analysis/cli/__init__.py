"""The ``memsim`` command line.

Each subcommand lives in a module that exposes ``add_arguments(parser)`` and
``main(args) -> int``; only the chosen subcommand's module is imported, so
``memsim --help`` answers at once. Bad input raises ``UserError``, printed
here as one line with exit code 2. So do the failures bad input or a bad
environment cause in any library below (``expected_failure``: I/O, parsing,
validation, absurd sizes): one line naming what failed, exit 2. Anything else
is a bug in memsim and keeps its traceback; ``--debug`` shows the traceback
of every error.

Diagnostics (progress of a judge check, retries) go through ``logging`` to
standard error: memsim's own at INFO by default, DEBUG with ``-v`` (which
also shows the LLM SDK's retries), warnings only with ``-q``. Standard
output, the command's results, is the same at every level.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from memsim.sim.answer.dryrun import DryRunFinished
from memsim.core.errors import UserError, expected_failure
from memsim.core.validate import NO_SIZE_LIMITS_ENV

__all__ = ["main", "build_parser", "setup_logging", "COMMANDS"]

COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("demo", "memsim.analysis.cli.run:demo", "the demo: the life world against every registered system (offline)"),
    ("run", "memsim.analysis.cli.run:run", "replay a scenario config against memory systems"),
    ("scenario", "memsim.analysis.cli.scenario:scenario", "a scenario's difficulty profile (stats) or its world file (render)"),
    ("static", "memsim.analysis.cli.static:static", "run a static benchmark (LoCoMo, LongMemEval) on the same engine"),
    ("rerun", "memsim.analysis.cli.run:rerun", "play a run folder again from its spec.json"),
    ("list", "memsim.analysis.cli.run:listing", "registered systems, scenarios, readers, judges and scorers"),
    ("report", "memsim.analysis.cli.report:report", "write report.html and report.md for a run folder"),
    ("compare", "memsim.analysis.cli.compare:compare", "compare run folders: per-seed intervals, rankings"),
    ("bench", "memsim.analysis.cli.bench:bench", "benchmarks that print figures: locomo, longmemeval, systems, llm, engine, demo, compare, backends, sweep, scale"),
    ("power", "memsim.analysis.cli.power:power", "design-based power curve and MDE of a learning contrast (a run folder, or a config over seeds)"),
    ("erasure", "memsim.analysis.cli.erasure:erasure", "what deletions left behind in a run folder: leaks by place and month, time to full erasure"),
    ("cost", "memsim.analysis.cli.cost:cost", "cost per user per simulated month of a run folder: memories, bytes, LLM and embedding calls, USD"),
    ("sensitivity", "memsim.analysis.cli.sensitivity:sensitivity", "how a system's DiD moves with re-ask rate, topic skew, change rate, feedback delay"),
    ("sweep", "memsim.analysis.cli.sweep:sweep", "scenarios x systems x seeds from a sweep spec, on a process pool or Dask, resumable"),
    ("data", "memsim.analysis.cli.data:data", "fetch the LoCoMo and LongMemEval files (sha256-verified) and list what is present"),
    ("board", "memsim.analysis.cli.board:board", "one page ranking the systems of many run and sweep folders under the same protocol"),
    ("export", "memsim.analysis.cli.export:export", "a run folder's per-question rows as JSON Lines (--jsonl)"),
    ("check", "memsim.analysis.cli.check:check", "run the conformance checks on any system (registered, plugged in or http:url=...)"),
    ("serve", "memsim.analysis.cli.serve:serve", "serve a registered memory system over memsim's HTTP protocol"),
    ("judge-check", "memsim.analysis.cli.judge_check:judge_check", "check every judge on labelled answers: accuracy, false accepts/rejects, kappa"),
)
"""(command, ``module:prefix`` with ``<prefix>_arguments`` and ``<prefix>_main``, help)."""


EMBED_BACKENDS = ("onnx", "onnx-int8", "torch")
"""``memsim.memory.embed.BACKENDS``, repeated so that ``--help`` imports nothing heavy (a test keeps them equal)."""
_TAKES_VALUE = ("--embed-backend",)


def _command_of(argv: Sequence[str]) -> str:
    """The subcommand named in ``argv`` ('' if none), skipping the values of top-level options."""
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a in _TAKES_VALUE:
            skip = True
        elif not a.startswith("-"):
            return a
    return ""


def _version() -> str:
    from memsim import __version__

    return __version__


def _load(target: str) -> tuple[object, object]:
    module_name, prefix = target.split(":", 1)
    module = importlib.import_module(module_name)
    return getattr(module, f"{prefix}_arguments"), getattr(module, f"{prefix}_main")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; only the subcommand named in ``argv`` gets its arguments (all when None)."""
    parser = argparse.ArgumentParser(
        prog="memsim",
        description="Longitudinal benchmark simulator for conversational memory systems.",
    )
    parser.add_argument("--version", action="version", version=f"memsim {_version()}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument("-v", "--verbose", action="store_true",
                      help="debug diagnostics on standard error, the LLM SDK's retries included")
    loud.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors on standard error")
    parser.add_argument(
        "--no-size-limits", action="store_true",
        help="accept sizes past memsim's sane upper bounds (users, months, sessions, turns, tick intervals); "
        "sets $MEMSIM_NO_SIZE_LIMITS for this run",
    )
    parser.add_argument(
        "--embed-backend", choices=EMBED_BACKENDS, default=None,
        help="how sentence vectors are computed: onnx (default), onnx-int8 (faster, slightly different "
        "vectors) or torch; sets $MEMSIM_EMBED_BACKEND for this run",
    )
    parser.add_argument(
        "--wide", action="store_true",
        help="print every table whole, however wide; by default a table wider than the terminal prints its "
        "compact view (report.md always holds every column); sets $MEMSIM_WIDE for this run",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = None if argv is None else _command_of(argv)
    for name, target, help_text in COMMANDS:
        p = sub.add_parser(name, help=help_text, description=help_text)
        if chosen is None or chosen == name:
            add, _ = _load(target)
            add(p)  # type: ignore[operator]
        p.set_defaults(_target=target)
    return parser


_SET_BY_FLAGS = (NO_SIZE_LIMITS_ENV, "MEMSIM_EMBED_BACKEND", "MEMSIM_WIDE")
"""Variables the global flags set for the command (and its child processes); put back when it returns."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memsim`` console script."""
    before = {key: os.environ.get(key) for key in _SET_BY_FLAGS}
    try:
        return _main(argv)
    finally:
        # A process that runs several commands (a notebook, the tests) keeps its own settings.
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(argv)
    if "--no-size-limits" in argv[: argv.index(command) if command in argv else len(argv)]:
        # Before parsing: the bounded flags check their ranges as they are parsed.
        os.environ[NO_SIZE_LIMITS_ENV] = "1"
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.command is None:  # bare ``memsim``: the list of commands, not an error
        parser.print_help()
        return 0
    setup_logging(verbose=args.verbose, quiet=args.quiet)
    if args.embed_backend is not None:
        # Through the environment, so that every embedder of the run (and child processes) uses it.
        os.environ["MEMSIM_EMBED_BACKEND"] = args.embed_backend
    if args.no_size_limits:
        os.environ[NO_SIZE_LIMITS_ENV] = "1"
    if args.wide:
        os.environ["MEMSIM_WIDE"] = "1"  # memsim.core.table.WIDE_ENV, read where tables are printed
    _, run = _load(args._target)
    try:
        code = int(run(args) or 0)  # type: ignore[operator]
        sys.stdout.flush()  # a reader that went away (``| head``) shows here, where it is caught, not at exit
        return code
    except BrokenPipeError:
        # Output no one reads is dropped quietly (the Python docs' recipe), as ``cat | head`` does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except DryRunFinished as done:
        print(done.text)
        return 0
    except Exception as exc:
        message = exc if isinstance(exc, UserError) else expected_failure(exc)
        if args.debug or message is None:
            raise
        print(f"memsim: error: {_one_line(str(message))}", file=sys.stderr)
        return int(getattr(exc, "exit_code", 2))
    except KeyboardInterrupt:
        print("memsim: interrupted", file=sys.stderr)
        return 130


def setup_logging(*, verbose: bool = False, quiet: bool = False) -> None:
    """Send memsim's log records (and with ``verbose`` the openai SDK's) to standard error.

    Calling it again replaces the handler it added before, so a process that runs
    several commands (the tests) does not print each record twice.
    """
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s" if verbose else "%(message)s"))
    handler._memsim_cli = True  # type: ignore[attr-defined]  # how the next call finds it
    for name, lvl in (("memsim", level), ("openai", logging.INFO if verbose else logging.WARNING)):
        logger = logging.getLogger(name)
        logger.handlers[:] = [h for h in logger.handlers if not getattr(h, "_memsim_cli", False)]
        logger.setLevel(lvl)
        if name == "memsim" or verbose:
            logger.addHandler(handler)


MAX_MESSAGE = 1_000
"""Longest error line printed (characters): a hostile value named in a message is not echoed whole."""


def _one_line(text: str) -> str:
    """``text`` on one line, cut to ``MAX_MESSAGE`` characters: a message from a library may span several."""
    line = " ".join(text[: MAX_MESSAGE * 4].split()) or "(no message)"
    return line if len(line) <= MAX_MESSAGE else line[: MAX_MESSAGE - 40] + f" ... (cut; {len(text):,} characters in all)"


if __name__ == "__main__":
    sys.exit(main())
