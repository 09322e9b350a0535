"""One line, exit 2, for the hostile inputs found on the third pass: a plugin attribute that is no class, an
HTTP URL that is no URL, and counts in a config or a sweep spec past their bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsim.analysis.cli import main

TINY = '[scenario]\nname = "persona"\nusers = 2\nmonths = 1\n\n[run]\nseed = 0\nk = 5\nn_boot = {n_boot}\n'


def _one_line(err: str) -> str:
    lines = [line for line in err.strip().split("\n") if line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_plugin_attribute_that_is_not_a_class_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "odd_plugins.py").write_text("NUMBER = 42\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "tiny.toml"
    config.write_text(TINY.format(n_boot=100), encoding="utf-8")
    assert main(["run", str(config), "--system", "odd_plugins:NUMBER", "--out", str(tmp_path / "run")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "odd_plugins:NUMBER is not a class or a function that makes a system (it is of type int)" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("url", ["http://127.0.0.1:abc", "http://[::1"])
def test_an_http_url_that_is_no_url_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(TINY.format(n_boot=100), encoding="utf-8")
    assert main(["run", str(config), "--system", f"http:url={url}", "--out", str(tmp_path / "run")]) == 2
    assert f"url {url!r} is not a valid URL" in _one_line(capsys.readouterr().err)
    assert main(["check", f"http:url={url}"]) == 2
    assert "is not a valid URL" in _one_line(capsys.readouterr().err)


def test_counts_past_their_bounds_in_files_are_refused_before_any_work(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "boot.toml"
    config.write_text(TINY.format(n_boot=10**12), encoding="utf-8")
    assert main(["run", str(config), "--system", "bm25", "--out", str(tmp_path / "run")]) == 2
    assert "run.n_boot: 1000000000000 is past the sane upper bound 100000" in _one_line(capsys.readouterr().err)
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('[sweep]\nseeds = 1000000000\n\n[scenario]\nname = "persona"\nusers = 2\nmonths = 1\n\n'
                     '[[systems]]\nname = "bm25"\n', encoding="utf-8")
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "sw"), "--dry-run"]) == 2
    assert "sweep.seeds: needs 1 to 1,000 seeds, got 1,000,000,000" in _one_line(capsys.readouterr().err)


EXITER = '''
import sys

from memsim.memory.naive import NaiveMemory


class ExitsOnRetrieve(NaiveMemory):
    """Ends its process from inside retrieve, before any row is written."""

    learns = False

    def retrieve(self, *args, **kwargs):
        sys.exit(0)
'''


def test_a_system_that_fails_before_its_first_row_leaves_the_others_figures_and_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Marked FAILED in the systems table, bm25's figures and the report made, exit 1, no traceback."""
    (tmp_path / "exiting_plugins.py").write_text(EXITER, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "tiny.toml"
    config.write_text(TINY.format(n_boot=100), encoding="utf-8")
    out = tmp_path / "run"
    code = main(["run", str(config), "--system", "exiting_plugins:ExitsOnRetrieve", "--system", "bm25",
                 "--out", str(out), "--workers", "1", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1 and "Traceback" not in captured.out + captured.err
    assert "exiting_plugins:ExitsOnRetrieve FAILED (0 question rows kept" in captured.out
    assert (out / "report.html").exists() and "bm25" in (out / "report.md").read_text(encoding="utf-8")


SLEEPER = '''
import time

from memsim.memory.naive import NaiveMemory


class SleepsOnRetrieve(NaiveMemory):
    """Never answers a retrieve."""

    learns = False

    def retrieve(self, *args, **kwargs):
        while True:
            time.sleep(1)
'''


def test_memsim_check_fails_a_check_that_overruns_its_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sleeping_plugins.py").write_text(SLEEPER, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["check", "sleeping_plugins:SleepsOnRetrieve", "--deadline", "0.5", "--only", "returns_well_formed"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL  returns_well_formed: took longer than 0.5 s (--deadline)" in out and "0 passed, 1 failed" in out


def test_static_holds_an_in_process_system_to_its_call_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``memsim static --call-deadline``: a retrieve that never returns fails its system, one line, exit 1."""
    (tmp_path / "sleeping_plugins.py").write_text(SLEEPER, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    data = Path(__file__).parent / "fixtures" / "locomo_quirks.json"
    code = main(["static", "locomo", "--data", str(data), "--system", "sleeping_plugins:SleepsOnRetrieve",
                 "--call-deadline", "0.5", "--out", str(tmp_path / "run"), "--no-progress", "--no-report"])
    captured = capsys.readouterr()
    said = captured.out + captured.err
    assert code == 1 and "Traceback" not in said
    assert "retrieve took longer than its 0.5 s deadline" in said and "SleepsOnRetrieve failed" in said
