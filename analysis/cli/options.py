"""Option definitions shared by the commands, written once.

The answer flags are derived from ``memsim.sim.answer.options.AnswerOptions``:
each field is the flag of the same name (``llm_model`` is ``--llm-model``),
its default and help come from the field, and ``answer_options_from_args``
reads the parsed values back by the same names.
"""

from __future__ import annotations

import argparse
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
]

ANSWER_FLAGS: dict[str, dict[str, Any]] = {
    "llm_model_path": {"metavar": "GGUF"},
    "llm_context_window": {"type": int, "metavar": "TOKENS"},
    "llm_threads": {"type": int},
    "llm_timeout": {"type": float},
    "llm_retries": {"type": int},
    "max_answer_tokens": {"type": int},
    "judge_check": {"type": int, "metavar": "N"},
    "judge_check_from": {"metavar": "PATH"},
    "judge": {"action": "append", "metavar": "NAME"},
    "judge_prompts": {"action": "append", "metavar": "PATH"},
    "prompts": {"action": "append", "metavar": "PATH"},
    "prices": {"metavar": "FILE"},
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
        g.add_argument("--" + name.replace("_", "-"), dest=name, default=default, help=f"{field.description}{shown}", **extra)


def add_system_argument(parser: argparse.ArgumentParser, *, default: list[str] | None, help: str) -> None:
    """``--system NAME[:k=v,...]``, repeatable."""
    parser.add_argument("--system", action="append", default=default, metavar="NAME[:k=v,...]", help=help)


def add_seed_argument(parser: argparse.ArgumentParser, *, default: int | None, help: str) -> None:
    """``--seed N``."""
    parser.add_argument("--seed", type=int, default=default, help=help)


def add_out_argument(parser: argparse.ArgumentParser, *, help: str) -> None:
    """``--out DIR``: the run folder (an unfinished run there is resumed)."""
    parser.add_argument("--out", type=Path, default=None, help=help)


def add_cache_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--cache-dir DIR``: the embedding cache folder."""
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="embedding cache folder (default $MEMSIM_CACHE_DIR or ~/.cache/memsim)")


def add_no_progress_argument(parser: argparse.ArgumentParser) -> None:
    """``--no-progress``: no progress bar."""
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
