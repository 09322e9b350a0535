"""The typed run spec: the [run] table, answer options and their flags, one resolution per run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from memsim.analysis import pipeline
from memsim.analysis.cli.options import ANSWER_FLAGS, add_answer_arguments
from memsim.analysis.pipeline import answer_options, execute, make_spec, spec_from_config
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import SystemSpec
from memsim.scenarios.config import load_config
from memsim.sim.answer.options import AnswerOptions
from memsim.core.errors import UserError
from memsim.sim.spec import RunSettings, RunSpec

TINY = '[scenario]\nname = "persona"\nusers = 2\nmonths = 1\n'


def _config(tmp_path: Path, run: str) -> Any:
    path = tmp_path / "run.toml"
    path.write_text(TINY + "[run]\n" + run)
    return load_config(path)


def test_run_table_names_scorers_and_metric(tmp_path: Path) -> None:
    config = _config(tmp_path, 'k = 5\nscorers = ["evidence"]\nmetric = "recall_any@5"\nsystems = ["naive"]\n')
    spec = spec_from_config(config)
    assert spec.scorers == ("evidence",) and spec.metric == "recall_any@5" and spec.k == 5
    outcome = execute(spec, out_dir=None, embedder_factory=lambda: HashEmbedder(64))
    assert outcome.summary.metrics["metric"] == "recall_any@5"
    assert "stale_above_current" not in outcome.result.probes.columns  # only the named scorer ran


def test_run_table_metric_must_be_scored(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"run\.metric: recall_all@50 is not scored"):
        _config(tmp_path, 'k = 5\nretrieve_k = 10\nmetric = "recall_all@50"\n')


def test_command_line_k_overrides_the_tables_default_metric(tmp_path: Path) -> None:
    config = _config(tmp_path, "k = 5\n")
    spec = spec_from_config(config, systems=[SystemSpec("naive")], k=30)
    assert spec.k == 30 and spec.metric == "recall_all@30" and 30 in spec.ks


def test_cut_offs_and_metric_are_normalised_by_validators() -> None:
    s = RunSettings(k=7, ks=(1, 50))
    assert s.ks == (1, 7) and s.metric == "recall_all@7"  # 50 was not fetched
    s = RunSettings(k=7, retrieve_k=50, ks=(1, 50))
    assert s.ks == (1, 7, 50) and s.fetch_k == 50
    with pytest.raises(ValueError, match="fetches fewer memories than k"):
        RunSettings(k=10, retrieve_k=5)
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        RunSettings(k=0)
    with pytest.raises(ValueError, match="cut-offs must be positive"):
        RunSettings(ks=(0, 5))


def test_every_answer_field_is_a_flag_of_its_name() -> None:
    fields = set(AnswerOptions.model_fields) - {"judge_checks"}
    assert set(ANSWER_FLAGS) < fields
    for name, field in AnswerOptions.model_fields.items():
        assert field.description and "\n" not in field.description, name
    p = argparse.ArgumentParser()
    add_answer_arguments(p)
    args = p.parse_args(["--reader", "cot", "--llm", "openai", "--llm-model", "m", "--llm-timeout", "5",
                         "--judge", "contains", "--judge", "bleu1", "--no-cache", "--dry-run"])
    assert set(vars(args)) == fields
    options = AnswerOptions(**vars(args))
    assert options.reader == "cot" and options.judge == ("contains", "bleu1") and options.llm_timeout == 5.0
    assert options.no_cache and options.dry_run and options.llm_model == "m"
    assert answer_options(args) == options  # the pipeline reads the flags by the same names
    assert answer_options(p.parse_args([])) is None  # reader none: retrieval only


def test_bad_answer_options_name_the_value() -> None:
    with pytest.raises(ValueError, match="'long' is not one of none, short, cot"):
        AnswerOptions(reader="long")
    with pytest.raises(ValueError, match="'nonsense' is not one of"):
        AnswerOptions(reader="short", judge=["nonsense"])
    with pytest.raises(ValueError, match="Extra inputs"):
        AnswerOptions(reader="short", temperature=0.2)


def test_spec_answer_is_typed_and_round_trips(tmp_path: Path) -> None:
    spec = make_spec("longitudinal", "persona", {"users": 1, "months": 1}, [SystemSpec("naive")],
                     answer=AnswerOptions(reader="short", judge=("contains",)))
    assert isinstance(spec.answer, AnswerOptions)
    spec.write(tmp_path / "spec.json")
    again = RunSpec.model_validate_json((tmp_path / "spec.json").read_text())
    assert again == spec and again.answer.judge == ("contains",)


def test_sweep_answer_table_unknown_key_names_it_and_the_known_ones() -> None:
    from memsim.analysis.sweep import sweep_from_mapping

    data = {"scenario": {"name": "persona", "users": 1, "months": 1}, "systems": ["naive"],
            "answer": {"reader": "short", "temprature": 0.1}}
    with pytest.raises(UserError, match=r"answer\.temprature: unknown option; valid: allow_self_judging, allow_unreadable_verdicts, dry_run,"):
        sweep_from_mapping(data)
    spec = sweep_from_mapping({**data, "answer": {"reader": "short", "judge": ["contains"]}})
    assert spec.answer == AnswerOptions(reader="short", judge=("contains",))


def test_a_run_generates_its_scenario_once_and_builds_its_scorers_once(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = make_spec("longitudinal", "persona", {"users": 2, "months": 1}, [SystemSpec("naive"), SystemSpec("neuroplastic")],
                     n_boot=200)
    calls = {"build": 0, "generate": 0, "scorers": []}
    real_build, real_scorer = pipeline.build_scenario, pipeline.build_scorer

    class Spy:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def generate(self, rng: Any) -> Any:
            calls["generate"] += 1
            return self.inner.generate(rng)

    def build(*args: Any, **kwargs: Any) -> Any:
        calls["build"] += 1
        return Spy(real_build(*args, **kwargs))

    def scorer(name: str) -> Any:
        calls["scorers"].append(name)
        return real_scorer(name)

    def no_second_build(name: str) -> Any:
        raise AssertionError(f"the runner built scorer {name} again")

    monkeypatch.setattr(pipeline, "build_scenario", build)
    monkeypatch.setattr(pipeline, "_BUILT", {})  # forget the scenario make_spec built
    monkeypatch.setattr(pipeline, "build_scorer", scorer)
    monkeypatch.setattr("memsim.sim.runner.build_scorer", no_second_build)
    run = pipeline.resolve(spec, embedder_factory=lambda: HashEmbedder(64))
    assert run.score_columns[:2] == ["recall_all@1", "recall_any@1"]
    outcome = execute(spec, out_dir=None, embedder_factory=lambda: HashEmbedder(64))
    # Built once (resolve above; execute reuses it), its stream generated once per resolution.
    assert calls["build"] == 1 and calls["generate"] == 2
    assert calls["scorers"] == [*spec.scorers, *spec.scorers]
    assert outcome.result.probes.height > 0


def test_same_seed_same_rows_through_named_streams() -> None:
    spec = make_spec("longitudinal", "persona", {"users": 2, "months": 1}, [SystemSpec("neuroplastic")], n_boot=200)
    a = execute(spec, out_dir=None, embedder_factory=lambda: HashEmbedder(64)).result.probes
    b = execute(spec, out_dir=None, embedder_factory=lambda: HashEmbedder(64)).result.probes
    cols = [c for c in a.columns if not c.endswith("_ms")]
    assert a.select(cols).equals(b.select(cols))
