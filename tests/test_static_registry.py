"""Static protocols as registrations: a benchmark is one loader module plus one registration.

``tiny_static`` (a loader and its options, in one module) and ``tiny_scorer``
(a scorer in one file) are registered here, in a fixture that undoes both,
and show up in ``memsim list``, in ``memsim static tiny --help`` and in the
tables and ``metrics.json`` of a run. Every registered protocol gets the
declaration checks of ``check_protocol``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsim.analysis import cli
from memsim.analysis.cli import static as static_cli
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources
from memsim.scenarios.registry import (
    StaticProtocol,
    protocol_names,
    register_protocol,
    scenario_names,
    static_protocol,
    unregister_protocol,
)
from memsim.sim.answer.judges import JUDGE_NAMES
from memsim.core.errors import UserError
from memsim.sim.scorers import build_scorer, register_scorer, scorer_names, unregister_scorer

TINY_FILE = Path(__file__).parent / "fixtures" / "tiny_static.json"

TINY = StaticProtocol(
    name="tiny",
    title="Tiny",
    scenario="tiny_static:TinyBenchmark",
    options="tiny_static:TinyOptions",
    description="a tiny fixture benchmark: short dialogues, questions after each",
    data="a tiny_static.json file (default: the fixture)",
    k=2,
    ks=(1, 2, 3),
    depth=3,
    scorers=("evidence", "gold_in_top"),
    metric="gold_in_top@{k}",
)


@pytest.fixture
def tiny() -> Iterator[StaticProtocol]:
    register_scorer("gold_in_top", "tiny_scorer:GoldInTopScorer", description="the gold answer is in the top k memories")
    register_protocol(TINY)
    try:
        yield TINY
    finally:
        unregister_protocol("tiny")
        unregister_scorer("gold_in_top")


def _help(name: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        cli.main(["static", name, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def check_protocol(protocol: StaticProtocol, capsys: pytest.CaptureFixture[str]) -> None:
    """What every registered protocol declares: a scenario, described options that are flags, known scorers and judges."""
    assert protocol.name in scenario_names() and protocol.name in protocol_names()
    model = protocol.options_model()
    text = _help(protocol.name, capsys)
    for name, field in model.model_fields.items():
        assert field.description, f"{protocol.name}: option {name} has no description"
        assert "--" + name.replace("_", "-") in text
    assert f"headline cut-off (default {protocol.k})" in text
    assert set(protocol.scorers) <= set(scorer_names()) and set(protocol.judges) <= set(JUDGE_NAMES)
    ks = sorted({*protocol.ks, protocol.k})
    columns = [c for s in protocol.scorers for c in build_scorer(s).columns(ks)]
    assert protocol.metric.format(k=protocol.k) in columns  # the default headline is a column the run fills


@pytest.mark.parametrize("name", protocol_names())
def test_every_registered_protocol_is_complete(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    check_protocol(static_protocol(name), capsys)


def test_a_protocol_in_one_module_plus_one_registration(tiny: StaticProtocol, capsys: pytest.CaptureFixture[str]) -> None:
    check_protocol(tiny, capsys)
    assert cli.main(["list"]) == 0
    listing = capsys.readouterr().out
    static_part = listing.split("static:")[1].split("readers:")[0]
    assert "tiny" in static_part and tiny.description in static_part
    assert "gold_in_top" in listing.split("scorers:")[1] and "the gold answer is in the top k memories" in listing
    text = _help("tiny", capsys)
    assert "--kind KIND" in text and "only the questions of this kind" in text
    assert "--limit-dialogues N" in text and "a tiny_static.json file" in text
    assert "--labels" not in text and "--depth" not in text  # the other protocols' options are theirs


def test_the_registered_protocol_runs_with_its_scorer_in_the_tables(
    tiny: StaticProtocol, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(static_cli, "_resources", lambda args: Resources(embedder_factory=lambda: HashEmbedder(64)))
    out = tmp_path / "run"
    assert cli.main(["static", "tiny", "--data", str(TINY_FILE), "--kind", "pets", "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert f"Tiny {TINY_FILE.resolve()} (sha256 " in text and "  2 dialogues" in text
    assert "2 episodes, 2 questions, k=2 (retrieved 3)" in text
    assert "gold_in_top" in text and "recall_all" in text and "pets" in text
    spec = json.loads((out / "spec.json").read_text())
    assert spec["scenario"]["name"] == "tiny" and spec["scenario"]["args"]["kind"] == "pets"
    assert spec["scorers"] == ["evidence", "gold_in_top"] and spec["metric"] == "gold_in_top@2"
    assert spec["k"] == 2 and spec["retrieve_k"] == 3 and spec["ks"] == [1, 2, 3]
    metrics = json.loads((out / "metrics.json").read_text())
    overall = metrics["systems"]["naive"]["overall"]
    assert metrics["metric"] == "gold_in_top@2" and overall["questions"] == 2
    assert set(overall["scores"]) >= {"gold_in_top@1", "gold_in_top@2", "gold_in_top@3", "recall_all@3"}
    # A whole dialogue (three or four turns) fits in the three fetched memories: the gold is always there.
    assert overall["scores"]["gold_in_top@3"]["mean"] == 1.0


def test_registration_is_strict(tiny: StaticProtocol, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="'tiny' is already registered"):
        register_protocol(tiny)
    with pytest.raises(ValueError, match="'locomo' is already registered"):
        register_protocol(StaticProtocol(name="locomo", title="x", scenario="m:C", options="m:O", description="x"))
    with pytest.raises(UserError, match="unknown static benchmark 'nosuch'; known static benchmarks: locomo, longmemeval, tiny"):
        static_protocol("nosuch")
    with pytest.raises(SystemExit):
        cli.main(["static", "nosuch"])
    assert "invalid choice: 'nosuch'" in capsys.readouterr().err


def test_a_registration_made_by_a_test_does_not_leak() -> None:
    # The fixture above undoes its registrations whatever the order the tests run in.
    assert "tiny" not in protocol_names() and "tiny" not in scenario_names() and "gold_in_top" not in scorer_names()


def test_only_locomo_declares_its_data_as_the_judge_check_file() -> None:
    # answer_options reads this field, where it once compared the benchmark's name with "locomo".
    declared = {name for name in protocol_names() if static_protocol(name).checks_judges}
    assert declared == {"locomo"}
