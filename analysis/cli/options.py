"""Option definitions shared by the commands, written once.

The answer flags are derived from ``memsim.sim.answer.options.AnswerOptions``:
each field is the flag of the same name (``llm_model`` is ``--llm-model``),
its default and help come from the field, and ``answer_options_from_args``
reads the parsed values back by the same names.

Every count, size and repetition a user can set on the command line has a
documented range (``LIMITS``), checked when the arguments are parsed: a
value out of range, or one that is not a number (``1e9`` for a count, an
integer of thousands of digits), is one usage error naming the flag. The
upper bounds are lifted by ``memsim --no-size-limits``; the lower ones hold
always. ``--out ""`` is refused (it would be the current folder), and a run
folder must be new, empty or a memsim run folder (``run_folder``).
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "add_answer_arguments",
    "add_system_argument",
    "add_seed_argument",
    "add_out_argument",
    "add_cache_dir_argument",
    "add_no_progress_argument",
    "ANSWER_FLAGS",
    "LIMITS",
    "int_in",
    "float_in",
    "nonempty_path",
    "run_folder",
    "check_run_folder",
    "RUN_FOLDER_MARKS",
    "input_path",
]

LIMITS: dict[str, tuple[float, float]] = {
    "seed": (0, 2**63 - 1),
    "k": (1, 10_000),
    "n_boot": (100, 100_000),
    "seeds": (1, 1_000),
    "workers": (1, 1_024),
    "retries": (0, 20),
    "llm_timeout": (0.001, 3_600),
    "llm_threads": (1, 1_024),
    "llm_context_window": (16, 10_000_000),
    "max_answer_tokens": (1, 1_000_000),
    "judge_check": (0, 100_000),
    "per_kind": (1, 100_000),
    "users": (1, 100_000),
    "months": (0.01, 240),
    "systems": (1, 64),
    "sample": (1, 1_000_000),
    "items": (1, 1_000_000),
    "limit_conversations": (1, 1_000_000),
    "repeat": (1, 100),
    "threads": (0, 1_024),
    "window": (1, 1_000_000),
    "size_gb": (0.001, 64),
    "seconds": (0.001, 86_400),
}
"""The range of each bounded command-line value, by kind (least, most); the flags name their kind."""


def _limits_on() -> bool:
    from memsim.core.validate import size_limits_on

    return size_limits_on()


def _echo(text: str) -> str:
    """A value as an error echoes it: cut to a short prefix (a hostile value may be megabytes)."""
    return repr(text if len(text) <= 40 else text[:37] + "...")


def int_in(kind: str, *, floor: bool = True) -> Callable[[str], int]:
    """An argparse ``type``: an integer within ``LIMITS[kind]`` (the upper bound lifted by --no-size-limits).

    Args:
        kind: the entry of ``LIMITS``.
        floor: check the lower bound too; False where the command checks it itself with its own message.
    """
    least, most = LIMITS[kind]
    if not floor:
        least = -math.inf

    def parse(text: str) -> int:
        try:
            if len(text) > 40:
                raise ValueError
            value = int(text.replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {_echo(text)}") from None
        if value < least or (value > most and _limits_on()):
            raise argparse.ArgumentTypeError(f"must be {int(least) if floor else LIMITS[kind][0]:,}..{int(most):,}, got {_echo(text)}"
                                             + (" (memsim --no-size-limits lifts the upper bound)" if value > most else ""))
        return value

    parse.__name__ = f"integer ({kind})"
    return parse


def float_in(kind: str) -> Callable[[str], float]:
    """An argparse ``type``: a finite number within ``LIMITS[kind]`` (the upper bound lifted by --no-size-limits)."""
    least, most = LIMITS[kind]

    def parse(text: str) -> float:
        try:
            if len(text) > 40:
                raise ValueError
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {_echo(text)}") from None
        if not math.isfinite(value) or value < least or (value > most and _limits_on()):
            raise argparse.ArgumentTypeError(f"must be a number in {least:g}..{most:g}, got {_echo(text)}"
                                             + (" (memsim --no-size-limits lifts the upper bound)" if value > most else ""))
        return value

    parse.__name__ = f"number ({kind})"
    return parse


def nonempty_path(text: str) -> Path:
    """An argparse ``type``: a path that is not empty (``""`` would silently mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; name a folder or file")
    return Path(text)


def input_path(what: str, *, folders: bool = False, path: bool = True, text: bool = False) -> Callable[[str], Any]:
    """An argparse ``type`` for an input: not empty, and when it names something that exists, a regular file
    or a folder, so that a FIFO, a socket or a device is refused before anything opens it.

    A name that does not exist passes, and so does a folder: the command says what it expected there
    (``--data`` may be a dataset name, ``--judge-check-from`` a folder).

    Args:
        what: what the input is, as the error names it.
        folders: a folder is what the command may take (documentation only: folders always pass here).
        path: give a ``Path`` (else the text as given).
        text: the file is UTF-8 text: one in UTF-16 or UTF-32 is refused by its first block (a JSON parser
            would decode it silently).
    """
    import stat

    def parse(value: str) -> Any:
        if not value.strip():
            raise argparse.ArgumentTypeError(f"an empty path; name the {what}")
        try:
            mode = os.stat(value).st_mode
        except (OSError, ValueError):  # absent, or a name no file can have: the command's own message says so
            return Path(value) if path else value
        # A folder is left to the command, which says what it expected there; what blocks or never ends is not.
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode)
                    or stat.S_ISBLK(mode) else "a socket")
            raise argparse.ArgumentTypeError(f"{_echo(value)} is {kind}, not a regular file; expected a {what}")
        if text and stat.S_ISREG(mode):
            from memsim.core.files import wide_encoding

            try:
                with open(value, "rb") as f:
                    problem = wide_encoding(f.read(4096))
            except OSError:
                problem = None  # unreadable: the command says so with its own message
            if problem:
                raise argparse.ArgumentTypeError(f"{_echo(value)}: {problem}")
        return Path(value) if path else value

    parse.__name__ = what
    return parse


RUN_FOLDER_MARKS = ("spec.json", "run.json", ".lock", "parts", "probes.parquet")
"""What makes a folder a memsim run folder (any one: a run writes its spec and lock first)."""


def check_run_folder(path: Path) -> Path:
    """``path`` if a run may be written there: new, an empty folder or a memsim run folder (to resume).

    Raises:
        UserError: the path is a folder with other things in it (a run would
            write into it and overwrite files such as ``report.html``).
    """
    from memsim.core.errors import UserError

    if path.is_dir():
        try:
            entries = {e.name for e in os.scandir(path)}
        except OSError as exc:
            raise UserError(f"--out {path}: cannot list the folder: {exc.strerror or exc}") from None
        if entries and not entries & set(RUN_FOLDER_MARKS):
            shown = ", ".join(sorted(entries)[:3]) + (", ..." if len(entries) > 3 else "")
            raise UserError(f"--out {path}: a folder that holds other things ({shown}) and is not a memsim run folder; "
                            "choose a new or empty folder")
    return path


def run_folder(text: str) -> Path:
    """An argparse ``type`` for a run folder: not empty, and new, empty or a memsim run folder."""
    from memsim.core.errors import UserError

    path = nonempty_path(text)
    try:
        return check_run_folder(path)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--out {path}: ")) from None

ANSWER_FLAGS: dict[str, dict[str, Any]] = {
    "llm_model_path": {"metavar": "GGUF", "type": input_path("GGUF file", path=False)},
    "llm_context_window": {"type": int_in("llm_context_window"), "metavar": "TOKENS"},
    "llm_threads": {"type": int_in("llm_threads")},
    "llm_timeout": {"type": float_in("llm_timeout")},
    "llm_retries": {"type": int_in("retries")},
    "max_answer_tokens": {"type": int_in("max_answer_tokens")},
    "judge_check": {"type": int_in("judge_check"), "metavar": "N"},
    "judge_check_from": {"metavar": "PATH", "type": input_path("judge check", folders=True, path=False)},
    "judge": {"action": "append", "metavar": "NAME"},
    "judge_prompts": {"action": "append", "metavar": "PATH", "type": input_path("prompt file", path=False)},
    "prompts": {"action": "append", "metavar": "PATH", "type": input_path("prompt file", path=False)},
    "prices": {"metavar": "FILE", "type": input_path("price table", path=False)},
}
"""argparse settings beyond a plain string flag (booleans are ``store_true``); ``judge_checks`` is filled by the run."""


def add_answer_arguments(parser: argparse.ArgumentParser, *, default_reader: str = "none") -> None:
    """Add the reader, LLM, judge and price flags, one per ``AnswerOptions`` field, to a command's parser."""
    from memsim.sim.answer.options import AnswerOptions, answer_choices

    choices = answer_choices()
    g = parser.add_argument_group("answers (reader, LLM, judges)")
    for name, field in AnswerOptions.model_fields.items():
        if name == "judge_checks":
            continue
        extra = {**ANSWER_FLAGS.get(name, {}), **({"choices": choices[name]} if name in choices else {})}
        if field.annotation is bool:
            extra["action"] = "store_true"
        default = default_reader if name == "reader" else field.default
        shown = "" if default in (None, False) else f" (default: {default})"
        # argparse formats help with %: a description that says "5%" must not break --help.
        text = f"{field.description}{shown}".replace("%", "%%")
        g.add_argument("--" + name.replace("_", "-"), dest=name, default=default, help=text, **extra)


def add_system_argument(parser: argparse.ArgumentParser, *, default: list[str] | None, help: str) -> None:
    """``--system NAME[:k=v,...]``, repeatable."""
    parser.add_argument("--system", action="append", default=default, metavar="NAME[:k=v,...]", help=help)


def add_seed_argument(parser: argparse.ArgumentParser, *, default: int | None, help: str) -> None:
    """``--seed N``."""
    parser.add_argument("--seed", type=int_in("seed"), default=default, help=help)


def add_out_argument(parser: argparse.ArgumentParser, *, help: str) -> None:
    """``--out DIR``: the run folder (an unfinished run there is resumed; a folder holding other things is refused)."""
    parser.add_argument("--out", type=run_folder, default=None, help=help)


def add_cache_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--cache-dir DIR``: the embedding cache folder."""
    parser.add_argument("--cache-dir", type=nonempty_path, default=None,
                        help="embedding cache folder (default $MEMSIM_CACHE_DIR or ~/.cache/memsim)")


def add_no_progress_argument(parser: argparse.ArgumentParser) -> None:
    """``--no-progress``: no progress bar."""
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
