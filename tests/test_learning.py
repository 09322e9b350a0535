"""Learning through use against twins: known effects, channels, user-level inference, A/A coverage."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta, timezone

import numpy as np
import polars as pl
import pytest
from helpers import replay

from memsim.analysis.learning import compare, learning_table, user_halves
from memsim.analysis.pipeline import execute, make_spec
from memsim.memory.base import MemoryStats, Retrieved, Turn
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources, SystemSpec
from memsim.scenarios.base import ScenarioStream
from memsim.core.errors import UserError
from memsim.sim.events import Question, Session, sort_events

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _hash() -> Resources:
    return Resources(embedder_factory=lambda: HashEmbedder(256))


def _run(seed: int, systems: Sequence[str], **kw):
    spec = make_spec(
        "longitudinal", "persona", {"users": 40, "months": 2}, [SystemSpec(s) for s in systems],
        seed=seed, n_boot=1000, **kw,
    )
    return execute(spec, out_dir=None, resources=_hash())


@pytest.fixture(scope="module")
def known_effects() -> dict[int, dict]:
    """Seeds 0-9 of the 40-user persona stream: the instruments, with control-learner's placebo twin."""
    return {
        seed: _run(seed, ("naive", "control-learner", "control-static", "control-decay"), placebo=True).summary.metrics
        for seed in range(10)
    }


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_known_effects_against_twins_on_seeds_0_to_9(known_effects: dict[int, dict], seed: int) -> None:
    metrics = known_effects[seed]
    m = metrics["systems"]
    learner = m["control-learner"]
    # learns from feedback alone: a positive second-half gain over its twin, interval above 0
    assert learner["users"] == 40 and learner["unit"] == "user"
    assert learner["gain_second"] > 0 and learner["gain_second_lo"] > 0, learner
    # systems whose feedback is a no-op get no twin: their gain from use is zero by construction
    assert set(metrics["twins"]) == {"control-learner"}
    assert "gain_second" not in m["naive"] and "gain_second" not in m["control-static"]
    # naive under another name: exactly no difference against the static control
    assert m["control-static"]["did_control"] == 0.0
    # forgets with time, not with feedback: a loss against the static control, no twin to differ from
    assert m["control-decay"]["did_control"] < 0 and "gain_second" not in m["control-decay"]


@pytest.mark.slow
def test_placebo_of_the_learner_is_null_on_seeds_0_to_9(known_effects: dict[int, dict]) -> None:
    """Bits with no link to the answers teach control-learner nothing: its placebo's gain is null.

    Each seed's 95% interval should cover 0 about 19 times in 20, so at least
    8 of 10 must (a null effect fails this with probability about 1%), and the
    placebo's gains centre on 0 while the learner's do not.
    """
    placebo = [known_effects[s]["systems"]["control-learner~placebo"] for s in range(10)]
    learner = [known_effects[s]["systems"]["control-learner"] for s in range(10)]
    covers = sum(p["gain_second_lo"] <= 0 <= p["gain_second_hi"] for p in placebo)
    assert covers >= 8, [(p["gain_second_lo"], p["gain_second_hi"]) for p in placebo]
    mean_placebo = float(np.mean([p["gain_second"] for p in placebo]))
    mean_learner = float(np.mean([p["gain_second"] for p in learner]))
    assert abs(mean_placebo) < 0.01 and mean_learner > 0.03, (mean_placebo, mean_learner)


def test_twin_differs_only_in_feedback() -> None:
    """Without feedback, control-learner is naive: its twin's rows equal naive's, question by question."""
    outcome = _run(0, ("naive", "control-learner"))
    rows = outcome.result.probes
    cols = ["question_id", "retrieved_ids", "recall_all@10"]
    naive = rows.filter(pl.col("system") == "naive").select(cols)
    twin = rows.filter(pl.col("system") == "control-learner~twin").select(cols)
    assert naive.equals(twin)
    learner = rows.filter(pl.col("system") == "control-learner").select(cols)
    assert not learner.equals(twin)


def test_placebo_twin_is_played_and_reported() -> None:
    outcome = _run(1, ("control-learner",), placebo=True)
    m = outcome.summary.metrics
    assert m["placebos"] == {"control-learner~placebo": "control-learner~twin"}
    placebo = m["systems"]["control-learner~placebo"]
    learner = m["systems"]["control-learner"]
    # Shuffled bits keep the rate but not the link to the question: the placebo gains less than the learner.
    assert placebo["gain_second"] < learner["gain_second"]
    assert placebo["gain_second_lo"] <= placebo["gain_second"] <= placebo["gain_second_hi"]
    # The report's lead figure is the summariser's: gain bands per window, the placebo's keyed by its system.
    assert set(m["gain_bands"]) == set(m["placebo_bands"]) == {"control-learner"}
    assert [b["gain"] for b in m["gain_bands"]["control-learner"]] == pytest.approx(
        [p["gain"] for p in m["gain_curves"]["control-learner"]]
    )
    # The arms are recorded where they are made (run.json), not inferred from the labels.
    assert outcome.result.info["arms"] == {
        "control-learner": {"system": "control-learner", "arm": "system", "name": "control-learner"},
        "control-learner~twin": {"system": "control-learner", "arm": "twin", "name": "control-learner"},
        "control-learner~placebo": {"system": "control-learner", "arm": "placebo", "name": "control-learner"},
        "control-learner~false": {"system": "control-learner", "arm": "always_false", "name": "control-learner"},
        "control-learner~true": {"system": "control-learner", "arm": "always_true", "name": "control-learner"},
    }
    # Every arm's entry names its role and its system; the headline's reference is one of the arms played.
    assert m["arms"] == {"control-learner": {
        "twin": "control-learner~twin", "placebo": "control-learner~placebo", "always_false": "control-learner~false",
        "always_true": "control-learner~true"}}
    assert m["systems"]["control-learner~false"]["arm"] == "always_false"
    assert m["systems"]["control-learner~false"]["of"] == "control-learner"
    head = learner["contrasts"]["learning_from_feedback"]
    assert head["second_reference"] in m["arms"]["control-learner"].values()


def test_the_arms_come_from_run_json_and_old_folders_fall_back_to_the_labels() -> None:
    from memsim.analysis.load import label_arms, twins_and_placebos

    labels = ["a", "b", "b~twin", "shadow", "c", "b~placebo"]
    recorded = {"arms": {
        "a": {"system": "a", "arm": "system"}, "b": {"system": "b", "arm": "system"},
        "b~twin": {"system": "b", "arm": "twin"}, "shadow": {"system": "a", "arm": "twin"},
        "c": {"system": "c", "arm": "system"}, "b~placebo": {"system": "b", "arm": "placebo"},
    }}
    # A twin under any label is the twin its run.json names.
    assert twins_and_placebos(labels, recorded) == ({"a": "shadow", "b": "b~twin"}, {"b~placebo": "b~twin"})
    # Without the field (folders written before it), the suffix rule, and only where the base system has rows.
    assert twins_and_placebos(labels, {}) == ({"b": "b~twin"}, {"b~placebo": "b~twin"})
    assert label_arms(["x~twin"]) == {"x~twin": ("x~twin", "system")}


def test_answer_channel_without_a_reader_is_an_error() -> None:
    with pytest.raises(UserError, match="needs a reader"):
        make_spec("longitudinal", "persona", {"users": 1, "months": 1}, [SystemSpec("naive")], feedback_from="answer")
    with pytest.raises(UserError, match="unknown feedback channel 'oracle'"):
        make_spec("longitudinal", "persona", {"users": 1, "months": 1}, [SystemSpec("naive")], feedback_from="oracle")


# --- channels, with a recording system ---------------------------------------------------------


class Recorder:
    """Keeps every turn; newest first; records the feedback bits and the turns it was given."""

    def __init__(self) -> None:
        self.turns: dict[str, list[Turn]] = {}
        self.bits: list[tuple[str, bool]] = []

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        self.turns.setdefault(user_id, []).extend(turns)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        mine = sorted((t for t in self.turns.get(user_id, []) if t.created_at <= now), key=lambda t: t.created_at, reverse=True)
        return [Retrieved(t.turn_id, t.text, 1.0, t.created_at, (t.turn_id,)) for t in mine[:k]]

    probe = retrieve

    def feedback(self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime) -> None:
        self.bits.append((question_id, correct))

    def maintain(self, *, now: datetime) -> None:
        pass

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        gone = set(turn_ids)
        self.turns[user_id] = [t for t in self.turns.get(user_id, []) if t.turn_id not in gone]

    def stats(self) -> MemoryStats:
        return MemoryStats(items=sum(len(v) for v in self.turns.values()))


def _stream() -> ScenarioStream:
    """One fact, buried by later chatter, asked about after each session (k=1 sees only the newest turn)."""
    events = []
    fact = Turn("u-fact", "u", "user", "My sister lives in Oslo.", T0, "u-s0")
    events.append(Session("u-s0", "u", T0, (fact,)))
    for i in range(1, 6):
        when = T0 + timedelta(days=i)
        chat = Turn(f"u-c{i}", "u", "user", f"Small talk number {i}.", when, f"u-s{i}")
        events.append(Session(f"u-s{i}", "u", when, (chat,)))
        events.append(Question(f"u-q{i}", "u", when + timedelta(hours=3), "Where does my sister live?", "Oslo", "current", ("u-fact",)))
    return ScenarioStream(start=T0, end=T0 + timedelta(days=7), events=tuple(sort_events(events)))


def test_noisy_channel_flips_bits_and_none_sends_nothing() -> None:
    exact, flipped, silent = Recorder(), Recorder(), Recorder()
    replay(_stream(), {"a": exact}, k=1)
    replay(_stream(), {"b": flipped}, k=1, feedback_from="noisy:1.0")
    replay(_stream(), {"c": silent}, k=1, feedback_from="none")
    assert exact.bits and [(q, not c) for q, c in exact.bits] == flipped.bits
    assert silent.bits == []


def test_withheld_twin_gets_no_feedback_and_placebo_keeps_the_dose() -> None:
    given, twin, placebo = Recorder(), Recorder(), Recorder()
    replay(_two_users(), {"s": given, "s~twin": twin, "s~placebo": placebo}, k=1,
           modes={"s~twin": "withheld", "s~placebo": "shuffled"})
    assert twin.bits == []
    # the placebo is told its system's own bits, permuted within user and week: the same calls and True bits per user
    def dose(bits: list[tuple[str, bool]]) -> dict[str, tuple[int, int]]:
        users = {q.split("-")[0] for q, _ in bits}
        return {u: (sum(q.startswith(u) for q, _ in bits), sum(c for q, c in bits if q.startswith(u))) for u in users}

    assert given.bits and dose(placebo.bits) == dose(given.bits) == {"a": (5, 5), "u": (5, 0)}


def _two_users() -> ScenarioStream:
    """User ``a`` is always answered right (one memory), user ``b`` always wrong (k=1 sees only chatter)."""
    events = list(_stream().events)
    fact = Turn("a-fact", "a", "user", "My brother lives in Rome.", T0, "a-s0")
    events.append(Session("a-s0", "a", T0, (fact,)))
    for i in range(1, 6):
        when = T0 + timedelta(days=i, hours=2)
        events.append(Question(f"a-q{i}", "a", when, "Where does my brother live?", "Rome", "current", ("a-fact",)))
    return ScenarioStream(start=T0, end=T0 + timedelta(days=7), events=tuple(sort_events(events)))


# --- user-level inference ----------------------------------------------------------------------


def _synthetic(rng: np.random.Generator, users: int = 40, per_user: int = 30, effect: float = 0.0) -> pl.DataFrame:
    """Two arms on the same questions: per-user skill, Bernoulli scores; ``effect`` added to arm ``s`` late."""
    rows = []
    q = 0
    for u in range(users):
        skill = rng.uniform(0.5, 0.95)
        for i in range(per_user):
            late = i >= per_user // 2
            for arm in ("s", "t"):
                p = min(1.0, skill + (effect if arm == "s" and late else 0.0))
                rows.append({
                    "system": arm, "question_id": f"q{q}", "user_id": f"u{u}", "thread_id": f"q{q}", "q_index": q,
                    "kind": "current", "error": None, "m": float(rng.random() < p), "t_days": float(i),
                })
            q += 1
    return pl.DataFrame(rows)


@pytest.mark.slow
def test_aa_user_level_interval_covers_the_null_about_95_percent() -> None:
    rng = np.random.default_rng(5)
    covered = 0
    reps = 400
    for _ in range(reps):
        df = _synthetic(rng)
        pair = compare(df, user_halves(df), metric="m", system="s", other="t", rng=rng, n_boot=1000)
        covered += pair.second_ci[0] <= 0.0 <= pair.second_ci[1]
    assert 0.93 * reps <= covered <= 0.97 * reps, covered


def test_a_real_effect_is_found_with_user_resampling() -> None:
    rng = np.random.default_rng(3)
    df = _synthetic(rng, effect=0.15)
    table = learning_table(df, metric="m", twins={"s": "t"}, placebos={}, control=None, rng=rng, n_boot=500, seed=0)
    s = table["s"]
    assert s["unit"] == "user" and s["users"] == 40
    assert s["gain_second_lo"] > 0 and s["did_twin_lo"] > 0 and s["gain_second_p"] < 0.01
    assert abs(s["gain_first"]) < 0.05 and s["gain_mde"] < 0.10


def test_halves_are_per_user() -> None:
    df = pl.DataFrame({
        "question_id": ["a1", "a2", "b1", "b2", "a3", "a4", "b3", "b4"],
        "user_id": ["a", "a", "b", "b", "a", "a", "b", "b"],
        "thread_id": ["a1", "a2", "b1", "b2", "a3", "a4", "b3", "b4"],
        "q_index": [0, 1, 2, 3, 4, 5, 6, 7],
        "kind": ["x"] * 8,
    })
    halves = dict(user_halves(df).select("question_id", "half").rows())
    # a global median split would put all of a's early questions first; per user, each user has both halves
    assert [halves[q] for q in ("a1", "a2", "a3", "a4")] == [0, 0, 1, 1]
    assert [halves[q] for q in ("b1", "b2", "b3", "b4")] == [0, 0, 1, 1]


def test_a_run_without_its_static_control_says_why_the_did_column_is_empty() -> None:
    from memsim.analysis.learning import format_learning

    outcome = _run(0, ("control-learner",))
    m = outcome.summary.metrics
    assert m["control"] is None and m["control_missing"] == "naive"
    text = format_learning(outcome.summary.learning, metric=m["metric"], control=None, missing_control="naive",
                           placebos=m["placebos"])
    assert "not computed, the control 'naive' is not among this run's systems (add --system naive)" in text


def test_balanced_halves_remove_a_shift_in_the_kind_mix() -> None:
    """A kind where the system is always 0.2 better, asked more often late, moves the plain DiD, not the balanced one."""
    rows = []
    for u in range(40):
        for i in range(20):
            late = i >= 10
            kind = "previous" if (late and i % 2) or i == 0 else "current"
            for system, value in (("s", 0.5 + (0.2 if kind == "previous" else 0.0)), ("t", 0.5)):
                rows.append({"system": system, "user_id": f"u{u}", "question_id": f"u{u}q{i}", "thread_id": f"u{u}q{i}",
                             "q_index": u * 100 + i, "kind": kind, "m": value, "error": None})
    df = pl.DataFrame(rows)
    halves = user_halves(df)
    plain = compare(df, halves, metric="m", system="s", other="t", rng=np.random.default_rng(0), n_boot=200)
    balanced = compare(df, halves, metric="m", system="s", other="t", rng=np.random.default_rng(0), n_boot=200,
                       balance_kinds=True)
    assert plain is not None and balanced is not None
    # 1 of 10 first-half questions and 5 of 10 second-half ones are "previous": +0.02 vs +0.10
    assert plain.did == pytest.approx(0.08)
    # weighted to the same mix (6 of 20 "previous") both halves gain 0.06: no difference in differences
    assert balanced.first == pytest.approx(0.06) and balanced.second == pytest.approx(0.06)
    assert balanced.did == pytest.approx(0.0, abs=1e-12)
    # a kind asked in one half only cannot be balanced: it is left out of both halves
    late_only = df.with_columns(
        pl.when((pl.col("kind") == "previous") & (pl.col("q_index") % 100 >= 10)).then(pl.lit("when"))
        .otherwise(pl.col("kind")).alias("kind")
    )
    kept = late_only.filter(pl.col("kind") != "when")
    got = compare(late_only, user_halves(late_only), metric="m", system="s", other="t", rng=np.random.default_rng(0),
                  n_boot=200, balance_kinds=True)
    want = compare(kept, user_halves(late_only), metric="m", system="s", other="t", rng=np.random.default_rng(0),
                   n_boot=200, balance_kinds=True)
    assert got is not None and want is not None and (got.first, got.second) == (want.first, want.second)


def test_a_run_without_learners_is_not_titled_learning() -> None:
    """No system uses feedback: the tables say "Change through use" and drop the arms' legend (issue 39, item 8)."""
    from memsim.analysis.learning import learning_header, learning_notes, learning_title

    plain = {"naive": {"unit": "user", "users": 30, "unit_reason": "30 users"},
             "mem0": {"unit": "user", "users": 30, "unit_reason": "30 users"}}
    learner = {**plain, "control-learner": {**plain["naive"], "contrasts": {"learning_from_feedback": {}}}}
    assert learning_title(learner) == "Learning through use"
    assert learning_title(plain).startswith("Change through use (no system here learns from feedback")
    assert learning_header(plain, "recall_all@10").startswith("Change through use, recall_all@10; inference unit: users")
    notes = " ".join(learning_notes(plain, metric="recall_all@10", control="naive"))
    assert "placebo" not in notes and "twin" not in notes and "not what feedback taught" in notes
    assert "placebo" in " ".join(learning_notes(learner, metric="recall_all@10", control="naive"))
    # Without a contrast there is no MDE of one, and no contrast in stale>cur either.
    assert "MDE" not in notes and "its contrast" not in notes
    assert "MDE" in " ".join(learning_notes(learner, metric="recall_all@10", control="naive"))


def test_a_run_without_learners_leads_with_its_overall_figures(tmp_path, capsys) -> None:
    """Nothing learns: the CLI's systems table (with the headline and its interval) and the report's Overall
    section come before the change through use."""
    import json

    from memsim.analysis.cli import main
    from memsim.analysis.cli.run import print_outcome
    from memsim.analysis.pipeline import execute, make_spec
    from memsim.memory.embed import HashEmbedder
    from memsim.memory.registry import SystemSpec

    spec = make_spec("longitudinal", "life", {"users": 3, "months": 2.0}, (SystemSpec("naive"), SystemSpec("bm25")),
                     seed=1, n_boot=100)
    out = tmp_path / "run"
    outcome = execute(spec, out_dir=out, embedder_factory=lambda: HashEmbedder(32))
    capsys.readouterr()
    print_outcome(outcome)
    text = capsys.readouterr().out
    assert text.index("recall_all@10 % [95% CI]") < text.index("Change through use")
    score = json.loads((out / "metrics.json").read_text())["systems"]["naive"]["overall"]["scores"]["recall_all@10"]
    assert f"{100 * score['mean']:.1f} [{100 * score['lo']:.1f}, {100 * score['hi']:.1f}]" in text
    assert main(["report", str(out)]) == 0
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.index("## Overall") < md.index("## Change through use")
