"""The three learning contrasts: weighted sign-flip p, design-based MDE, and figures named by their metric."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from memsim.analysis.learning import compare, user_halves
from memsim.analysis.stats import Design, design_mde, design_mdes, design_power

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _rows(per_user: dict[str, list[tuple[float, float]]]) -> pl.DataFrame:
    """Arms ``s`` and ``t`` on each user's questions: as many even ones (first half) as ``pairs`` (second half)."""
    rows, q = [], 0
    for user, pairs in per_user.items():
        for s, t in [(0.0, 0.0)] * len(pairs) + pairs:
            for arm, v in (("s", s), ("t", t)):
                rows.append({"system": arm, "question_id": f"q{q}", "user_id": user, "thread_id": user,
                             "q_index": q, "kind": "current", "error": None, "m": v})
            q += 1
    return pl.DataFrame(rows)


def test_the_p_value_tests_the_question_weighted_statistic() -> None:
    """Four heavy users gain, eight light users lose: the weighted mean is positive, the per-user mean negative.

    The p must be the exact sign-flip p of the weighted statistic (flipping whole users' sums), not of per-user means.
    """
    heavy = [(1.0, 0.0)] * 4 + [(1.0, 1.0)] * 16  # 20 second-half questions, +4 each
    light = [(0.0, 1.0)]  # 1 second-half question, -1 each
    users = {**{f"h{i}": heavy for i in range(4)}, **{f"l{i}": light for i in range(8)}}
    df = _rows(users)
    pair = compare(df, user_halves(df), metric="m", system="s", other="t", rng=np.random.default_rng(0), n_boot=200)
    assert pair is not None and pair.units == 12  # fewer than 30 users: threads, one per user here
    assert pair.second == pytest.approx((16 - 8) / (80 + 8))
    sums = np.array([4.0] * 4 + [-1.0] * 8)
    flips = np.array(list(itertools.product((-1.0, 1.0), repeat=12)))
    weighted = float((np.abs(flips @ sums) >= abs(sums.sum()) - 1e-12).mean())
    means = np.array([4 / 20] * 4 + [-1.0] * 8)
    unweighted = float((np.abs(flips @ means) >= abs(means.sum()) - 1e-12).mean())
    assert pair.second_p == pytest.approx(weighted)
    assert abs(weighted - unweighted) > 0.1  # the two tests disagree here, so the check has teeth


def _design(rng: np.random.Generator, users: int = 40, per_user: int = 15) -> Design:
    rate = np.repeat(rng.uniform(0.4, 0.95, users), per_user)
    base = (rng.random(rate.size) < rate).astype(float)
    ids = np.repeat(np.arange(users), per_user)
    return Design.from_rows(base, ids, ids)


def test_design_power_is_near_alpha_at_zero_and_rises() -> None:
    design = _design(np.random.default_rng(1))
    power = design_power(design, (0.0, 0.03, 0.06, 0.12), rng=np.random.default_rng(2))
    assert 0.02 <= power[0] <= 0.10, power
    assert power[0] < power[1] < power[2] <= power[3] and power[3] >= 0.8


def test_design_power_is_near_alpha_at_zero_when_threads_are_the_units() -> None:
    """Ten users, each with 40 threads of three asks that are all hit or all missed (as re-asks of one question are).

    Each thread sits a fixed distance from its user's rate; redrawn questions compared with the realised
    scores would carry those distances into every sign pattern and reject well under 5% at effect 0.
    """
    rng = np.random.default_rng(3)
    users, threads, asks = 10, 40, 3
    rate = np.repeat(rng.uniform(0.3, 0.8, users), threads)
    base = np.repeat((rng.random(users * threads) < rate).astype(float), asks)
    user_ids = np.repeat(np.arange(users), threads * asks)
    thread_ids = np.repeat(np.arange(users * threads), asks)
    power = design_power(Design.from_rows(base, user_ids, thread_ids), (0.0, 0.05), rng=np.random.default_rng(4))
    assert 0.02 <= power[0] <= 0.10, power
    assert power[1] > 0.5


def test_design_mde_is_the_crossing_of_the_curve_and_never_reads_a_gap() -> None:
    """The MDE reaches 80% on the same draws, a hair below it does not; arms need not differ for it to exist."""
    design = _design(np.random.default_rng(1))
    mde = design_mde(design, rng=np.random.default_rng(2))
    assert mde is not None and 0.01 < mde < 0.2
    at, below = design_power(design, (mde, mde - 0.002), rng=np.random.default_rng(2))
    assert at >= 0.8 > below
    # more users, smaller MDE (roughly one over the square root)
    bigger = design_mde(_design(np.random.default_rng(1), users=160), rng=np.random.default_rng(2))
    assert bigger is not None and 0.35 * mde < bigger < 0.7 * mde
    # a reference arm that is always right leaves no room for a gain; a loss it can still detect
    always = design_mdes(Design.from_rows(np.ones(40), np.arange(40), np.arange(40)), rng=np.random.default_rng(0))
    assert always.gain is None and always.loss is not None


# --- figures are named by their metric ----------------------------------------------------------

_HALVES = re.compile(r"\bhal(f|ves)\b", re.IGNORECASE)


def _accuracy_near_halves(chunks: list[str], where: str) -> list[str]:
    """Chunks (lines, rows, notes) that speak of halves and call a figure accuracy without judged answers."""
    bad = []
    for chunk in chunks:
        low = re.sub(r"\s+", " ", chunk.lower())  # a phrase broken across lines is still one phrase
        if _HALVES.search(chunk) and "accuracy" in low and not re.search(r"answer accuracy|judge", low):
            bad.append(f"{where}: {chunk.strip()[:200]}")
    return bad


@pytest.fixture(scope="module")
def retrieval_only_run(tmp_path_factory: pytest.TempPathFactory):
    from memsim.analysis.pipeline import execute, make_spec
    from memsim.memory.embed import HashEmbedder
    from memsim.memory.registry import SystemSpec

    spec = make_spec("longitudinal", "persona", {"users": 4, "months": 1},
                     (SystemSpec("naive"), SystemSpec("control-learner")), seed=0, n_boot=100)
    out = tmp_path_factory.mktemp("retrieval-only")
    return out, execute(spec, out_dir=out, report=True, embedder_factory=lambda: HashEmbedder(256))


def test_no_halves_figure_of_a_retrieval_only_run_is_called_accuracy(retrieval_only_run, capsys) -> None:
    from memsim.analysis.cli.run import print_outcome

    out, outcome = retrieval_only_run
    print_outcome(outcome)
    printed = capsys.readouterr().out
    assert "learning from feedback (system - best arm" in printed and "2nd half, recall_all@10 (pp)" in printed
    bad = _accuracy_near_halves(printed.splitlines(), "CLI")
    bad += _accuracy_near_halves((out / "report.md").read_text(encoding="utf-8").splitlines(), "report.md")
    html = (out / "report.html").read_text(encoding="utf-8")
    html = re.sub(r"data:image/[^'\"]+", "", html)  # figures are images, their text is the captions
    bad += _accuracy_near_halves(re.split(r"<(?:tr|li|h\d|p|figcaption|th)\b", html), "report.html")
    assert not bad, bad


def test_no_halves_figure_in_the_docs_is_called_accuracy() -> None:
    bad: list[str] = []
    for page in sorted(DOCS.rglob("*.md")):
        paragraphs = re.split(r"\n\s*\n|\n(?=\|)", page.read_text(encoding="utf-8"))
        bad += _accuracy_near_halves(paragraphs, str(page.relative_to(DOCS)))
    assert not bad, bad
