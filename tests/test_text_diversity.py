"""Text diversity figures of ``memsim scenario stats`` (issue 35, item 3): prefix share, skeletons, cue precision.

Hand-made streams whose figures are counted here by hand, then the LoCoMo stream (real text) and a
synthetic world that logs its claims.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memsim.analysis.profile import config_stream, format_profile, skeleton, text_diversity
from memsim.memory.base import Turn
from memsim.scenarios.base import ScenarioStream
from memsim.scenarios.config import CONFIG_DIR
from memsim.sim.events import Session

T0 = datetime(2024, 1, 1, 9, tzinfo=timezone.utc)


def _stream(turns: list[tuple[str, str]], *, user: str = "u1", meta: dict | None = None) -> ScenarioStream:
    """One session per turn pair: (speaker, text) in order; turn ids t0, t1, ..."""
    sessions = []
    for i, (speaker, text) in enumerate(turns):
        when = T0 + timedelta(hours=i)
        turn = Turn(turn_id=f"t{i}", user_id=user, speaker=speaker, text=text, created_at=when, session_id=f"s{i}")
        sessions.append(Session(session_id=f"s{i}", user_id=user, time=when, turns=(turn,)))
    return ScenarioStream(start=T0, end=T0 + timedelta(days=1), events=tuple(sessions), meta=meta or {})


def test_skeleton_masks_digits_and_capitalised_words() -> None:
    assert skeleton("I moved to Lisbon on 3 May 2023.") == "X moved to X on 0 X 0."
    assert skeleton("I moved to Porto on 12 June 1999.") == "X moved to X on 0 X 0."
    assert skeleton("we  moved   again") == "we moved again"


def test_prefix_share_counts_the_20_most_frequent_six_word_openings() -> None:
    templated = [("user", f"By the way I just moved to city {i} today") for i in range(30)]
    varied = [("user", f"word{i} other{i} words{i} that{i} never{i} repeat{i}") for i in range(30)]
    short = [("user", "Thanks!")] * 10  # fewer than six words: not counted
    d = text_diversity(_stream(templated + varied + short))
    user = d["prefix_share"]["user"]
    assert user["turns"] == 60
    # The templated opening (30 turns) and 19 openings seen once: 49 of 60.
    assert user["share"] == pytest.approx(49 / 60, abs=1e-4)
    assert user["top"][0] == ["by the way i just moved", 30]
    assert d["prefix_share"]["assistant"] == {"turns": 0, "share": None, "top": []}


def test_skeleton_ratio_over_sentences_of_every_turn() -> None:
    d = text_diversity(_stream([("user", "I moved to Lisbon on 3 May. It rains."),
                                ("assistant", "You moved to Porto on 9 June!"),
                                ("user", "I moved to Rome on 1 July. It rains.")]))
    # Sentences: 5; skeletons: "X moved to X on 0 X.", "X rains.", "X moved to X on 0 X!"
    assert (d["sentences"], d["skeletons"]) == (5, 3)
    assert d["skeleton_ratio"] == pytest.approx(3 / 5)


def test_named_speakers_split_into_user_and_assistant_by_who_opens() -> None:
    turns = [("Caroline", f"Caroline says thing number {i} about her week") for i in range(3)]
    turns += [("Melanie", f"Melanie answers thing number {i} about her own week") for i in range(2)]
    d = text_diversity(_stream(turns))
    assert d["prefix_share"]["user"]["turns"] == 3 and d["prefix_share"]["assistant"]["turns"] == 2


def test_best_cue_precision_of_openings_for_fact_bearing_turns() -> None:
    facts = [("user", f"Quick update: I moved to town {i}.") for i in range(20)]
    chat = [("user", f"By the way, what is a good film {i}?") for i in range(20)]
    other = [("user", f"News: my cousin {i} got a dog.") for i in range(20)]
    stream = _stream(facts + chat + other)
    bearing = {f"t{i}" for i in range(20)} | {f"t{i}" for i in range(40, 50)}
    d = text_diversity(stream, fact_bearing=bearing)
    # "quick" ("quick update", "quick update i") opens 20 turns, all fact-bearing; "news" 20, half of them;
    # "by the way" none: the best cue is the shortest of the openings with precision 1.
    assert d["best_cue"] == {"precision": 1.0, "opening": "quick", "turns": 20, "fact_bearing_turns": 30}
    # A stream that does not say which turns bear facts has no cue figure.
    assert text_diversity(stream)["best_cue"] is None
    # Openings seen in fewer than 20 user turns are not counted.
    few = text_diversity(_stream(facts[:19] + other), fact_bearing={f"t{i}" for i in range(19)})
    assert few["best_cue"]["opening"] == "news" and few["best_cue"]["precision"] == 0.0


def test_the_claim_log_says_which_turns_bear_facts() -> None:
    claim = {"subject": "me", "attr": "city", "value": "Lisbon", "time": "2024-01-01", "aspect": "holds",
             "polarity": "asserts", "said_as": "Lisbon"}
    turns = [("user", f"I live in Lisbon now, number {i}.") for i in range(20)]
    turns += [("user", f"I never lived in Lisbon, number {i}.") for i in range(20)]
    claims = {f"t{i}": [claim] for i in range(20)}
    claims.update({f"t{i}": [{**claim, "polarity": "denies"}] for i in range(20, 40)})
    d = text_diversity(_stream(turns, meta={"claims": claims}))
    assert d["best_cue"]["fact_bearing_turns"] == 20
    assert d["best_cue"]["precision"] == 1.0 and d["best_cue"]["opening"] in ("i live", "i live in")


def test_the_locomo_stream_is_varied_text(locomo_path: Path) -> None:
    _, stream, _ = config_stream(CONFIG_DIR / "locomo_stream.toml", seed=0)
    d = text_diversity(stream)
    # Real conversation: few turns share an opening, most sentences have a skeleton of their own.
    assert d["prefix_share"]["user"]["share"] < 0.05 and d["prefix_share"]["assistant"]["share"] < 0.05
    assert d["skeleton_ratio"] > 0.7 and d["best_cue"] is None
    text = format_profile({"diversity": d, **_empty_profile()})
    assert "top-20 6-word openings  user" in text and "n/a (the stream does not say" in text



@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_demo_world_meets_the_diversity_bounds(seed: int) -> None:
    """Issue 35's bounds on the demo world: openings shared no more than real chat allows, sentences of their own,
    and no phrase that marks the turns that bear a fact (at an opening or anywhere)."""
    _, stream, _ = config_stream(CONFIG_DIR / "demo.toml", seed=seed)
    d = text_diversity(stream)
    assert d["prefix_share"]["user"]["share"] <= 0.05, d["prefix_share"]["user"]
    assert d["prefix_share"]["assistant"]["share"] <= 0.05, d["prefix_share"]["assistant"]
    assert d["skeleton_ratio"] >= 0.5
    assert d["best_cue"]["fact_bearing_turns"] > 900 and d["best_cue"]["precision"] <= 0.5, d["best_cue"]
    assert d["best_ngram_cue"]["precision"] <= 0.5, d["best_ngram_cue"]


def test_the_best_ngram_cue_counts_phrases_anywhere_in_30_or_more_user_turns() -> None:
    facts = [("user", f"Well, number {i}, I moved to town and the flat is small.") for i in range(30)]
    chat = [("user", f"Well, number {i}, what is a good film for tonight?") for i in range(30)]
    stream = _stream(facts + chat)
    d = text_diversity(stream, fact_bearing={f"t{i}" for i in range(30)})
    # "well" opens every turn (precision 0.5), but "moved to town" stands later in only the fact-bearing ones.
    assert d["best_cue"]["precision"] == pytest.approx(0.5)
    assert d["best_ngram_cue"]["precision"] == 1.0 and d["best_ngram_cue"]["turns"] == 30
    assert d["best_ngram_cue"]["ngram"] in ("moved", "and", "flat", "i moved", "town", "small")
    few = text_diversity(_stream(facts[:29] + chat), fact_bearing={f"t{i}" for i in range(29)})
    assert few["best_ngram_cue"]["precision"] < 1.0  # phrases of 29 turns are not counted


def _empty_profile() -> dict:
    spread = {"n": 0, "mean": None, "p10": None, "median": None, "p90": None}
    return {"users": 1, "sessions": 0, "turns": 0, "questions": 0, "scored_questions": 0, "deletions": 0,
            "span_days": 0, "distinct_texts": 0, "distinct_text_ratio": None, "store_at_question": spread,
            "evidence_per_question": {}, "share_evidence_2plus": None, "share_changed_fact": None,
            "question_evidence_cosine": spread, "content_word_overlap": spread, "k": 10,
            "naive_first_evidence_rank": {**spread, "not_found": 0}, "naive_all_evidence_rank": {**spread, "not_found": 0},
            "naive_recall_all@10": {"all": None, "first_half": None, "second_half": None, "by_kind": {}}}
