"""The docs' Python snippets run as written and print figures, not NaN."""

from __future__ import annotations

import math
import re
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _snippet(page: str, needle: str) -> str:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if needle in b]
    assert len(blocks) == 1, f"{page}: expected one python block with {needle!r}"
    return blocks[0]


def test_the_tutorials_polars_snippet_skips_unscored_questions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Rows as a run writes them: abstention questions are not scored (NaN, with the reason in excluded).
    rows = pl.DataFrame({
        "system": ["naive", "naive", "naive", "bm25", "bm25", "bm25"],
        "excluded": [None, None, "abstention", None, None, "abstention"],
        "recall_all@10": [1.0, 0.0, math.nan, 1.0, 1.0, math.nan],
    })
    (tmp_path / "runs" / "demo").mkdir(parents=True)
    rows.write_parquet(tmp_path / "runs" / "demo" / "probes.parquet")
    monkeypatch.chdir(tmp_path)
    code = _snippet("tutorial.md", "probes.parquet").strip().splitlines()
    namespace: dict[str, object] = {}
    exec("\n".join(code[:-1]), namespace)
    result = eval(code[-1], namespace)  # the value a notebook shows
    assert dict(result.iter_rows()) == {"bm25": 1.0, "naive": 0.5}
    # The NaN the snippet avoids is real: a plain mean over the same rows is NaN for every system.
    plain = rows.group_by("system").agg(pl.col("recall_all@10").mean())
    assert all(math.isnan(v) for v in plain["recall_all@10"].to_list())


def _commands(block: str) -> list[str]:
    """Shell commands of a fenced block: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line.split("  #", 1)[0].strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]


@pytest.mark.slow
def test_the_tutorials_plugin_commands_run_as_written_on_the_quick_world(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    text = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
    (tmp_path / "mine.py").write_text(_snippet("tutorial.md", "class WordOverlapMemory"), encoding="utf-8")
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")  # the commands name configs from the repository root
    blocks = [b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "mine:WordOverlapMemory" in b]
    assert len(blocks) == 1
    commands = _commands(blocks[0])
    assert [c.split()[1] for c in commands] == ["memsim", "memsim", "memsim"] and "life_quick.toml" in commands[1]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert (tmp_path / "runs" / "mine" / "metrics.json").read_bytes() == (
        tmp_path / "runs" / "mine-again" / "metrics.json").read_bytes()  # "same numbers", as the tutorial says
