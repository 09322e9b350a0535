"""Hostile input: one line and exit 2, bounded resources, one writer per run folder, caches that heal."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from memsim.analysis.cli import main
from memsim.memory.kvcache import KVCache
from memsim.core.errors import UserError, expected_failure
from memsim.core.heal import repairs

REPO = Path(__file__).resolve().parents[1]

TINY = """
[scenario]
name = "persona"
users = 2
months = 0.5
sessions_per_week = 2.0
turns_per_session = 4
questions_per_week = 2.0

[run]
seed = 0
k = 5
systems = ["bm25"]
control = "bm25"
"""
"""A world that plays in seconds against a system that needs no embedding model."""


def _child_env() -> dict[str, str]:
    # The child imports the memsim under test (a PYTHONPATH given to the tests comes first).
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(REPO)) if p)}


def _memsim(*argv: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "memsim", *argv], env=_child_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("memsim: error: ") and "Traceback" not in err, err
    return lines[0]


# --- bounded resources ---------------------------------------------------------------------------------


_DEEP = textwrap.dedent(
    """
    import sys, time
    import numpy, ijson  # imported before the clock starts: the check, not the imports, is timed
    from memsim.core.errors import UserError
    from memsim.static_benchmarks.longmemeval import load_instances
    from memsim.static_benchmarks.locomo import load_locomo
    kind, path = sys.argv[1], sys.argv[2]
    t0 = time.process_time()  # CPU time: other jobs on the machine do not count against the check
    try:
        load_instances(path) if kind == "longmemeval" else load_locomo(path)
    except UserError as exc:
        # VmHWM is this process's own peak: ru_maxrss keeps the forking parent's peak across exec on Linux,
        # so under a large test process it reads the parent, not the check.
        hwm = next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
        print(f"{time.process_time() - t0:.3f} {hwm} {exc}")
    """
)


@pytest.mark.parametrize("kind", ["longmemeval", "locomo"])
def test_a_file_nested_100000_deep_is_refused_at_once_in_flat_memory(tmp_path: Path, kind: str) -> None:
    """The file that once took 23 GB: refused in under a CPU second, the whole process under 500 MB."""
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="ascii")
    done = subprocess.run([sys.executable, "-c", _DEEP, kind, str(path)], env=_child_env(), text=True,
                          capture_output=True, timeout=120)
    seconds, peak_kb, message = done.stdout.split(" ", 2)
    assert "nested deeper than" in message and str(path) in message, done.stdout + done.stderr
    assert float(seconds) < 1.0
    assert int(peak_kb) < 500 * 1024


def test_nesting_guard_counts_brackets_outside_strings_only(tmp_path: Path) -> None:
    """Brackets inside strings (escaped quotes and backslashes across block edges included) do not count."""
    import io

    from memsim.static_benchmarks.data import NestingGuard

    text = json.dumps([{"a": "[[[[[[[[[[\\\"[[[[\\\\", "b": ["x" * 5000 + "]]]]"]}] * 3)
    for block in (1, 7, 4096):
        guard = NestingGuard(io.BytesIO(text.encode()), 3, "f", "test")
        assert b"".join(iter(lambda: guard.read(block), b"")) == text.encode()
    third = text.index('"b": [') + 5  # the first bracket outside a string at depth 3
    with pytest.raises(UserError, match=rf"f: nested deeper than 2 levels at byte {third};"):
        NestingGuard(io.BytesIO(text.encode()), 2, "f", "test").read()


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("users = 1000000000", "scenario.users: 1000000000 is past the sane upper bound"),
        ("turns_per_session = 100000000", "scenario.turns_per_session"),
        ("months = 1e9", "scenario.months"),
        ("months = inf", "must be a finite number"),
        ("sessions_per_week = nan", "scenario.sessions_per_week"),
        ("sessions_per_week = 1e9", "scenario.sessions_per_week"),
    ],
)
def test_absurd_sizes_are_refused_up_front(tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, says: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(_with(line), encoding="utf-8")
    assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 2
    assert says in _one_line(capsys.readouterr().err)


def _with(line: str) -> str:
    """TINY with a ``[scenario]`` key set to ``line``'s value."""
    import re

    key = line.split("=")[0].strip()
    if re.search(rf"^{key} = ", TINY, flags=re.M):
        return re.sub(rf"^{key} = .*$", line, TINY, flags=re.M)
    return TINY.replace("[run]", f"{line}\n\n[run]")


def test_tick_intervals_have_a_floor_and_the_bounds_a_way_round(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from memsim.scenarios.config import load_config

    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY + "maintenance_every_hours = 1e-9\n", encoding="utf-8")
    assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 2
    assert "run.maintenance_every_hours: 1e-09 is below the sane lower bound" in capsys.readouterr().err
    monkeypatch.setenv("MEMSIM_NO_SIZE_LIMITS", "1")  # what --no-size-limits sets
    assert load_config(cfg).run.maintenance_every_hours == 1e-9
    cfg.write_text(_with("users = 1000000"), encoding="utf-8")
    assert load_config(cfg).scenario["users"] == 1_000_000
    cfg.write_text(_with("months = inf"), encoding="utf-8")
    with pytest.raises(UserError, match="must be a finite number"):  # never lifted
        load_config(cfg)


# --- one writer per run folder -----------------------------------------------------------------------------


def test_two_writers_of_one_folder_exactly_one_runs(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY, encoding="utf-8")
    out = tmp_path / "run"
    procs = [_memsim("run", str(cfg), "--out", str(out), "--no-report") for _ in range(2)]
    done = [(p.wait(timeout=600), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in done)
    assert codes == [0, 2], done
    refused = next(err for code, _, err in done if code == 2)
    assert "is being written by another process (pid" in _one_line(refused)
    assert json.loads((out / "run.json").read_text())["complete"] is True


def test_a_lock_left_by_a_dead_writer_is_taken_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY, encoding="utf-8")
    out = tmp_path / "run"
    holder = textwrap.dedent(
        """
        import sys, time
        from memsim.analysis.pipeline import spec_from_config
        from memsim.scenarios.config import load_config
        from memsim.sim.recorder import Recorder
        Recorder(sys.argv[2]).open(spec_from_config(load_config(sys.argv[1])))
        print("holding", flush=True)
        time.sleep(600)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", holder, str(cfg), str(out)], env=_child_env(), text=True,
                             stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "holding"
        assert main(["run", str(cfg), "--out", str(out), "--no-report"]) == 2
        assert f"pid {child.pid}" in capsys.readouterr().err
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert (out / ".lock").read_text().strip() == str(child.pid)  # the dead writer's lock is still there ...
    assert main(["run", str(cfg), "--out", str(out), "--no-report"]) == 0  # ... and is taken over


# --- caches that heal ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["header", "pages"])
def test_a_physically_damaged_cache_is_set_aside_and_rebuilt(tmp_path: Path, where: str,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "c.sqlite"
    cache = KVCache(path, label="test cache")
    cache.put_many([(b"%05d" % i, b"v" * 2000) for i in range(3000)])
    cache.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with path.open("r+b") as f:
        f.seek(0 if where == "header" else path.stat().st_size // 2)
        f.write(os.urandom(16384))
    before = len(repairs())
    cache = KVCache(path, label="test cache")
    assert len(cache) == 0  # a scan meets the damage: set aside, and a fresh file in its place
    assert cache.get_many([b"00001"]) == ({}, 0)  # a miss, recomputed by the caller, not a stopped run
    cache.put(b"new", b"value")
    assert cache.get(b"new") == b"value" and len(cache) == 1
    (fixed,) = repairs()[before:]
    assert fixed["cache"] == "test cache" and Path(fixed["set_aside"]).exists()
    warned = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
    assert len(warned) == 1 and "\n" not in warned[0] and "test cache" in warned[0]


def test_a_busy_cache_is_not_taken_for_damage() -> None:
    assert not expected_failure(AssertionError("a bug"))
    from memsim.core.heal import is_damage

    assert is_damage(sqlite3.DatabaseError("database disk image is malformed"))
    assert not is_damage(sqlite3.OperationalError("database is locked"))


# --- the run folder's own files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        ("file", "is a file, not a run folder"),
        ("run.json", "run.json: unreadable run summary"),
        ("spec-array", "spec.json: not a run spec (a JSON list)"),
        ("part", "damaged run part"),
    ],
)
def test_damaged_run_folders_get_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, says: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY, encoding="utf-8")
    out = tmp_path / "run"
    argv = ["run", str(cfg), "--out", str(out), "--no-report"]
    if damage == "file":
        out.write_text("x")
    else:
        assert main(argv) == 0
        if damage == "run.json":
            (out / "run.json").write_text("{not json")
        elif damage == "spec-array":
            (out / "spec.json").write_text("[1, 2]")
        else:  # a run cut short keeps its parts; damage one of them
            info = json.loads((out / "run.json").read_text())
            (out / "run.json").write_text(json.dumps({**info, "complete": False}))
            (out / "parts").mkdir(exist_ok=True)
            (out / "parts" / "a0-0000.json").write_text(json.dumps(
                {"key": "a0-0000", "complete": True, "probes": 1, "timeline": 0, "failures": []}))
            (out / "parts" / "a0-0000.probes.parquet").write_bytes(b"PAR1 not really")
        capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    if damage == "part":  # found while joining the parts: the run says first that it stopped and can resume
        err = err.split("\n", 1)[1]
    assert says in _one_line(err)


def test_a_read_only_out_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY, encoding="utf-8")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert main(["run", str(cfg), "--out", str(ro / "run")]) == 2
        assert "Permission denied" in _one_line(capsys.readouterr().err)
    finally:
        ro.chmod(0o700)


def test_a_bug_still_shows_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only input and environment failures become one line; anything else is memsim's bug and propagates."""
    import memsim.analysis.cli.run as run_cli

    monkeypatch.setattr(run_cli, "listing_main", lambda args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        main(["list"])


def test_debug_shows_the_traceback_of_input_errors_too(tmp_path: Path) -> None:
    with pytest.raises(UserError):
        main(["--debug", "erasure", str(tmp_path / "nope")])
    assert main(["erasure", str(tmp_path / "nope")]) == 2


def test_a_locomo_file_with_too_many_questions_is_refused_while_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """50,000 questions once aborted in native code; now the loader stops at the bound, naming the record."""
    from memsim.static_benchmarks.locomo import MAX_LOCOMO_QUESTIONS, load_locomo

    turn = {"speaker": "A", "dia_id": "D1:1", "text": "I adopted a cat named Miso."}
    qa = {"question": "What is the cat's name?", "answer": "Miso", "evidence": ["D1:1"], "category": 1}
    record = {"sample_id": "c0", "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1": [turn],
                                                  "session_1_date_time": "1:00 pm on 8 May, 2023"},
              "qa": [qa] * 10_000}
    records = [{**record, "sample_id": f"c{i}"} for i in range(MAX_LOCOMO_QUESTIONS // 10_000 + 1)]
    path = tmp_path / "many.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    last = len(records) - 1
    assert main(["static", "locomo", "--data", str(path), "--out", str(tmp_path / "out")]) == 2
    err = _one_line(capsys.readouterr().err)
    assert f"{path}: record {last}: more than {MAX_LOCOMO_QUESTIONS:,} questions, over the limit" in err
    assert not (tmp_path / "out").exists()
    monkeypatch.setenv("MEMSIM_NO_SIZE_LIMITS", "1")  # what --no-size-limits sets
    assert len(load_locomo(path).questions) == 10_000 * len(records)
