"""The ``life`` world: synthetic users whose lives unfold over months of mostly task chat.

Truth first (``memsim.scenarios.life_truth``): each user and the people in
their life are drawn from a network of dependent attributes, then live
through dated events. Text second (``memsim.scenarios.life_text``): sessions
are task chat (recipes, writing, code, budgets, planning, reading...), and
the user mentions what is going on in their life in passing, one fact per
turn at most, among hypotheticals, negations and other people's news. The
assistant answers with specifics and recommends books and films.

What the user tells is recorded as the truth's *tellings*; questions are
asked from the second stretch of each user's months on, and their gold
answers, evidence and superseded turns come from ``derive`` on the tellings.
Users sometimes ask to forget a topic: its turns are deleted, and later gold
no longer counts them. ``meta["truth"]`` holds each user's truth (JSON),
``meta["facts"]`` the strings that carry each fact-bearing turn's fact and
``meta["questions"]`` what each question asks; ``check_world`` re-derives
every question from them. Ids are opaque and turns carry no metadata.
"""

from __future__ import annotations

import copy
import hashlib
import random
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from memsim.memory.base import Turn
from memsim.scenarios import life_text as X
from memsim.scenarios import life_truth as W
from memsim.scenarios.base import ScenarioStream
from memsim.sim.core.validate import bounded, validate_args
from memsim.sim.events import Deletion, Event, Question, Session, sort_events

__all__ = ["LifeConfig", "LifeScenario", "QUESTION_WEIGHTS", "check_world"]

check_world = W.check_world

QUESTION_WEIGHTS: Mapping[str, float] = {
    "current": 0.15, "previous": 0.11, "as_of": 0.07, "since": 0.09, "count": 0.14, "latest": 0.04,
    "preference": 0.08, "hop": 0.16, "assistant": 0.07, "abstain": 0.06, "name": 0.03,
}
"""How often each kind of question is asked, among those a user's tellings make answerable."""

_DELETABLE = ("city", "partner", "illnesses", "employer")
_ABSTAIN_TOPICS = ("car", "school", "allergy", "salary", "anniversary")
_RELATIVES = ("partner", "sister", "brother", "mother", "father", "daughter", "son")


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
    start: datetime = Field(datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc), description="simulated time zero")

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

    @classmethod
    def from_args(cls, args: Mapping[str, Any], *, source: str = "") -> LifeScenario:
        """Build from a config table; bad keys or values raise ``UserError``."""
        return cls(validate_args(LifeConfig, args, what="scenario", source=source))  # type: ignore[arg-type]

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
        specs: dict[str, dict[str, Any]] = {}
        for u in range(cfg.users):
            user_rng = np.random.default_rng(rng.integers(2**63))
            life = _Life(cfg, f"u{u + 1:02d}", user_rng, ids, seen, span_days)
            events.extend(life.play())
            truth[life.user_id] = life.truth
            facts.update(life.facts)
            specs.update(life.specs)
        end = cfg.start + timedelta(days=span_days)
        return ScenarioStream(start=cfg.start, end=end, events=tuple(sort_events(events)),
                              meta={"truth": truth, "facts": facts, "questions": specs})


class _Life:
    """One user's months: truth, then sessions that tell it, then deletions and questions."""

    def __init__(self, cfg: LifeConfig, user_id: str, rng: np.random.Generator, ids: _Ids, seen: set[str],
                 span_days: float) -> None:
        self.cfg, self.user_id, self.rng, self.ids, self.seen, self.span = cfg, user_id, rng, ids, seen, span_days
        self.words = random.Random(int(rng.integers(2**63)))  # the text's choices (life_text)
        sampled = W.sample_user(rng)
        start_people = copy.deepcopy(sampled["people"])
        life_events = W.sample_events(rng, sampled, span_days, cfg.event_rate)
        # Every person who ever appears, with their attributes when they first do (a partner met later too).
        self.people = {**start_people, **{e["participants"][1]: e["details"]["person"]
                                          for e in life_events if e["type"] == "relationship"}}
        self.truth: dict[str, Any] = {
            "attributes": sampled["attributes"], "people": copy.deepcopy(self.people),
            "events": [{**e, "date": self._iso(e["day"])} for e in life_events], "tellings": [], "deletions": [],
        }
        self.index: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.facts: dict[str, list[str]] = {}
        self.specs: dict[str, dict[str, Any]] = {}
        self.pending = self._initial_tellings() + self._event_tellings(life_events)

    def _iso(self, day: float) -> str:
        return (self.cfg.start + timedelta(days=float(day))).isoformat()

    # -- what there is to tell ---------------------------------------------------

    def _initial_tellings(self) -> list[dict[str, Any]]:
        a, rng = self.truth["attributes"], self.rng
        out: list[dict[str, Any]] = []

        def tell(subject: str, attr: str, value: Any, mode: str = "state", **extra: Any) -> None:
            out.append({"subject": subject, "attr": attr, "value": value, "mode": mode, "day": 0.0, **extra})

        for attr in ("city", "employer", "occupation", "music"):
            tell("me", attr, a[attr])
        for attr in ("diet", "cuisine"):
            tell("me", attr, a[attr], "behaviour")
            tell("me", attr, a[attr], "behaviour")
        for attr in ("pets", "habits"):
            for v in a[attr]:
                tell("me", attr, v)
        for pid, p in self.truth["people"].items():
            if p["relation"] == "partner" and a["partner"] == p["name"]:
                tell("me", "partner", p["name"], "intro", person=pid)
            elif p["relation"] != "partner":
                tell(pid, "name", p["name"], "intro")
            if p["relation"] == "partner" and a["partner"] != p["name"]:
                continue  # met later: told when the relationship starts
            for attr in ("city", "employer", "occupation"):
                if p.get(attr) and (attr != "city" or p["relation"] != "partner"):
                    tell(pid, attr, p[attr], after=pid)
        order = rng.permutation(len(out))
        return [out[int(i)] for i in order]

    def _event_tellings(self, life_events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for e in life_events:
            day = e["day"]
            if e["type"] == "trip":
                # A trip is talked about before (a plan: a hard negative for "my last trip") and told once back home.
                lead = float(self.rng.uniform(5.0, 30.0))
                if day - lead > 0:
                    out.append({"subject": "me", "attr": "trip_plans", "value": e["consequences"][0]["value"],
                                "mode": "plan", "day": day - lead, "news": True,
                                "with_partner": e["details"]["companion"] is not None})
                day += e["details"]["nights"]
            for c in e["consequences"]:
                if c["subject"] != "me" and e["type"] == "move":
                    continue  # "we moved" tells the partner's city too; no separate telling
                extra: dict[str, Any] = {}
                if e["type"] == "trip":
                    comp = e["details"]["companion"]
                    extra = {"nights": e["details"]["nights"],
                             "companion_name": self.people[comp]["name"] if comp else None}
                if e["type"] in ("move", "adoption"):
                    extra["with_partner"] = len(e["participants"]) > 1
                if e["type"] == "relationship":
                    pid = e["participants"][1]
                    extra["person"] = pid
                    out.append({"subject": "me", "attr": "partner", "value": c["value"], "mode": "change",
                                "day": day, "news": True, **extra})
                    for attr in ("employer", "occupation"):
                        out.append({"subject": pid, "attr": attr, "value": self.people[pid][attr], "mode": "state",
                                    "day": day, "after": pid})
                    continue
                mode = "change" if c["subject"] == "me" or c["attr"] != "occupation" else "state"
                out.append({"subject": c["subject"], "attr": c["attr"], "value": c["value"], "mode": mode,
                            "day": day, "news": True, **extra})
                if c["attr"] == "diet":
                    out.append({"subject": "me", "attr": "diet", "value": c["value"], "mode": "behaviour",
                                "day": day, "news": True})
        return sorted(out, key=lambda t: t["day"])

    # -- playing the months ---------------------------------------------------------

    def play(self) -> list[Event]:
        """The user's sessions, then deletions, then questions (in that order, so gold sees the deletions)."""
        cfg, rng = self.cfg, self.rng
        n = int(rng.poisson(cfg.sessions_per_week / 7.0 * self.span))
        times = sorted(float(x) for x in rng.uniform(0.0, self.span, size=n))
        news = [t for t in self.pending if t.get("news")]
        queue = [t for t in self.pending if not t.get("news")]
        introduced: set[str] = set()
        out: list[Event] = []
        for day in times:
            while news and news[0]["day"] < day:
                queue.insert(0, news.pop(0))  # news is told before what was always so
            out.append(self._session(day, queue, introduced))
        out.extend(self._deletions())
        out.extend(self._questions())
        return out

    def _session(self, day: float, queue: list[dict[str, Any]], introduced: set[str]) -> Session:
        cfg, rng, words = self.cfg, self.rng, self.words
        when = self.cfg.start + timedelta(days=day)
        sid = self.ids("s")
        n_pairs = max(2, int(rng.poisson(cfg.turns_per_session / 2)))
        ready = [t for t in queue if t.get("after") is None or t["after"] in introduced]
        n_facts = min(len(ready), cfg.facts_per_session, int(rng.binomial(n_pairs, cfg.fact_share)))
        if ready and n_facts == 0 and ready[0].get("news"):
            n_facts = 1
        chosen = ready[:n_facts]
        for t in chosen:
            queue.remove(t)
        slots = set(int(i) for i in rng.choice(n_pairs, size=len(chosen), replace=False))
        theme = X.pick(words, X.THEMES)
        relations = sorted({p["relation"] for p in self.people.values()})
        turns: list[Turn] = []

        def add(speaker: str, text: str) -> str:
            tid = self.ids("t")
            turns.append(Turn(turn_id=tid, user_id=self.user_id, speaker=speaker, text=text, created_at=when, session_id=sid))
            return tid

        current = {"city": self._latest("city"), "employer": self._latest("employer"), "music": self._latest("music")}
        for p in range(n_pairs):
            telling = chosen.pop(0) if p in slots else None
            for _ in range(12):  # redraw until the text is new: no turn text repeats
                d = X.session_details(words, relations)
                strings: list[str] = []
                clause = None
                if telling is not None:
                    who = self.people.get(telling["subject"]) if telling["subject"] != "me" else None
                    clause, strings = X.fact_clause(words, telling, who, day - telling["day"])
                distract = X.distractor(words, current) if words.random() < cfg.distractor_rate else None
                text = X.user_turn(words, theme, d, clause, distract)
                if p == 0 and words.random() < 0.5:
                    text = f"{X.pick(words, X.GREETINGS)} {text}"
                reply, title = X.assistant_turn(words, theme, d)
                if text not in self.seen and reply not in self.seen:
                    break
            self.seen.update((text, reply))
            tid = add("user", text)
            if telling is not None:
                self._record(telling, tid, when, strings)
                introduced.add(telling["subject"])
                if telling.get("person"):
                    introduced.add(telling["person"])
            rid = add("assistant", reply)
            if title is not None:
                self._record({"subject": "assistant", "attr": "book" if theme == "reading" else "film", "value": title,
                              "mode": "state", "day": day, "genre": d["genre"]}, rid, when, [title])
        return Session(session_id=sid, user_id=self.user_id, time=when, turns=tuple(turns))

    def _record(self, telling: dict[str, Any], turn_id: str, when: datetime, strings: list[str]) -> None:
        told = {k: v for k, v in telling.items() if k not in ("day", "news", "after")}
        told.update(turn=turn_id, valid=self._iso(telling["day"]), said=when.isoformat(), deleted=None)
        both = [told]
        if telling.get("person"):
            # Naming the partner also introduces them: a hop through the partner starts here.
            both.append({**told, "subject": telling["person"], "attr": "name", "mode": "intro"})
        for t in both:
            self.truth["tellings"].append(t)
            self.index.setdefault((t["subject"], t["attr"]), []).append(t)
        self.facts[turn_id] = strings

    def _latest(self, attr: str) -> str:
        said = self.index.get(("me", attr))
        return str(said[-1]["value"]) if said else ""

    # -- deletions and questions -------------------------------------------------------

    def _deletions(self) -> list[Deletion]:
        cfg, rng = self.cfg, self.rng
        n = int(rng.poisson(cfg.deletion_rate * self.span / 30.0))
        out: list[Deletion] = []
        for day in sorted(float(x) for x in rng.uniform(0.0, self.span, size=n)):
            when = self._iso(day)
            options = [a for a in _DELETABLE if W.told(self.index, "me", a, when)]
            if not options:
                continue
            attr = options[int(rng.integers(len(options)))]
            gone = {t["turn"] for t in W.told(self.index, "me", attr, when)}
            for t in self.truth["tellings"]:
                if t["turn"] in gone:
                    t["deleted"] = when
            self.truth["deletions"].append({"time": when, "topic": attr, "turns": sorted(gone)})
            out.append(Deletion(deletion_id=self.ids("d"), user_id=self.user_id, time=datetime.fromisoformat(when),
                                turn_ids=tuple(sorted(gone)), topic=attr))
        return out

    def _candidates(self, when: str) -> dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
        """Answerable question specs at ``when`` by kind, each with the context its wording needs."""
        out: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {k: [] for k in QUESTION_WEIGHTS}
        index = self.index

        def told(subject: str, attr: str) -> list[Any]:
            return W.by_valid(W.told(index, subject, attr, when))

        for attr in ("city", "employer", "occupation", "partner", "music"):
            t = told("me", attr)
            if not t:
                continue
            cur = t[-1]
            out["current"].append(({"kind": "current", "attr": attr}, {}))
            if any(x["value"] != cur["value"] for x in t) and attr != "partner":
                out["previous"].append(({"kind": "previous", "attr": attr}, {"cur": cur["value"]}))
            if attr in ("city", "employer") and cur["mode"] == "change":
                out["since"].append(({"kind": "since", "attr": attr}, {"cur": cur["value"]}))
            if attr in ("city", "employer") and len(t) >= 2:
                lo, hi = datetime.fromisoformat(t[-2]["valid"]), datetime.fromisoformat(t[-1]["valid"])
                if (hi - lo).days >= 3 and t[-2]["value"] != cur["value"]:
                    at = lo + timedelta(days=float(self.rng.uniform(1.0, (hi - lo).days - 1.0)))
                    at = at.replace(hour=12, minute=0, second=0, microsecond=0)
                    out["as_of"].append(({"kind": "as_of", "attr": attr, "at": at.isoformat()},
                                         {"date": f"{at.day} {at:%B %Y}"}))
        for attr in W.ACCUMULATING:
            t = told("me", attr)
            if not t:
                continue
            out["count"].append(({"kind": "count", "attr": attr}, {}))
            out["latest"].append(({"kind": "latest", "attr": attr}, {}))
            if attr in ("trips", "illnesses", "purchases"):
                out["since"].append(({"kind": "since", "attr": attr}, {"cur": t[-1]["value"]}))
        for attr in ("diet", "cuisine"):
            if told("me", attr):
                out["preference"].append(({"kind": "preference", "attr": attr}, {}))
        partner_now = told("me", "partner")
        relations = [p["relation"] for p in self.people.values()]
        for pid, p in self.people.items():
            rel = p["relation"]
            if relations.count(rel) != 1 or rel not in _RELATIVES or not W.told(index, pid, "name", when):
                continue
            if rel == "partner" and (not partner_now or partner_now[-1]["value"] != p["name"]):
                continue
            out["name"].append(({"kind": "current", "subject": pid, "attr": "name"}, {"rel": rel}))
            for attr in ("city", "employer", "occupation"):
                if told(pid, attr):
                    out["hop"].append(({"kind": "hop", "subject": pid, "attr": attr}, {"rel": rel, "name": p["name"]}))
        for attr in ("book", "film"):
            for genre in sorted({t["genre"] for t in W.told(index, "assistant", attr, when)}):
                out["assistant"].append(({"kind": "assistant", "attr": attr, "genre": genre}, {"cur": genre}))
        for topic in _ABSTAIN_TOPICS:
            out["abstain"].append(({"kind": "abstain", "attr": topic}, {}))
        for rel in ("sister", "brother"):
            if rel not in relations:
                out["abstain"].append(({"kind": "abstain", "attr": "relative", "rel": rel}, {"rel": rel}))
        return {k: v for k, v in out.items() if v}

    def _questions(self) -> list[Question]:
        cfg, rng = self.cfg, self.rng
        first = cfg.questions_from * self.span
        n = int(rng.poisson(cfg.questions_per_week / 7.0 * (self.span - first)))
        out: list[Question] = []
        for day in sorted(float(x) for x in rng.uniform(first, self.span, size=n)):
            when = self._iso(day)
            options = self._candidates(when)
            kinds = sorted(options)
            w = np.array([QUESTION_WEIGHTS[k] for k in kinds])
            kind = kinds[int(rng.choice(len(kinds), p=w / w.sum()))]
            spec, ctx = options[kind][int(rng.integers(len(options[kind])))]
            gold = W.derive(self.index, spec, when)
            if spec["kind"] != "abstain" and not gold["evidence"]:
                continue
            qid = self.ids("q")
            self.specs[qid] = spec
            topic = spec["attr"] if spec.get("subject", "me") == "me" else f"{ctx['rel']}.{spec['attr']}"
            out.append(Question(
                question_id=qid, user_id=self.user_id, time=datetime.fromisoformat(when),
                text=X.question_text(self.words, spec, ctx), gold=gold["gold"], kind=spec["kind"],
                evidence=tuple(gold["evidence"]), superseded=tuple(gold["superseded"]), topic=topic,
                excluded="abstention" if spec["kind"] == "abstain" else None,
            ))
        return out
