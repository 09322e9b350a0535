"""Corrections that leak nothing: a restatement states the fact in new words, and no match finds the gold turn."""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl
import pytest

from memsim.analysis.pipeline import execute, make_spec
from memsim.memory.base import MemoryStats, Retrieved, Turn
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources, SystemSpec
from memsim.scenarios.registry import build_scenario
from memsim.sim.engine import CORRECTION_FRAMES, restatement
from memsim.sim.events import Question, Session
from tests.helpers import replay

_FRAME_WORDS = re.compile("|".join(re.escape(part) for f in CORRECTION_FRAMES
                                   for part in re.split(r"\{question\}|\{answer\}", f) if part.strip()))


class Thief:
    """A system that keeps everything it is given and tries to tell, for each turn, which stored turn it repeats.

    It knows the correction frames (they are in the source) and strips them; then it looks for a stored
    turn by id (anywhere in the new turn's id, session, text or metadata), by metadata, by exact text
    (either text inside the other) and by fuzzy text (difflib's ratio, or one block covering most of the
    stored text). ``recovered`` maps each turn id to what it found then.
    """

    def __init__(self) -> None:
        self.store: dict[str, list[Turn]] = {}
        self.recovered: dict[str, dict[str, set[str]]] = {}

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        for turn in turns:
            self.recovered[turn.turn_id] = self.match(turn, self.store.get(user_id, []))
            self.store.setdefault(user_id, []).append(turn)

    @staticmethod
    def match(turn: Turn, store: Sequence[Turn]) -> dict[str, set[str]]:
        """Ids of stored turns the new turn gives away, by the way each was found."""
        found: dict[str, set[str]] = {"id": set(), "metadata": set(), "exact": set(), "fuzzy": set()}
        said = f"{turn.turn_id} {turn.session_id} {turn.text} {dict(turn.metadata)!r}"
        bare = _FRAME_WORDS.sub(" ", turn.text).strip(" .:\"")
        for old in store:
            if old.turn_id in said:
                found["id"].add(old.turn_id)
            if turn.metadata and dict(turn.metadata) == dict(old.metadata):
                found["metadata"].add(old.turn_id)
            a, b = turn.text.lower(), old.text.lower()
            if len(b) >= 12 and (b in a or (len(a) >= 12 and a in b)):
                found["exact"].add(old.turn_id)
            for text in {turn.text, bare}:
                m = difflib.SequenceMatcher(None, text.lower(), b, autojunk=False)
                if m.real_quick_ratio() >= 0.6 and m.quick_ratio() >= 0.6 and m.ratio() >= 0.6:
                    found["fuzzy"].add(old.turn_id)
        return found

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        mine = [t for t in self.store.get(user_id, []) if t.created_at <= now][-k:]
        return [Retrieved(t.turn_id, t.text, 1.0, t.created_at, (t.turn_id,)) for t in reversed(mine)]

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        return self.retrieve(query, user_id=user_id, now=now, k=k)

    def feedback(self, question_id: str, retrieved: Sequence[str], correct: bool, *, user_id: str, now: datetime) -> None:
        pass

    def maintain(self, *, now: datetime) -> None:
        pass

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        gone = set(turn_ids)
        self.store[user_id] = [t for t in self.store.get(user_id, []) if t.turn_id not in gone]

    def stats(self) -> MemoryStats:
        return MemoryStats(items=sum(len(v) for v in self.store.values()))


@pytest.fixture(scope="module")
def stolen():
    """A persona world played under ``correction`` by a thief and its placebo (k=3: many answers are wrong)."""
    stream = build_scenario("persona", {"users": 4, "months": 2}).generate(np.random.default_rng(0))
    thief, placebo = Thief(), Thief()
    rows = replay(stream, {"s": thief, "s~placebo": placebo}, k=3, feedback_from="correction",
                  modes={"s~placebo": "shuffled"}).probes
    return stream, thief, placebo, rows


def _written(stream: Any, thief: Thief) -> list[tuple[str, Turn]]:
    """(user, turn) of every turn the engine wrote for this system (not one of the scenario's), in order."""
    own = {t.turn_id for e in stream.events if isinstance(e, Session) for t in e.turns}
    return [(user, t) for user, turns in thief.store.items() for t in turns if t.turn_id not in own]


def test_the_thief_finds_a_turn_restated_in_its_own_words() -> None:
    """The attack has teeth: a restatement that quotes the stored turn (what the channel used to do) is found."""
    t0 = datetime(2026, 1, 1)
    gold = Turn("g1", "u", "user", "My sister moved to Oslo last spring.", t0, "s1")
    other = Turn("o1", "u", "user", "I had pasta for dinner.", t0, "s1")
    quoted = Turn("r1", "u", "user", f"To correct you: {gold.text}", t0, "s2")
    assert "g1" in set().union(*Thief.match(quoted, [gold, other]).values())
    assert "o1" not in set().union(*Thief.match(quoted, [gold, other]).values())
    assert "g1" in Thief.match(Turn("g1-restated", "u", "user", "hello", t0, "s2"), [gold])["id"]
    # The channel's own restatement of the same fact is found by none of the matches.
    said = restatement("Where does my sister live?", "Oslo", np.random.default_rng(0))
    assert not set().union(*Thief.match(Turn("r2", "u", "user", said, t0, "s2"), [gold, other]).values())


@pytest.mark.slow
def test_a_system_recovers_no_gold_turn_from_its_corrections_beyond_what_the_fact_gives(stolen) -> None:
    """No stored turn is found by id, metadata or exact text; fuzzy text finds no more than the bare fact does.

    A correction must tell the fact, so its answer may match a stored turn that says the same value
    (``I've got a job at Willow Pharmaceuticals``): that is the content a learner is meant to use. The
    chance line is therefore an attacker handed only the question and its answer (as they are, and in every
    public frame) against the same store: a gold turn the restatement finds beyond that would be a leak.
    """
    stream, thief, _, rows = stolen
    own = {t.turn_id for e in stream.events if isinstance(e, Session) for t in e.turns}
    questions = {e.question_id: e for e in stream.events if isinstance(e, Question)}
    wrong = rows.filter((pl.col("system") == "s") & (pl.col("told") == False))  # noqa: E712 - one restatement each
    assert wrong.height >= 20
    written = _written(stream, thief)
    # One restatement per wrong answer, said at the user's next session (the last ones have none after them).
    assert 0.8 * wrong.height <= len(written) <= wrong.height
    hits = bare_hits = beyond = 0
    for user, turn in written:
        got = {how: ids & own for how, ids in thief.recovered[turn.turn_id].items()}  # the scenario's turns only
        assert not (got["id"] or got["metadata"] or got["exact"]), (turn.text, got)
        store = thief.store[user][: [t.turn_id for t in thief.store[user]].index(turn.turn_id)]
        facts = [questions[q] for q in wrong.filter((pl.col("user_id") == user) & (pl.col("time") < turn.created_at))
                 ["question_id"].to_list()]
        fact = next(q for q in reversed(facts) if q.text.rstrip("?.! ") in turn.text and q.gold.rstrip(".! ") in turn.text)
        gold = set(fact.evidence)
        # What the fact alone finds: the question and answer as they are, and in every public frame.
        said = [f"{fact.text} {fact.gold}", *(f.format(question=fact.text.rstrip("?.! "), answer=fact.gold.rstrip(".! "))
                                              for f in CORRECTION_FRAMES)]
        plain = set().union(*(Thief.match(Turn("x", user, "user", t, turn.created_at, "x"), store)["fuzzy"] for t in said))
        hits += len(got["fuzzy"] & gold)
        bare_hits += len(plain & own & gold)
        beyond += len((got["fuzzy"] & gold) - plain)
    assert beyond == 0 and hits <= bare_hits, (hits, bare_hits, beyond)


def test_a_placebos_corrections_state_other_facts_of_the_same_user(stolen) -> None:
    """As many corrections as its system, each a fact of the same user's asked before, never the question's own."""
    stream, _, placebo, rows = stolen
    questions = {e.question_id: e for e in stream.events if isinstance(e, Question)}
    system = rows.filter(pl.col("system") == "s")
    mine = rows.filter(pl.col("system") == "s~placebo")
    assert (mine["told"] == False).sum() == (system["told"] == False).sum() >= 20  # noqa: E712 - the dose
    # The system restates each question it got wrong, itself.
    wrong = system.filter(pl.col("told") == False)  # noqa: E712
    assert wrong["restated"].to_list() == [[q] for q in wrong["question_id"].to_list()]
    restated = 0
    for row in mine.filter(pl.col("restated").is_not_null()).iter_rows(named=True):
        q = questions[row["question_id"]]
        for fact_id in row["restated"]:
            fact = questions[fact_id]
            assert fact.user_id == q.user_id and fact.time <= q.time
            assert fact_id != q.question_id and not set(fact.evidence) & set(q.evidence) and fact.gold != q.gold
            restated += 1
    # Owed corrections (no other fact yet) are paid later; only those of a user's last questions stay owed.
    said = [t for _, t in _written(stream, placebo)]
    assert restated >= 0.9 * (mine["told"] == False).sum() and len(said) <= restated  # noqa: E712
    by_text = {t.text for t in said}
    assert all(any(questions[f].gold.rstrip(".! ") in text for f in questions) for text in by_text)


def test_naive_learns_nothing_from_corrections_system_minus_placebo_is_near_zero() -> None:
    """naive stores everything and learns nothing: its own corrections, scored as new turns, lift no recall."""
    spec = make_spec("longitudinal", "persona", {"users": 6, "months": 2}, [SystemSpec("naive")], seed=1, n_boot=100,
                     feedback_from="correction", constant_arms=False)
    rows = execute(spec, out_dir=None, resources=Resources(embedder_factory=lambda: HashEmbedder(256))).result.probes
    key = ["question_id"]
    metric = "recall_all@10"
    pair = (rows.filter(pl.col("system") == "naive").select(*key, "user_id", pl.col(metric).alias("s"))
            .join(rows.filter(pl.col("system") == "naive~placebo").select(*key, pl.col(metric).alias("p")), on=key)
            .filter(pl.col("s").is_not_nan() & pl.col("p").is_not_nan()))
    assert pair.height > 100
    told = rows.filter(pl.col("system") == "naive")["told"]
    assert (told == False).sum() > 20  # noqa: E712 - there were corrections to leak
    diff = pair["s"] - pair["p"]
    per_user = pair.with_columns(d=diff).group_by("user_id").agg(pl.col("d").sum())["d"].to_numpy()
    # Within two points, and inside the spread a sign flip of whole users gives.
    assert abs(float(diff.mean())) < 0.02, float(diff.mean())
    signs = np.random.default_rng(0).choice((-1.0, 1.0), size=(2000, per_user.size))
    p = float((np.abs(signs @ per_user) >= abs(per_user.sum()) - 1e-9).mean())
    assert p > 0.05, (p, per_user)


def test_under_correction_naive_headline_is_against_its_placebo_and_covers_zero() -> None:
    """Every arm plays, but the twin and the constant arms are told a different number of turns: the headline
    takes the placebo (told turns at naive's dose), and naive, which learns nothing, gets 0 within its interval."""
    spec = make_spec("longitudinal", "persona", {"users": 6, "months": 2}, [SystemSpec("naive")], seed=1, n_boot=200,
                     feedback_from="correction")
    out = execute(spec, out_dir=None, resources=Resources(embedder_factory=lambda: HashEmbedder(256)))
    head = out.summary.learning["naive"]["contrasts"]["learning_from_feedback"]
    assert head["candidates"] == ["naive~placebo"]
    assert head["first_reference"] == head["second_reference"] == "naive~placebo"
    for half in ("first", "second"):
        assert head[f"{half}_lo"] <= 0 <= head[f"{half}_hi"], head
    # the twin stays in the detailed table
    assert "effect_of_use" in out.summary.learning["naive"]["contrasts"]
