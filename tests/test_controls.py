"""Known-effect instruments: the A/A control, the decay control, the oracle injection and its side channel."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from memsim.analysis.pipeline import Outcome, execute, make_spec
from memsim.memory.embed import HashEmbedder
from memsim.memory.inject import inject_rows, receives_gold
from memsim.memory.registry import Resources, SystemSpec, build_memory

SCENARIO = {"users": 3, "months": 3}
SPAN_DAYS = 90.0
METRIC = "recall_all@10"
"""The runs' headline column (k = 10)."""


def _resources(seed: int) -> Resources:
    return Resources(rng=np.random.default_rng(seed), embedder_factory=lambda: HashEmbedder(256))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list:
    """Three seeds of a small persona run with naive and every instrument."""
    systems = (
        SystemSpec("naive"),
        SystemSpec("control-static"),
        SystemSpec("control-decay", {"fraction_per_month": 0.3}),
        SystemSpec("control-inject", {"p_end": 0.9, "span_days": SPAN_DAYS, "seed": 11}),
    )
    out = []
    for seed in range(3):
        spec = make_spec("longitudinal", "persona", SCENARIO, systems, seed=seed, n_boot=500)
        assert spec.metric == METRIC
        out.append(execute(spec, out_dir=tmp_path_factory.mktemp(f"ctl{seed}"), resources=_resources(seed)))
    return out


def _row(outcome: Outcome, name: str) -> dict:
    """metrics.json's figures of the system registered as ``name`` (``did_control*``: DiD against naive).

    Read from the run folder's ``metrics.json``, as the report and ``memsim compare`` read them;
    it is the summary the run returned.
    """
    spec = outcome.spec
    label = next(s.display for s in spec.systems if s.name == name)
    metrics = json.loads((outcome.out_dir / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["control"] == "naive"
    return {"system": label, **metrics["systems"][label]}


def _pooled(rows: list[dict]) -> tuple[float, float, float]:
    """Fixed-effect (inverse-variance) pool of the seeds' ``did_control``: estimate and 95% interval.

    Each seed's standard error is read off its 95% bootstrap interval in metrics.json.
    """
    z = 1.959964
    se = np.array([(r["did_control_hi"] - r["did_control_lo"]) / (2 * z) for r in rows])
    w = 1.0 / se**2
    mean = float(np.sum(w * np.array([r["did_control"] for r in rows])) / w.sum())
    half = z / float(np.sqrt(w.sum()))
    return mean, mean - half, mean + half


def test_static_control_is_exactly_naive(runs) -> None:
    """A/A of the plumbing: identical retrieval gives DiD 0 with a zero-width interval on every seed."""
    for result in runs:
        p = result.result.probes
        a = p.filter(pl.col("system") == "naive").sort("q_index")["retrieved_ids"].to_list()
        b = p.filter(pl.col("system") == "control-static").sort("q_index")["retrieved_ids"].to_list()
        assert a == b and len(a) > 50
        row = _row(result, "control-static")
        assert row["did_control"] == 0.0 and row["did_control_lo"] == 0.0 and row["did_control_hi"] == 0.0
        assert row["did_control_mde"] == 0.0


def test_decay_control_has_negative_did(runs) -> None:
    """Forgetting a growing share of old memories reads as a negative DiD: every seed below 0, pooled interval below 0."""
    rows = [_row(result, "control-decay") for result in runs]
    for row in rows:
        assert row["did_control"] < 0, row
    assert np.mean([r["did_control"] for r in rows]) < -0.03
    pooled = _pooled(rows)
    assert pooled[2] < 0, pooled


def test_injection_is_detected_and_matches_rows(runs) -> None:
    """The oracle raises the DiD; replaying its rule on naive's rows gives the very same scores."""
    for result in runs:
        row = _row(result, "control-inject")
        assert row["did_control"] > 0.05 and row["did_control_lo"] > 0, row
        p = result.result.probes
        label = row["system"]
        engine = p.filter(pl.col("system") == label).sort("q_index")[METRIC].to_list()
        replay = inject_rows(p, system="naive", p_end=0.9, span_days=SPAN_DAYS, seed=11, k=10, metric=METRIC)
        assert replay.sort("q_index")[METRIC].to_list() == engine
    assert any(r.summary.metrics["system_reports"][_row(r, "control-inject")["system"]]["fired"] > 5 for r in runs)


def test_metrics_carry_the_minimum_detectable_effect(runs) -> None:
    """metrics.json reports the MDE next to the measured DiD; it grows with the interval's width."""
    for result in runs:
        m = result.summary.metrics["systems"]
        decay = m[next(s.display for s in result.spec.systems if s.name == "control-decay")]
        width = decay["did_control_hi"] - decay["did_control_lo"]
        assert decay["did_control_mde"] == pytest.approx(width * (1.959964 + 0.841621) / (2 * 1.959964), rel=1e-4)
        assert m["control-static"]["did_control_mde"] == 0.0


class _Spy:
    """Records whether gold reached it."""

    def __init__(self) -> None:
        self.gold: list = []

    def oracle(self, question_id: str, evidence: tuple[str, ...], *, user_id: str, t_days: float) -> None:
        self.gold.append(evidence)


def test_gold_only_for_control_instruments() -> None:
    """The side channel needs both the control- prefix and the oracle method."""
    spy = _Spy()
    assert receives_gold("control-inject", spy)
    assert not receives_gold("neuroplastic", spy)
    assert not receives_gold("control-static", build_memory("control-static", resources=_resources(0)))
    assert not receives_gold("naive", build_memory("naive", resources=_resources(0)))


def test_decay_forgets_with_use_not_with_query_time(hash_embedder, make_turn) -> None:
    """A store left alone forgets nothing more; use moves the clock and old memories go."""
    mem = build_memory("control-decay", {"fraction_per_month": 1.0, "min_age_days": 1.0}, resources=_resources(3))
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    first = [make_turn(f"fact number {i} about cats", i=i, at=t0) for i in range(40)]
    mem.ingest(first, user_id="u1", now=t0)
    far = t0 + timedelta(days=3000)
    assert len(mem.retrieve("cats", user_id="u1", now=far, k=100)) == 40
    later = t0 + timedelta(days=15)
    mem.ingest([make_turn("news about dogs", i=99, at=later)], user_id="u1", now=later)
    kept = mem.retrieve("cats", user_id="u1", now=later, k=100)
    assert 5 < len(kept) < 38  # about half of the old ones are gone at half a month x 1.0
    mem.maintain(now=later)
    assert mem.stats().items == len(kept)


def test_bad_instrument_arguments_are_errors() -> None:
    with pytest.raises(ValueError, match="p_end"):
        build_memory("control-inject", {"p_end": 2.0}, resources=_resources(0))
    with pytest.raises(ValueError, match="instrument"):
        build_memory("control-inject", {"inner": "control-static"}, resources=_resources(0))
    with pytest.raises(ValueError, match="fraction_per_month"):
        build_memory("control-decay", {"fraction_per_month": 0}, resources=_resources(0))


@pytest.mark.slow
def test_learner_control_gains_over_its_twin_with_real_embeddings(tmp_path: Path) -> None:
    """With real MiniLM vectors the learner's second-half gain over its twin, pooled over seeds 0-2, is above 0.

    40 users, so each seed's interval resamples users. Single seeds are not
    asserted: with MiniLM the effect is a few points and one seed's interval
    can touch 0 (seed 1: +1.1 [-0.8, +2.8]); the pooled interval may not.
    """
    rows = []
    resources = Resources()  # one real embedder (and cache) for every seed
    for seed in range(3):
        spec = make_spec(
            "longitudinal", "persona", {"users": 40, "months": 2},
            (SystemSpec("naive"), SystemSpec("control-learner")), seed=seed, n_boot=500,
        )
        m = execute(spec, out_dir=tmp_path / f"learn{seed}", resources=resources).summary.metrics
        entry = m["systems"]["control-learner"]
        assert entry["unit"] == "user" and entry["twin"] == "control-learner~twin"
        rows.append({"did_control": entry["gain_second"], "did_control_lo": entry["gain_second_lo"],
                     "did_control_hi": entry["gain_second_hi"]})
    pooled = _pooled(rows)
    assert pooled[0] > 0.0 and pooled[1] > 0.0, (pooled, rows)

def test_every_registered_system_has_a_role_and_the_demo_plays_the_baselines_and_systems() -> None:
    from memsim.analysis.cli.run import DEMO_ASK_FIRST, DEMO_INSTRUMENTS, demo_systems
    from memsim.memory.registry import ROLES, memory_names, memory_role, register_memory

    roles = {n: memory_role(n) for n in memory_names()}
    assert set(roles.values()) <= set(ROLES)
    assert {n for n, r in roles.items() if r == "instrument"} == {n for n in roles if n.startswith("control-")}
    assert {n for n, r in roles.items() if r == "ablation"} == {
        n for n in roles if "-no-" in n or n.endswith(("-decay-only", "-inhibition-only"))
    }
    # The same selection the demo made by name patterns before roles were recorded, plus the
    # known-positive learner the demo plays to show what its contrasts detect.
    assert DEMO_INSTRUMENTS == ("control-learner",)
    by_pattern = [
        n for n in memory_names(standalone_only=True)
        if (not n.startswith("control-") or n in DEMO_INSTRUMENTS) and "-no-" not in n
        and not n.endswith(("-decay-only", "-inhibition-only")) and n not in DEMO_ASK_FIRST
    ]
    by_pattern.sort(key=lambda n: (n != "naive", n))
    assert [s.name for s in demo_systems()] == by_pattern
    with pytest.raises(ValueError, match="role 'learner' is not one of"):
        register_memory("odd", "memsim.memory.naive:NaiveMemory", description="odd", role="learner")
