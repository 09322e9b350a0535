"""Gold from the truth of the ``life`` world: what a user's tellings answer, and the check of a stream's gold.

Gold answers are derived from the tellings (``derive``), never from the
text: every telling records which turn stated which value of which attribute
of whom, the date it refers to (``valid``, the user's calendar day), its
aspect and when it was said. ``check_world`` re-derives them from the JSON
written into the stream's ``meta["truth"]``; the claims the text makes are
checked apart, by ``memsim.scenarios.world_check``, which shares none of
this code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any

from memsim.scenarios.base import ScenarioStream
from memsim.scenarios.life_truth import ABSTAIN, ACCUMULATING
from memsim.sim.events import Deletion, Question, Session

__all__ = ["Index", "index_tellings", "told", "by_valid", "local_day", "meant", "derive", "check_world"]


Index = Mapping[tuple[str, str], Sequence[Mapping[str, Any]]]
"""A user's tellings by ``(subject, attr)``, in the order they were said (``index_tellings``)."""


def index_tellings(tellings: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """A user's tellings (``meta["truth"][user]["tellings"]``) grouped by subject and attribute."""
    out: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for t in tellings:
        out.setdefault((t["subject"], t["attr"]), []).append(t)
    return out


def told(index: Index, subject: str, attr: str, when: str) -> list[Mapping[str, Any]]:
    """Tellings of ``subject``'s ``attr`` said before ``when`` (ISO) and not deleted by then, as said."""
    return [t for t in index.get((subject, attr), ()) if t["said"] < when and (t["deleted"] is None or t["deleted"] > when)]


def by_valid(tellings: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Tellings ordered by the date their value refers to, then as said."""
    return sorted(tellings, key=lambda t: (t["valid"], t["said"], t["seq"]))


def _months_text(days: int) -> str:
    """Whole days from the date of the news to the day asked, as a reader of the two dates would say them:
    days up to ten, then weeks up to eight, then months of 30 days to the nearest half."""
    if days <= 0:
        return "today"
    if days <= 10:
        return "1 day" if days == 1 else f"{days} days"
    if days < 56:
        return f"about {round(days / 7.0)} weeks"
    halves = round(days / 15.0)
    return f"about {halves // 2} months" if halves % 2 == 0 else f"about {halves // 2} and a half months"


def _dedup(xs: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(xs))


def _tail(said: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The last tellings that share the last one's value."""
    k = len(said) - 1
    while k > 0 and said[k - 1]["value"] == said[-1]["value"]:
        k -= 1
    return list(said[k:])


def local_day(t: datetime, offset: float) -> str:
    """The user's calendar day (ISO) of an instant, ``offset`` hours east of UTC."""
    return (t.astimezone(timezone.utc) + timedelta(hours=offset)).date().isoformat()


def meant(index: Index, rel: str, when: str) -> str | None:
    """The person id the user means by "my <rel>" at ``when``: the partner they are with, or the one named relative."""
    names = [t for (who, attr) in index if attr == "name" for t in told(index, who, "name", when)]
    if rel == "partner":
        now = by_valid(told(index, "me", "partner", when))
        ids = {t["subject"] for t in names if now and t["value"] == now[-1]["value"]}
    else:
        ids = {t["subject"] for t in names if t.get("relation") == rel}
    return next(iter(ids)) if len(ids) == 1 else None


def derive(index: Index, spec: Mapping[str, Any], when: str, offset: float = 0.0) -> dict[str, Any] | None:
    """The gold of one question from a user's tellings, or None where the tellings leave it ambiguous.

    Args:
        index: the user's tellings (``index_tellings`` of ``meta["truth"][user]["tellings"]``).
        spec: the question's entry of ``meta["questions"]`` (``kind``, ``subject``, ``attr`` and ``at``,
            ``value``, ``rel``, ``genre`` where used).
        when: the question's time (ISO).
        offset: the user's hours east of UTC (their calendar dates the tellings).

    Returns:
        ``{"gold", "evidence", "support", "superseded"}``: ``evidence`` the fewest turns that answer it,
        ``support`` for each of them every turn that could stand in its place; empty for an abstention.
    """
    kind, subject, attr = spec["kind"], spec.get("subject", "me"), spec.get("attr", "")
    if kind == "abstain":
        return _abstention(index, spec, when)
    if kind == "assistant":
        return _recommended(index, spec, when)
    if (subject != "me" or kind == "hop") and meant(index, spec.get("rel", ""), when) != subject:
        return None
    said = by_valid(told(index, subject, attr, when))
    if not said:
        return None
    cur, tail = said[-1], _tail(said)
    stale = _dedup([t["turn"] for t in said if t["value"] != cur["value"]])
    support = [_dedup([t["turn"] for t in tail])]
    if kind in ("current", "preference"):
        return {"gold": cur["value"], "evidence": [cur["turn"]], "support": support, "superseded": stale}
    if kind == "previous":
        return _previous(said, tail, spec)
    if kind == "as_of":
        return _as_of(said, spec, offset)
    if kind == "since":
        return _since(said, tail, stale, spec, when, offset)
    if kind == "latest":
        # "The most recent pet / trip": the latest must be dated news, and alone on its date.
        if cur["aspect"] != "began" or len({t["value"] for t in said if t["valid"] == cur["valid"]}) != 1:
            return None
        return {"gold": cur["value"], "evidence": [cur["turn"]],
                "support": [_dedup([t["turn"] for t in said if t["value"] == cur["value"]])], "superseded": []}
    if kind == "count":
        values = _dedup([t["value"] for t in said])
        groups = [_dedup([t["turn"] for t in said if t["value"] == v]) for v in values]
        return {"gold": str(len(values)), "evidence": [g[-1] for g in groups], "support": groups, "superseded": []}
    if kind == "hop":
        # "Where does my sister work": who the relative is (the naming), then the relative's value.
        names = by_valid(told(index, subject, "name", when))
        return {"gold": cur["value"], "evidence": _dedup([names[-1]["turn"], cur["turn"]]),
                "support": [_dedup([t["turn"] for t in names]), *support], "superseded": stale}
    raise ValueError(f"unknown question kind {kind!r}")


def _abstention(index: Index, spec: Mapping[str, Any], when: str) -> dict[str, Any] | None:
    """The gold of a question about what the user never told: the abstention, while they still have not."""
    attr = spec.get("attr", "")
    out: dict[str, Any] = {"gold": ABSTAIN, "evidence": [], "support": [], "superseded": []}
    if attr == "relative":
        named = [t for (who, a) in index if a == "name" for t in told(index, who, a, when)]
        return None if any(t.get("relation") == spec["rel"] for t in named) else out
    return None if told(index, "me", attr, when) else out


def _recommended(index: Index, spec: Mapping[str, Any], when: str) -> dict[str, Any] | None:
    """The gold of "the book you suggested when I wanted a short read": asked only while one title answers it."""
    recs = [t for t in told(index, "assistant", spec.get("attr", ""), when) if t["genre"] == spec["genre"]]
    if len({t["value"] for t in recs}) != 1:
        return None
    return {"gold": recs[-1]["value"], "evidence": [recs[-1]["turn"]], "support": [_dedup([t["turn"] for t in recs])],
            "superseded": []}


def _previous(said: Sequence[Mapping[str, Any]], tail: Sequence[Mapping[str, Any]],
              spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The value before the current one, while the question names the current one and it is new."""
    cur = said[-1]
    before = said[:len(said) - len(tail)]
    if not before or spec.get("value") != cur["value"] or any(t["value"] == cur["value"] for t in before):
        return None
    prev = _tail(before)
    return {"gold": prev[-1]["value"], "evidence": [prev[-1]["turn"], cur["turn"]],
            "support": [_dedup([t["turn"] for t in prev]), _dedup([t["turn"] for t in tail])], "superseded": []}


def _as_of(said: Sequence[Mapping[str, Any]], spec: Mapping[str, Any], offset: float) -> dict[str, Any] | None:
    """The value on the day asked, unless a change after it has no date."""
    at = local_day(datetime.fromisoformat(spec["at"]), offset)
    then = [t for t in said if t["valid"] <= at]
    if not then:
        return None
    hit = then[-1]
    changes = [t for t in said[len(then):] if t["value"] != hit["value"]]
    if changes and changes[0]["aspect"] != "began":
        return None  # the change has no date: it may have come before or after the day asked
    return {"gold": hit["value"], "evidence": [hit["turn"]], "support": [_dedup([t["turn"] for t in _tail(then)])],
            "superseded": _dedup([t["turn"] for t in said if t["valid"] > at and t["value"] != hit["value"]])}


def _since(said: Sequence[Mapping[str, Any]], tail: Sequence[Mapping[str, Any]], stale: list[str],
           spec: Mapping[str, Any], when: str, offset: float) -> dict[str, Any] | None:
    """How long ago the value began (the current city or employer, a trip, an illness, a purchase), in words."""
    if spec.get("attr", "") in ("city", "employer"):
        if spec.get("value") != said[-1]["value"]:
            return None
        dated = [t for t in tail if t["aspect"] == "began"]
    else:
        stale = []
        dated = [t for t in said if t["value"] == spec.get("value") and t["aspect"] == "began"]
    if len({t["valid"] for t in dated}) != 1:
        return None
    # Calendar days in the user's time zone: "today" on the 16th, asked on the 18th, is 2 days.
    asked = (datetime.fromisoformat(when) + timedelta(hours=offset)).date()
    days = (asked - date.fromisoformat(dated[0]["valid"][:10])).days
    return {"gold": _months_text(days), "evidence": [dated[-1]["turn"]], "support": [_dedup([t["turn"] for t in dated])],
            "superseded": stale}


def check_world(stream: ScenarioStream) -> list[str]:
    """Problems with a ``life`` stream's gold against its truth (empty: every question checks out).

    Re-derives each question's gold, evidence, support and superseded turns
    from ``meta["truth"]`` and ``meta["questions"]``; checks that every
    telling states what the events make true on its date, that every evidence
    turn is the asking user's, said before the question and not deleted, and
    that its text carries its fact (one of ``meta["facts"][turn]``,
    case-insensitive); that abstention questions have no evidence; and that no
    turn id repeats. The text's own check, from the claims as said, is
    ``memsim.scenarios.world_check.check_claims``.
    """
    problems: list[str] = []
    truth, facts, specs = stream.meta["truth"], stream.meta["facts"], stream.meta["questions"]
    offsets = stream.meta.get("utc_offsets", {})
    turns = {t.turn_id: t for e in stream.events if isinstance(e, Session) for t in e.turns}
    n_turns = sum(len(e.turns) for e in stream.events if isinstance(e, Session))
    if len(turns) != n_turns:
        problems.append(f"{n_turns - len(turns)} turn ids repeat")
    gone: dict[str, datetime] = {}
    for e in stream.events:
        if isinstance(e, Deletion):
            for tid in e.turn_ids:
                gone.setdefault(tid, e.time)
    indexes = {uid: index_tellings(user["tellings"]) for uid, user in truth.items()}
    for uid, user in truth.items():
        for t in user["tellings"]:
            if t["subject"] != "assistant" and not _holds(user, t):
                problems.append(f"{uid}: turn {t['turn']} tells {t['subject']}.{t['attr']} = {t['value']!r}, "
                                f"which the events do not give on {t['valid']}")
    for q in (e for e in stream.events if isinstance(e, Question)):
        spec = specs.get(q.question_id)
        if spec is None:
            problems.append(f"{q.question_id}: no entry in meta['questions']")
            continue
        want = derive(indexes[q.user_id], spec, q.time.isoformat(), float(offsets.get(q.user_id, 0.0)))
        got = {"gold": q.gold, "evidence": list(q.evidence), "superseded": list(q.superseded),
               "support": [list(g) for g in q.extra.get("support", ())]}
        if got != want:
            problems.append(f"{q.question_id} ({q.kind}): stream has {got}, the truth gives {want}")
        if not q.evidence and (q.excluded != "abstention" or q.gold != ABSTAIN):
            problems.append(f"{q.question_id}: no evidence but not an abstention")
        for tid in (*q.evidence, *q.superseded):
            t = turns.get(tid)
            if t is None:
                problems.append(f"{q.question_id}: turn {tid} is in no session")
                continue
            if t.user_id != q.user_id or t.created_at >= q.time or (tid in gone and gone[tid] <= q.time):
                problems.append(f"{q.question_id}: turn {tid} is not in the asker's store at question time")
            strings = facts.get(tid)
            if not strings or not any(s.lower() in t.text.lower() for s in strings):
                problems.append(f"{q.question_id}: turn {tid} does not carry its fact {strings}")
    return problems


def _holds(user: Mapping[str, Any], telling: Mapping[str, Any]) -> bool:
    """Whether a telling states what the user's initial attributes and dated events make true on its date."""
    subject, attr, value = telling["subject"], telling["attr"], telling["value"]
    if attr == "name":
        return bool(user["people"][subject]["name"] == value)
    if attr == "trip_plans":  # a plan holds when the trip happens after it was made
        return any(e["type"] == "trip" and e["date"] >= telling["valid"] and e["consequences"][0]["value"] == value
                   for e in user["events"])
    start = user["attributes"] if subject == "me" else user["people"][subject]
    state: Any = list(start[attr]) if attr in ACCUMULATING else start[attr]
    if subject == "me" and attr == "partner" and state is None:
        state = "single"
    for e in user["events"]:
        if e["date"] > telling["valid"]:
            break
        for c in e["consequences"]:
            if c["subject"] == subject and c["attr"] == attr:
                state = [*state, c["value"]] if attr in ACCUMULATING else c["value"]
    return value in state if attr in ACCUMULATING else bool(state == value)
