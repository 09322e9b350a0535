"""The one pipeline: durable rows, resume after kill -9, rerun from spec, refusal, scorers, layers."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from memsim.analysis.cli import main as cli_main
from memsim.analysis.pipeline import execute, make_spec, rerun
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources, SystemSpec
from memsim.core.errors import UserError
from memsim.sim.scorers import register_scorer, unregister_scorer

REPO = Path(__file__).resolve().parents[1]

# A child process that plays a spec into a folder with the hash embedder; the test kills it.
_CHILD = textwrap.dedent(
    """
    import json, sys
    from memsim.analysis.pipeline import execute
    from memsim.memory.embed import HashEmbedder
    from memsim.memory.registry import Resources
    from memsim.sim.spec import RunSpec
    spec = RunSpec(**json.loads(sys.argv[1]))
    execute(spec, out_dir=sys.argv[2], resources=Resources(embedder_factory=lambda: HashEmbedder(64)))
    """
)


def _hash() -> Resources:
    return Resources(embedder_factory=lambda: HashEmbedder(64))


def _kill_after_parts(spec_json: dict, out: Path, parts: int) -> None:
    """Start a run in a child process and ``kill -9`` it once ``parts`` parts are on disk."""
    # The child imports the memsim under test (a PYTHONPATH given to the tests comes first).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(REPO)) if p)}
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, json.dumps(spec_json), str(out)], env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if len(list((out / "parts").glob("*.json"))) >= parts:
                break
            time.sleep(0.005)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert not (out / "metrics.json").exists()
    assert len(list((out / "parts").glob("*.json"))) >= parts


def _longitudinal_spec(**kw):
    return make_spec(
        "longitudinal", "persona", {"users": 3, "months": 4}, [SystemSpec("naive"), SystemSpec("neuroplastic")],
        seed=2, n_boot=200, **kw,
    )


@pytest.mark.slow
def test_longitudinal_kill_9_then_resume_gives_identical_metrics(tmp_path: Path):
    spec = _longitudinal_spec()
    execute(spec, out_dir=tmp_path / "whole", resources=_hash())
    out = tmp_path / "killed"
    _kill_after_parts(spec.to_json(), out, parts=2)  # two of its arms committed
    resumed = execute(spec, out_dir=out, resources=_hash())
    assert (out / "metrics.json").read_bytes() == (tmp_path / "whole" / "metrics.json").read_bytes()
    whole = execute(spec, out_dir=tmp_path / "whole", resources=_hash())  # a finished folder: nothing replayed
    cols = [c for c in whole.result.probes.columns if not c.endswith("_ms")]
    assert resumed.result.probes.select(cols).equals(whole.result.probes.select(cols))


def test_static_kill_9_then_resume_skips_finished_episodes(tmp_path: Path, locomo_path: Path):
    spec = make_spec(
        "static", "locomo", {"data": str(locomo_path), "limit_conversations": 4}, [SystemSpec("naive")],
        k=10, retrieve_k=50, scorers=("evidence",), control=None, n_boot=200,
    )
    execute(spec, out_dir=tmp_path / "whole", resources=_hash())
    out = tmp_path / "killed"
    _kill_after_parts(spec.to_json(), out, parts=1)
    done = {p.stem for p in (out / "parts").glob("*.json")}
    resumed = execute(spec, out_dir=out, resources=_hash())
    assert (out / "metrics.json").read_bytes() == (tmp_path / "whole" / "metrics.json").read_bytes()
    # Episodes finished before the kill were not played again: only the others produced rows here.
    assert resumed.result.info["totals"]["episodes"] == 4
    played = {row["episode"] for row in resumed.result.probes.iter_rows(named=True)}
    assert len(played) == 4 and len(done) >= 1


def test_a_folder_of_another_spec_is_refused(tmp_path: Path):
    execute(_longitudinal_spec(), out_dir=tmp_path / "r", resources=_hash())
    before = (tmp_path / "r" / "metrics.json").read_bytes()
    with pytest.raises(UserError, match=r"another spec .*seed"):
        execute(
            make_spec("longitudinal", "persona", {"users": 3, "months": 4}, [SystemSpec("naive"), SystemSpec("neuroplastic")],
                      seed=3, n_boot=200),
            out_dir=tmp_path / "r",
            resources=_hash(),
        )
    assert (tmp_path / "r" / "metrics.json").read_bytes() == before  # nothing overwritten


def test_rerun_reproduces_metrics_byte_for_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    spec = make_spec("longitudinal", "persona", {"users": 2, "months": 2}, [SystemSpec("naive")], seed=7, n_boot=200)
    execute(spec, out_dir=tmp_path / "a")
    outcome = rerun(tmp_path / "a", out_dir=tmp_path / "b")
    assert (tmp_path / "a" / "metrics.json").read_bytes() == (tmp_path / "b" / "metrics.json").read_bytes()
    assert outcome.spec == spec
    assert cli_main(["rerun", str(tmp_path / "a"), "--out", str(tmp_path / "c")]) == 0
    assert "metrics.json identical to" in capsys.readouterr().out


class AnswerLength:
    """A scorer added in one place: the number of retrieved memories that mention the gold answer."""

    name = "gold_mentions"

    def columns(self, ks: Sequence[int]) -> list[str]:
        return ["gold_mentions"]

    def score(self, question, retrieved, *, ks):  # noqa: ANN001
        if not question.gold:
            return {"gold_mentions": math.nan}
        return {"gold_mentions": float(sum(question.gold.lower() in m.text.lower() for m in retrieved))}


def test_a_new_scorer_is_one_registration_and_appears_in_the_tables(tmp_path: Path):
    register_scorer("gold_mentions", AnswerLength, description="retrieved memories that mention the gold answer")
    try:
        spec = make_spec(
            "longitudinal", "persona", {"users": 2, "months": 2}, [SystemSpec("naive")],
            scorers=("evidence", "gold_mentions"), n_boot=200,
        )
        outcome = execute(spec, out_dir=tmp_path / "r", resources=_hash())
    finally:
        unregister_scorer("gold_mentions")
    assert "gold_mentions" in outcome.result.probes.columns
    overall = outcome.summary.metrics["systems"]["naive"]["overall"]["scores"]["gold_mentions"]
    assert overall["mean"] > 0 and overall["lo"] <= overall["mean"] <= overall["hi"]
    assert all("gold_mentions" in t["scores"] for t in outcome.summary.metrics["systems"]["naive"]["per_kind"].values())


def test_unknown_scorer_and_bad_settings_are_clear_errors():
    with pytest.raises(UserError, match="unknown scorer 'nope'; known scorers: .*evidence"):
        execute(
            make_spec("longitudinal", "persona", {"users": 1, "months": 1}, [SystemSpec("naive")], scorers=("nope",)),
            out_dir=None,
            resources=_hash(),
        )
    with pytest.raises(UserError, match="listed twice"):
        make_spec("longitudinal", "persona", {"users": 1, "months": 1}, [SystemSpec("naive"), SystemSpec("naive")])


def test_list_prints_every_registry(capsys: pytest.CaptureFixture[str]):
    assert cli_main(["list"]) == 0
    text = capsys.readouterr().out
    for head in ("systems:", "scenarios:", "readers:", "judges:", "scorers:"):
        assert head in text
    for name in ("neuroplastic", "persona", "locomo", "cot", "f1_locomo", "lme_turn", "stale"):
        assert f"  {name} " in text


def test_bad_system_arguments_fail_before_any_work(tmp_path, capsys) -> None:
    from memsim.analysis.cli import main
    from memsim.memory.registry import check_system_args

    for system, needle in (("neuroplastic:ltp=maybe", "ltp='maybe' is not a valid bool"),
                           ("neuroplastic:no_such_knob=1", "has no argument 'no_such_knob'"),
                           ("control-learner:explore=2.5", "explore=2.5 is not a valid int")):
        assert main(["run", "scenarios/configs/demo.toml", "--system", system, "--out", str(tmp_path / "x")]) == 2
        assert needle in capsys.readouterr().err
        assert not (tmp_path / "x").exists(), "nothing may be written for a bad argument"
    # the same check guards specs built from a config file's systems
    with pytest.raises(ValueError, match="explore=2.5 is not a valid int"):
        check_system_args("control-learner", {"explore": 2.5})
    check_system_args("control-learner", {"explore": 2, "rate": 0.2})
