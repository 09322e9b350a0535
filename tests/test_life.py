"""The life world: gold correct by construction, nothing visible reveals it, same seed same stream, its shape."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from memsim.scenarios.config import CONFIG_DIR, load_config
from memsim.scenarios.life import LifeScenario, check_world
from memsim.scenarios.life_text import GREETINGS
from memsim.scenarios.life_truth import ABSTAIN
from memsim.scenarios.registry import build_scenario, scenario_names
from memsim.core.errors import UserError
from memsim.core.streams import streams
from memsim.sim.events import Deletion, Question, Session

SMALL = {"users": 6, "months": 6}  # six months, as the demo: changes have time to pile up


def _stream(seed: int = 0, **args):
    return build_scenario("life", {**SMALL, **args}).generate(streams(seed)["scenario"])


@pytest.fixture(scope="module", params=[0, 1, 2], ids=lambda s: f"seed{s}")
def stream(request):
    return _stream(request.param)


def _questions(stream) -> list[Question]:
    return [e for e in stream.events if isinstance(e, Question)]


def _turns(stream) -> list:
    return [t for e in stream.events if isinstance(e, Session) for t in e.turns]


def test_registered_and_built_from_args():
    assert "life" in scenario_names()
    scenario = build_scenario("life", {"users": 2})
    assert isinstance(scenario, LifeScenario)
    json.dumps(scenario.spec_args())
    assert scenario.spec_args()["users"] == 2


def test_check_world_finds_nothing_wrong(stream):
    assert check_world(stream) == []


def test_same_seed_same_stream_bytes_other_seed_differs():
    a, b, c = _stream(3, users=2), _stream(3, users=2), _stream(4, users=2)
    assert a.events == b.events
    assert json.dumps(a.meta, sort_keys=True) == json.dumps(b.meta, sort_keys=True)
    assert [t.text for t in _turns(a)] != [t.text for t in _turns(c)]


def test_check_world_catches_wrong_gold_evidence_and_text():
    s = _stream(0, users=2)
    qs = _questions(s)
    q = next(q for q in qs if q.kind == "current")
    wrong_gold = dataclasses.replace(q, gold="Atlantis")
    broken = dataclasses.replace(s, events=tuple(wrong_gold if e is q else e for e in s.events))
    assert any(q.question_id in p and "truth gives" in p for p in check_world(broken))
    multi = next(q for q in qs if len(q.evidence) >= 2)
    dropped = dataclasses.replace(multi, evidence=multi.evidence[:1])
    broken = dataclasses.replace(s, events=tuple(dropped if e is multi else e for e in s.events))
    assert any(multi.question_id in p for p in check_world(broken))
    # A turn whose text lost its fact (as a bad rewrite would) is found through meta["facts"].
    tid = q.evidence[0]
    facts = {**s.meta["facts"], tid: ["a value the text does not hold"]}
    broken = dataclasses.replace(s, meta={**s.meta, "facts": facts})
    assert any(tid in p and "does not carry its fact" in p for p in check_world(broken))
    # A telling the events do not make true is found by replaying the truth.
    truth = json.loads(json.dumps(s.meta["truth"]))
    told = next(t for t in truth["u01"]["tellings"] if t["attr"] == "city" and t["subject"] == "me")
    told["value"] = "Atlantis"
    broken = dataclasses.replace(s, meta={**s.meta, "truth": truth})
    assert any("which the events do not give" in p for p in check_world(broken))


def test_nothing_a_system_sees_reveals_gold(stream):
    for e in stream.events:
        if isinstance(e, Session):
            assert re.fullmatch(r"s[0-9a-f]{12}", e.session_id)
            for t in e.turns:
                assert re.fullmatch(r"t[0-9a-f]{12}", t.turn_id)
                assert not t.metadata
        if isinstance(e, Question):
            assert re.fullmatch(r"q[0-9a-f]{12}", e.question_id)
            if e.gold != ABSTAIN:
                assert not re.search(rf"\b{re.escape(e.gold)}\b", e.text, re.IGNORECASE), (e.text, e.gold)


def test_texts_do_not_repeat_except_greetings(stream):
    texts = Counter(t.text for t in _turns(stream))
    assert len(texts) / sum(texts.values()) >= 0.9
    assert all(text in GREETINGS for text, n in texts.items() if n > 1)


def test_question_mix_has_multi_evidence_changed_facts_and_every_kind(stream):
    qs = _questions(stream)
    assert len(qs) > 300
    assert np.mean([len(q.evidence) >= 2 for q in qs]) >= 0.25
    assert np.mean([bool(q.superseded) for q in qs]) >= 0.15
    kinds = {q.kind for q in qs}
    assert kinds >= {"current", "previous", "as_of", "since", "count", "latest", "preference", "hop", "assistant", "abstain"}
    for q in qs:
        assert (q.kind == "abstain") == (q.excluded == "abstention") == (not q.evidence)


def test_meta_is_json_and_every_fact_turn_carries_its_fact(stream):
    json.dumps(stream.meta)
    turns = {t.turn_id: t for t in _turns(stream)}
    assert stream.meta["facts"]
    for tid, strings in stream.meta["facts"].items():
        assert any(s.lower() in turns[tid].text.lower() for s in strings), (tid, strings, turns[tid].text)
    for user in stream.meta["truth"].values():
        assert {"attributes", "people", "events", "tellings", "deletions"} <= set(user)
        assert {e["type"] for e in user["events"]} & {"move", "job", "trip"}


def test_deleted_turns_leave_later_gold():
    s = _stream(1, deletion_rate=2.0)
    deletions = [e for e in s.events if isinstance(e, Deletion)]
    assert deletions
    later = 0
    for d in deletions:
        for q in _questions(s):
            if q.user_id == d.user_id and q.time >= d.time:
                assert not set(q.evidence + q.superseded) & set(d.turn_ids)
                later += q.topic == d.topic
    assert later > 0
    assert check_world(s) == []


@pytest.mark.parametrize("args, key", [
    ({"sessions_per_week": 0}, "sessions_per_week"),
    ({"users": 0}, "users"),
    ({"colour": "blue"}, "colour"),
    ({"event_rate": 20}, "event_rate"),  # more life events than days
    ({"deletion_rate": 45}, "deletion_rate"),  # more forget requests than days
    ({"distractor_rate": 1.5}, "distractor_rate"),  # a rate outside [0, 1]
    ({"fact_share": -0.1}, "fact_share"),
])
def test_bad_arguments_are_one_line_user_errors(args, key, tmp_path: Path):
    with pytest.raises(UserError, match=key) as err:
        build_scenario("life", args, source="life.toml")
    assert "\n" not in str(err.value) and "life.toml" in str(err.value)
    bad = tmp_path / "bad.toml"
    bad.write_text('[scenario]\nname = "life"\nsessions_per_week = 0\n', encoding="utf-8")
    with pytest.raises(UserError, match="bad.toml"):
        load_config(bad)


def test_quick_config_is_small_and_checks_out():
    cfg = load_config(CONFIG_DIR / "life_quick.toml")
    scen = build_scenario("life", {k: v for k, v in cfg.scenario.items() if k != "name"})
    s = scen.generate(streams(cfg.run.seed)["scenario"])
    assert s.totals()["turns"] < 4000
    assert check_world(s) == []


@pytest.mark.slow
def test_full_config_size():
    """life.toml: ~25-35k turns, ~8-9k questions, the median asking user holds >= 250 memories (>= 500 at the end)."""
    cfg = load_config(CONFIG_DIR / "life.toml")
    s = build_scenario("life", {k: v for k, v in cfg.scenario.items() if k != "name"}).generate(streams(0)["scenario"])
    totals = s.totals()
    assert 25_000 <= totals["turns"] <= 35_000
    assert 8_000 <= totals["questions"] <= 9_500
    held: dict[str, list] = {}
    sizes = []
    for e in s.events:
        if isinstance(e, Session):
            held.setdefault(e.user_id, []).extend(e.turns)
        elif isinstance(e, Question):
            sizes.append(len(held.get(e.user_id, ())))
    assert np.median(sizes) >= 250
    assert np.median([len(v) for v in held.values()]) >= 500
    assert check_world(s) == []


def test_absurd_sizes_are_refused_up_front() -> None:
    """A size past the shared bounds is a one-line error naming the key, before anything is generated."""
    for key, value in (("users", 10**9), ("turns_per_session", 10**8), ("months", float("inf"))):
        with pytest.raises(UserError, match=key):
            LifeScenario.from_args({key: value}, source="life.toml")


def test_impossible_life_is_exit_code_2_naming_the_key(tmp_path: Path, capsys) -> None:
    from memsim.analysis.cli import main

    bad = tmp_path / "bad.toml"
    bad.write_text('[scenario]\nname = "life"\nevent_rate = 20\n', encoding="utf-8")
    assert main(["scenario", "check", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "event_rate" in err and "a day" in err and "\n" not in err


def test_lives_are_plausible(stream):
    from datetime import timedelta

    from memsim.scenarios.life_truth import FEMALE_NAMES, MALE_NAMES

    offsets = stream.meta["utc_offsets"]
    for uid, user in stream.meta["truth"].items():
        trips = sorted((e["day"], e["day"] + e["details"]["nights"]) for e in user["events"] if e["type"] == "trip")
        assert all(a_end < b_start for (_, a_end), (b_start, _) in zip(trips, trips[1:])), trips
        assert sum(e["type"] == "move" for e in user["events"]) <= 3
        for p in user["people"].values():
            if p["relation"] in ("sister", "mother", "daughter"):
                assert p["name"] not in MALE_NAMES, p
            if p["relation"] in ("brother", "father", "son"):
                assert p["name"] not in FEMALE_NAMES, p
    for e in stream.events:
        if isinstance(e, (Session, Question)):
            local = e.time + timedelta(hours=offsets[e.user_id])
            assert 7 <= local.hour < 23, (e.user_id, local)
        if isinstance(e, Session):
            first = e.turns[0].text
            hour = (e.time + timedelta(hours=offsets[e.user_id])).hour
            if first.startswith("Morning!"):
                assert hour < 12
            if first.startswith("Evening."):
                assert hour >= 18


def test_no_opener_marks_a_fact_bearing_turn(stream):
    """The first word or two of a user turn are drawn alike with and without a fact (LoCoMo-style openers are no cue)."""
    from memsim.scenarios.claims import fact_bearing

    facts = fact_bearing(stream.meta)
    user = [t for t in _turns(stream) if t.speaker == "user"]
    base = sum(t.turn_id in facts for t in user) / len(user)
    has: Counter[str] = Counter()
    hit: Counter[str] = Counter()
    for t in user:
        words = t.text.split()
        for n in (1, 2):
            has[" ".join(words[:n])] += 1
            hit[" ".join(words[:n])] += t.turn_id in facts
    frequent = [g for g, n in has.items() if n >= 20]
    assert len(frequent) >= 10
    # The bound on a cue's precision; the openers that used to mark news ("By the way,") had 1.0.
    assert max(hit[g] / has[g] for g in frequent) <= 0.5, base


def test_the_assistant_takes_part_in_the_dialogue(stream):
    """News is announced in one turn and told in the next, the assistant reacts to it and asks back about an
    earlier session's task; none of it asserts a value (the world check reads every turn's claims)."""
    from memsim.scenarios import life_text as X

    facts = stream.meta["claims"]
    sessions = [e for e in stream.events if isinstance(e, Session)]
    teasers = reactions = news = recalls = 0
    for s in sessions:
        turns = s.turns
        for i in range(0, len(turns) - 2, 2):
            user, reply, following = turns[i], turns[i + 1], turns[i + 2]
            if any(t.lower() in user.text.lower() for t in X._TEASERS) and any(p in reply.text for p in X._PROMPTS):
                teasers += 1
                # The next user turn tells news: the user's, one of their people's, or someone else's.
                assert any(c["aspect"] in ("began", "plan", "holds", "long") for c in facts[following.turn_id]), following.text
        for user, reply in zip(turns[::2], turns[1::2]):
            began = [c for c in facts[user.turn_id] if c["polarity"] == "asserts" and c["aspect"] == "began"]
            if began:
                news += 1
                reactions += any(r.lower() in reply.text.lower() for rs in X._REACTIONS.values() for r in rs)
        recalls += any(r.split("{x}")[0] and r.split("{x}")[0] in s.turns[1].text for r in X._RECALLS)
    assert teasers >= 10
    assert news and reactions / news >= 0.4
    assert recalls >= 5


def test_someone_elses_words_in_the_users_constructions_never_count_for_the_user(stream):
    """A quote ("my friend keeps saying 'I live in Porto'") is logged as someone else's claim: never evidence."""
    from memsim.scenarios.claims import fact_bearing

    bearing = fact_bearing(stream.meta)
    turns = {t.turn_id: t for t in _turns(stream)}
    quotes = {tid for tid, items in stream.meta["claims"].items()
              if '"' in turns[tid].text and any(c["polarity"] == "other" for c in items)}
    assert len(quotes) >= 100
    # The quoted words are the user's own constructions ("I ...", "my ..."), in the first person.
    first_person = re.compile(r'"[^"]*\b(I|I\'m|I\'ve|my|our|we|me)\b[^"]*"', re.IGNORECASE)
    assert sum(bool(first_person.search(turns[tid].text)) for tid in quotes) >= len(quotes) / 2
    evidence = {tid for q in _questions(stream) for tid in q.evidence}
    assert not (quotes - bearing) & evidence


def test_the_assistant_misremembers_and_the_user_corrects_it_in_plain_words(stream):
    """A slip of the assistant's ("How is life in Porto?") is logged as ``mistaken``, never the user's fact; the
    user's next turn asserts the right value and denies the wrong one, and later gold counts the correction."""
    claims = stream.meta["claims"]
    turns = {t.turn_id: t for t in _turns(stream)}
    sessions = [e for e in stream.events if isinstance(e, Session)]
    corrected = []
    for s in sessions:
        slips = [c for c in claims[s.turns[1].turn_id] if c["polarity"] == "mistaken"]
        if not slips:
            continue
        slip = slips[0]
        fix = claims[s.turns[2].turn_id]
        right = [c for c in fix if c["polarity"] == "asserts" and c["subject"] == slip["subject"] and c["attr"] == slip["attr"]]
        wrong = [c for c in fix if c["polarity"] == "denies" and c["value"] == slip["value"]]
        assert right and wrong and right[0]["value"] != slip["value"], (s.turns[1].text, s.turns[2].text)
        assert slip["value"] in turns[s.turns[1].turn_id].text and right[0]["value"] in turns[s.turns[2].turn_id].text
        corrected.append(s.turns[2].turn_id)
    assert len(corrected) >= 3
    # A correction is a telling like any other: questions asked after it count it as evidence.
    evidence = {tid for q in _questions(stream) for tid in q.evidence}
    assert evidence & set(corrected)
    assert check_world(stream) == []


def test_no_corrections_leave_the_rest_of_the_world_as_it_was():
    a, b = _stream(0, users=2), _stream(0, users=2, correction_rate=0.0)
    assert not any(c["polarity"] == "mistaken" for items in b.meta["claims"].values() for c in items)
    assert len(_questions(a)) == len(_questions(b))
    slipped = {tid for tid, items in a.meta["claims"].items() for c in items if c["polarity"] == "mistaken"}
    assert slipped
    sessions_a = [e for e in a.events if isinstance(e, Session)]
    sessions_b = [e for e in b.events if isinstance(e, Session)]
    assert len(sessions_a) == len(sessions_b)
    for sa, sb in zip(sessions_a, sessions_b):
        fixed = sa.turns[1].turn_id in slipped
        for i, (ta, tb) in enumerate(zip(sa.turns, sb.turns)):
            if fixed and i == 1:
                assert ta.text.startswith(tb.text)  # the slip is said after the reply
            elif fixed and i == 2:
                assert ta.text != tb.text  # the correction, in the user's voice, before what they had to say
            else:
                assert ta.text == tb.text


def test_books_and_films_are_recommended_only_when_asked_and_keep_their_genre(stream) -> None:
    """A title is recommended in reply to a turn that asked for its genre, and is never recommended to the same
    user for another genre, so "Which film did you recommend when I asked for X?" rests on what was said."""
    claims = stream.meta["claims"]
    genres: dict[tuple[str, str], set[str]] = {}
    recs = verbatim = 0
    for e in stream.events:
        if not isinstance(e, Session):
            continue
        before = None
        for t in e.turns:
            if t.speaker == "user":
                before = t
            for c in claims.get(t.turn_id, []):
                if c["subject"] == "assistant" and c["attr"] in ("book", "film"):
                    assert before is not None
                    recs += 1
                    verbatim += c["genre"].lower() in before.text.lower()
                    genres.setdefault((t.user_id, c["value"]), set()).add(c["genre"])
    assert recs > 50
    assert all(len(g) == 1 for g in genres.values())
    # The user's voice may misspell the genre it asks for ("a twissty thriller"); nothing else keeps it out.
    assert verbatim / recs > 0.9


def test_elapsed_time_is_said_in_calendar_days_then_weeks_then_half_months() -> None:
    """The world and its checker say an elapsed time alike, and as a reader of the two dates would."""
    from memsim.scenarios.life_gold import _months_text
    from memsim.scenarios.world_check import _elapsed

    assert [_elapsed(d) for d in (0, 1, 2, 10, 11, 55, 56, 106, 120)] == [
        "today", "1 day", "2 days", "10 days", "about 2 weeks", "about 8 weeks", "about 2 months",
        "about 3 and a half months", "about 4 months"]
    assert all(_months_text(d) == _elapsed(d) for d in range(0, 400))


def test_an_injury_is_told_and_asked_about_as_being_hurt_not_ill(stream) -> None:
    """"I came down with a broken wrist" is not English, and "How many times have I been ill?" does not count one."""
    from memsim.scenarios.life_truth import INJURIES

    text = {t.turn_id: t.text.lower() for t in _turns(stream)}
    hurt = 0
    for tid, claims in stream.meta["claims"].items():
        for c in claims:
            if c["attr"] == "illnesses" and c["subject"] == "me" and c["value"] in INJURIES:
                hurt += 1
                v = c["value"]
                assert not any(p in text[tid] for p in (f"came down with {v}", f"off sick with {v}", f"{v} knocked me out"))
    asked = [q.text for q in _questions(stream) if q.kind in ("count", "latest") and q.topic == "illnesses"]
    assert asked and hurt
    assert all(("injur" in q or "laid me up" in q or "off sick" in q) for q in asked), Counter(asked)


@pytest.fixture(scope="module")
def demo_world():
    """The demo's world on a seed the other tests do not use (a reading found exes told of as partners in it)."""
    table = load_config(CONFIG_DIR / "demo.toml").scenario
    args = {k: v for k, v in table.get("args", table).items() if k != "name"}
    return build_scenario("life", args).generate(streams(14)["scenario"])


def test_a_past_partner_gets_no_couples_follow_on(demo_world) -> None:
    """After a breakup the ex's news is told like anyone's: "they make me laugh constantly" is for a partner now."""
    from memsim.scenarios.life_facts import FOLLOW_ON as _FOLLOW_ON

    stream = demo_world
    couple = _FOLLOW_ON["partner"]
    claims = stream.meta["claims"]
    user = {t.turn_id: t.user_id for t in _turns(stream)}
    names = {(user[tid], c["subject"]): c["value"] for tid, cs in claims.items() for c in cs if c["attr"] == "name"}
    partner: dict[str, str] = {}  # user -> the partner the text last named, or "single"
    had: dict[str, set[str]] = {}  # user -> every partner the text named
    exes = 0
    for t in sorted(_turns(stream), key=lambda t: t.created_at):
        own = [c for c in claims.get(t.turn_id, []) if c["polarity"] == "asserts"]
        for c in own:
            if c["subject"] == "me" and c["attr"] == "partner":
                partner[t.user_id] = c["value"]
                had.setdefault(t.user_id, set()).add(c["value"])
        about = {names.get((t.user_id, c["subject"])) for c in own if c["subject"] not in ("me", "assistant", "someone")}
        if about & had.get(t.user_id, set()) - {partner.get(t.user_id)}:
            exes += 1
            assert not any(x in t.text for x in couple), t.text
    checked = exes
    assert checked


def test_a_new_diet_is_told_as_a_switch_and_articles_fit(demo_world) -> None:
    """"I went gluten-free" read as on top of "I am vegetarian"; a new diet replaces the old, so it says so."""
    from memsim.scenarios.life_words import a_or_an as _a

    stream = demo_world
    text = {t.turn_id: t.text.lower() for t in _turns(stream)}
    began = [tid for tid, cs in stream.meta["claims"].items()
             for c in cs if c["attr"] == "diet" and c["subject"] == "me" and c["aspect"] == "began"]
    assert began
    assert all(any(w in text[tid] for w in ("switch", "swapped", "changed my diet")) for tid in began)
    assert (_a("UX researcher"), _a("apology email"), _a("drill")) == ("a UX researcher", "an apology email", "a drill")
    assert not any(re.search(r"\ba [aeio]\w", t) for t in text.values() if "a uk" not in t)
