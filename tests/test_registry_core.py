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
