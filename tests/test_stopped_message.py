"""A run stopped by an error names its run folder only when rows were written there (a dry run writes none)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memsim.analysis.cli import main
from memsim.core.errors import UserError

TINY = '[scenario]\nname = "persona"\nusers = 2\nmonths = 1\n\n[run]\nseed = 0\nk = 5\nn_boot = 100\n'


def _failing(write_rows: bool) -> Any:
    def execute(spec: Any, *, out_dir: Any, **kwargs: Any) -> Any:
        if write_rows and out_dir is not None:
            (Path(out_dir) / "parts").mkdir(parents=True)
        raise UserError("reader short needs the llm extra (pip install 'memsim[llm]')")

    return execute


@pytest.mark.parametrize("write_rows", [False, True])
def test_run_names_its_folder_only_when_rows_were_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str], write_rows: bool) -> None:
    import memsim.analysis.pipeline as pipeline

    monkeypatch.setattr(pipeline, "execute", _failing(write_rows))
    config = tmp_path / "tiny.toml"
    config.write_text(TINY, encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", str(config), "--system", "naive", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    said = "stopped; every row committed so far is in" in captured.out + captured.err
    assert said == write_rows and out.exists() == write_rows
    assert "needs the llm extra" in captured.err


@pytest.mark.parametrize("write_rows", [False, True])
def test_static_names_its_folder_only_when_episodes_were_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 write_rows: bool) -> None:
    from test_static_registry import TINY as TINY_PROTOCOL
    from test_static_registry import TINY_FILE

    import memsim.analysis.pipeline as pipeline
    from memsim.scenarios.registry import register_protocol, unregister_protocol
    from memsim.sim.scorers import register_scorer, unregister_scorer

    monkeypatch.setattr(pipeline, "execute", _failing(write_rows))
    register_scorer("gold_in_top", "tiny_scorer:GoldInTopScorer", description="the gold answer is in the top k memories")
    register_protocol(TINY_PROTOCOL)
    try:
        out = tmp_path / "static"
        assert main(["static", "tiny", "--data", str(TINY_FILE), "--out", str(out), "--no-progress"]) == 2
    finally:
        unregister_protocol("tiny")
        unregister_scorer("gold_in_top")
    captured = capsys.readouterr()
    assert ("stopped; every finished episode is in" in captured.out + captured.err) == write_rows
    assert out.exists() == write_rows
