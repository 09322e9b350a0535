"""The Python API (``memsim.run``, ``memsim.static``, ``memsim.open_run``): the documented example, run as written."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[1]
API_PAGE = ROOT / "docs" / "reference" / "api.md"


def _documented() -> tuple[str, list[str]]:
    """The Python example of the reference page's "Running from Python" and the command it says is the same."""
    text = API_PAGE.read_text(encoding="utf-8")
    section = text.split("## Running from Python", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    command = re.search(r"```bash\n(.*?)```", section, re.S)
    assert code is not None and command is not None, "the page lost its example or its command"
    return code.group(1), command.group(1).split()


@pytest.mark.slow
def test_the_documented_example_returns_the_figures_of_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from memsim.analysis.cli import main

    code, command = _documented()
    monkeypatch.chdir(tmp_path)  # the command's --out is relative: it lands here
    namespace: dict[str, object] = {}
    exec(compile(code, str(API_PAGE), "exec"), namespace)  # as a notebook user pastes it
    printed = capsys.readouterr().out
    run = namespace["run"]
    assert command[:2] == ["memsim", "run"]
    # The config path of the command is relative to the repository root.
    argv = [str(ROOT / a) if a.endswith(".toml") else a for a in command[2:]]
    assert main(["run", *argv, "--no-report", "--no-progress"]) == 0
    out = tmp_path / command[command.index("--out") + 1]
    cli = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert dict(run.metrics.raw) == cli  # the same figures, every one
    assert run.spec.to_json() == json.loads((out / "spec.json").read_text(encoding="utf-8"))
    # The typed view reads the same numbers.
    naive = run.metrics["naive"]
    assert naive.headline.mean == cli["systems"]["naive"]["overall"]["scores"][cli["metric"]]["mean"]
    assert naive.headline.lo < naive.headline.mean < naive.headline.hi
    assert repr(naive.headline) in printed
    rows = run.rows()
    assert rows.height == pl.read_parquet(out / "probes.parquet").height
    contrasts = run.contrasts()
    learner = cli["systems"]["control-learner"]["contrasts"]
    assert set(contrasts["contrast"].to_list()) == set(learner)
    for r in contrasts.iter_rows(named=True):
        assert r["second"] == learner[r["contrast"]]["second"] and r["second_p"] == learner[r["contrast"]]["second_p"]
    # The documented mean skips the NaN of unscored questions, as metrics.json does: no NaN printed.
    means = rows.filter(pl.col("excluded").is_null()).group_by("system").agg(pl.col(cli["metric"]).fill_nan(None).mean())
    assert not any(math.isnan(v) for v in means[cli["metric"]].to_list())
    assert means.filter(pl.col("system") == "naive")[cli["metric"]][0] == pytest.approx(naive.headline.mean, abs=1e-12)
    # open_run reads the command's folder into the same figures.
    import memsim

    again = memsim.open_run(out)
    assert dict(again.metrics.raw) == cli and again.rows().height == rows.height


def _tiny_config(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text('[scenario]\nname = "persona"\nusers = 2\nmonths = 1\n\n[run]\nseed = 3\nk = 5\nn_boot = 100\n',
                    encoding="utf-8")
    return path


def test_run_writes_a_run_folder_and_takes_a_spec(tmp_path: Path) -> None:
    import memsim
    from memsim.sim.spec import read_spec

    run = memsim.run(_tiny_config(tmp_path), systems=["naive", "control-static"], out=tmp_path / "run")
    assert run.out_dir == tmp_path / "run" and (tmp_path / "run" / "metrics.json").is_file()
    assert run.metrics.kind == "longitudinal" and run.metrics.metric == "recall_all@5" and run.spec.seed == 3
    assert json.loads((tmp_path / "run" / "metrics.json").read_text()) == dict(run.metrics.raw)
    assert list(run.systems()["system"]) == ["naive", "control-static"]
    assert run.contrasts().height == 0 and "second_mde" in run.contrasts().columns  # no feedback-using system
    # A spec read back plays the same numbers; seed= overrides it.
    same = memsim.run(read_spec(tmp_path / "run"))
    assert dict(same.metrics.raw) == dict(run.metrics.raw) and same.out_dir is None
    other = memsim.run(read_spec(tmp_path / "run"), seed=4)
    assert other.spec.seed == 4 and dict(other.metrics.raw) != dict(run.metrics.raw)


def test_bad_input_is_one_clear_error(tmp_path: Path) -> None:
    import memsim
    from memsim.core.errors import UserError

    with pytest.raises(UserError, match="'nowhere' is neither a config file nor a shipped config; shipped: .*life_quick"):
        memsim.run("nowhere", systems=["naive"])
    with pytest.raises(UserError, match="no systems: give systems="):
        memsim.run(_tiny_config(tmp_path))
    with pytest.raises(UserError, match="systems: unknown memory system 'nope'; known systems: "):
        memsim.run(_tiny_config(tmp_path), systems=["nope"])
    with pytest.raises(UserError, match="report=True needs a run folder"):
        memsim.run(_tiny_config(tmp_path), systems=["naive"], report=True)
    with pytest.raises(UserError, match="unknown static benchmark 'nope'"):
        memsim.static("nope")
    with pytest.raises(KeyError, match="no system 'nope' in this run; systems: naive"):
        memsim.run(_tiny_config(tmp_path), systems=["naive"]).metrics["nope"]


def test_import_memsim_stays_light() -> None:
    import subprocess
    import sys

    probe = "import sys, memsim; print(sorted(m for m in ('polars', 'torch', 'memsim.api') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_static_plays_a_registered_benchmark_as_the_command_does(tmp_path: Path) -> None:
    from test_static_registry import TINY, TINY_FILE

    import memsim
    from memsim.analysis.cli import main
    from memsim.scenarios.registry import register_protocol, unregister_protocol
    from memsim.core.errors import UserError
    from memsim.sim.scorers import register_scorer, unregister_scorer

    register_scorer("gold_in_top", "tiny_scorer:GoldInTopScorer", description="the gold answer is in the top k memories")
    register_protocol(TINY)
    try:
        run = memsim.static("tiny", systems=["naive"], data=TINY_FILE, kind="pets", n_boot=200)
        assert main(["static", "tiny", "--data", str(TINY_FILE), "--kind", "pets", "--n-boot", "200", "--no-report",
                     "--no-progress", "--out", str(tmp_path / "cli")]) == 0
        assert dict(run.metrics.raw) == json.loads((tmp_path / "cli" / "metrics.json").read_text(encoding="utf-8"))
        assert run.metrics.kind == "static" and run.metrics.metric == "gold_in_top@2"
        assert set(run.rows()["kind"].to_list()) == {"pets"} and run.contrasts().height == 0
        with pytest.raises(UserError, match="tiny has no option colour; options: kind, limit_dialogues"):
            memsim.static("tiny", data=TINY_FILE, colour="red")
    finally:
        unregister_protocol("tiny")
        unregister_scorer("gold_in_top")
