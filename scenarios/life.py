"""The ``life`` world: synthetic users whose lives unfold over months of mostly task chat.

Truth first (``memsim.scenarios.life_truth``, one user's in
``memsim.scenarios.life_user``): each user and the people in their life are
drawn from a network of dependent attributes, then live through dated
events. Text second (``memsim.scenarios.life_text``): sessions
are task chat (recipes, writing, code, budgets, planning, reading...), and
the user mentions what is going on in their life in passing, one fact per
turn at most, among hypotheticals, denials and other people's news written
the same way. Sessions fall at the user's waking hours. The assistant
answers with specifics and recommends books and films.

What the user tells is recorded as the truth's *tellings*, each said as the
truth stands on the day it is said (news with its date, in the order it
happened); questions (``memsim.scenarios.life_asking``) are asked from the
second stretch of each user's months on, and their gold answers, evidence,
support and superseded turns come from ``derive`` on the tellings. Users sometimes ask to forget a topic: its turns
are deleted, and later gold no longer counts them. ``meta["truth"]`` holds
each user's truth (JSON), ``meta["claims"]`` the claims every turn's text
makes (``memsim.scenarios.claims``), ``meta["facts"]`` the strings that carry
each fact-bearing turn's fact and ``meta["questions"]`` what each question
asks; ``check_world`` re-derives every question from the truth, and
``memsim.scenarios.world_check.check_claims`` independently from the claims.
Ids are opaque and turns carry no metadata.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import date, datetime, timedelta, timezone
from typing import Annotated, Any, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from memsim.memory.base import Turn
from memsim.scenarios import life_text as X
from memsim.scenarios import life_gold as G
from memsim.scenarios import life_truth as W
from memsim.scenarios.base import ScenarioStream
from memsim.scenarios.claims import Claim
from memsim.scenarios.life_asking import QUESTION_WEIGHTS, RELATIVES, question_candidates, question_extra
from memsim.scenarios.life_user import UserTruth
from memsim.scenarios.voice import draw_voice
from memsim.core.validate import bounded, validate_args
from memsim.sim.events import Deletion, Event, Question, Session, sort_events
from memsim.core.streams import keyed_random, spawn, spawn_random

__all__ = ["LifeConfig", "LifeScenario", "QUESTION_WEIGHTS", "check_world"]

check_world = G.check_world

_MIRROR_SHARE = 0.2
_QUOTE_SHARE = 0.05  # of turn pairs quoting someone else in the user's own constructions (life_text.quote)
_TEASER_SHARE = 0.25  # of news told in a turn after a teaser ("guess what happened")
"""Share of user turns without a fact of the user's that are built around someone else's news instead."""
_DELETABLE = ("city", "partner", "illnesses", "employer")


class _Plan(NamedTuple):
    """Which of a session's turn pairs tell what."""

    tellings: dict[int, dict[str, Any]]
    """Pair -> the user's telling it tells."""
    mirrors: set[int]
    """Pairs built around someone else's news (``mirror``)."""
    quotes: set[int]
    """Pairs that quote someone else (``quote``)."""
    news: set[int]
    """Pairs that tell news (the user's, dated or planned, or someone else's): the assistant may react."""
    teased: set[int]
    """Pairs whose news the pair before announces."""


class _News(NamedTuple):
    """The news a user turn is built around, as drawn."""

    clause: str | None
    """Its sentences, or None for a turn without news."""
    said_as: str
    """The string of them that carries the user's fact ("" for none)."""
    when_as: str
    """The date phrase of dated news, or ""."""
    other: tuple[str, dict[str, str]] | None
    """Someone else's news and its claim, or None."""
    keep: list[str]
    """Strings the user's voice must leave letter for letter."""
    topic: str
    """What the assistant reacts to (``reaction``)."""


class _Pair(NamedTuple):
    """A turn pair's texts as drawn, with what its claims are made from."""

    text: str
    reply: str
    title: str | None
    """The book or film the reply recommends, or None."""
    d: dict[str, Any]
    """The session details its task chat was written with."""
    news: _News
    distract: tuple[str, dict[str, str]] | None
    """The distractor in the user's turn and its claim, or None."""


class LifeConfig(BaseModel):
    """Arguments of the ``life`` scenario (validated; unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    users: Annotated[int, bounded(100_000)] = Field(6, ge=1, description="number of simulated users")
    months: Annotated[float, bounded(240)] = Field(6.0, gt=0, description="simulated span in months of 30 days")
    sessions_per_week: Annotated[float, bounded(100)] = Field(2.2, gt=0, description="mean session arrivals per user per week (Poisson)")
    turns_per_session: Annotated[int, bounded(1_000)] = Field(10, ge=2, description="mean turns per session (user + assistant)")
    fact_share: float = Field(0.3, ge=0, le=1, description="share of turn pairs that mention a fact of the user's life")
    facts_per_session: Annotated[int, bounded(100)] = Field(3, ge=1, description="most facts a user mentions in one session")
    distractor_rate: float = Field(0.4, ge=0, le=1, description="chance a user turn carries a hypothetical, negation or remark")
    questions_per_week: Annotated[float, bounded(1_000)] = Field(8.5, gt=0, description="mean questions per user per week (Poisson), once questions start")
    questions_from: float = Field(0.3, ge=0, lt=1, description="share of the span before the first question")
    event_rate: Annotated[float, bounded(100)] = Field(1.0, ge=0, description="multiplier on every life event's rate (life_truth.EVENT_RATES)")
    deletion_rate: Annotated[float, bounded(1_000)] = Field(0.15, ge=0, description="forget requests per user per month")
    forget_in_text_rate: Annotated[float, bounded(1_000)] = Field(
        0.1, ge=0, description="requests per user per month, in the user's own words, to forget a topic (no API deletion)")
    correction_rate: float = Field(
        0.05, ge=0, le=1, description="chance a session's first reply misremembers a fact the user told (city, employer, "
        "a relative's name) and the user corrects it in the next turn")
    start: datetime = Field(datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc), description="simulated time zero")

    @field_validator("event_rate")
    @classmethod
    def _one_event_a_day(cls, v: float) -> float:
        # Events fall on whole days, one of a kind per person per day: a life cannot hold more.
        per_day = sum(W.EVENT_RATES.values()) * v / 30.0
        if per_day > 1.0:
            raise ValueError(f"{v:g} asks for {per_day:.2f} life events a day per user; a life holds at most one a day "
                             f"(event_rate at most {30.0 / sum(W.EVENT_RATES.values()):.2f})")
        return v

    @field_validator("deletion_rate", "forget_in_text_rate")
    @classmethod
    def _one_deletion_a_day(cls, v: float) -> float:
        if v / 30.0 > 1.0:
            raise ValueError(f"{v:g} forget requests a month is more than one a day (at most 30)")
        return v

    @field_validator("start")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        return v if v.tzinfo is not None else v.replace(tzinfo=timezone.utc)


class _Ids:
    """Opaque ids: a hash of a per-stream salt and a counter, so an id says nothing about its turn."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.salt = int(rng.integers(2**62))
        self.n = 0

    def __call__(self, prefix: str) -> str:
        self.n += 1
        return prefix + hashlib.blake2b(f"{self.salt}:{self.n}".encode(), digest_size=6).hexdigest()


class LifeScenario:
    """The ``life`` scenario: see the module docstring."""

    name = "life"

    def __init__(self, config: LifeConfig | None = None) -> None:
        self.config = config or LifeConfig()

    config_model = LifeConfig

    @classmethod
    def from_args(cls, args: Mapping[str, Any], *, source: str = "") -> LifeScenario:
        """Build from a config table; bad keys or values raise ``UserError``."""
        return cls(validate_args(cls.config_model, args, what="scenario", source=source))  # type: ignore[arg-type]

    def spec_args(self) -> dict[str, Any]:
        """Resolved arguments, JSON-ready."""
        return self.config.model_dump(mode="json")

    def generate(self, rng: np.random.Generator) -> ScenarioStream:
        """Every user's truth, sessions, deletions and questions."""
        cfg = self.config
        span_days = cfg.months * 30.0
        ids = _Ids(rng)
        seen: set[str] = set()
        events: list[Event] = []
        truth: dict[str, Any] = {}
        facts: dict[str, list[str]] = {}
        claims: dict[str, list[dict[str, str]]] = {}
        specs: dict[str, dict[str, Any]] = {}
        offsets: dict[str, float] = {}
        for u in range(cfg.users):
            user_rng = spawn(rng)
            life = _Life(cfg, f"u{u + 1:02d}", user_rng, ids, seen, span_days)
            events.extend(life.play())
            truth[life.user_id] = life.truth
            facts.update(life.facts)
            claims.update(life.claims)
            specs.update(life.specs)
            offsets[life.user_id] = life.offset
        end = cfg.start + timedelta(days=span_days)
        return ScenarioStream(start=cfg.start, end=end, events=tuple(sort_events(events)),
                              meta={"truth": truth, "facts": facts, "questions": specs, "claims": claims,
                                    "vocabulary": X.vocabulary(), "utc_offsets": offsets,
                                    "accumulating": [*W.ACCUMULATING, "trip_plans"]})


class _Life(UserTruth):
    """One user's months: truth, then sessions that tell it, then deletions and questions."""

    def __init__(self, cfg: LifeConfig, user_id: str, rng: np.random.Generator, ids: _Ids, seen: set[str],
                 span_days: float) -> None:
        self.cfg, self.user_id, self.ids, self.seen = cfg, user_id, ids, seen
        self.words = spawn_random(rng)  # the text's choices (life_text)
        self.voice = draw_voice(self.words, X.COMMON_STARTS)  # how this user writes (voice)
        self.greets = X.greetings_of(self.words)
        self.echoes: list[tuple[str, str, str, str]] = []  # shapes of tellings a quote has yet to echo (life_text.quote)
        self.last_task: tuple[str, dict[str, Any]] | None = None  # the previous session's theme and details
        self.titles: dict[str, str] = {}  # book or film -> the genre it was recommended for (it keeps it)
        super().__init__(rng, cfg.start, span_days, cfg.event_rate)  # the truth: drawn after the text's generator
        self.facts: dict[str, list[str]] = {}
        self.claims: dict[str, list[dict[str, str]]] = {}
        self.specs: dict[str, dict[str, Any]] = {}
        self.strangers = [n for n in W.NAMES if n not in {p["name"] for p in self.people.values()}]

    # -- playing the months ---------------------------------------------------------

    def _hours(self, n: int) -> list[float]:
        """Local clock hours of ``n`` sessions or questions: waking hours, busiest in the evening."""
        w = np.array([1, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 6, 7, 7, 6, 4], dtype=float)  # 7:00 to 22:00
        starts = self.rng.choice(len(w), size=n, p=w / w.sum()) + 7
        return [float(h) + float(m) for h, m in zip(starts, self.rng.uniform(0.0, 0.98, size=n))]

    def play(self) -> list[Event]:
        """The user's sessions, then deletions, then questions (in that order, so gold sees the deletions)."""
        cfg, rng = self.cfg, self.rng
        n = int(rng.poisson(cfg.sessions_per_week / 7.0 * self.span))
        days = [int(x) for x in rng.uniform(0.0, self.span, size=n)]
        times = sorted(zip(days, self._hours(n)))
        introduced: set[str] = set()
        out: list[Event] = []
        # Forget requests in the user's words have a generator of their own, so the rest of the world is the
        # same with or without them.
        self.asks = keyed_random(f"{self.ids.salt}:{self.user_id}:forget")
        n_asks = sum(self.asks.random() < cfg.forget_in_text_rate / 30.0 for _ in range(int(self.span)))
        self.ask_days = sorted(self.asks.uniform(0.0, self.span) for _ in range(n_asks))
        self.fixes = keyed_random(f"{self.ids.salt}:{self.user_id}:correct")  # the assistant's slips, likewise
        for day, hour in times:
            out.append(self._session(day, hour, introduced))
        out.extend(self._deletions())
        out.extend(self._questions())
        return out

    def _pick_tellings(self, day: int, n_pairs: int, introduced: set[str]) -> list[dict[str, Any]]:
        """News due by ``day`` in the order it happened, then what was always so, at most ``facts_per_session``."""
        cfg, rng = self.cfg, self.rng
        due = [t for t in self.news if t["day"] <= day]
        for t in [t for t in due if t["aspect"] == "plan" and day >= t["until"]]:
            self.news.remove(t)  # a plan not told before the trip is never told
        ready = [t for t in self.news if t["day"] <= day and (t.get("after") is None or t["after"] in introduced)]
        ready += [t for t in self.state if t.get("after") is None or t["after"] in introduced]
        n_facts = min(len(ready), cfg.facts_per_session, int(rng.binomial(n_pairs, cfg.fact_share)))
        if ready and n_facts == 0 and ready[0].get("aspect") in ("began", "plan"):
            n_facts = 1
        chosen: list[dict[str, Any]] = []
        for t in ready[:n_facts]:
            (self.news if t in self.news else self.state).remove(t)
            resolved = self.resolve(t, day)
            if resolved is not None:
                chosen.append(resolved)
        return chosen

    def _session(self, day: int, hour: float, introduced: set[str]) -> Session:
        """One session on the user's ``day`` at their local ``hour``: turn pairs of task chat that tell what is due."""
        cfg, rng, words = self.cfg, self.rng, self.words
        when = self.instant(day, hour)
        said_day = self.day0 + timedelta(days=day)
        sid = self.ids("s")
        n_pairs = max(2, int(rng.poisson(cfg.turns_per_session / 2)))
        chosen = self._pick_tellings(day, n_pairs, introduced)
        slots = set(int(i) for i in rng.choice(n_pairs, size=len(chosen), replace=False))
        theme = X.pick(words, X.THEMES)
        # A past partner is nobody's "my partner" (nor a name task chat drops): only the one the user is with now.
        now = self.value_on("me", "partner", day)
        known = [p for p in self.people.values() if p["id"] in introduced
                 and (p["relation"] != "partner" or p["name"] == now)]
        people = (sorted({p["relation"] for p in known if p["name"]}), sorted(p["name"] for p in known))
        turns: list[Turn] = []

        def add(speaker: str, text: str, claims: list[dict[str, str]]) -> str:
            tid = self.ids("t")
            turns.append(Turn(turn_id=tid, user_id=self.user_id, speaker=speaker, text=text, created_at=when, session_id=sid))
            self.claims[tid] = claims
            return tid

        plan = self._plan(n_pairs, dict(zip(sorted(slots), chosen)))
        fix = self._slip(day, when) if self.fixes.random() < cfg.correction_rate else None
        for p in range(n_pairs):
            pair = self._pair(p, plan, theme, people, day, hour, now, fix)
            self.seen.update((pair.text, pair.reply))
            self._record_pair(p, pair, plan, theme, fix, add, when, said_day, introduced)
        if self.ask_days and self.ask_days[0] <= day:
            self.ask_days.pop(0)
            self._forget_in_text(when, said_day, add)
        self.last_task = (theme, pair.d)
        return Session(session_id=sid, user_id=self.user_id, time=when, turns=tuple(turns))

    def _plan(self, n_pairs: int, tellings: dict[int, dict[str, Any]]) -> _Plan:
        """Which of a session's pairs tell what: the tellings' pairs, someone else's news, quotes and teasers."""
        words = self.words
        mirrors = {p for p in range(n_pairs) if p not in tellings and words.random() < _MIRROR_SHARE}
        # Someone else's words in the constructions the user's own facts are told with: one for each fact told
        # (``echoes``), a few more at random.
        free = [p for p in range(n_pairs) if p not in tellings and p not in mirrors]
        quotes = set(words.sample(free, min(len(free), len(self.echoes))))
        quotes |= {p for p in free if words.random() < _QUOTE_SHARE}
        news = {p for p in range(n_pairs) if p in mirrors or (p in tellings and tellings[p]["aspect"] in ("began", "plan"))}
        # A teaser in one turn ("guess what happened"), the news itself in the next: for the user's news and
        # someone else's alike.
        teased = {p for p in news if p > 0 and words.random() < _TEASER_SHARE}
        return _Plan(tellings, mirrors, quotes, news, teased)

    def _pair(self, p: int, plan: _Plan, theme: str, people: tuple[list[str], list[str]], day: int, hour: float,
              now: Any, fix: dict[str, Any] | None) -> _Pair:
        """The texts of pair ``p``: the user's turn and the assistant's reply, redrawn until neither repeats."""
        cfg, words = self.cfg, self.words
        for _ in range(12):  # redraw until the text is new: no turn text repeats
            d = X.session_details(words, *people)
            news = self._news(p, plan, day, now)
            distract = X.distractor(words, self.never) if words.random() < cfg.distractor_rate else None
            keep = news.keep + ([distract[1]["said_as"]] if distract is not None else [])
            text, asked = X.user_turn(words, theme, d, news.clause, distract[0] if distract else None)
            if p in plan.teased:
                text = X.reveal(words, text)
            if p + 1 in plan.teased:
                text = f"{text} {X.teaser(words).capitalize()}."
            text = self.voice.say(words, text, keep)
            if fix is not None and p == 1:
                text = f"{fix['correction']} {text}"
            if p == 0 and words.random() < 0.5:
                text = X.greet(words, X.greeting(words, int(hour), self.greets), text)
            reacts = p in plan.news and words.random() < (0.3 if p in plan.mirrors else 0.7)
            react = X.reaction(words, news.topic) if reacts else ""
            after = X.news_prompt(words) if p + 1 in plan.teased else ""
            if not after and p == 0 and self.last_task is not None and words.random() < 0.3:
                after = X.recall(words, *self.last_task)
            reply, title = X.assistant_turn(words, theme, d, react, after, asked, self.titles)
            if fix is not None and p == 0:
                reply = f"{reply} {fix['slip']}"
            if text not in self.seen and reply not in self.seen:
                break
        return _Pair(text, reply, title, d, news, distract)

    def _news(self, p: int, plan: _Plan, day: int, now: Any) -> _News:
        """The news pair ``p``'s user turn is built around: someone else's, the user's telling, or none."""
        words, said_day = self.words, self.day0 + timedelta(days=day)
        clause, said_as, when_as = None, "", ""
        other = None
        keep: list[str] = []
        topic = ""
        if p in plan.mirrors:
            other = X.mirror(words, self.never, said_day, self.strangers)
            clause = other[0]
            keep += [other[1]["said_as"], other[1].get("when_as", "")]
            topic = "person"
        if p in plan.quotes:
            shape = self.echoes[0] if self.echoes else None
            other = X.quote(words, self.never, said_day, self.strangers, shape)
            clause = other[0]
            keep += [other[1]["said_as"], other[1].get("when_as", "")]
        telling = plan.tellings.get(p)
        if telling is not None:
            who = self.people.get(telling["subject"]) if telling["subject"] != "me" else None
            if telling["aspect"] == "began":
                when_as = X.when_phrase(date.fromisoformat(self.date_of(telling["day"])), said_day)
            still = telling["aspect"] != "began" or self.value_on(telling["subject"], telling["attr"], day) == telling["value"]
            clause, said_as = X.fact_clause(words, telling, who, when_as, still and telling["attr"] != "trips",
                                            partnered=who is None or who["name"] == now)
            keep += [said_as, when_as]
            topic = "person" if who is not None else X.news_topic(telling)
        return _News(clause, said_as, when_as, other, keep, topic)

    def _record_pair(self, p: int, pair: _Pair, plan: _Plan, theme: str, fix: dict[str, Any] | None, add: Any,
                     when: datetime, said_day: date, introduced: set[str]) -> None:
        """Add pair ``p``'s turns with the claims they make, and log its telling (and a correction's) in the truth."""
        telling, other, distract = plan.tellings.get(p), pair.news.other, pair.distract
        claims: list[dict[str, str]] = []
        if other is not None:
            claims.append(Claim(**{"time": said_day.isoformat(), **other[1]}).to_json())
        if distract is not None:
            claims.append(Claim(time=said_day.isoformat(), **distract[1]).to_json())
        tid = add("user", pair.text, claims)
        if p in plan.quotes and self.echoes:
            self.echoes.pop(0)
        if fix is not None and p == 1:
            claims[:0] = self._record(fix["telling"], tid, when, said_day, fix["right"], "")
            claims.append(Claim(subject=fix["telling"]["subject"], attr=fix["attr"], value=fix["wrong"],
                                time=said_day.isoformat(), aspect="holds", polarity="denies",
                                said_as=fix["wrong"]).to_json())
        if telling is not None:
            who = self.people.get(telling["subject"])
            value = "" if who or telling["attr"] == "pets" or (telling["attr"] == "partner" and telling["value"] != "single") \
                else str(telling["value"])  # never the user's own pet or partner in someone else's mouth
            shape = (telling["attr"], telling["aspect"], who["relation"] if who else "", value)
            self.echoes.extend([shape] * (2 + (self.words.random() < 0.6)))
            claims[:0] = self._record(telling, tid, when, said_day, pair.news.said_as, pair.news.when_as)
            introduced.add(telling["subject"])
            if telling.get("person"):
                introduced.add(telling["person"])
        rid = add("assistant", pair.reply, [])
        if pair.title is not None:
            attr = "book" if theme == "reading" else "film"
            genre = pair.d["genre"] if theme == "reading" else pair.d["film_genre"]
            self.titles[pair.title] = genre
            self.claims[rid] = self._record({"subject": "assistant", "attr": attr, "value": pair.title, "aspect": "holds",
                                             "genre": genre}, rid, when, said_day, pair.title, "")
        if fix is not None and p == 0:
            self.claims[rid].append(Claim(subject=fix["telling"]["subject"], attr=fix["attr"], value=fix["wrong"],
                                          time=said_day.isoformat(), aspect="holds", polarity="mistaken",
                                          said_as=fix["wrong"]).to_json())

    def _slip(self, day: int, when: datetime) -> dict[str, Any] | None:
        """What the assistant may misremember at the start of a session, and the user's correction, or None.

        Only a fact the user told and that still holds as told (their city or employer, a relative's name); the
        wrong value is one the user never holds, or a name none of their people has, of the relation's gender.
        """
        iso, rng = when.isoformat(), self.fixes
        options: list[dict[str, Any]] = []
        for attr in ("city", "employer"):
            said = G.told(self.index, "me", attr, iso)
            right = self.value_on("me", attr, day)
            if said and said[-1]["value"] == right and self.never.get(attr):
                options.append({"attr": attr, "right": str(right), "wrong": X.pick(rng, self.never[attr]), "rel": "",
                                "telling": {"subject": "me", "attr": attr, "value": right, "aspect": "holds"}})
        names = {p["name"] for p in self.people.values()}
        for pid, p in sorted(self.people.items()):
            if p["relation"] in RELATIVES[1:] and G.told(self.index, pid, "name", iso):
                fits = [n for n in W.names_for(p["relation"]) if n not in names]
                if fits:
                    options.append({"attr": "name", "right": p["name"], "wrong": X.pick(rng, fits), "rel": p["relation"],
                                    "telling": {"subject": pid, "attr": "name", "value": p["name"], "aspect": "holds"}})
        if not options:
            return None
        fix = X.pick(rng, options)
        fix["slip"] = X.slip(rng, fix["attr"], fix["wrong"], fix["rel"])
        # In the user's voice, drawn from this generator too: the rest of the world is the same without it.
        fix["correction"] = self.voice.say(rng, X.correction(rng, fix["attr"], fix["right"], fix["wrong"], fix["rel"]),
                                           [fix["right"], fix["wrong"]])
        return fix

    def _forget_in_text(self, when: datetime, said_day: date, add: Any) -> None:
        """A turn pair in which the user asks, in plain words, to forget a topic they told; its tellings go from then on."""
        iso = when.isoformat()
        topics = [a for a in X.FORGET_PHRASES if G.told(self.index, "me", a, iso)]
        if not topics:
            return
        attr = topics[self.asks.randrange(len(topics))]
        for _ in range(12):  # the request comes with the task at hand, so no text repeats
            theme = X.pick(self.asks, [t for t in X.THEMES if t not in ("reading", "film")])
            d = X.session_details(self.asks, ())
            text, phrase = X.forget_request(self.asks, attr)
            text = self.voice.say(self.asks, f"{text} {X.user_turn(self.asks, theme, d, None, None)[0]}", [phrase])
            reply = f"{X.forget_reply(self.asks)} {X.assistant_turn(self.asks, theme, d)[0]}"
            if text not in self.seen and reply not in self.seen:
                break
        self.seen.update((text, reply))
        tid = add("user", text, [Claim(subject="me", attr=attr, value="", time=said_day.isoformat(), aspect="holds",
                                       polarity="forgets", said_as=phrase).to_json()])
        add("assistant", reply, [])
        forgotten = G.told(self.index, "me", attr, iso)
        gone = {t["turn"] for t in forgotten}
        for t in forgotten:
            t["deleted"] = iso  # what was said of the topic no longer counts, though systems still hold the turns
        self.truth["deletions"].append({"time": iso, "topic": attr, "turns": sorted(gone), "in_text": tid})

    def _record(self, telling: dict[str, Any], turn_id: str, when: datetime, said_day: date, said_as: str,
                when_as: str) -> list[dict[str, str]]:
        """Log a telling in the truth and return the claims its turn makes."""
        aspect = telling["aspect"]
        valid = {"began": self.date_of(telling.get("day", 0)), "long": self.day0.isoformat()}.get(aspect, said_day.isoformat())
        rel = self.people[telling["subject"]]["relation"] if telling["attr"] == "name" else ""
        told = {k: v for k, v in telling.items() if k not in ("day", "after", "until", "intro")}
        told.update(turn=turn_id, valid=valid, said=when.isoformat(), deleted=None, **({"relation": rel} if rel else {}))
        both = [told]
        if telling.get("person"):
            # Naming the partner also introduces them: a hop through the partner starts here.
            pid = telling["person"]
            both.append({**told, "subject": pid, "attr": "name", "aspect": "holds", "valid": said_day.isoformat(),
                         "relation": "partner"})
        claims = []
        for t in both:
            t["seq"] = len(self.truth["tellings"])
            self.truth["tellings"].append(t)
            self.index.setdefault((t["subject"], t["attr"]), []).append(t)
            claims.append(Claim(
                subject=t["subject"], attr=t["attr"], value=str(t["value"]), time=t["valid"], aspect=t["aspect"],
                polarity="asserts", said_as=said_as if t is told else str(t["value"]),
                when_as=when_as if t["aspect"] == "began" else "", relation=t.get("relation", ""),
                genre=t.get("genre", "")).to_json())
        self.facts.setdefault(turn_id, []).append(said_as)
        return claims

    # -- deletions and questions -------------------------------------------------------

    def _deletions(self) -> list[Deletion]:
        cfg, rng = self.cfg, self.rng
        n = int(rng.poisson(cfg.deletion_rate * self.span / 30.0))
        out: list[Deletion] = []
        for day, hour in sorted(zip((int(x) for x in rng.uniform(0.0, self.span, size=n)), self._hours(n))):
            when = self.instant(day, hour).isoformat()
            options = [a for a in _DELETABLE if G.told(self.index, "me", a, when)]
            if not options:
                continue
            attr = options[int(rng.integers(len(options)))]
            gone = {t["turn"] for t in G.told(self.index, "me", attr, when)}
            for t in self.truth["tellings"]:
                if t["turn"] in gone and (t["deleted"] is None or t["deleted"] > when):
                    t["deleted"] = when  # everything the deleted turns said goes with them (a later forget request may have come first)
            self.truth["deletions"].append({"time": when, "topic": attr, "turns": sorted(gone)})
            out.append(Deletion(deletion_id=self.ids("d"), user_id=self.user_id, time=datetime.fromisoformat(when),
                                turn_ids=tuple(sorted(gone)), topic=attr))
        return out

    def _questions(self) -> list[Question]:
        cfg, rng = self.cfg, self.rng
        first = cfg.questions_from * self.span
        n = int(rng.poisson(cfg.questions_per_week / 7.0 * (self.span - first)))
        out: list[Question] = []
        for day, hour in sorted(zip((int(x) for x in rng.uniform(first, self.span, size=n)), self._hours(n))):
            when = self.instant(day, hour).isoformat()
            options = question_candidates(self, when)
            found = None
            while options and found is None:
                kinds = sorted(options)
                w = np.array([QUESTION_WEIGHTS[k] for k in kinds])
                kind = kinds[int(rng.choice(len(kinds), p=w / w.sum()))]
                # A candidate the tellings leave ambiguous (two titles, an undated change) is not asked; one
                # about a fact that changed is asked three times as often (what a memory must keep up with).
                golds = [(spec, ctx, G.derive(self.index, spec, when, self.offset)) for spec, ctx in options[kind]]
                answerable = [g for g in golds if g[2] is not None]
                if not answerable:
                    del options[kind]
                    continue
                w = np.array([3.0 if g[2]["superseded"] else 1.0 for g in answerable])  # type: ignore[index]
                found = answerable[int(rng.choice(len(answerable), p=w / w.sum()))]
            if found is None:
                continue
            spec, ctx, gold = found
            assert gold is not None
            qid = self.ids("q")
            self.specs[qid] = spec
            topic = spec["attr"] if spec.get("subject", "me") == "me" else f"{ctx['rel']}.{spec['attr']}"
            out.append(Question(
                question_id=qid, user_id=self.user_id, time=datetime.fromisoformat(when),
                text=X.question_text(self.words, spec, ctx), gold=gold["gold"], kind=spec["kind"],
                evidence=tuple(gold["evidence"]), superseded=tuple(gold["superseded"]), topic=topic,
                excluded="abstention" if spec["kind"] == "abstain" else None,
                extra=question_extra(self, gold, when),
            ))
        return out
