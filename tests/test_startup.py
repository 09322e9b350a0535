"""``memsim --help`` and ``memsim list`` start without loading a model, torch or scipy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "scipy", "sentence_transformers", "transformers", "onnxruntime", "faiss", "spacy", "polars")

_PROBE = """
import sys
from memsim.analysis.cli import main
try:
    code = main({argv!r})
except SystemExit as exc:
    code = exc.code
print("HEAVY", sorted(m for m in {heavy!r} if m in sys.modules), "CODE", code, file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["--help"], ["list"], ["bench", "--help"], ["--embed-backend", "torch", "list"]])
def test_start_up_imports_nothing_heavy(argv: list[str]) -> None:
    # A fresh interpreter: the test process itself has imported everything long ago.
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(argv=argv, heavy=HEAVY)], capture_output=True, text=True, cwd=ROOT,
    )
    line = [x for x in out.stderr.splitlines() if x.startswith("HEAVY")]
    assert line, out.stderr
    assert line[-1] == "HEAVY [] CODE 0", out.stderr
    assert out.stdout.strip()  # it did print its help or its listing


def test_a_top_level_option_value_is_not_taken_for_the_command() -> None:
    from memsim.analysis.cli import _command_of

    assert _command_of(["--embed-backend", "torch", "static", "locomo"]) == "static"
    assert _command_of(["--debug", "list"]) == "list"
    assert _command_of(["--help"]) == ""
