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


def _play(args: list[str], out: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    """``memsim static ARGS --out OUT`` with hash embeddings; what it printed."""
    monkeypatch.setattr(static_cli, "_resources", lambda args: Resources(embedder_factory=lambda: HashEmbedder(64)))
    assert cli.main(["static", *args, "--out", str(out), "--no-progress"]) == 0
    return capsys.readouterr().out


def test_the_registered_protocol_runs_with_its_scorer_in_the_tables(
    tiny: StaticProtocol, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    text = _play(["tiny", "--data", str(TINY_FILE), "--kind", "pets"], out, monkeypatch, capsys)
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
    known = ", ".join(protocol_names())  # a new built-in benchmark edits no test
    assert known.startswith("locomo, longmemeval, ") and known.endswith(", tiny")
    with pytest.raises(UserError, match=f"unknown static benchmark 'nosuch'; known static benchmarks: {known}$"):
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


# A whole benchmark as a user's package would ship it: one module (its file kind and dataset, its loader and
# options, its protocol) and one entry point; memsim itself is not touched.
DIALOGS_MODULE = '''
"""Dialogs: a static benchmark in one module."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta

from pydantic import Field

from memsim.core.errors import UserError
from memsim.core.validate import validate_args
from memsim.memory.base import Turn
from memsim.scenarios.base import ScenarioStream, StaticOptions, StaticProtocol
from memsim.sim.events import Episode, Question, Session
from memsim.static_benchmarks.data import Dataset, fetch_hint, locate, register_dataset, register_kind, resolve_given

register_kind("dialogs", env="MEMSIM_DIALOGS", defaults=("dialogs-v1",))
register_dataset(Dataset("dialogs-v1", "dialogs", "https://example.org/dialogs/v1/dialogs.json", "dialogs.json", None,
                         "CC0", "Dialogs: short dialogues, questions after each"))


class DialogsOptions(StaticOptions):
    limit: int | None = Field(None, description="only the first N dialogues")


class DialogsConfig(DialogsOptions):
    data: str = Field("", description="a dialogs file or a memsim data name")


class DialogsBenchmark:
    name = "dialogs"

    def __init__(self, config):
        self.config = config
        self.path = resolve_given(config.data, "dialogs") if config.data else locate("dialogs")
        if self.path is None or not self.path.is_file():
            raise UserError(f"no dialogs file {self.path}; {fetch_hint('dialogs')}")
        self.raw = self.path.read_bytes()

    @classmethod
    def from_args(cls, args, *, source=""):
        return cls(validate_args(DialogsConfig, args, what="scenario", source=source))

    def spec_args(self):
        return {**self.config.model_dump(mode="json"), "data": str(self.path.resolve())}

    def meta(self):
        return {"sha256": hashlib.sha256(self.raw).hexdigest(), "load_lines": ["read by the dialogs module"]}

    def episodes(self):
        for d in json.loads(self.raw)["dialogues"][: self.config.limit]:
            at, uid = datetime.fromisoformat(d["date"]), d["id"]
            turns = tuple(Turn(f"{uid}:T{i}", uid, "user", t, at, uid) for i, t in enumerate(d["turns"]))
            asked = tuple(Question(f"{uid}:q{j}", uid, at + timedelta(hours=1), q["q"], q["a"], q["kind"],
                                   tuple(f"{uid}:T{i}" for i in q["evidence"])) for j, q in enumerate(d["questions"]))
            yield Episode(uid, (Session(uid, uid, at, turns), *asked))

    def generate(self, rng):
        return ScenarioStream(start=None, end=None, meta=self.meta(), streamed=self.episodes())


PROTOCOL = StaticProtocol(
    name="dialogs", title="Dialogs", scenario=f"{__name__}:DialogsBenchmark", options=f"{__name__}:DialogsOptions",
    description="dialogs: short dialogues, questions after each", data="a dialogs file or a memsim data name",
    k=2, ks=(1, 2), depth=2,
)
'''


@pytest.fixture
def dialogs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The dialogs module in a folder on ``sys.path`` with its ``memsim.benchmarks`` entry point; undone after."""
    import sys

    from memsim.scenarios.registry import BENCHMARKS
    from memsim.static_benchmarks import data

    site = tmp_path / "site"
    info = site / "memsim_dialogs-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "memsim_dialogs.py").write_text(DIALOGS_MODULE, encoding="utf-8")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: memsim-dialogs\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[memsim.benchmarks]\ndialogs = memsim_dialogs:PROTOCOL\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("MEMSIM_DATA_DIR", str(tmp_path / "data-home"))
    monkeypatch.delenv("MEMSIM_DIALOGS", raising=False)
    try:
        yield site
    finally:
        if BENCHMARKS.registered_entry("dialogs") is not None:
            unregister_protocol("dialogs")
        if "dialogs" in data.KINDS:
            data.unregister_kind("dialogs")
        sys.modules.pop("memsim_dialogs", None)


def test_a_benchmark_in_one_module_is_listed_with_its_data_and_plays(
    dialogs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["list", "static"]) == 0
    assert "dialogs" in capsys.readouterr().out
    # memsim data imports the installed benchmarks: the module's kind and dataset are known, with their hint
    assert cli.main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert "dialogs-v1" in out and "Dialogs: short dialogues, questions after each" in out
    assert "dialogs:" in out and "none: get it with `memsim data fetch dialogs-v1`, or set MEMSIM_DIALOGS" in out
    file = tmp_path / "dialogs.json"
    file.write_bytes(TINY_FILE.read_bytes())
    monkeypatch.setenv("MEMSIM_DIALOGS", str(file))
    assert cli.main(["data", "list"]) == 0
    assert f"  dialogs:                    {file}" in capsys.readouterr().out
    check_protocol(static_protocol("dialogs"), capsys)
    out_dir = tmp_path / "run"
    text = _play(["dialogs", "--data", str(file), "--limit", "1"], out_dir, monkeypatch, capsys)
    assert f"Dialogs {file.resolve()} (sha256 " in text and "read by the dialogs module" in text
    assert "1 episodes, 3 questions, k=2" in text
    spec = json.loads((out_dir / "spec.json").read_text())
    assert spec["scenario"]["name"] == "dialogs" and spec["scenario"]["args"]["limit"] == 1


def test_data_registration_is_strict() -> None:
    from memsim.static_benchmarks.data import Dataset, register_dataset, register_kind

    with pytest.raises(ValueError, match="data kind 'locomo' is already registered"):
        register_kind("locomo", env="MEMSIM_X", defaults=("locomo",))
    with pytest.raises(ValueError, match="dataset 'locomo' is already registered"):
        register_dataset(Dataset("locomo", "locomo", "https://x", "x.json", None, "-", "-"))
    with pytest.raises(ValueError, match="unknown data kind 'nosuch'; register_kind it first"):
        register_dataset(Dataset("x", "nosuch", "https://x", "x.json", None, "-", "-"))
