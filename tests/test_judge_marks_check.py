"""A run's judge check: sized by ``--judge-check N``, reused with ``--judge-check-from``, counted by ``--dry-run``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from memsim.analysis.judge_check import (
    build_check_set,
    draw_items,
    format_check_estimate,
    judge_check_estimate,
    judge_checks_for_run,
)
from memsim.core.errors import UserError
from tests.test_llm import _Endpoint

MINI_LME = Path(__file__).parent / "fixtures" / "longmemeval_s_mini.json"


@pytest.fixture
def endpoint():
    ep = _Endpoint([], reply="CORRECT")
    yield ep
    ep.stop()


def _options(url: str, *extra: str) -> dict:
    from memsim.analysis.cli.options import add_answer_arguments

    p = argparse.ArgumentParser()
    add_answer_arguments(p)
    argv = ["--reader", "short", "--llm", "openai", "--llm-model", "reader-model", "--llm-base-url", url,
            "--judge", "llm_locomo", "--judge-model", "judge-model", "--no-cache", *extra]
    return vars(p.parse_args(argv))


def test_draw_items_is_a_seeded_subset_in_the_sets_order() -> None:
    items = build_check_set()
    drawn = draw_items(items, 12)
    assert len(drawn) == 12 and drawn == draw_items(items, 12)
    order = [items.index(it) for it in drawn]
    assert order == sorted(order) and len({it.category for it in drawn}) > 1
    assert draw_items(items, None) == items == draw_items(items, len(items) + 5)


def test_judge_check_n_sizes_the_check_and_zero_skips_it(endpoint) -> None:
    checks = judge_checks_for_run(_options(endpoint.url, "--judge-check", "12"), default_judges=())
    assert checks["n_items"] == 12 and checks["judges"]["llm_locomo"]["n"] == 12
    # Abstention items are scored by the rubric without a call: at most one call per item.
    assert 0 < len(endpoint.requests) <= 12
    assert {r["model"] for r in endpoint.requests} == {"judge-model"}
    before = len(endpoint.requests)
    assert judge_checks_for_run(_options(endpoint.url, "--judge-check", "0"), default_judges=()) == {}
    assert len(endpoint.requests) == before


def test_judge_check_from_reuses_an_earlier_judge_check_and_names_a_mismatch(endpoint, tmp_path: Path) -> None:
    from memsim.analysis.cli import main

    out = tmp_path / "check"
    assert main(["judge-check", "--no-locomo", "--judge", "llm_locomo", "--llm", "openai", "--judge-model",
                 "judge-model", "--llm-base-url", endpoint.url, "--per-kind", "1", "--no-cache", "--out", str(out)]) == 0
    saved = json.loads((out / "judge_check.json").read_text())
    made = len(endpoint.requests)
    checks = judge_checks_for_run(_options(endpoint.url, "--judge-check-from", str(out)), default_judges=())
    assert len(endpoint.requests) == made  # nothing judged again
    entry = saved["judges"]["llm_locomo/judge-model"]
    assert checks["from"] == str(out) and checks["items"] == saved["items"] and checks["n_items"] == saved["n_items"]
    assert checks["judges"]["llm_locomo"]["accuracy"] == entry["accuracy"]
    again = judge_checks_for_run(_options(endpoint.url, "--judge-check-from", str(out / "judge_check.json")),
                                 default_judges=())
    assert again["judges"] == checks["judges"]
    other = _options(endpoint.url, "--judge-check-from", str(out))
    other["judge_model"] = "another-model"
    with pytest.raises(UserError, match="no check of llm_locomo with model another-model"):
        judge_checks_for_run(other, default_judges=())
    with pytest.raises(UserError, match="--judge-check-from .*missing"):
        judge_checks_for_run(_options(endpoint.url, "--judge-check-from", str(tmp_path / "missing")),
                             default_judges=())


def test_dry_run_counts_the_judge_check_and_calls_no_model(endpoint, tmp_path: Path) -> None:
    from memsim.analysis.pipeline import answer_options, execute, make_spec
    from memsim.memory.embed import HashEmbedder
    from memsim.memory.registry import Resources, SystemSpec
    from memsim.sim.answer.dryrun import DryRunFinished

    from memsim.scenarios.locomo_stream import default_locomo_path

    # the run draws its check items from the LoCoMo file where it is found (as answer_options does)
    locomo = default_locomo_path() if default_locomo_path().is_file() else None
    estimate = judge_check_estimate(_options(endpoint.url, "--dry-run", "--judge-check", "20"), default_judges=(),
                                    locomo=locomo)
    assert estimate["n_items"] == 20 and 0 < estimate["calls"] <= 20 and estimate["prompt_tokens"] > 0
    assert "on 20 labelled items" in format_check_estimate(estimate) and f"{estimate['calls']} calls" in \
        format_check_estimate(estimate)
    skipped = judge_check_estimate(_options(endpoint.url, "--dry-run", "--judge-check", "0"), default_judges=())
    assert skipped["calls"] == 0 and "skipped" in format_check_estimate(skipped)
    no_llm_judge = {**_options(endpoint.url, "--dry-run"), "judge": ["contains"]}
    assert judge_check_estimate(no_llm_judge, default_judges=()) == {}
    args = argparse.Namespace(**_options(endpoint.url, "--dry-run", "--judge-check", "20"))
    options = answer_options(args)
    assert options.judge_checks == {"dry_run": estimate}
    spec = make_spec(
        "static", "longmemeval", {"data": str(MINI_LME), "user_only": False, "include_abstention": True},
        [SystemSpec("naive")], k=3, retrieve_k=10, scorers=("lme_turn",), n_boot=100, answer=options,
    )
    with pytest.raises(DryRunFinished) as done:
        execute(spec, out_dir=tmp_path / "run", resources=Resources(embedder_factory=lambda: HashEmbedder(dim=256)))
    assert "dry run: no model was called" in done.value.text
    assert format_check_estimate(estimate) in done.value.text
    assert endpoint.requests == [] and not (tmp_path / "run").exists()
