"""One registry type for every kind (``memsim.core.registry``): strict, lazy, with did-you-mean and entry points."""

from __future__ import annotations

import importlib.metadata
import textwrap
from pathlib import Path

import pytest

from memsim.core.errors import UserError
from memsim.core.registry import Registry


def test_register_load_describe_and_refuse_duplicates() -> None:
    reg = Registry("widget")
    reg.register("b", dict, description="a dict")
    reg.register("a", "collections:OrderedDict", description="lazy", colour="red")
    assert reg.names() == ["a", "b"] and "a" in reg and "zz" not in reg
    assert reg.load("b") is dict and reg.load("a").__name__ == "OrderedDict"
    assert reg.entry("a").meta == {"colour": "red"} and reg.origin("a").endswith("test_registry_core")
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a", dict, description="again")
    with pytest.raises(ValueError, match="module:attribute"):
        reg.register("c", "no_colon", description="bad")
    with pytest.raises(UserError, match=r"unknown widget 'aa' in x.toml \(did you mean 'a'\?\); known widgets: a, b"):
        reg.load("aa", where="x.toml")
    reg.register("broken", "collections:Nope", description="missing attribute")
    with pytest.raises(UserError, match="widget 'broken': cannot load 'collections:Nope'"):
        reg.load("broken")
    ordered = Registry("thing", ordered=True)
    ordered.register("z", dict, description="")
    ordered.register("y", dict, description="")
    assert ordered.names() == ["z", "y"]


@pytest.fixture
def plugin_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A package on the path whose entry points add a scorer, a scenario and a judge (as an installed one would)."""
    (tmp_path / "extra_kinds.py").write_text(textwrap.dedent('''
        from memsim.sim.answer.prompts import PromptTemplate
        from memsim.sim.answer.readers import ReaderKind

        TERSE = ReaderKind(PromptTemplate("reader_terse", system="Answer in one word after ANSWER:.",
                                          user="{memories}\\nQuestion: {question}"), 32, "marked_line")

        class Count:
            def score(self, ctx):
                return {"retrieved_count": float(len(ctx.retrieved))}

        class Loud:
            name = "loud"
            def score(self, *, question, gold, answer, **kw):
                return float(answer.isupper())
            def describe(self):
                return {"name": self.name}
    '''), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    points = [
        importlib.metadata.EntryPoint(name="retrieved_count", value="extra_kinds:Count", group="memsim.scorers"),
        importlib.metadata.EntryPoint(name="loud", value="extra_kinds:Loud", group="memsim.judges"),
        importlib.metadata.EntryPoint(name="evidence", value="extra_kinds:Count", group="memsim.scorers"),  # shadowed
        importlib.metadata.EntryPoint(name="terse", value="extra_kinds:TERSE", group="memsim.readers"),
    ]
    real = importlib.metadata.entry_points

    def entry_points(**kw):
        if kw.get("group", "").startswith("memsim.") and kw["group"] != "memsim.systems":
            return [p for p in points if p.group == kw["group"]]
        return real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    return tmp_path


def test_an_installed_package_adds_a_scorer_and_a_judge_by_entry_point(plugin_package, capsys) -> None:
    from memsim.analysis.cli import main
    from memsim.sim.answer.judges import JUDGE_NAMES, build_judge
    from memsim.sim.scorers import build_scorer, scorer_names

    assert "retrieved_count" in scorer_names() and "loud" in JUDGE_NAMES
    assert type(build_scorer("retrieved_count")).__name__ == "Count"
    assert build_judge("loud").score(question="q", gold="g", answer="YES") == 1.0
    assert main(["list", "scorers"]) == 0
    out = capsys.readouterr().out
    assert "retrieved_count" in out and "[entry point of an installed package]" in out
    assert "  evidence " in out and "[entry point" not in out.split("retrieved_count")[0]  # a built-in name wins
    assert type(build_scorer("evidence")).__name__ == "EvidenceScorer"


def test_an_installed_package_adds_a_reader_by_entry_point(plugin_package, capsys) -> None:
    from datetime import datetime, timezone

    from memsim.analysis.cli import main
    from memsim.memory.base import Retrieved
    from memsim.sim.answer.llm import ScriptedLLM
    from memsim.sim.answer.options import answer_choices
    from memsim.sim.answer.readers import READER_VARIANTS, Reader

    assert list(READER_VARIANTS) == ["short", "cot", "terse"] and "terse" in answer_choices()["reader"]
    assert main(["list", "readers"]) == 0
    out = capsys.readouterr().out
    assert "terse" in out and "[entry point of an installed package]" in out
    llm = ScriptedLLM("Thinking it over.\nFINAL ANSWER: Lisbon\nThat is all.")
    at = datetime(2024, 3, 1, tzinfo=timezone.utc)
    reader = Reader(llm, "terse")
    answer = reader.answer("Where does Ana live?", at, [Retrieved("m0", "Ana moved to Lisbon", 1.0, at, ("t0",))])
    # the package's prompt was sent, its reply budget kept, and its answer read from the marked line
    assert llm.calls[0]["messages"][0]["content"] == "Answer in one word after ANSWER:."
    assert reader.max_answer_tokens == 32 and answer.text == "Lisbon" and answer.prompt_id.startswith("reader_terse@")


def test_a_package_adds_a_benchmark_with_its_scorer_and_a_scenario_by_entry_points_and_they_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The tiny static benchmark and its scorer (``tests/tiny_static.py``, ``tests/tiny_scorer.py``) and the persona
    scenario under another name, declared only as entry points: listed, then played end to end."""
    from memsim.analysis import cli
    from memsim.analysis.cli import static as static_cli
    from memsim.memory.embed import HashEmbedder
    from memsim.memory.registry import Resources
    from memsim.scenarios.registry import build_scenario, unregister_protocol
    from memsim.core.streams import streams
    from test_static_registry import TINY_FILE

    points = [
        importlib.metadata.EntryPoint(name="tiny", value="test_static_registry:TINY", group="memsim.benchmarks"),
        importlib.metadata.EntryPoint(name="gold_in_top", value="tiny_scorer:GoldInTopScorer", group="memsim.scorers"),
        importlib.metadata.EntryPoint(name="people", value="memsim.scenarios.persona:PersonaScenario",
                                      group="memsim.scenarios"),
    ]
    real = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: [p for p in points if p.group == kw.get("group")]
                        if kw.get("group") in ("memsim.benchmarks", "memsim.scorers", "memsim.scenarios") else real(**kw))
    monkeypatch.setattr(static_cli, "_resources", lambda args: Resources(embedder_factory=lambda: HashEmbedder(64)))
    try:
        assert cli.main(["list"]) == 0
        listing = capsys.readouterr().out
        assert "tiny" in listing.split("static:")[1] and "people" in listing.split("scenarios:")[1]
        stream = build_scenario("people", {"users": 2, "months": 1}).generate(streams(0)["scenario"])
        assert stream.events
        out = tmp_path / "run"
        assert cli.main(["static", "tiny", "--data", str(TINY_FILE), "--kind", "pets", "--out", str(out),
                         "--no-progress"]) == 0
        assert "gold_in_top@2" in capsys.readouterr().out
    finally:
        from memsim.scenarios.registry import BENCHMARKS

        if "tiny" in BENCHMARKS.registered():
            unregister_protocol("tiny")
