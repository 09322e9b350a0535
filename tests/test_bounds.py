"""Bounded input: counts with documented ranges checked as they are parsed, run folders that are run folders,
inputs that are regular files, reads that stop at a size, error lines of bounded length."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest

from memsim.analysis.cli import main
from memsim.analysis.cli.options import LIMITS
from memsim.core.errors import UserError
from memsim.core.files import decode_utf8, read_limited, read_toml, regular_file, utf8_problem

TINY = """[scenario]
name = "persona"
users = 2
months = 0.25
sessions_per_week = 2.0
turns_per_session = 4
questions_per_week = 2.0

[run]
seed = 0
k = 3
systems = ["bm25"]
control = "bm25"
"""


def _usage_error(argv: list[str]) -> str:
    """The last stderr line of an argparse refusal (exit 2, no traceback)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as done:
        main(argv)
    text = err.getvalue()
    assert done.value.code == 2 and "Traceback" not in text, text
    return text.strip().splitlines()[-1]


@pytest.mark.parametrize("argv, says", [
    (["run", "c.toml", "-k", "0"], "argument -k: must be 1..10,000, got '0'"),
    (["run", "c.toml", "-k", "1000000000"], "argument -k: must be 1..10,000"),
    (["run", "c.toml", "--seed", "-1"], "argument --seed: must be 0.."),
    (["run", "c.toml", "--seed", "9" * 5000], "argument --seed: expected an integer, got '9999"),
    (["run", "c.toml", "--llm-retries", "1000000000"], "argument --llm-retries: must be 0..20"),
    (["static", "locomo", "--n-boot", "1000000000000"], "argument --n-boot: must be 100..100,000"),
    (["sweep", "s.toml", "--workers", "1000000000"], "argument --workers: must be 1..1,024"),
    (["power", "c.toml", "--seeds", "0"], "argument --seeds: must be 1..1,000"),
    (["scenario", "render", "c.toml", "--out", "w.jsonl", "--retries", "1e9"], "argument --retries: expected an integer"),
    (["run", "c.toml", "--llm-timeout", "nan"], "argument --llm-timeout: must be a number in"),
])
def test_counts_out_of_range_are_refused_when_parsed(argv: list[str], says: str) -> None:
    line = _usage_error(argv)
    assert says in line and len(line) < 300, line


def test_no_size_limits_lifts_upper_bounds_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from memsim.analysis.cli import build_parser

    monkeypatch.delenv("MEMSIM_NO_SIZE_LIMITS", raising=False)
    assert LIMITS["k"][1] < 20_000
    assert "must be 1..10,000, got '20000' (memsim --no-size-limits lifts the upper bound)" in _usage_error(
        ["run", "c.toml", "-k", "20000"])
    # Past the bound with --no-size-limits: parsed (the environment is set before parsing).
    monkeypatch.setenv("MEMSIM_NO_SIZE_LIMITS", "1")
    assert build_parser(["run"]).parse_args(["run", "c.toml", "-k", "20000"]).k == 20000
    assert "must be 1.." in _usage_error(["--no-size-limits", "run", "c.toml", "-k", "0"])


def test_an_empty_out_is_refused(tmp_path: Path) -> None:
    assert "argument --out: an empty path" in _usage_error(["run", str(tmp_path / "c.toml"), "--out", ""])


def test_a_folder_that_is_not_a_run_folder_is_refused_and_left_alone(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY, encoding="utf-8")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.html").write_text("my own report", encoding="utf-8")
    line = _usage_error(["run", str(cfg), "--out", str(mine)])
    assert "argument --out: a folder that holds other things (report.html)" in line
    assert (mine / "report.html").read_text(encoding="utf-8") == "my own report"
    assert sorted(p.name for p in mine.iterdir()) == ["report.html"]


@pytest.mark.slow
def test_an_empty_folder_and_a_run_folder_are_accepted(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY, encoding="utf-8")
    out = tmp_path / "empty"
    out.mkdir()
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", str(cfg), "--out", str(out), "--no-report"]) == 0
        # The run folder it made is accepted again (a finished run is rerun in place, an unfinished one resumed).
        assert main(["run", str(cfg), "--out", str(out), "--no-report"]) == 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_inputs_that_are_not_regular_files_are_refused_before_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)  # no writer: opening it would block forever
    with pytest.raises(UserError, match=r"is a FIFO \(named pipe\), expected a config"):
        read_toml(fifo, "config")
    if Path("/dev/zero").exists():
        with pytest.raises(UserError, match=r"/dev/zero: is a device, expected a LoCoMo data file"):
            regular_file("/dev/zero", "LoCoMo data file")
    with pytest.raises(UserError, match=r"is a folder, expected a world file"):
        regular_file(tmp_path, "world file")
    with pytest.raises(UserError, match=r"world file not found"):
        regular_file(tmp_path / "nope", "world file")


def test_reads_stop_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSIM_NO_SIZE_LIMITS", raising=False)
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 5000)
    assert read_limited(big, "data file", 5000) == b"x" * 5000
    with pytest.raises(UserError, match=r"big.json: data file of 5,000 bytes is over the 4,999-byte limit"):
        read_limited(big, "data file", 4999)
    monkeypatch.setenv("MEMSIM_NO_SIZE_LIMITS", "1")
    assert len(read_limited(big, "data file", 10)) == 5000


@pytest.mark.parametrize("data, says", [
    ("[1]".encode("utf-16"), "encoded in UTF-16 (byte order mark)"),
    ("[1]".encode("utf-32"), "encoded in UTF-32 (byte order mark)"),
    ('[{"a": "b"}]'.encode("utf-16-le"), "looks encoded in UTF-16"),
    (b'["caf\xe9"]', "not valid UTF-8 at byte 5"),
])
def test_text_that_is_not_utf8_is_named(data: bytes, says: str) -> None:
    assert says in (utf8_problem(data) or "")
    with pytest.raises(UserError, match="locomo10.json: "):
        decode_utf8(data, "locomo10.json")


def test_utf8_with_or_without_a_byte_order_mark_reads() -> None:
    assert utf8_problem("[\"café\"]".encode()) is None
    assert decode_utf8(b"\xef\xbb\xbf[1]", "x") == "[1]"


def test_a_huge_integer_in_toml_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY.replace("seed = 0", "seed = " + "9" * 5000), encoding="utf-8")
    with pytest.raises(UserError, match=r"c.toml: a value out of range") as err:
        read_toml(cfg, "config")
    assert len(str(err.value)) < 300


def test_an_error_line_is_cut_to_a_short_prefix(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY.replace('name = "persona"', 'name = "' + "x" * 2_000_000 + '"'), encoding="utf-8")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", str(cfg), "--out", str(tmp_path / "run")]) == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memsim: error: ") and len(lines[0]) <= 1_100, len(lines[0])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("argv", [
    ["static", "locomo", "--data", "@FIFO@"],
    ["static", "longmemeval", "--data", "@FIFO@"],
    ["static", "longmemeval", "--question-ids", "@FIFO@"],
    ["run", "c.toml", "--data", "@FIFO@"],
    ["run", "c.toml", "--prices", "@FIFO@"],
    ["judge-check", "--locomo", "@FIFO@"],
])
def test_a_fifo_given_as_an_input_file_is_refused_when_parsed(tmp_path: Path, argv: list[str]) -> None:
    fifo = tmp_path / "data.json"
    os.mkfifo(fifo)  # no writer: reading it would wait forever
    line = _usage_error([str(fifo) if a == "@FIFO@" else a for a in argv])
    assert "is a FIFO (named pipe), not a regular file; expected a" in line


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_dev_zero_as_locomo_data_is_refused_before_reading() -> None:
    assert "is a device, not a regular file; expected a data file" in _usage_error(["static", "locomo", "--data", "/dev/zero"])


def test_naming_file_names_the_file_of_a_full_disk_and_a_damaged_part(tmp_path: Path) -> None:
    import errno

    import polars as pl

    from memsim.core.errors import naming_file

    part = tmp_path / "part-0001.parquet"
    with pytest.raises(UserError, match=rf"^{part}: writing run part: (OSError: )?no space left on device$"):
        with naming_file(part, "writing run part"):
            raise OSError(errno.ENOSPC, "No space left on device")
    part.write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
    with pytest.raises(UserError, match=rf"^{part}: reading rows: ComputeError: ") as err:
        with naming_file(part, "reading rows"):
            pl.read_parquet(part)
    assert len(str(err.value)) < 400
    with pytest.raises(KeyError):  # a bug keeps its own type (and its traceback)
        with naming_file(part, "reading rows"):
            raise KeyError("bug")


def test_every_command_has_help() -> None:
    """Help texts come from field descriptions; one that says "5%" must not break --help (argparse formats with %)."""
    from memsim.analysis.cli import COMMANDS

    for name, _, _ in COMMANDS:
        argv = [name, "locomo", "--help"] if name == "static" else [name, "--help"]
        with contextlib.redirect_stdout(io.StringIO()) as out, pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 0 and "usage: memsim" in out.getvalue(), name


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_a_data_file_in_utf16_or_utf32_is_named_before_a_parser_decodes_it(tmp_path: Path, encoding: str) -> None:
    data = tmp_path / "locomo10.json"
    data.write_bytes('[{"sample_id": "c1", "conversation": {}, "qa": []}]'.encode(encoding))
    for argv in (["static", "locomo", "--data", str(data)], ["judge-check", "--locomo", str(data)]):
        line = _usage_error(argv)
        assert "memsim reads UTF-8 only" in line and encoding[:6].upper() in line, line
