"""Plugins: systems named by import path or entry point, ``label=``, ``memsim check``, and the example package.

The fast tests put ``examples/`` on the path; the slow one installs the
example package into a fresh virtual environment and plays it through
``memsim run``, ``memsim rerun``, a Dask sweep and ``memsim check``, each in
a process of that environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import memsim
from memsim.analysis.cli import main
from memsim.memory.checks import iter_checks
from memsim.memory import registry
from memsim.memory.registry import (
    ENTRY_POINT_GROUP,
    UnknownSystemError,
    build_memory,
    learns_from_feedback,
    memory_names,
    parse_system,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PLUGIN = "memsim_overlap:OverlapMemory"
SMALL = '[scenario]\nname = "persona"\nusers = 2\nmonths = 1\n[run]\nseed = 2\nk = 5\nn_boot = 200\n'


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example package importable, as a user's own package on ``sys.path`` would be."""
    monkeypatch.syspath_prepend(str(EXAMPLES))


@pytest.fixture
def entry_point(on_path: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An installed distribution (a ``.dist-info`` on ``sys.path``) whose entry point names the example system."""
    info = tmp_path / "memsim_overlap-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: memsim-overlap\nVersion: 0.1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\noverlap-ep = {PLUGIN}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "overlap-ep"


def test_import_path_with_args_and_label(on_path: None) -> None:
    spec = parse_system(f"{PLUGIN}:bonus=2,label=mine")
    assert (spec.name, dict(spec.args), spec.display) == (PLUGIN, {"bonus": 2}, "mine")
    assert parse_system(PLUGIN).display == PLUGIN
    assert build_memory(spec.name, spec.args).bonus == 2
    assert learns_from_feedback(PLUGIN)  # no declaration: taken to learn, so its twin is played


def test_label_on_a_registered_system() -> None:
    """``label=`` was refused as an unknown argument; it names the system in tables and is no constructor arg."""
    spec = parse_system("http:url=http://127.0.0.1:9/x,label=remote")
    assert (spec.name, dict(spec.args), spec.display) == ("http", {"url": "http://127.0.0.1:9/x"}, "remote")


def test_plugin_args_are_checked(on_path: None) -> None:
    with pytest.raises(ValueError, match="has no argument 'bouns'; its arguments: bonus"):
        parse_system(f"{PLUGIN}:bouns=1")


def test_unknown_names_and_imports_are_clear() -> None:
    with pytest.raises(UnknownSystemError, match="did you mean 'neuroplastic'"):
        parse_system("neuroplastik")
    with pytest.raises(UnknownSystemError, match="cannot import nopkg.mod:Thing: No module named 'nopkg'"):
        parse_system("nopkg.mod:Thing:k=1")
    # ``name:key=value`` is never read as an import path
    with pytest.raises(ValueError, match="expected key=value"):
        parse_system("naive:oops")


def test_entry_point_is_listed_and_recorded_as_its_import_path(entry_point: str) -> None:
    assert entry_point in memory_names()
    assert entry_point not in memory_names(standalone_only=True)  # the demo plays it only when named
    spec = parse_system(f"{entry_point}:bonus=1")
    # The spec holds the import path (a worker without the entry point still rebuilds it); tables show the name.
    assert (spec.name, spec.display) == (PLUGIN, entry_point)
    assert registry.memory_description(entry_point).startswith("Every turn kept")


def test_check_command_prints_every_check(on_path: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", f"{PLUGIN}:label=overlap"]) == 0
    out = capsys.readouterr().out
    assert "PASS  forget_removes_derived" in out and "PASS  probe_changes_nothing" in out
    n = len(list(iter_checks()))
    assert f"{n} passed, 0 failed, 0 skipped of {n} checks" in out


def test_check_command_reports_a_failing_system(on_path: None, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from memsim_overlap import OverlapMemory

    monkeypatch.setattr(OverlapMemory, "forget", lambda self, turn_ids, *, user_id, now: None)
    assert main(["check", PLUGIN, "--only", "forget_removes_derived", "--only", "users_isolated"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  forget_removes_derived: right after forget:" in out and "PASS  users_isolated" in out
    assert "1 passed, 1 failed, 0 skipped of 2 checks" in out
    assert main(["check", "naive", "--only", "nosuch"]) == 2


def test_long_label_keeps_the_system_table_aligned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "s.toml"
    cfg.write_text(SMALL.replace("users = 2", "users = 1"), encoding="utf-8")
    label = "http[url=http://127.0.0.1:8000/a/rather/long/path]"
    assert main(["run", str(cfg), "--system", f"naive:label={label}", "--out", str(tmp_path / "r"), "--no-report"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("system") and "stale>cur %" in line)
    assert set(lines[head + 1]) == {"-", " "}  # the rule under the header
    assert lines[head + 2].startswith(label)
    assert lines[head].index("leaks") + len("leaks") == len(lines[head + 2])  # the last column ends where its header does


# --------------------------------------------------------------------------- installed into a fresh environment


def _venv_with_example(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A fresh venv that sees this interpreter's packages, with the example package pip-installed into it."""
    import site

    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True).stdout.strip()
    # The project's dependencies (and pip, setuptools) from this interpreter's site-packages, after the venv's own.
    (Path(own) / "memsim-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # This checkout's memsim, workers included: a folder holding it under its package name, whatever the
    # checkout's own folder is called (a clone need not be named ``memsim``).
    src = tmp / "src"
    src.mkdir()
    (src / "memsim").symlink_to(Path(memsim.__file__).resolve().parent, target_is_directory=True)
    env["PYTHONPATH"] = str(src)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", str(EXAMPLES)], check=True, env=env, cwd=tmp)
    return python, env


@pytest.mark.slow
def test_example_package_installed_in_a_fresh_venv(tmp_path: Path) -> None:
    python, env = _venv_with_example(tmp_path)

    def memsim_(*argv: str) -> str:
        done = subprocess.run([str(python), "-m", "memsim", *argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert "overlap" in memsim_("list", "systems")
    cfg = tmp_path / "s.toml"
    cfg.write_text(SMALL, encoding="utf-8")
    out = memsim_("run", str(cfg), "--system", "naive", "--system", "overlap:bonus=1", "--out", "r1", "--no-report")
    assert "overlap~twin" in out  # a plugin that does not declare ``learns`` is played with its twin
    systems = json.loads((tmp_path / "r1" / "spec.json").read_text())["systems"]
    assert systems[1] == {"name": PLUGIN, "args": {"bonus": 1}, "label": "overlap"}
    assert "metrics.json identical to" in memsim_("rerun", "r1", "--out", "r2")

    sweep = tmp_path / "sweep.toml"
    sweep.write_text(textwrap.dedent("""
        systems = ["naive", "overlap"]
        [sweep]
        name = "plugin"
        seeds = 2
        embedder = "hash"
        [scenario]
        name = "persona"
        users = 2
        months = 1
        [run]
        seed = 0
        k = 5
        n_boot = 200
    """), encoding="utf-8")
    out = memsim_("sweep", str(sweep), "--out", "sw", "--executor", "dask", "--workers", "2")
    assert "4 done, 0 failed" in out, out

    out = memsim_("check", "overlap")
    n = len(list(iter_checks()))
    assert f"{n} passed, 0 failed, 0 skipped of {n} checks" in out
