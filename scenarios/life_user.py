"""One user's truth in the ``life`` world: their sampled life, what there is to tell of it, what holds on a day.

``UserTruth`` draws a user and the dated events of their months
(``memsim.scenarios.life_truth``), turns them into *tellings* (what was so
before the conversations, and the news of each event in the order it
happened), and answers what holds of anyone in the user's life on a given
day, the only source of what a turn may assert. The scenario
(``memsim.scenarios.life``) tells the tellings in sessions and asks about
them.
"""

from __future__ import annotations

import copy
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

import numpy as np

from memsim.scenarios import life_gold as G
from memsim.scenarios import life_truth as W

__all__ = ["UserTruth"]


class UserTruth:
    """One user's truth: their life as sampled, its tellings, and the value of any attribute on any day."""

    def __init__(self, rng: np.random.Generator, start: datetime, span_days: float, event_rate: float) -> None:
        self.rng, self.span = rng, span_days
        sampled = W.sample_user(rng)
        start_people = copy.deepcopy(sampled["people"])
        life_events = W.sample_events(rng, sampled, span_days, event_rate)
        self.offset = float(W.UTC_OFFSETS[sampled["attributes"]["city"]])
        self.day0 = date.fromisoformat(G.local_day(start, self.offset))
        # Every person who ever appears, with their attributes when they first do (a partner met later too).
        self.people = {**start_people, **{e["participants"][1]: e["details"]["person"]
                                          for e in life_events if e["type"] == "relationship"}}
        self.events = [{**e, "date": self.date_of(e["day"])} for e in life_events]
        self.truth: dict[str, Any] = {
            "attributes": sampled["attributes"], "people": copy.deepcopy(self.people), "events": self.events,
            "utc_offset": self.offset, "tellings": [], "deletions": [],
        }
        # The tellings said so far, by subject and attribute (``life_gold.told`` reads it).
        self.index: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.never = self._never_held()
        self.news = self._event_tellings()
        self.state = self._initial_tellings()

    def date_of(self, day: float) -> str:
        """The user's calendar date, ISO, of their ``day`` (days since the first)."""
        return (self.day0 + timedelta(days=int(day))).isoformat()

    def instant(self, day: int, hour: float) -> datetime:
        """The UTC instant of the user's local ``hour`` on their ``day``."""
        local = datetime.combine(self.day0 + timedelta(days=day), time(0), tzinfo=timezone.utc)
        return local + timedelta(hours=hour - self.offset)

    # -- the truth on a given day -------------------------------------------------------

    def value_on(self, subject: str, attr: str, day: int) -> Any:
        """What the initial attributes and the events up to ``day`` make true of ``subject``'s ``attr``."""
        start = self.truth["attributes"] if subject == "me" else self.truth["people"][subject]
        value = start.get(attr)
        if subject == "me" and attr == "partner" and value is None:
            value = "single"
        for e in self.events:
            if e["day"] > day:
                break
            for c in e["consequences"]:
                if c["subject"] == subject and c["attr"] == attr:
                    value = c["value"]
        return value

    def _never_held(self) -> dict[str, list[str]]:
        """Values of each distractor attribute the user never holds (nor plans), so a denial never contradicts them."""
        a = self.truth["attributes"]
        pools = {"city": W.CITIES, "employer": [x for v in W.SECTORS.values() for x in v], "music": list(W.MUSIC),
                 "trips": W.DESTINATIONS, "purchases": W.PURCHASES, "diet": list(W.DIETS),
                 "occupation": list(W.OCCUPATIONS), "cuisine": list(W.CUISINES),
                 "habits": list(W.HABITS), "illnesses": W.ILLNESSES}
        held: dict[str, set[str]] = {k: set() for k in pools}
        for k in held:
            v = a.get(k)
            held[k].update(v if isinstance(v, (list, tuple)) else [v] if v else [])
        for e in self.events:
            for c in e["consequences"]:
                if c["subject"] == "me" and c["attr"] in held:
                    held[c["attr"]].add(c["value"])
        never = {k: [v for v in dict.fromkeys(pool) if v not in held[k]] for k, pool in pools.items()}
        never["trip_plans"] = never["trips"]
        own_pets = {str(p).split(" the ")[0] for p in a.get("pets", ())} | {
            str(c["value"]).split(" the ")[0] for e in self.events for c in e["consequences"] if c["attr"] == "pets"}
        never["pets"] = [f"{n} the {sp}" for n in W.PET_NAMES if n not in own_pets for sp in W.PET_SPECIES]
        return never

    # -- what there is to tell ---------------------------------------------------

    def _initial_tellings(self) -> list[dict[str, Any]]:
        """What was so before the conversations: each said as it stands on the day it is said (``resolve``)."""
        a, rng = self.truth["attributes"], self.rng
        out: list[dict[str, Any]] = []

        def tell(subject: str, attr: str, aspect: str = "holds", **extra: Any) -> None:
            out.append({"subject": subject, "attr": attr, "aspect": aspect, **extra})

        for attr in ("city", "employer", "occupation", "music", "diet", "diet", "cuisine", "cuisine"):
            tell("me", attr)
        for attr in ("pets", "habits"):
            for v in a[attr]:
                tell("me", attr, "long", value=v)
        for pid, p in self.truth["people"].items():
            if p["relation"] == "partner":
                tell("me", "partner", person=pid, value=p["name"])
            else:
                tell(pid, "name", intro=True, value=p["name"])
            for attr in ("city", "employer", "occupation"):
                if p.get(attr) and (attr != "city" or p["relation"] != "partner"):
                    tell(pid, attr, after=pid)
        order = rng.permutation(len(out))
        return [out[int(i)] for i in order]

    def _event_tellings(self) -> list[dict[str, Any]]:
        """The news of each event, dated, in the order it happened (a trip: a plan before, the trip once back)."""
        out: list[dict[str, Any]] = []
        for e in self.events:
            day = int(e["day"])
            if e["type"] == "trip":
                lead = int(self.rng.integers(5, 30))
                if day - lead > 0:
                    out.append({"subject": "me", "attr": "trip_plans", "value": e["consequences"][0]["value"],
                                "aspect": "plan", "day": day - lead, "until": day,
                                "with_partner": e["details"]["companion"] is not None})
                day += int(e["details"]["nights"])
            for c in e["consequences"]:
                if c["subject"] != "me" and e["type"] == "move":
                    continue  # "we moved" tells the partner's city too; no separate telling
                base = {"subject": c["subject"], "attr": c["attr"], "value": c["value"], "aspect": "began", "day": day}
                if e["type"] == "trip":
                    comp = e["details"]["companion"]
                    base.update(nights=e["details"]["nights"], companion_name=self.people[comp]["name"] if comp else None)
                if e["type"] in ("move", "adoption"):
                    base["with_partner"] = len(e["participants"]) > 1
                if e["type"] == "relationship":
                    pid = e["participants"][1]
                    out.append({**base, "person": pid})
                    for attr in ("employer", "occupation"):
                        out.append({"subject": pid, "attr": attr, "aspect": "holds", "day": day, "after": pid})
                    continue
                out.append(base)
        return sorted(out, key=lambda t: t["day"])

    def resolve(self, telling: dict[str, Any], day: int) -> dict[str, Any] | None:
        """The telling as it may be said on ``day``, or None when it no longer may (a stale plan, a past partner).

        A telling of what *is* takes its value from the truth on the day it is said: the only source of
        what a turn may assert.
        """
        t = dict(telling)
        if t["aspect"] == "plan":
            return t if day < t["until"] else None
        if t["aspect"] == "long" or t["aspect"] == "began" or t.get("intro"):
            return t
        value = self.value_on(t["subject"], t["attr"], day)
        if t["attr"] == "partner" and value != t["value"]:
            return None  # the partner of the first weeks is not introduced once they are gone
        if value is None:
            return None
        t["value"] = value
        return t
