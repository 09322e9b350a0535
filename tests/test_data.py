"""``memsim data``: fetch from a loopback mirror, verify sha256, trust on first use, refuse tampering, find files."""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from dataclasses import dataclass
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsim.analysis.cli import main
from memsim.core.errors import UserError
from memsim.static_benchmarks import data

FIXTURES = Path(__file__).parent / "fixtures"
LME_MINI = FIXTURES / "longmemeval_s_mini.json"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@dataclass(frozen=True)
class Mirror:
    """A folder served over HTTP on loopback."""

    root: Path
    url: str


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[Mirror]:
    """An empty folder served by a file server on 127.0.0.1 (never the network)."""
    root = tmp_path / "mirror"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield Mirror(root, f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty data folder, and no environment variable that would point elsewhere."""
    home = tmp_path / "data-home"
    monkeypatch.setenv("MEMSIM_DATA_DIR", str(home))
    monkeypatch.delenv("MEMSIM_LOCOMO", raising=False)
    monkeypatch.delenv("MEMSIM_LONGMEMEVAL", raising=False)
    monkeypatch.delenv("MEMSIM_DATA_MIRROR", raising=False)
    return home


def _serve(mirror: Mirror, name: str, source: Path | bytes) -> None:
    folder = mirror.root / name
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / data.DATASETS[name].filename
    if isinstance(source, bytes):
        target.write_bytes(source)
    else:
        shutil.copyfile(source, target)


def test_locomo_fetch_stores_the_verified_file_and_prints_the_licence(
    mirror: Mirror, data_home: Path, locomo_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _serve(mirror, "locomo", locomo_path)
    assert main(["data", "fetch", "locomo", "--mirror", mirror.url, "--no-progress"]) == 0
    out = capsys.readouterr().out
    stored = data_home / "locomo" / "locomo10.json"
    assert stored.read_bytes() == locomo_path.read_bytes()
    assert data.DATASETS["locomo"].sha256 in out and "(verified)" in out
    assert "CC BY-NC 4.0" in out
    # The fetched copy is what a run finds when no file is named.
    assert data.locate("locomo") == stored
    from memsim.scenarios.static import LocomoConfig

    assert LocomoConfig().path() == stored
    assert LocomoConfig(data="locomo").path() == stored


def test_tampered_locomo_is_refused_and_nothing_is_stored(
    mirror: Mirror, data_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _serve(mirror, "locomo", (FIXTURES / "locomo_quirks.json").read_bytes())
    assert main(["data", "fetch", "locomo", "--mirror", mirror.url, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "refused" in err and data.DATASETS["locomo"].sha256 in err
    assert not (data_home / "locomo" / "locomo10.json").exists()


def test_unknown_hash_is_recorded_at_first_fetch_and_enforced_later(mirror: Mirror, data_home: Path) -> None:
    _serve(mirror, "longmemeval-s", LME_MINI)
    first = data.fetch("longmemeval-s", mirror=mirror.url)
    assert first.first_use and first.sha256 == data.sha256_file(LME_MINI)
    assert data.recorded_hashes() == {"longmemeval-s": first.sha256}
    again = data.fetch("longmemeval-s", mirror=mirror.url)
    assert not again.first_use and again.sha256 == first.sha256
    # Upstream changes and the local copy is gone: the new file does not match the recorded hash.
    (data_home / "longmemeval-s" / "longmemeval_s.json").unlink()
    _serve(mirror, "longmemeval-s", LME_MINI.read_bytes().replace(b"}", b"} ", 1))
    with pytest.raises(UserError, match=f"refused.*{first.sha256}"):
        data.fetch("longmemeval-s", mirror=mirror.url)
    assert not (data_home / "longmemeval-s" / "longmemeval_s.json").exists()


def test_a_changed_local_copy_is_fetched_again(mirror: Mirror, data_home: Path) -> None:
    _serve(mirror, "longmemeval-oracle", LME_MINI)
    got = data.fetch("longmemeval-oracle", mirror=mirror.url)
    got.path.write_text("[]")
    again = data.fetch("longmemeval-oracle", mirror=mirror.url)
    assert again.path.read_bytes() == LME_MINI.read_bytes()


def test_download_failure_names_the_url(mirror: Mirror, data_home: Path) -> None:
    with pytest.raises(UserError, match=f"longmemeval-m: download from {mirror.url}/longmemeval-m/"):
        data.fetch("longmemeval-m", mirror=mirror.url)


def test_the_mirror_comes_from_the_environment(mirror: Mirror, data_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _serve(mirror, "longmemeval-s-cleaned", LME_MINI)
    monkeypatch.setenv("MEMSIM_DATA_MIRROR", mirror.url)
    assert data.fetch("longmemeval-s-cleaned").url.startswith(mirror.url)


def test_longmemeval_runs_fall_back_to_the_fetched_file(mirror: Mirror, data_home: Path) -> None:
    from memsim.scenarios.registry import build_scenario
    from memsim.scenarios.static import LongMemEvalConfig

    assert LongMemEvalConfig().path() is None
    _serve(mirror, "longmemeval-s-cleaned", LME_MINI)
    got = data.fetch("longmemeval-s-cleaned", mirror=mirror.url)
    assert LongMemEvalConfig().path() == got.path
    assert build_scenario("longmemeval_stream", {}).config.path() == got.path


def test_the_environment_variable_wins_over_the_cache(
    mirror: Mirror, data_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _serve(mirror, "longmemeval-s-cleaned", LME_MINI)
    data.fetch("longmemeval-s-cleaned", mirror=mirror.url)
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL", "/elsewhere/lme.json")
    assert data.locate("longmemeval") == Path("/elsewhere/lme.json")


def test_missing_data_errors_name_the_fetch_command(data_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["static", "longmemeval"]) == 2
    assert "memsim data fetch longmemeval-s-cleaned" in capsys.readouterr().err
    assert main(["static", "longmemeval", "--data", "longmemeval-m"]) == 2
    assert "memsim data fetch longmemeval-m" in capsys.readouterr().err
    assert main(["static", "locomo", "--data", str(data_home / "absent.json")]) == 2
    assert "memsim data fetch locomo" in capsys.readouterr().err
    with pytest.raises(UserError, match="that dataset is locomo, not longmemeval"):
        data.resolve_given("locomo", "longmemeval")


def test_list_shows_what_is_present(mirror: Mirror, data_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _serve(mirror, "longmemeval-oracle-cleaned", LME_MINI)
    data.fetch("longmemeval-oracle-cleaned", mirror=mirror.url)
    assert main(["data", "list", "--verify"]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if "longmemeval-oracle-cleaned" in line)
    assert "present, sha256 ok" in row
    assert all("absent" in line for line in lines if line.strip().startswith("locomo "))
    (data_home / "longmemeval-oracle-cleaned" / "longmemeval_oracle_cleaned.json").write_text("[]")
    main(["data", "list", "--verify"])
    assert "SHA256 MISMATCH" in capsys.readouterr().out


def test_unknown_dataset_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["data", "fetch", "locomo11"])
    assert "invalid choice" in capsys.readouterr().err
