"""The independent world check: zero disagreements on the shipped life configs, and it catches what it must."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from memsim.analysis.cli import main
from memsim.analysis.profile import config_stream
from memsim.scenarios.claims import claim_from_json, fact_bearing
from memsim.scenarios.config import CONFIG_DIR
from memsim.scenarios.registry import build_scenario
from memsim.scenarios.world_check import check_claims
from memsim.core.streams import streams
from memsim.sim.events import Deletion, Question, Session


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("config", ["life_quick.toml", "demo.toml", "life.toml"])
def test_shipped_life_configs_have_zero_disagreements(config: str, seed: int) -> None:
    _, stream, _ = config_stream(CONFIG_DIR / config, seed=seed)
    report = check_claims(stream)
    assert report.problems == []
    assert sum(report.questions.values()) > 500
    # Every kind is checked, and every turn the world wrote is in the claim log.
    assert set(report.questions) >= {"current", "previous", "as_of", "since", "count", "latest", "preference", "hop",
                                      "assistant", "abstain"}
    assert report.turns == len(stream.meta["claims"])
    assert report.claims["asserts"] and report.claims["denies"] and report.claims["hypothetical"] and report.claims["other"]


@pytest.fixture(scope="module")
def world():
    return build_scenario("life", {"users": 4, "months": 6}).generate(streams(0)["scenario"])


def _questions(stream) -> list[Question]:
    return [e for e in stream.events if isinstance(e, Question)]


def _turns(stream) -> dict:
    return {t.turn_id: t for e in stream.events if isinstance(e, Session) for t in e.turns}


def _replace_question(stream, q: Question, **changes):
    new = dataclasses.replace(q, **changes)
    return dataclasses.replace(stream, events=tuple(new if e is q else e for e in stream.events))


def _replace_turn(stream, tid: str, text: str):
    events = []
    for e in stream.events:
        if isinstance(e, Session) and any(t.turn_id == tid for t in e.turns):
            e = dataclasses.replace(e, turns=tuple(dataclasses.replace(t, text=text) if t.turn_id == tid else t
                                                   for t in e.turns))
        events.append(e)
    return dataclasses.replace(stream, events=tuple(events))


def _with_claims(stream, tid: str, claims: list[dict]):
    return dataclasses.replace(stream, meta={**stream.meta, "claims": {**stream.meta["claims"], tid: claims}})


def _flagged(report, qid: str) -> bool:
    return any(p.startswith(qid) for p in report.problems)


def test_the_world_checks_out(world) -> None:
    assert check_claims(world).ok


def test_wrong_gold_missing_evidence_and_incomplete_support_are_disagreements(world) -> None:
    qs = _questions(world)
    q = next(q for q in qs if q.kind == "current")
    report = check_claims(_replace_question(world, q, gold="Atlantis"))
    assert _flagged(report, q.question_id) and report.disagreements["current"] == 1
    multi = next(q for q in qs if len(q.evidence) >= 2)
    assert _flagged(check_claims(_replace_question(world, multi, evidence=multi.evidence[:1])), multi.question_id)
    wide = next(q for q in qs if any(len(g) >= 2 for g in q.extra["support"]))
    cut = tuple(g[:1] for g in wide.extra["support"])
    assert _flagged(check_claims(_replace_question(world, wide, extra={"support": cut})), wide.question_id)


def test_a_denial_never_counts_as_the_users_fact(world) -> None:
    q = next(q for q in _questions(world) if q.kind == "current" and q.topic == "city")
    tid = q.evidence[0]
    claims = [{**c, "polarity": "denies"} if c["attr"] == "city" else c for c in world.meta["claims"][tid]]
    assert _flagged(check_claims(_with_claims(world, tid, claims)), q.question_id)


def test_an_unlogged_or_stale_restatement_is_caught(world) -> None:
    q = next(q for q in _questions(world) if q.kind == "current" and q.topic == "city")
    turns = _turns(world)
    evidence = turns[q.evidence[0]]
    later = next(t for t in turns.values() if t.user_id == q.user_id and t.speaker == "user"
                 and evidence.created_at < t.created_at < q.time)
    other = "Lisbon" if q.gold != "Lisbon" else "Porto"
    # Said in the text without a claim: the text check finds the value.
    unlogged = _replace_turn(world, later.turn_id, f"{later.text} I live in {other}.")
    report = check_claims(unlogged)
    assert any(later.turn_id in p and other.lower() in p.lower() and "no claim" in p for p in report.problems)
    # Logged as said: the present-tense restatement now answers the question, so the stored gold disagrees.
    day = (later.created_at + timedelta(hours=world.meta["utc_offsets"][q.user_id])).date().isoformat()
    stale = _with_claims(unlogged, later.turn_id, [*world.meta["claims"][later.turn_id], {
        "subject": "me", "attr": "city", "value": other, "time": day, "aspect": "holds", "polarity": "asserts",
        "said_as": other}])
    assert _flagged(check_claims(stale), q.question_id)


def test_a_claim_its_text_does_not_carry_or_date_is_caught(world) -> None:
    tid, claims = next((tid, cs) for tid, cs in world.meta["claims"].items()
                       if any(c["aspect"] == "began" for c in cs))
    text = _turns(world)[tid].text
    c = next(c for c in claims if c["aspect"] == "began")
    moved = [{**c, "time": "2020-01-01"} if x is c else x for x in claims]
    assert any(tid in p and "dates it" in p for p in check_claims(_with_claims(world, tid, moved)).problems)
    gone = _replace_turn(world, tid, text.replace(c["said_as"], "something").replace(c["said_as"].capitalize(), "Something"))
    assert any(tid in p and "does not carry" in p for p in check_claims(gone).problems)


def test_deletions_are_read_from_the_stream() -> None:
    s = build_scenario("life", {"users": 4, "months": 6, "deletion_rate": 2.0}).generate(streams(1)["scenario"])
    assert check_claims(s).ok
    kept = dataclasses.replace(s, events=tuple(e for e in s.events if not isinstance(e, Deletion)))
    assert sum(check_claims(kept).disagreements.values()) > 0


def test_two_values_for_one_day_are_a_contradiction(world) -> None:
    tid, claims = next((tid, cs) for tid, cs in world.meta["claims"].items()
                       if any(c["attr"] == "city" and c["polarity"] == "asserts" and c["subject"] == "me" for c in cs))
    c = next(c for c in claims if c["attr"] == "city" and c["subject"] == "me")
    text = _turns(world)[tid].text
    twin = _replace_turn(world, tid, f"{text} Also Atlantis.")
    report = check_claims(_with_claims(twin, tid, [*claims, {**c, "value": "Atlantis", "said_as": "Atlantis"}]))
    assert any("for the same day" in p and "Atlantis" in p for p in report.problems)


def test_my_partner_on_a_day_the_text_has_the_user_single_is_caught(world) -> None:
    turns = sorted(_turns(world).values(), key=lambda t: t.created_at)
    uid = turns[0].user_id
    mine = [t for t in turns if t.user_id == uid and t.speaker == "user" and "partner" not in t.text.lower()]
    early, late = mine[len(mine) // 2], mine[-1]
    day = (early.created_at + timedelta(hours=world.meta["utc_offsets"].get(uid, 0.0))).date().isoformat()
    split = _with_claims(_replace_turn(world, early.turn_id, f"{early.text} My partner and I broke up today."),
                         early.turn_id, [*world.meta["claims"][early.turn_id], {
                             "subject": "me", "attr": "partner", "value": "single", "time": day, "aspect": "began",
                             "polarity": "asserts", "said_as": "broke up", "when_as": "today"}])

    def said(stream) -> list[str]:
        return [p for p in check_claims(stream).problems if f"turn {late.turn_id}: says 'my partner'" in p]

    assert not said(split)
    lie = said(_replace_turn(split, late.turn_id, f"{late.text} My partner says hello."))
    assert len(lie) == 1 and early.turn_id in lie[0]
    quoted = _replace_turn(split, late.turn_id, f'{late.text} A friend wrote: "My partner says hello."')
    assert not said(quoted)  # someone else's partner, in their words


def test_malformed_claims_are_one_line_errors_naming_turn_and_field() -> None:
    good = {"subject": "me", "attr": "city", "value": "Oslo", "time": "2026-01-05", "aspect": "holds",
            "polarity": "asserts", "said_as": "Oslo"}
    assert claim_from_json(good, where="claims of turn t1").value == "Oslo"
    for bad, field in (({**good, "polarity": "maybe"}, "polarity"), ({**good, "colour": "x"}, "colour"),
                       ({k: v for k, v in good.items() if k != "value"}, "value"), ({**good, "time": 5}, "time")):
        with pytest.raises(ValueError, match=field) as err:
            claim_from_json(bad, where="claims of turn t1")
        assert "t1" in str(err.value) and "\n" not in str(err.value)


def test_fact_bearing_turns_are_the_user_turns_that_assert_a_fact(world) -> None:
    bearing = fact_bearing(world.meta)
    turns = _turns(world)
    assert bearing and all(turns[t].speaker == "user" for t in bearing)
    # Every evidence turn of a question about the user's life bears a fact; distractor-only turns do not.
    for q in _questions(world):
        if q.kind not in ("assistant", "abstain"):
            assert set(q.evidence) <= bearing
    only_distractors = [tid for tid, cs in world.meta["claims"].items()
                        if cs and all(c["polarity"] != "asserts" for c in cs)]
    assert only_distractors and not set(only_distractors) & bearing


def test_cli_check_prints_counts_by_kind_and_exits_by_the_result(capsys) -> None:
    assert main(["scenario", "check", str(CONFIG_DIR / "life_quick.toml"), "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "no disagreements" in out and "previous" in out and "as_of" in out
    assert main(["scenario", "check", str(CONFIG_DIR / "persona.toml")]) == 2
    assert "logs no claims" in capsys.readouterr().err


def test_support_scorer_needs_one_turn_of_each_group() -> None:
    import math
    from datetime import datetime, timezone

    from memsim.memory.base import Retrieved
    from memsim.sim.scorers import build_scorer

    now = datetime(2026, 1, 5, tzinfo=timezone.utc)

    def q(**kw) -> Question:
        return Question(question_id="q1", user_id="u", time=now, text="?", gold="x", kind="previous",
                        evidence=("a2", "b2"), **kw)

    def got(*ids: str) -> list[Retrieved]:
        return [Retrieved(memory_id=i, text=i, score=1.0, created_at=now, source_turn_ids=(i,)) for i in ids]

    scorer = build_scorer("support")
    two = q(extra={"support": (("a1", "a2"), ("b1", "b2"))})
    # An earlier statement of the same value stands in for the latest one; both parts are still needed.
    assert scorer.score(two, got("a1", "b1"), ks=(2,)) == {"recall_support@2": 1.0}
    assert scorer.score(two, got("a1", "zz", "b1"), ks=(2, 3)) == {"recall_support@2": 0.0, "recall_support@3": 1.0}
    assert scorer.score(two, got("a1", "a2"), ks=(2,)) == {"recall_support@2": 0.0}
    assert math.isnan(scorer.score(q(), got("a2"), ks=(1,))["recall_support@1"])


def test_forget_requests_in_plain_words_are_claims_that_gold_follows() -> None:
    s = build_scenario("life", {"users": 6, "months": 6, "forget_in_text_rate": 2.0}).generate(streams(2)["scenario"])
    report = check_claims(s)
    assert report.ok and report.claims["forgets"] >= 5
    turns = _turns(s)
    asks = [(turns[tid], c) for tid, cs in s.meta["claims"].items() for c in cs if c["polarity"] == "forgets"]
    told = {tid: cs for tid, cs in s.meta["claims"].items()}
    later = 0
    for turn, c in asks:
        assert c["said_as"] in turn.text and turn.speaker == "user"
        before = {tid for tid, cs in told.items() if turns[tid].user_id == turn.user_id and turns[tid].created_at < turn.created_at
                  and any(x["attr"] == c["attr"] and x["subject"] == "me" and x["polarity"] == "asserts" for x in cs)}
        for q in _questions(s):
            # A turn may tell of another topic too (a correction beside news): only the forgotten topic's gold
            # stops counting it.
            if q.user_id == turn.user_id and q.time > turn.created_at and s.meta["questions"][q.question_id]["attr"] == c["attr"]:
                assert not set(q.evidence + q.superseded) & before
                later += q.kind == "abstain" and s.meta["questions"][q.question_id]["attr"] == c["attr"]
    assert later > 0  # the forgotten topic is asked about, and its gold is an abstention
    # Every later question of the user names the forgotten turns (what the run counts as still retrieved),
    # and no question names a turn before the user asked to forget it.
    asked = {}
    for turn, c in asks:
        asked.setdefault(turn.user_id, []).append(turn.created_at)
    for q in _questions(s):
        named = set(q.extra.get("forgotten", ()))
        for turn, c in asks:
            before = {tid for tid, cs in told.items() if turns[tid].user_id == turn.user_id
                      and turns[tid].created_at < turn.created_at
                      and any(x["attr"] == c["attr"] and x["subject"] == "me" and x["polarity"] == "asserts" for x in cs)}
            if q.user_id == turn.user_id and q.time > turn.created_at:
                assert before <= named
        assert all(turns[t].user_id == q.user_id for t in named)
        assert not named or min(asked.get(q.user_id, [q.time])) < q.time
    # Without the requests in the log, the checker reads the forgotten facts as still told, and disagrees.
    dropped = {tid: [c for c in cs if c["polarity"] != "forgets"] for tid, cs in s.meta["claims"].items()}
    broken = dataclasses.replace(s, meta={**s.meta, "claims": dropped})
    assert sum(check_claims(broken).disagreements.values()) > 0


def test_turns_forgotten_in_words_are_counted_when_still_retrieved(tmp_path) -> None:
    """A run counts, per question, the retrieved memories of turns the user asked in words to forget
    (``forgotten_leaks``), and the summary gives the share of later questions that still retrieved one."""
    import json

    import polars as pl

    from memsim.analysis.pipeline import execute, make_spec
    from memsim.memory.embed import HashEmbedder
    from memsim.memory.registry import SystemSpec

    spec = make_spec("longitudinal", "life", {"users": 4, "months": 3.0, "forget_in_text_rate": 3.0},
                     (SystemSpec("naive"),), seed=2, n_boot=100)
    execute(spec, out_dir=tmp_path / "run", embedder_factory=lambda: HashEmbedder(32))
    rows = pl.read_parquet(tmp_path / "run" / "probes.parquet")
    world = {q.question_id: q for q in _questions(build_scenario("life", {"users": 4, "months": 3.0, "forget_in_text_rate": 3.0})
                                                  .generate(streams(2)["scenario"]))}
    after = 0
    for row in rows.iter_rows(named=True):
        forgotten = set(world[row["question_id"]].extra.get("forgotten", ()))
        assert row["forgotten_turns"] == len(forgotten)
        assert row["forgotten_leaks"] == sum(1 for src in row["retrieved_sources"] if forgotten & set(src))
        after += bool(forgotten)
    kept = rows.filter(pl.col("forgotten_leaks") > 0).height
    assert after > 0 and kept > 0  # naive honours no request made in words: what it was told still surfaces
    figure = json.loads((tmp_path / "run" / "metrics.json").read_text())["systems"]["naive"]["forgotten_in_words"]
    assert figure == {"questions": after, "retrieving": kept, "share": kept / after}
    assert main(["report", str(tmp_path / "run")]) == 0
    report = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert "forgotten in words, still retrieved" in report and f"({kept}/{after})" in report
    # Each row carries its gold evidence as said, and the worst questions show it.
    turns = _turns(build_scenario("life", {"users": 4, "months": 3.0, "forget_in_text_rate": 3.0}).generate(streams(2)["scenario"]))
    from memsim.sim.recorder import REDACTED

    for ids, said in rows.select("evidence_ids", "evidence_text").iter_rows():
        assert [s if s == REDACTED else turns[t].text for t, s in zip(ids, said)] == said and len(said) == len(ids)
    assert "<small>evidence: " in (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
