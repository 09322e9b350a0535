"""The truth of the ``life`` world: who a user is, what happens to them, and what follows from it.

A user is sampled from a network of dependent attributes (documented in
``docs/concepts/world.md``): age sets the life stage; the stage weighs
occupation, partner, children, habits, diet and music; occupation sets the
sector and the sector the employer; diet bounds the cuisines; children make
a dog likelier. The people in the user's life (partner, siblings, a parent,
children) get attributes of their own (name, city, occupation, employer).
Over the simulated months dated events happen (moves, job changes, trips,
illnesses, relationships, adoptions, purchases, new habits, changes of taste,
and events of the other people), each with participants and consequences.

What the user *tells* is part of the truth too: every telling records which
turn stated which value of which attribute of whom, the date it refers to
(``valid``, the user's calendar day), its aspect and when it was said. Gold
answers are derived from the tellings (``derive``), never from the text, and
``check_world`` re-derives them from the JSON written into the stream's
``meta["truth"]``; the claims the text makes are checked apart, by
``memsim.scenarios.world_check``, which shares none of this code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any

import numpy as np

from memsim.scenarios.base import ScenarioStream
from memsim.sim.events import Deletion, Question, Session

__all__ = [
    "CITIES", "SECTORS", "OCCUPATIONS", "NAMES", "DESTINATIONS", "ILLNESSES", "PURCHASES", "HABITS",
    "DIETS", "CUISINES", "MUSIC", "BOOK_GENRES", "PET_SPECIES", "PET_NAMES", "REPLACING", "ACCUMULATING",
    "EVENT_RATES", "ABSTAIN", "UTC_OFFSETS", "FEMALE_NAMES", "MALE_NAMES", "NEUTRAL_NAMES", "names_for", "Index", "sample_user",
    "sample_events", "index_tellings", "told", "by_valid", "local_day", "meant", "derive", "check_world",
]

CITIES = (
    "Lisbon", "Porto", "Berlin", "Hamburg", "Vienna", "Prague", "Madrid", "Valencia", "Seville", "Dublin",
    "Edinburgh", "Oslo", "Copenhagen", "Stockholm", "Helsinki", "Warsaw", "Krakow", "Budapest", "Zurich",
    "Geneva", "Lyon", "Marseille", "Toronto", "Montreal", "Denver", "Austin", "Seattle", "Portland",
    "Melbourne", "Auckland", "Bristol", "Leeds", "Utrecht", "Ghent", "Bologna", "Turin", "Tallinn", "Riga",
)
SECTORS: Mapping[str, tuple[str, ...]] = {
    "tech": ("Bluepeak Analytics", "Redwood Robotics", "Cobalt Games", "Orbit Telecom", "Quarry Labs", "Nimbus Cloudworks"),
    "health": ("Harbor Health", "Willow Pharmaceuticals", "Saint Brigid Hospital", "Clearwater Clinics", "Mosaic Dental"),
    "education": ("Pinecrest University", "Lakeside Academy", "Northfield College", "Brightpath Schools"),
    "finance": ("Meridian Bank", "Atlas Insurance", "Ledgerline Partners", "Copperleaf Capital"),
    "creative": ("Quillstone Press", "Vantage Media", "Sable Architecture", "Fernhill Studio", "Paperkite Agency"),
    "logistics": ("Northwind Logistics", "Tidewater Shipping", "Granite Construction Co", "Railbridge Freight"),
    "food": ("Evergreen Foods", "Saffron Hotels", "Copper Pot Bistro", "Millstone Bakery"),
}
OCCUPATIONS: Mapping[str, tuple[str, tuple[float, float, float]]] = {
    # occupation: (sector, weights for the young / mid / older stage)
    "software engineer": ("tech", (3, 2, 1)), "data analyst": ("tech", (3, 2, 1)), "UX researcher": ("tech", (2, 1, 0.5)),
    "product manager": ("tech", (1, 2, 1)), "nurse": ("health", (2, 2, 1)), "pharmacist": ("health", (1, 2, 2)),
    "physiotherapist": ("health", (2, 1, 1)), "teacher": ("education", (2, 2, 2)), "lecturer": ("education", (0.5, 2, 2)),
    "school counsellor": ("education", (0.5, 1, 2)), "accountant": ("finance", (1, 2, 2)),
    "financial advisor": ("finance", (0.5, 2, 2)), "copy editor": ("creative", (2, 1, 1)),
    "graphic designer": ("creative", (3, 1, 0.5)), "architect": ("creative", (1, 2, 2)),
    "logistics planner": ("logistics", (1, 2, 1)), "site manager": ("logistics", (0.5, 2, 2)),
    "chef": ("food", (2, 1, 0.5)), "hotel manager": ("food", (0.5, 1, 2)),
}
FEMALE_NAMES = (
    "Priya", "Yuki", "Amara", "Noor", "Elena", "Ines", "Freya", "Camille", "Hana", "Leila", "Marta", "Aisha", "Clara",
    "Esme", "Greta", "Ilse", "Kira", "Mina", "Olga", "Rosa", "Tara", "Vera", "Ximena", "Zoe", "Anouk", "Cora",
)
MALE_NAMES = (
    "Mateo", "Luca", "Tomas", "Kofi", "Ravi", "Diego", "Oskar", "Jonas", "Bruno", "Dmitri", "Farid", "Hugo", "Jamal",
    "Lars", "Nico", "Pablo", "Soren", "Umar", "Wes", "Yusuf", "Bilal",
)
NEUTRAL_NAMES = ("Alex", "Sam", "Robin", "Noa")
NAMES = (*NEUTRAL_NAMES, *FEMALE_NAMES, *MALE_NAMES)
"""Every name a person may have; a sister, mother or daughter has a female or neutral one, a brother,
father or son a male or neutral one, a partner any."""
_FEMALE = ("sister", "mother", "daughter")
_MALE = ("brother", "father", "son")

UTC_OFFSETS: Mapping[str, int] = {
    # Standard time, hours east of UTC: the user's sessions keep the waking hours of their first city.
    **dict.fromkeys(("Lisbon", "Porto", "Dublin", "Edinburgh", "Bristol", "Leeds"), 0),
    **dict.fromkeys(("Berlin", "Hamburg", "Vienna", "Prague", "Madrid", "Valencia", "Seville", "Oslo", "Copenhagen",
                     "Stockholm", "Warsaw", "Krakow", "Budapest", "Zurich", "Geneva", "Lyon", "Marseille", "Utrecht",
                     "Ghent", "Bologna", "Turin"), 1),
    **dict.fromkeys(("Helsinki", "Tallinn", "Riga"), 2),
    "Toronto": -5, "Montreal": -5, "Austin": -6, "Denver": -7, "Seattle": -8, "Portland": -8,
    "Melbourne": 10, "Auckland": 12,
}
DESTINATIONS = (
    "Japan", "Iceland", "Morocco", "Peru", "Vietnam", "Norway", "Greece", "Mexico", "Kenya", "New Zealand",
    "Scotland", "Chile", "Sicily", "Canada", "Sri Lanka", "Croatia", "Georgia", "Jordan", "the Azores", "Slovenia",
)
ILLNESSES = (
    "a bad flu", "a sprained ankle", "a back injury", "bronchitis", "a bout of migraines", "a chest infection",
    "a broken wrist", "tonsillitis", "a stomach bug", "a pulled hamstring", "shingles", "a slipped disc",
)
INJURIES = frozenset(("a sprained ankle", "a back injury", "a broken wrist", "a pulled hamstring", "a slipped disc"))
"""The ``ILLNESSES`` that are injuries: said, reacted to and asked about as being hurt, not ill."""
PURCHASES = (
    "an electric bike", "an upright piano", "a standing desk", "a road bike", "an espresso machine", "a sofa bed",
    "a kayak", "a telescope", "a sewing machine", "a drum kit", "a 3D printer", "a rowing machine", "a pizza oven",
)
HABITS: Mapping[str, tuple[float, float, float]] = {
    "running before work": (3, 2, 1), "swimming laps": (1, 2, 2), "journaling at night": (2, 1, 1),
    "bouldering": (3, 1, 0.2), "yoga": (1, 2, 2), "meditating": (1, 1, 2), "cycling to work": (2, 2, 1),
    "learning Spanish": (1, 1, 1), "sourdough baking": (1, 1, 1), "birdwatching": (0.2, 1, 3),
    "playing chess online": (2, 1, 1), "pottery classes": (1, 1, 2), "gardening": (0.3, 1, 3),
}
DIETS: Mapping[str, tuple[float, float, float]] = {
    "vegetarian": (3, 2, 1), "vegan": (2, 1, 0.3), "pescatarian": (1, 2, 2), "gluten-free": (1, 1, 1),
    "dairy-free": (1, 1, 1), "omnivore": (3, 4, 5),
}
CUISINES: Mapping[str, tuple[str, ...]] = {
    # cuisine: the diets it suits (meat-heavy cuisines do not suit vegetarians)
    "Thai": ("vegetarian", "vegan", "pescatarian", "gluten-free", "dairy-free", "omnivore"),
    "Ethiopian": ("vegetarian", "vegan", "gluten-free", "dairy-free", "omnivore"),
    "South Indian": ("vegetarian", "vegan", "pescatarian", "gluten-free", "omnivore"),
    "Lebanese": ("vegetarian", "vegan", "pescatarian", "dairy-free", "omnivore"),
    "Japanese": ("pescatarian", "gluten-free", "dairy-free", "omnivore"),
    "Korean barbecue": ("gluten-free", "dairy-free", "omnivore"),
    "Argentinian steakhouse": ("gluten-free", "dairy-free", "omnivore"),
    "Neapolitan pizza": ("vegetarian", "pescatarian", "omnivore"),
    "Mexican": ("vegetarian", "vegan", "pescatarian", "gluten-free", "dairy-free", "omnivore"),
}
MUSIC: Mapping[str, tuple[float, float, float]] = {
    "jazz": (1, 2, 3), "techno": (3, 1, 0.2), "folk": (1, 2, 2), "classical piano": (1, 1, 3), "indie rock": (3, 2, 1),
    "hip hop": (3, 1, 0.3), "bossa nova": (1, 2, 2), "synthwave": (2, 1, 0.2), "bluegrass": (0.5, 1, 2), "opera": (0.3, 1, 2),
}
BOOK_GENRES = ("crime novels", "science fiction", "historical fiction", "poetry", "biographies", "fantasy", "travel writing")
PET_SPECIES: Mapping[str, tuple[float, float]] = {
    # species: weights without / with children
    "dog": (2, 4), "cat": (3, 2), "rabbit": (1, 2), "parrot": (0.5, 0.5), "tortoise": (0.5, 1), "guinea pig": (0.5, 2),
}
PET_NAMES = (
    "Biscuit", "Pepper", "Mochi", "Luna", "Ziggy", "Olive", "Nacho", "Clover", "Pixel", "Waffles", "Juniper",
    "Rocket", "Pickles", "Maple", "Sprout", "Beanie", "Comet", "Hazel", "Tofu", "Figaro",
)

_OCC_WEIGHTS = {o: w for o, (_, w) in OCCUPATIONS.items()}

REPLACING = ("city", "employer", "occupation", "partner", "diet", "cuisine", "music")
"""Attributes whose new value replaces the old one (the old one becomes superseded)."""
ACCUMULATING = ("pets", "trips", "purchases", "illnesses", "habits")
"""Attributes whose values add up over the months (asked about by counting)."""

EVENT_RATES: Mapping[str, float] = {
    "move": 0.25, "job": 0.25, "trip": 0.35, "illness": 0.15, "adoption": 0.08, "purchase": 0.25,
    "relationship": 0.10, "breakup": 0.02, "habit": 0.10, "diet": 0.06, "music": 0.10, "cuisine": 0.10,
    "partner_job": 0.15, "relative_move": 0.15,
}
"""Events per user per month (``relative_move`` per relative) before the ``event_rate`` multiplier.

These are the rates of a cohort in a year of change, raised above population
rates on purpose so that six months hold the changes a memory must keep up
with; ``docs/concepts/world.md`` gives each one beside its population
reference and source."""

_SETTLING: Mapping[str, float] = {"move": 60.0, "job": 60.0, "relative_move": 60.0, "partner_job": 60.0}
"""Days after a move or a job change before the same person moves or changes jobs again."""

ABSTAIN = "not mentioned"
"""Gold answer of a question about something the user never told (scored as ``excluded="abstention"``)."""

_STAGES = ((0, 30), (30, 50), (50, 200))
_PARTNER_P = (0.45, 0.75, 0.7)


def _stage(age: int) -> int:
    return next(i for i, (lo, hi) in enumerate(_STAGES) if lo <= age < hi)


def _weighted(rng: np.random.Generator, options: Mapping[str, Sequence[float]] | Sequence[str], column: int = 0,
              exclude: Sequence[str] = ()) -> str:
    names = [n for n in options if n not in exclude]
    if isinstance(options, Mapping):
        w = np.array([float(options[n][column]) for n in names])
    else:
        w = np.ones(len(names))
    return names[int(rng.choice(len(names), p=w / w.sum()))]


def _name(rng: np.random.Generator, relation: str, taken: set[str]) -> str:
    name = _weighted(rng, names_for(relation), exclude=sorted(taken))
    taken.add(name)
    return name


def names_for(relation: str) -> tuple[str, ...]:
    """The names a person of ``relation`` may have (a sister's are female or neutral)."""
    return (*NEUTRAL_NAMES, *(FEMALE_NAMES if relation in _FEMALE else MALE_NAMES if relation in _MALE else
                              (*FEMALE_NAMES, *MALE_NAMES)))


def _person(rng: np.random.Generator, pid: str, relation: str, taken: set[str], *, city: str, age: int) -> dict[str, Any]:
    name = _name(rng, relation, taken)
    occupation = _weighted(rng, _OCC_WEIGHTS, _stage(max(age, 18)))
    return {"id": pid, "relation": relation, "name": name, "age": age, "city": city, "occupation": occupation,
            "employer": _weighted(rng, SECTORS[OCCUPATIONS[occupation][0]])}


def sample_user(rng: np.random.Generator) -> dict[str, Any]:
    """One user's attributes and people at time zero, drawn from the attribute network.

    Returns:
        ``{"attributes": {...}, "people": {pid: {...}}}``; list-valued
        attributes (pets, habits) hold the values that accumulate.
    """
    age = int(rng.integers(23, 68))
    st = _stage(age)
    occupation = _weighted(rng, _OCC_WEIGHTS, st)
    city = _weighted(rng, CITIES)
    taken: set[str] = set()
    people: dict[str, dict[str, Any]] = {}
    partner = None
    if rng.random() < _PARTNER_P[st]:
        partner = "p1"
        people[partner] = _person(rng, partner, "partner", taken, city=city, age=max(20, age + int(rng.integers(-5, 6))))
    for i in range(int(rng.choice([0, 1, 1, 2, 2, 3]))):
        pid = f"p{len(people) + 2}"
        home = city if rng.random() < 0.3 else _weighted(rng, CITIES, exclude=[city])
        people[pid] = _person(rng, pid, ("sister", "brother")[int(rng.integers(2))], taken,
                              city=home, age=max(18, age + int(rng.integers(-8, 9))))
    parent = f"p{len(people) + 2}"
    people[parent] = _person(rng, parent, ("mother", "father")[int(rng.integers(2))], taken,
                             city=_weighted(rng, CITIES), age=age + int(rng.integers(24, 34)))
    children = 0
    if partner and st >= 1:
        children = int(rng.choice([0, 1, 2], p=[0.5, 0.3, 0.2]))
    for _ in range(children):
        pid = f"p{len(people) + 2}"
        relation = ("daughter", "son")[int(rng.integers(2))]
        people[pid] = {"id": pid, "relation": relation, "name": _name(rng, relation, taken),
                       "age": int(rng.integers(1, 16)), "city": city, "occupation": None, "employer": None}
    pets = []
    if rng.random() < 0.35 + 0.2 * (children > 0):
        pets.append(_pet(rng, children > 0, []))
    habits = [_weighted(rng, HABITS, st)]
    if rng.random() < 0.5:
        habits.append(_weighted(rng, HABITS, st, exclude=habits))
    diet = _weighted(rng, DIETS, st)
    attributes = {
        "age": age, "city": city, "occupation": occupation, "employer": _weighted(rng, SECTORS[OCCUPATIONS[occupation][0]]),
        "partner": people[partner]["name"] if partner else None, "diet": diet,
        "cuisine": _weighted(rng, [c for c, diets in CUISINES.items() if diet in diets]),
        "music": _weighted(rng, MUSIC, st), "books": _weighted(rng, BOOK_GENRES), "pets": pets, "habits": habits,
        "trips": [], "purchases": [], "illnesses": [], "children": children,
    }
    return {"attributes": attributes, "people": people}


def _pet(rng: np.random.Generator, children: bool, taken: Sequence[str]) -> str:
    species = _weighted(rng, PET_SPECIES, int(children))
    return f"{_weighted(rng, PET_NAMES, exclude=list(taken))} the {species}"


def sample_events(rng: np.random.Generator, user: dict[str, Any], span_days: float, rate: float) -> list[dict[str, Any]]:
    """The dated events of one user's months, applied to a copy of the state as they happen.

    Each event is ``{"day", "type", "participants", "consequences", "details"}``;
    a consequence ``{"subject", "attr", "value"}`` sets (or, for an
    accumulating attribute, adds) a value. Participants are ``"me"`` and
    people ids; a relationship adds its new partner to ``user["people"]``.
    """
    attrs, people = user["attributes"], user["people"]
    state = {"city": attrs["city"], "employer": attrs["employer"], "occupation": attrs["occupation"],
             "partner": next((p for p, v in people.items() if v["relation"] == "partner"), None),
             "diet": attrs["diet"], "music": attrs["music"], "cuisine": attrs["cuisine"],
             "pets": list(attrs["pets"]), "habits": list(attrs["habits"])}
    st = _stage(attrs["age"])
    draws: list[tuple[float, str, str]] = []
    relatives = [p for p, v in people.items() if v["relation"] in ("sister", "brother", "mother", "father")]
    for kind, per_month in EVENT_RATES.items():
        for who in (relatives if kind == "relative_move" else ["me"]):
            n = int(rng.poisson(per_month * rate * span_days / 30.0))
            # Events happen on whole days (before that day's sessions), so a day's news and state agree.
            draws.extend((float(np.floor(t)), kind, who) for t in rng.uniform(0.0, span_days, size=n))
    # Two events of one kind for one person on one day would leave that day's value undecided: keep the first.
    draws = sorted(set(draws))
    busy_until = -1.0  # the day the last trip ends: trips never overlap
    # Who has just moved or changed jobs rarely does it again within two months (a settling-in period).
    settled: dict[tuple[str, str], float] = {}
    had: dict[str, list[str]] = {"trips": [], "illnesses": [], "purchases": []}
    events: list[dict[str, Any]] = []

    def add(day: float, kind: str, participants: list[str], consequences: list[dict[str, Any]], **details: Any) -> None:
        events.append({"day": round(day, 4), "type": kind, "participants": participants,
                       "consequences": consequences, "details": details})

    taken_names = {v["name"] for v in people.values()}
    for day, kind, who in draws:
        partner = state["partner"]
        if kind in _SETTLING:
            if day < settled.get((kind, who), -1.0):
                continue
            settled[(kind, who)] = day + _SETTLING[kind]
        if kind == "move":
            # Most moves stay in the region (same time zone); the user's waking hours stay those of their first city.
            near = [c for c in CITIES if UTC_OFFSETS[c] == UTC_OFFSETS[state["city"]] and c != state["city"]]
            if not near:
                continue  # no other city in the time zone: the user stays (their waking hours would not follow)
            city = _weighted(rng, near)
            state["city"] = city
            cons = [{"subject": "me", "attr": "city", "value": city}]
            if partner:
                people[partner]["city"] = city
                cons.append({"subject": partner, "attr": "city", "value": city})
            add(day, kind, ["me", *([partner] if partner else [])], cons)
        elif kind == "job":
            occupation = state["occupation"]
            cons = []
            if rng.random() < 0.3:
                occupation = _weighted(rng, [o for o, (s, _) in OCCUPATIONS.items()
                                             if s == OCCUPATIONS[state["occupation"]][0] and o != state["occupation"]])
                state["occupation"] = occupation
                cons.append({"subject": "me", "attr": "occupation", "value": occupation})
            employer = _weighted(rng, SECTORS[OCCUPATIONS[occupation][0]], exclude=[state["employer"]])
            state["employer"] = employer
            add(day, kind, ["me"], [{"subject": "me", "attr": "employer", "value": employer}, *cons])
        elif kind == "trip":
            companion = partner or (relatives[int(rng.integers(len(relatives)))] if relatives else None)
            nights = int(rng.integers(3, 15))
            if day <= busy_until + 7 or day + nights >= span_days or len(had["trips"]) == len(DESTINATIONS):
                continue  # still away (or just back), or back after the span ends
            busy_until = day + nights
            dest = _weighted(rng, DESTINATIONS, exclude=had["trips"])
            had["trips"].append(dest)
            add(day, kind, ["me", *([companion] if companion else [])],
                [{"subject": "me", "attr": "trips", "value": dest}], nights=nights, companion=companion)
        elif kind == "illness":
            if len(had["illnesses"]) < len(ILLNESSES):  # each illness once: "the flu" twice would count as one
                had["illnesses"].append(_weighted(rng, ILLNESSES, exclude=had["illnesses"]))
                add(day, kind, ["me"], [{"subject": "me", "attr": "illnesses", "value": had["illnesses"][-1]}],
                    days_off=int(rng.integers(2, 15)))
        elif kind == "adoption":
            pet = _pet(rng, attrs["children"] > 0, [p.split(" the ")[0] for p in state["pets"]])
            state["pets"].append(pet)
            add(day, kind, ["me", *([partner] if partner else [])], [{"subject": "me", "attr": "pets", "value": pet}])
        elif kind == "purchase":
            if len(had["purchases"]) < len(PURCHASES):
                had["purchases"].append(_weighted(rng, PURCHASES, exclude=had["purchases"]))
                add(day, kind, ["me"], [{"subject": "me", "attr": "purchases", "value": had["purchases"][-1]}])
        elif kind == "habit":
            options = [h for h in HABITS if h not in state["habits"]]
            if options:
                habit = _weighted(rng, {h: HABITS[h] for h in options}, st)
                state["habits"].append(habit)
                add(day, kind, ["me"], [{"subject": "me", "attr": "habits", "value": habit}])
        elif kind == "relationship" and partner is None:
            pid = f"p{len(people) + 2}"
            people[pid] = _person(rng, pid, "partner", taken_names, city=state["city"],
                                  age=max(20, attrs["age"] + int(rng.integers(-5, 6))))
            state["partner"] = pid
            add(day, kind, ["me", pid], [{"subject": "me", "attr": "partner", "value": people[pid]["name"]}],
                person=dict(people[pid]))
        elif kind == "breakup" and partner is not None:
            people[partner]["relation"] = "ex-partner"
            state["partner"] = None
            add(day, kind, ["me", partner], [{"subject": "me", "attr": "partner", "value": "single"}])
        elif kind in ("diet", "music", "cuisine"):
            if kind == "cuisine":
                value = _weighted(rng, [c for c, d in CUISINES.items() if state["diet"] in d and c != state["cuisine"]])
            elif kind == "diet":
                value = _weighted(rng, [d for d in DIETS if d != state["diet"]])
            else:
                value = _weighted(rng, MUSIC, st, exclude=[state["music"]])
            state[kind] = value
            add(day, kind, ["me"], [{"subject": "me", "attr": kind, "value": value}])
        elif kind == "partner_job" and partner is not None:
            p = people[partner]
            employer = _weighted(rng, SECTORS[OCCUPATIONS[p["occupation"]][0]], exclude=[p["employer"]])
            p["employer"] = employer
            add(day, kind, [partner], [{"subject": partner, "attr": "employer", "value": employer}])
        elif kind == "relative_move":
            city = _weighted(rng, CITIES, exclude=[people[who]["city"]])
            people[who]["city"] = city
            add(day, kind, [who], [{"subject": who, "attr": "city", "value": city}])
    return events


# -- gold from the truth ------------------------------------------------------


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
    out: dict[str, Any] = {"gold": ABSTAIN, "evidence": [], "support": [], "superseded": []}
    if kind == "abstain":
        if attr == "relative":
            named = [t for (who, a) in index if a == "name" for t in told(index, who, a, when)]
            return None if any(t.get("relation") == spec["rel"] for t in named) else out
        return None if told(index, "me", attr, when) else out
    if kind == "assistant":
        # "The book you suggested when I wanted a short read": asked only while one title answers it.
        recs = [t for t in told(index, "assistant", attr, when) if t["genre"] == spec["genre"]]
        if len({t["value"] for t in recs}) != 1:
            return None
        return {"gold": recs[-1]["value"], "evidence": [recs[-1]["turn"]], "support": [_dedup([t["turn"] for t in recs])],
                "superseded": []}
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
        before = said[:len(said) - len(tail)]
        if not before or spec.get("value") != cur["value"] or any(t["value"] == cur["value"] for t in before):
            return None
        prev = _tail(before)
        return {"gold": prev[-1]["value"], "evidence": [prev[-1]["turn"], cur["turn"]],
                "support": [_dedup([t["turn"] for t in prev]), *support], "superseded": []}
    if kind == "as_of":
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
    if kind == "since":
        if attr in ("city", "employer"):
            if spec.get("value") != cur["value"]:
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
