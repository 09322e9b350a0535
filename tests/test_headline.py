"""The headline that cannot flatter: the best content-ignoring arm, one halves rule, intervals that agree with p, MDE."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from memsim.analysis.learning import compare, design_unit, format_learning, learning_table, user_halves
from memsim.analysis.stats import (
    Design,
    FlipTest,
    bootstrap_ci,
    design_mdes,
    design_power,
    did_parts,
    diff_in_diff,
    effect_spread,
    sign_flips,
)

ARMS = {"s": {"twin": "s~twin", "placebo": "s~placebo", "always_false": "s~false", "always_true": "s~true"}}


def _frame(rates: dict[str, tuple[float, float]], *, users: int = 40, per_user: int = 20, seed: int = 0,
           shared: bool = False) -> pl.DataFrame:
    """Arms on the same questions, each a Bernoulli of (first-half rate, second-half rate) per question.

    ``shared``: every arm draws from the same uniforms (arms that differ only where their rates do).
    """
    rng = np.random.default_rng(seed)
    rows, q = [], 0
    for u in range(users):
        for i in range(per_user):
            half = int(i >= per_user // 2)
            common = rng.random()
            for arm, (r1, r2) in rates.items():
                draw = common if shared else rng.random()
                rows.append({"system": arm, "question_id": f"q{q}", "user_id": f"u{u:02d}", "thread_id": f"q{q}",
                             "q_index": q, "kind": "current", "error": None, "m": float(draw < (r1, r2)[half])})
            q += 1
    return pl.DataFrame(rows)


def _table(df: pl.DataFrame, **kw) -> dict:
    return learning_table(df, metric="m", twins={}, placebos={}, control=None, rng=np.random.default_rng(0),
                          n_boot=500, arms=ARMS, **kw)


# --- the headline -------------------------------------------------------------------------------


def test_a_learner_harmed_by_noise_shows_no_learning_unless_it_beats_every_arm() -> None:
    """The placebo is hurt by random bits, always False is not: the headline is against always False.

    In the first half the twin is the best arm, in the second always False: the table says which, per half,
    and the DiD is the second half's difference minus the first's.
    """
    df = _frame({"s": (0.60, 0.62), "s~twin": (0.62, 0.60), "s~placebo": (0.45, 0.45), "s~false": (0.55, 0.70),
                 "s~true": (0.50, 0.55)}, shared=True)
    c = _table(df, seed=0)["s"]["contrasts"]
    head = c["learning_from_feedback"]
    assert (head["first_reference"], head["second_reference"]) == ("s~twin", "s~false")
    assert (head["first_reference_arm"], head["second_reference_arm"]) == ("twin", "always_false")
    assert head["first"] == c["effect_of_use"]["first"] and head["second"] == c["system_vs_always_false"]["second"]
    assert head["did"] == pytest.approx(head["second"] - head["first"])
    # system - placebo is large and positive; the headline, against the best arm, is negative
    assert c["system_vs_placebo"]["second"] > 0.1 and c["system_vs_placebo"]["second_lo"] > 0
    assert head["second"] == min(c[k]["second"] for k in ("effect_of_use", "system_vs_placebo",
                                                          "system_vs_always_false", "system_vs_always_true"))
    assert head["second"] < 0
    # every contrast is kept in the detailed table, placebo - twin too
    assert set(c) == {"learning_from_feedback", "system_vs_placebo", "effect_of_feedback_calls", "effect_of_use",
                      "system_vs_always_false", "system_vs_always_true"}
    text = format_learning(_table(df), metric="m", control=None)
    assert "learning from feedback (system - best arm: 1st twin, 2nd always False)" in text
    assert "conservative" in text


def test_a_learner_that_beats_every_arm_shows_its_learning() -> None:
    df = _frame({"s": (0.6, 0.85), "s~twin": (0.6, 0.6), "s~placebo": (0.55, 0.55), "s~false": (0.6, 0.62),
                 "s~true": (0.58, 0.6)}, shared=True)
    head = _table(df)["s"]["contrasts"]["learning_from_feedback"]
    assert head["second_reference"] == "s~false"
    assert head["second"] == pytest.approx(0.85 - 0.62, abs=0.06) and head["second_lo"] > 0 and head["second_p"] < 0.05


def test_a_no_op_learner_gets_zero_with_an_interval_that_covers_it_and_an_mde() -> None:
    """Arms identical to the system: exactly 0, [0, 0]; arms that differ by chance: an interval of width > 0 about 0."""
    same = {a: (0.7, 0.7) for a in ("s", "s~twin", "s~placebo", "s~false", "s~true")}
    head = _table(_frame(same, shared=True), seed=0)["s"]["contrasts"]["learning_from_feedback"]
    assert head["second"] == 0.0 and head["second_lo"] == 0.0 == head["second_hi"] and head["second_p"] == 1.0
    assert head["first_mde"] > 0.01 and head["second_mde"] > 0.01
    noisy = _table(_frame(same, shared=False, seed=3), seed=0)["s"]["contrasts"]["learning_from_feedback"]
    for half in ("first", "second"):
        assert noisy[f"{half}_lo"] <= 0.0 <= noisy[f"{half}_hi"], noisy
        assert noisy[f"{half}_hi"] - noisy[f"{half}_lo"] > 0.01
        assert noisy[f"{half}_mde"] > 0.01


# --- intervals that agree with p ----------------------------------------------------------------


def test_a_few_differing_threads_no_longer_give_an_interval_that_excludes_0_at_p_0_125() -> None:
    """276 threads of which 4 differ (+1 each): the exact sign-flip p is 2/16; the percentile bootstrap excluded 0."""
    threads, differing = 276, 4
    d = np.zeros(threads)
    d[:differing] = 1.0
    boot = bootstrap_ci(d, rng=np.random.default_rng(0), clusters=np.arange(threads), n_boot=4000)
    assert boot[0] > 0  # the old interval: excludes 0 although p is 0.125
    rows = []
    for t in range(threads):
        for arm, v in (("s", d[t]), ("t", 0.0)):
            rows.append({"system": arm, "question_id": f"q{t}", "user_id": f"u{t % 8}", "thread_id": f"q{t}",
                         "q_index": t, "kind": "current", "error": None, "m": v})
    df = pl.DataFrame(rows)
    # every question in one half: all in the second (q_index at or above each user's median) or not
    pair = compare(df, user_halves(df), metric="m", system="s", other="t", rng=np.random.default_rng(0),
                   n_boot=4000, unit="thread")
    assert pair is not None
    for p, (lo, hi) in ((pair.first_p, pair.first_ci), (pair.second_p, pair.second_ci), (pair.did_p, pair.did_ci)):
        assert (lo > 0 or hi < 0) == (p < 0.05), (p, lo, hi)
    # four nonzero units of 1: every random pattern flips them as 2**4 equally likely patterns
    test = FlipTest(d, np.ones(threads), sign_flips(threads, np.random.default_rng(1), 4000))
    assert test.p(0.0) == pytest.approx(2 / 16, abs=0.02)
    lo, hi = test.interval()
    assert lo <= 0.0 <= hi and hi > differing / threads


def test_interval_excludes_zero_exactly_when_p_is_below_5_percent() -> None:
    """On random data of every size, for the differences and for the DiD: the verdicts never disagree."""
    rng = np.random.default_rng(7)
    checked = disagreements = excluded = 0
    for _ in range(400):
        k = int(rng.integers(3, 40))
        n1, n2 = rng.integers(1, 6, k).astype(float), rng.integers(1, 6, k).astype(float)
        shift = rng.choice([0.0, 0.1, 0.3])
        s1 = np.array([rng.binomial(int(n), 0.5) - rng.binomial(int(n), 0.5) for n in n1], dtype=float)
        s2 = np.array([rng.binomial(int(n), 0.5 + shift / 2) - rng.binomial(int(n), 0.5 - shift / 2) for n in n2],
                      dtype=float)
        flips = sign_flips(k, rng, 500)
        for x, w, bounds in ((s2, n2, (-1.0, 1.0)), (*did_parts(s1, n1, s2, n2), (-2.0, 2.0))):
            test = FlipTest(x, w, flips)
            lo, hi = test.interval(bounds=bounds)
            p = test.p(0.0)
            checked += 1
            excluded += lo > 0 or hi < 0
            disagreements += (lo > 0 or hi < 0) != (p < 0.05)
            assert lo <= min(max(test.estimate, bounds[0]), bounds[1]) <= hi
    assert disagreements == 0 and checked == 800
    assert 100 < excluded < 700  # both verdicts occur, so the check has teeth


# --- one halves rule ----------------------------------------------------------------------------


def test_the_table_diff_in_diff_power_aa_and_sensitivity_split_halves_alike() -> None:
    """Users with different numbers of questions, interleaved: every figure splits each user at their own median."""
    from memsim.analysis.power import _fix_and_time, random_cutoff_rows
    from memsim.analysis.sensitivity import pool_seeds

    rng = np.random.default_rng(2)
    rows, q = [], 0
    counts = {f"u{u}": int(rng.integers(4, 30)) for u in range(12)}
    order = [u for u, n in counts.items() for _ in range(n)]
    rng.shuffle(order)
    seen: dict[str, int] = {}
    for u in order:
        i = seen[u] = seen.get(u, -1) + 1
        for arm in ("s", "t"):
            rows.append({"system": arm, "question_id": f"{u}q{i}", "user_id": u, "thread_id": f"{u}q{i}",
                         "q_index": q, "kind": "current", "error": None, "t_days": float(q),
                         "recall_all@10": float(rng.random() < (0.4 + 0.3 * (arm == "s") * (i > 3))),
                         "evidence_ids": ["e"], "retrieved_sources": [["x"]] * 10})
        q += 1
    df = pl.DataFrame(rows)
    split = dict(user_halves(df).select("question_id", "half").iter_rows())
    for u, n in counts.items():  # each user: the questions at or above their own median are the second half
        mine = [split[f"{u}q{i}"] for i in range(n)]
        assert mine == sorted(mine) and sum(mine) == n - (n // 2)
    # the learning table's DiD and diff_in_diff: the same halves, the same statistic, the same test
    pair = compare(df, user_halves(df), metric="recall_all@10", system="s", other="t", rng=np.random.default_rng(4),
                   unit="thread")
    dd = diff_in_diff(df, metric="recall_all@10", system="s", control="t", rng=np.random.default_rng(4), unit="thread")
    assert pair is not None and dd.did == pytest.approx(pair.did, abs=1e-12)
    assert dd.ci == pytest.approx(pair.did_ci, abs=1e-9) and dd.p == pytest.approx(pair.did_p)
    # power's injection reads the second half from the same rule
    _, _, second = _fix_and_time(df.filter(pl.col("system") == "s").sort("q_index"), 10, 100.0, "recall_all@10")
    assert second.tolist() == [split[x] == 1 for x in df.filter(pl.col("system") == "s").sort("q_index")["question_id"]]
    # sensitivity pools seeds by rescaling positions: each user keeps the same halves
    pooled = diff_in_diff(pool_seeds([df]), metric="recall_all@10", system="s", control="t",
                          rng=np.random.default_rng(4), unit="thread")
    assert pooled.did == pytest.approx(dd.did, abs=1e-12)
    # the A/A arms go through diff_in_diff: their halves are the same rule
    a = random_cutoff_rows(df, system="s", k=10, metric="recall_all@10", rng=np.random.default_rng(0), label="a")
    assert dict(user_halves(a).select("question_id", "half").iter_rows()) == split


# --- the unit, decided once ---------------------------------------------------------------------


def test_losing_a_user_does_not_switch_the_unit() -> None:
    df = _frame({"s": (0.6, 0.7), "s~twin": (0.6, 0.6)}, users=30, per_user=6)
    lost = df.filter(pl.col("user_id") != "u00")
    assert design_unit({"totals": {"users": 30}}, lost)[:2] == ("user", 30)
    assert design_unit({}, lost)[:2] == ("thread", 29)  # without the design, the rows' users decide
    unit, users, reason = design_unit({"totals": {"users": 30}}, lost)
    table = learning_table(lost, metric="m", twins={"s": "s~twin"}, placebos={}, control=None,
                           rng=np.random.default_rng(0), n_boot=200, unit=unit, unit_reason=reason)
    assert table["s"]["unit"] == "user" and table["s"]["contrasts"]["effect_of_use"]["units"] == 29
    header = format_learning(table, metric="m", control=None).splitlines()[0]
    assert header == "Learning through use, m; inference unit: users (30 users in the design, at least 30: whole users)"


# --- the design-based MDE -----------------------------------------------------------------------


def test_mde_searches_both_signs_on_a_tenth_of_a_point() -> None:
    rng = np.random.default_rng(1)
    ids = np.repeat(np.arange(40), 15)
    near_top = Design.from_rows((rng.random(ids.size) < 0.97).astype(float), ids, ids)
    found = design_mdes(near_top, rng=np.random.default_rng(2), replicates=300)
    # little room for a gain near 100%, plenty for a loss: the loss is the smaller MDE
    assert found.loss is not None and (found.gain is None or found.gain > found.loss)
    assert found.mde == found.loss and round(found.loss * 1000) == found.loss * 1000
    at, below = design_power(near_top, (-found.loss, -found.loss + 0.001), rng=np.random.default_rng(2),
                             replicates=300)
    assert at >= 0.8 > below
    always = Design.from_rows(np.ones(40), np.arange(40), np.arange(40))
    assert design_mdes(always, rng=np.random.default_rng(0), replicates=200).gain is None


def test_effects_that_vary_between_users_raise_the_mde_and_keep_5_percent_at_zero() -> None:
    rng = np.random.default_rng(5)
    users, per = 40, 20
    ids = np.repeat(np.arange(users), per)
    rate = np.repeat(rng.uniform(0.4, 0.8, users), per)
    base = (rng.random(ids.size) < rate).astype(float)
    # the spread is read from the paired differences: 0 for identical arms, about the true one otherwise
    assert effect_spread(np.zeros(ids.size), ids) == 0.0
    tau = 0.15
    effect = np.repeat(rng.normal(0, tau, users), per)
    other = (rng.random(ids.size) < np.clip(rate + effect, 0, 1)).astype(float)
    assert effect_spread(other - base, ids) == pytest.approx(tau, abs=0.07)
    flat = Design.from_rows(base, ids, ids)
    varied = Design.from_rows(base, ids, ids, spread=0.1)
    mde_flat = design_mdes(flat, rng=np.random.default_rng(3), replicates=400)
    mde_varied = design_mdes(varied, rng=np.random.default_rng(3), replicates=400)
    assert mde_varied.gain > mde_flat.gain + 0.005 and mde_varied.loss > mde_flat.loss + 0.005
    at_zero = design_power(varied, (0.0,), rng=np.random.default_rng(3), replicates=2000)[0]
    assert 0.03 <= at_zero <= 0.07, at_zero
    assert not math.isnan(at_zero)


def test_channels_that_speak_in_turns_take_the_placebo_as_the_headline_reference() -> None:
    """Under correction the twin (no turns) scores best, yet only the placebo is told turns at the system's dose."""
    from memsim.analysis.learning import best_reference, headline_roles

    df = _frame({"s": (0.6, 0.6), "s~twin": (0.8, 0.8), "s~placebo": (0.6, 0.6), "s~false": (0.55, 0.55),
                 "s~true": (0.8, 0.8)}, shared=True)
    assert headline_roles("correction") == headline_roles("implicit:0.3") == ("placebo",)
    assert "twin" in headline_roles("evidence")
    head = _table(df, channel="correction")["s"]["contrasts"]["learning_from_feedback"]
    assert head["second_reference"] == "s~placebo" and head["candidates"] == ["s~placebo"]
    assert head["second_lo"] <= 0 <= head["second_hi"]
    assert best_reference(df, metric="m", system="s", arms=ARMS["s"], half=1, channel="correction") == "s~placebo"
    assert _table(df)["s"]["contrasts"]["learning_from_feedback"]["second_reference"] in ("s~twin", "s~true")
