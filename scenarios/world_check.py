"""An independent check of a synthetic world: is every question's gold true by the text as said?

A world that writes its own text logs the claims of every turn
(``memsim.scenarios.claims``). This module reads only that log, the
stream's events (sessions, deletions, questions) and what each question asks
(``meta["questions"]``), and re-derives every question's gold answer,
evidence and superseded turns from the claims *as said, at the dates they
were said*. It shares no code with any generator's question logic: the rules
below are written out here a second time, from the text's side, so that a
generator whose truth and text drift apart is caught.

Rules, for the asking user at the question's time:

- Only claims said before the question and not deleted by then count; only
  ``asserts`` claims count as facts (denials, hypotheticals and other
  people's facts never do). Claims are ordered by the date they refer to,
  then by when they were said.
- The current value is the last one. The *final run* is the tail of claims
  with that value; every turn in it supports the answer (``support``), the
  latest is the evidence; turns stating other values are superseded.
- ``previous``: the run before the final one, asked only when the current
  value was never held before it (otherwise "before X" is ambiguous).
- ``as_of``: the last claim dated on or before the date asked; the next
  change after it must be dated news (``began``), or the change could have
  happened on either side of the date.
- ``since``: dated news (``began``) of the value; the calendar days from
  its date to the question's local day, said as days (up to ten), "about N
  weeks" (below eight) or "about N (and a half) months".
- ``latest``: the value whose claim refers to the latest date, unique, and
  dated news (a pet had "for years" is nobody's newest).
- ``count``: distinct values; one evidence turn per value.
- ``hop``: the relative named by relation (unique among the named people; the
  partner is the one the user is with now), then their value.
- ``assistant``: the one title recommended for the request the question
  names (two titles for one request: ambiguous).
- ``abstain``: nothing asserted on the topic counts (never said, or said and
  then deleted or forgotten at the user's request in their own words: a
  ``forgets`` claim takes away what was said of its topic before it).

A second pass reads the text: each claim's string (the value or a declared
alias, ``meta["vocabulary"]``) is in its turn, each dated claim's date
phrase is in its turn and gives the claim's date, no form of any value in
the vocabulary appears in a turn without a claim of that turn covering it,
and no two values of an attribute that replaces its value are asserted for
the same day, and no user turn speaks of "my partner" on a day the text has
the user single.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any

from memsim.scenarios.claims import POLARITIES, Claim, claims_of

__all__ = ["WorldCheck", "check_claims", "format_check"]

_ABSTAIN = "not mentioned"
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_WHEN = re.compile(r"^(?:(today)|(yesterday)|(\d+) days ago|on (\d{1,2}) (" + "|".join(_MONTHS) + r"))$")


@dataclass
class WorldCheck:
    """What the check found."""

    questions: Counter[str] = field(default_factory=Counter)
    """Questions checked, by kind."""
    disagreements: Counter[str] = field(default_factory=Counter)
    """Questions whose stored gold, evidence, support or superseded turns differ from the claims', by kind."""
    claims: Counter[str] = field(default_factory=Counter)
    """Claims logged, by polarity."""
    turns: int = 0
    """Turns read."""
    text_problems: int = 0
    """Turns whose text does not carry a claim, a date, or carries a value without a claim."""
    problems: list[str] = field(default_factory=list)
    """One line per problem."""

    @property
    def ok(self) -> bool:
        """True when nothing disagrees."""
        return not self.problems


@dataclass(frozen=True, slots=True)
class _Said:
    pos: int
    turn: str
    said: datetime
    day: date
    claim: Claim
    deleted: datetime | None


def _local_day(t: datetime, offset_hours: float) -> date:
    return (t.astimezone(timezone.utc) + timedelta(hours=offset_hours)).date()


def _elapsed(days: int) -> str:
    # The world's wording of whole calendar days: days up to ten, weeks below eight, then half months of 30 days.
    if days < 1:
        return "today"
    if days < 11:
        return f"{days} day" + ("s" if days > 1 else "")
    if days < 56:
        return f"about {round(days / 7.0)} weeks"
    months, half = divmod(round(days / 15.0), 2)
    return f"about {months}" + (" and a half" if half else "") + " months"


def _order(items: Sequence[_Said]) -> list[_Said]:
    return sorted(items, key=lambda s: (s.claim.time, s.said, s.pos))


def _unique(turns: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(turns))


def _final_run(seq: Sequence[_Said]) -> list[_Said]:
    last = seq[-1].claim.value
    i = len(seq)
    while i > 0 and seq[i - 1].claim.value == last:
        i -= 1
    return list(seq[i:])


class _User:
    """One user's claims as said, to be read at any time."""

    def __init__(self, said: list[_Said], offset: float) -> None:
        self.said, self.offset = said, offset
        self.by_slot: dict[tuple[str, str], list[_Said]] = {}
        for s in said:
            if s.claim.polarity == "asserts":
                self.by_slot.setdefault((s.claim.subject, s.claim.attr), []).append(s)

    def facts(self, when: datetime, subject: str, attr: str) -> list[_Said]:
        return _order([s for s in self.by_slot.get((subject, attr), ())
                       if s.said < when and (s.deleted is None or s.deleted > when)])

    def named(self, when: datetime) -> list[_Said]:
        return [s for (_, attr), items in self.by_slot.items() if attr == "name" for s in items
                if s.said < when and (s.deleted is None or s.deleted > when)]

    def who(self, when: datetime, rel: str) -> str | None:
        """The person the user means by ``my <rel>`` at ``when``, if one is meant unambiguously."""
        if rel == "partner":
            now = self.facts(when, "me", "partner")
            if not now:
                return None
            ids = {s.claim.subject for s in self.named(when) if s.claim.value == now[-1].claim.value}
        else:
            ids = {s.claim.subject for s in self.named(when) if s.claim.relation == rel}
        return next(iter(ids)) if len(ids) == 1 else None


def _derive(user: _User, spec: Mapping[str, Any], when: datetime) -> dict[str, Any] | str:
    """Gold, evidence, support and superseded turns of one question by the rules above; a string says why none."""
    kind, attr = spec["kind"], spec.get("attr", "")
    subject = spec.get("subject", "me")
    if kind == "abstain":
        return _abstention(user, spec, when)
    if kind == "assistant":
        return _recommendation(user, spec, when)
    if subject != "me" or kind == "hop":
        pid = user.who(when, spec.get("rel", ""))
        if pid is None or pid != subject:
            return f"'my {spec.get('rel')}' does not name one person (the spec's {subject})"
    seq = user.facts(when, subject, attr)
    if not seq:
        return "nothing was asserted"
    cur = seq[-1].claim.value
    run = _final_run(seq)
    stale = _unique([s.turn for s in seq if s.claim.value != cur])
    if kind in ("current", "preference"):
        return {"gold": cur, "evidence": [seq[-1].turn], "support": [_unique([s.turn for s in run])], "superseded": stale}
    if kind == "previous":
        return _previous(seq, run, spec)
    if kind == "as_of":
        return _as_of(user, seq, spec)
    if kind == "since":
        return _since(user, seq, run, stale, spec, when)
    if kind == "latest":
        if seq[-1].claim.aspect != "began":
            return "the latest value is not dated news, so nothing says it is the most recent"
        top = seq[-1].claim.time
        tied = {s.claim.value for s in seq if s.claim.time == top}
        if len(tied) != 1:
            return f"{len(tied)} values share the latest date {top}"
        return {"gold": cur, "evidence": [seq[-1].turn],
                "support": [_unique([s.turn for s in seq if s.claim.value == cur])], "superseded": []}
    if kind == "count":
        values = _unique([s.claim.value for s in seq])
        groups = [_unique([s.turn for s in seq if s.claim.value == v]) for v in values]
        last = {v: [s.turn for s in seq if s.claim.value == v][-1] for v in values}
        return {"gold": str(len(values)), "evidence": [last[v] for v in values], "support": groups, "superseded": []}
    if kind == "hop":
        names = _order([s for s in user.named(when) if s.claim.subject == subject])
        return {"gold": cur, "evidence": _unique([names[-1].turn, seq[-1].turn]),
                "support": [_unique([s.turn for s in names]), _unique([s.turn for s in run])], "superseded": stale}
    return f"unknown question kind {kind!r}"


def _abstention(user: _User, spec: Mapping[str, Any], when: datetime) -> dict[str, Any] | str:
    """An abstention, while the user has asserted nothing of what is asked (nor named such a relative)."""
    attr = spec.get("attr", "")
    none: dict[str, Any] = {"gold": _ABSTAIN, "evidence": [], "support": [], "superseded": []}
    if attr == "relative":
        named = [s for s in user.named(when) if s.claim.relation == spec["rel"]]
        return none if not named else f"the user named a {spec['rel']} in {named[-1].turn}"
    said = user.facts(when, "me", attr)
    return none if not said else f"the user stated {attr} in {said[-1].turn}"


def _recommendation(user: _User, spec: Mapping[str, Any], when: datetime) -> dict[str, Any] | str:
    """The one title the assistant recommended for the genre asked about."""
    recs = [s for s in user.facts(when, "assistant", spec.get("attr", "")) if s.claim.genre == spec["genre"]]
    recs.sort(key=lambda s: s.pos)
    titles = _unique([s.claim.value for s in recs])
    if len(titles) != 1:
        return f"{len(titles)} titles were recommended for {spec['genre']!r}"
    return {"gold": titles[0], "evidence": [recs[-1].turn], "support": [_unique([s.turn for s in recs])],
            "superseded": []}


def _previous(seq: list[_Said], run: list[_Said], spec: Mapping[str, Any]) -> dict[str, Any] | str:
    """The value held before the current one, which the question names."""
    cur = seq[-1].claim.value
    if spec.get("value") != cur:
        return f"the question names {spec.get('value')!r} but the current value is {cur!r}"
    before = seq[:len(seq) - len(run)]
    if not before:
        return "no earlier value"
    prev_run = _final_run(before)
    if any(s.claim.value == cur for s in before):
        return f"{cur!r} was held before, so 'before {cur}' is ambiguous"
    return {"gold": prev_run[-1].claim.value, "evidence": [prev_run[-1].turn, seq[-1].turn],
            "support": [_unique([s.turn for s in prev_run]), _unique([s.turn for s in run])], "superseded": []}


def _as_of(user: _User, seq: list[_Said], spec: Mapping[str, Any]) -> dict[str, Any] | str:
    """The value asserted for the day asked, unless a change after it is undated."""
    at = _local_day(datetime.fromisoformat(spec["at"]), user.offset).isoformat()
    then = [s for s in seq if s.claim.time <= at]
    if not then:
        return f"nothing was asserted for {at} or before"
    gold = then[-1].claim.value
    after = [s for s in seq[len(then):] if s.claim.value != gold]
    if after and after[0].claim.aspect != "began":
        return f"the change after {at} ({after[0].turn}) is not dated"
    return {"gold": gold, "evidence": [then[-1].turn], "support": [_unique([s.turn for s in _final_run(then)])],
            "superseded": _unique([s.turn for s in seq if s.claim.time > at and s.claim.value != gold])}


def _since(user: _User, seq: list[_Said], run: list[_Said], stale: list[str], spec: Mapping[str, Any],
           when: datetime) -> dict[str, Any] | str:
    """The time elapsed since the one date given for the value asked about."""
    value, cur = spec.get("value"), seq[-1].claim.value
    if spec.get("attr", "") in ("city", "employer"):
        if value != cur:
            return f"the question names {value!r} but the current value is {cur!r}"
        dated = [s for s in run if s.claim.aspect == "began"]
    else:
        stale = []
        dated = [s for s in seq if s.claim.value == value and s.claim.aspect == "began"]
    days = {s.claim.time for s in dated}
    if len(days) != 1:
        return f"{len(days)} dates are given for {value!r}"
    start = date.fromisoformat(next(iter(days))[:10])
    return {"gold": _elapsed((_local_day(when, user.offset) - start).days), "evidence": [dated[-1].turn],
            "support": [_unique([s.turn for s in dated])], "superseded": stale}


def _resolve_when(text: str, said: date) -> date | None:
    m = _WHEN.match(text)
    if m is None:
        return None
    if m.group(1):
        return said
    if m.group(2):
        return said - timedelta(days=1)
    if m.group(3):
        return said - timedelta(days=int(m.group(3)))
    d, month = int(m.group(4)), _MONTHS.index(m.group(5)) + 1
    for year in (said.year, said.year - 1):
        try:
            got = date(year, month, d)
        except ValueError:
            continue
        if got <= said:
            return got
    return None


_TOKEN = re.compile(r"[\w-]+")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _vocabulary_index(vocabulary: Mapping[str, Sequence[str]]) -> tuple[dict[str, list[tuple[str, ...]]], dict[str, set[str]]]:
    """Each form of the vocabulary as its words joined by one space, with the values it may stand for, and the
    forms by their first word (longest first)."""
    owners: dict[str, set[str]] = {}
    for value, forms in vocabulary.items():
        for f in forms:
            owners.setdefault(" ".join(_tokens(f)), set()).add(value)
    starts: dict[str, list[tuple[str, ...]]] = {}
    for key in sorted(owners, key=lambda k: -k.count(" ")):
        words = tuple(key.split(" "))
        starts.setdefault(words[0], []).append(words)
    return starts, owners


def _found(text: str, starts: Mapping[str, Sequence[tuple[str, ...]]]) -> list[str]:
    """Forms of the vocabulary in ``text``, whole words only, the longest where forms overlap."""
    words = _tokens(text)
    out: list[str] = []
    i = 0
    while i < len(words):
        for form in starts.get(words[i], ()):
            if tuple(words[i:i + len(form)]) == form:
                out.append(" ".join(form))
                i += len(form)
                break
        else:
            i += 1
    return out


def check_claims(stream: Any) -> WorldCheck:
    """Check a generated stream against its own claim log.

    Args:
        stream: a ``ScenarioStream`` whose ``meta`` holds ``claims``, ``questions`` and ``vocabulary``
            (``utc_offsets``, hours by user, where users live off UTC; ``accumulating``, the attributes whose
            values add up rather than replace each other).

    Raises:
        ValueError: the stream logs no claims, or a claim is malformed (one line naming the turn and field).
    """
    from memsim.sim.events import Deletion, Question, Session

    meta = stream.meta
    log = claims_of(meta)
    specs: Mapping[str, Mapping[str, Any]] = meta.get("questions", {})
    vocabulary: Mapping[str, Sequence[str]] = meta.get("vocabulary", {})
    offsets: Mapping[str, float] = meta.get("utc_offsets", {})
    report = WorldCheck()
    gone: dict[str, datetime] = {}
    for e in stream.events:
        if isinstance(e, Deletion):
            for tid in e.turn_ids:
                gone.setdefault(tid, e.time)
    starts, owners = _vocabulary_index(vocabulary)
    by_user: dict[str, list[_Said]] = {}
    turns: dict[str, Any] = {}
    pos = 0
    for e in stream.events:
        if not isinstance(e, Session):
            continue
        for t in e.turns:
            pos += 1
            report.turns += 1
            if t.turn_id in turns:
                report.problems.append(f"turn {t.turn_id}: its id repeats")
            turns[t.turn_id] = t
            if t.turn_id not in log:
                report.problems.append(f"turn {t.turn_id}: no entry in the claim log")
                report.text_problems += 1
                continue
            offset = float(offsets.get(t.user_id, 0.0))
            day = _local_day(t.created_at, offset)
            items = log[t.turn_id]
            bad = _text_problems(t.turn_id, t.text, items, day, vocabulary, starts, owners)
            report.text_problems += bool(bad)
            report.problems.extend(bad)
            for c in items:
                report.claims[c.polarity] += 1
                by_user.setdefault(t.user_id, []).append(
                    _Said(pos, t.turn_id, t.created_at, day, c, gone.get(t.turn_id)))
    for tid in log:
        if tid not in turns:
            report.problems.append(f"claim log: turn {tid} is in no session")
    for uid, items in by_user.items():
        by_user[uid] = _forgotten(items)
    users = {uid: _User(items, float(offsets.get(uid, 0.0))) for uid, items in by_user.items()}
    adding = set(meta.get("accumulating", ()))
    for uid, user in users.items():
        report.problems.extend(_contradictions(uid, user, adding))
        bad = _partner_presupposed(user, [t for t in turns.values() if t.user_id == uid], log, offset=user.offset)
        report.text_problems += len(bad)
        report.problems.extend(bad)
    for q in (e for e in stream.events if isinstance(e, Question)):
        report.questions[q.kind] += 1
        spec = specs.get(q.question_id)
        if spec is None:
            report.disagreements[q.kind] += 1
            report.problems.append(f"{q.question_id} ({q.kind}): no entry in meta['questions']")
            continue
        want = _derive(users.get(q.user_id, _User([], 0.0)), spec, q.time)
        lines = _compare(q, spec, want, turns, gone)
        if lines:
            report.disagreements[q.kind] += 1
            report.problems.extend(lines)
    return report


def _forgotten(items: list[_Said]) -> list[_Said]:
    """Claims as a forget request in the user's words leaves them: what was said of its topic before it is gone."""
    asks = [s for s in items if s.claim.polarity == "forgets"]
    if not asks:
        return items
    out = []
    for s in items:
        gone = [a.said for a in asks if a.claim.subject == s.claim.subject and a.claim.attr == s.claim.attr
                and s.said < a.said and s.claim.polarity != "forgets"]
        if gone and (s.deleted is None or min(gone) < s.deleted):
            s = _Said(s.pos, s.turn, s.said, s.day, s.claim, min(gone))
        out.append(s)
    return out


_MY_PARTNER = re.compile(r"\bmy partner\b", re.IGNORECASE)
_QUOTED = re.compile(r'"[^"]*"|“[^”]*”')


def _partner_presupposed(user: _User, turns: Sequence[Any], log: Mapping[str, Sequence[Claim]], *,
                         offset: float) -> list[str]:
    """User turns that speak of "my partner" on a day the text says the user has none.

    Whatever the text says of the user's partner for a date on or before the turn's day counts, told before
    the turn or after it (a breakup told later "on 3 March" makes an earlier "my partner" of 5 March a lie).
    """
    said = user.by_slot.get(("me", "partner"), [])
    out = []
    for t in turns:
        if t.speaker != "user" or not _MY_PARTNER.search(_QUOTED.sub("", t.text)):  # a quote is someone else's
            continue
        if any(c.subject == "me" and c.attr == "partner" for c in log.get(t.turn_id, ())):
            continue
        day = _local_day(t.created_at, offset).isoformat()
        then = _order([s for s in said if s.claim.time <= day])
        if then and then[-1].claim.value == "single":
            out.append(f"turn {t.turn_id}: says 'my partner' on {day}, but the text has the user single since "
                       f"{then[-1].claim.time} ({then[-1].turn})")
    return out


def _contradictions(uid: str, user: _User, adding: set[str]) -> list[str]:
    """Two values of one attribute (not one whose values add up) asserted for the same day."""
    out = []
    for (subject, attr), items in user.by_slot.items():
        if attr in adding or subject in ("assistant", "someone"):  # "someone" is many people
            continue
        by_day: dict[str, set[str]] = {}
        for s in items:
            by_day.setdefault(s.claim.time, set()).add(s.claim.value)
        out.extend(f"{uid}: {subject}.{attr} is asserted as {sorted(v)} for the same day {d}"
                   for d, v in sorted(by_day.items()) if len(v) > 1)
    return out


def _compare(q: Any, spec: Mapping[str, Any], want: dict[str, Any] | str, turns: Mapping[str, Any],
             gone: Mapping[str, datetime]) -> list[str]:
    head = f"{q.question_id} ({q.kind}, {q.text!r})"
    if isinstance(want, str):
        return [f"{head}: the claims give no answer: {want}"]
    got = {"gold": q.gold, "evidence": list(q.evidence), "superseded": list(q.superseded),
           "support": [list(g) for g in q.extra.get("support", ())]}
    out = [f"{head}: {key} is {got[key]!r}, the claims give {want[key]!r}"
           for key in ("gold", "evidence", "superseded", "support") if got[key] != want[key]]
    if spec.get("kind") != q.kind:
        out.append(f"{head}: the question's kind is {q.kind!r} but meta['questions'] asks {spec.get('kind')!r}")
    if (q.gold == _ABSTAIN) != (q.excluded == "abstention"):
        out.append(f"{head}: an abstention must be excluded from scores, and only an abstention")
    for name in ("value", "genre", "rel"):
        if spec.get(name) and str(spec[name]).lower() not in q.text.lower():
            out.append(f"{head}: the question does not name its {name} {spec[name]!r}")
    for tid in (*q.evidence, *q.superseded):
        t = turns.get(tid)
        if t is None or t.user_id != q.user_id or t.created_at >= q.time or (tid in gone and gone[tid] <= q.time):
            out.append(f"{head}: turn {tid} is not in the asker's store at question time")
    return out


def _text_problems(tid: str, text: str, items: Sequence[Claim], day: date, vocabulary: Mapping[str, Sequence[str]],
                   starts: Mapping[str, Sequence[tuple[str, ...]]], owners: Mapping[str, set[str]]) -> list[str]:
    out: list[str] = []
    low = text.lower()
    for c in items:
        forms = {c.value.lower(), *(f.lower() for f in vocabulary.get(c.value, ()))}
        if c.said_as.lower() not in forms and c.polarity != "forgets":
            out.append(f"turn {tid}: {c.subject}.{c.attr} = {c.value!r} is said as {c.said_as!r}, "
                       f"neither the value nor a declared alias")
        if c.said_as.lower() not in low:
            out.append(f"turn {tid}: the text does not carry {c.subject}.{c.attr} = {c.value!r} ({c.said_as!r})")
        if c.aspect == "began":
            got = _resolve_when(c.when_as, day) if c.when_as and c.when_as.lower() in low else None
            if got is None or got.isoformat() != c.time:
                out.append(f"turn {tid}: {c.subject}.{c.attr} = {c.value!r} began {c.time}, "
                           f"but the text dates it {c.when_as!r} (said {day.isoformat()})")
    covered = {c.value for c in items}
    for form in _found(text, starts):
        if not owners[form] & covered:
            out.append(f"turn {tid}: {form!r} is in the text but no claim of the turn covers it")
    return out


def format_check(report: WorldCheck, *, limit: int = 20) -> str:
    """The check as text: counts by kind, claims by polarity, then the first problems."""
    lines = [f"{'kind':<12} {'questions':>9} {'disagree':>9}"]
    for kind in sorted(report.questions):
        lines.append(f"{kind:<12} {report.questions[kind]:>9,} {report.disagreements[kind]:>9,}")
    lines.append(f"{'all':<12} {sum(report.questions.values()):>9,} {sum(report.disagreements.values()):>9,}")
    lines.append("claims: " + ", ".join(f"{p} {report.claims[p]:,}" for p in POLARITIES)
                 + f"; turns {report.turns:,}, turns with text problems {report.text_problems:,}")
    if report.problems:
        lines.append(f"{len(report.problems):,} problems; the first {min(limit, len(report.problems))}:")
        lines.extend(f"  {p}" for p in report.problems[:limit])
    else:
        lines.append("no disagreements")
    return "\n".join(lines)
