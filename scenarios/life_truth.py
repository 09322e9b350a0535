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
answers are derived from the tellings, never from the text, in
``memsim.scenarios.life_gold``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "CITIES", "SECTORS", "OCCUPATIONS", "NAMES", "DESTINATIONS", "ILLNESSES", "PURCHASES", "HABITS",
    "DIETS", "CUISINES", "MUSIC", "BOOK_GENRES", "PET_SPECIES", "PET_NAMES", "REPLACING", "ACCUMULATING",
    "EVENT_RATES", "ABSTAIN", "UTC_OFFSETS", "FEMALE_NAMES", "MALE_NAMES", "NEUTRAL_NAMES", "names_for", "sample_user",
    "sample_events",
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
    months = _Months(rng, user, span_days)
    for day, kind, who in _event_draws(rng, months.relatives, span_days, rate):
        months.happen(day, kind, who)
    return months.events


def _event_draws(rng: np.random.Generator, relatives: Sequence[str], span_days: float,
                 rate: float) -> list[tuple[float, str, str]]:
    """The days events may happen on, with their kind and person, in order (``_Months.happen`` may skip one)."""
    draws: list[tuple[float, str, str]] = []
    for kind, per_month in EVENT_RATES.items():
        for who in (relatives if kind == "relative_move" else ["me"]):
            n = int(rng.poisson(per_month * rate * span_days / 30.0))
            # Events happen on whole days (before that day's sessions), so a day's news and state agree.
            draws.extend((float(np.floor(t)), kind, who) for t in rng.uniform(0.0, span_days, size=n))
    # Two events of one kind for one person on one day would leave that day's value undecided: keep the first.
    return sorted(set(draws))


class _Months:
    """One user's months as events happen: the state they change and the events so far, one step per kind."""

    def __init__(self, rng: np.random.Generator, user: dict[str, Any], span_days: float) -> None:
        attrs, people = user["attributes"], user["people"]
        self.rng, self.attrs, self.people, self.span = rng, attrs, people, span_days
        self.state = {"city": attrs["city"], "employer": attrs["employer"], "occupation": attrs["occupation"],
                      "partner": next((p for p, v in people.items() if v["relation"] == "partner"), None),
                      "diet": attrs["diet"], "music": attrs["music"], "cuisine": attrs["cuisine"],
                      "pets": list(attrs["pets"]), "habits": list(attrs["habits"])}
        self.stage = _stage(attrs["age"])
        self.relatives = [p for p, v in people.items() if v["relation"] in ("sister", "brother", "mother", "father")]
        self.busy_until = -1.0  # the day the last trip ends: trips never overlap
        # Who has just moved or changed jobs rarely does it again within two months (a settling-in period).
        self.settled: dict[tuple[str, str], float] = {}
        self.had: dict[str, list[str]] = {"trips": [], "illnesses": [], "purchases": []}
        self.events: list[dict[str, Any]] = []
        self.taken_names = {v["name"] for v in people.values()}
        self.steps = {"move": self._move, "job": self._job, "trip": self._trip, "illness": self._illness,
                      "adoption": self._adoption, "purchase": self._purchase, "habit": self._habit,
                      "relationship": self._relationship, "breakup": self._breakup, "diet": self._taste,
                      "music": self._taste, "cuisine": self._taste, "partner_job": self._partner_job,
                      "relative_move": self._relative_move}

    def add(self, day: float, kind: str, participants: list[str], consequences: list[dict[str, Any]],
            **details: Any) -> None:
        self.events.append({"day": round(day, 4), "type": kind, "participants": participants,
                            "consequences": consequences, "details": details})

    def happen(self, day: float, kind: str, who: str) -> None:
        """The event drawn for ``day``, unless its person is still settling in (or it cannot happen)."""
        if kind in _SETTLING:
            if day < self.settled.get((kind, who), -1.0):
                return
            self.settled[(kind, who)] = day + _SETTLING[kind]
        self.steps[kind](day, kind, who, self.state["partner"])

    def _move(self, day: float, kind: str, who: str, partner: str | None) -> None:
        state, people = self.state, self.people
        # Most moves stay in the region (same time zone); the user's waking hours stay those of their first city.
        near = [c for c in CITIES if UTC_OFFSETS[c] == UTC_OFFSETS[state["city"]] and c != state["city"]]
        if not near:
            return  # no other city in the time zone: the user stays (their waking hours would not follow)
        city = _weighted(self.rng, near)
        state["city"] = city
        cons = [{"subject": "me", "attr": "city", "value": city}]
        if partner:
            people[partner]["city"] = city
            cons.append({"subject": partner, "attr": "city", "value": city})
        self.add(day, kind, ["me", *([partner] if partner else [])], cons)

    def _job(self, day: float, kind: str, who: str, partner: str | None) -> None:
        state, rng = self.state, self.rng
        occupation = state["occupation"]
        cons = []
        if rng.random() < 0.3:
            occupation = _weighted(rng, [o for o, (s, _) in OCCUPATIONS.items()
                                         if s == OCCUPATIONS[state["occupation"]][0] and o != state["occupation"]])
            state["occupation"] = occupation
            cons.append({"subject": "me", "attr": "occupation", "value": occupation})
        employer = _weighted(rng, SECTORS[OCCUPATIONS[occupation][0]], exclude=[state["employer"]])
        state["employer"] = employer
        self.add(day, kind, ["me"], [{"subject": "me", "attr": "employer", "value": employer}, *cons])

    def _trip(self, day: float, kind: str, who: str, partner: str | None) -> None:
        rng, relatives, had = self.rng, self.relatives, self.had
        companion = partner or (relatives[int(rng.integers(len(relatives)))] if relatives else None)
        nights = int(rng.integers(3, 15))
        if day <= self.busy_until + 7 or day + nights >= self.span or len(had["trips"]) == len(DESTINATIONS):
            return  # still away (or just back), or back after the span ends
        self.busy_until = day + nights
        dest = _weighted(rng, DESTINATIONS, exclude=had["trips"])
        had["trips"].append(dest)
        self.add(day, kind, ["me", *([companion] if companion else [])],
                 [{"subject": "me", "attr": "trips", "value": dest}], nights=nights, companion=companion)

    def _illness(self, day: float, kind: str, who: str, partner: str | None) -> None:
        had = self.had
        if len(had["illnesses"]) < len(ILLNESSES):  # each illness once: "the flu" twice would count as one
            had["illnesses"].append(_weighted(self.rng, ILLNESSES, exclude=had["illnesses"]))
            self.add(day, kind, ["me"], [{"subject": "me", "attr": "illnesses", "value": had["illnesses"][-1]}],
                     days_off=int(self.rng.integers(2, 15)))

    def _adoption(self, day: float, kind: str, who: str, partner: str | None) -> None:
        pet = _pet(self.rng, self.attrs["children"] > 0, [p.split(" the ")[0] for p in self.state["pets"]])
        self.state["pets"].append(pet)
        self.add(day, kind, ["me", *([partner] if partner else [])], [{"subject": "me", "attr": "pets", "value": pet}])

    def _purchase(self, day: float, kind: str, who: str, partner: str | None) -> None:
        had = self.had
        if len(had["purchases"]) < len(PURCHASES):
            had["purchases"].append(_weighted(self.rng, PURCHASES, exclude=had["purchases"]))
            self.add(day, kind, ["me"], [{"subject": "me", "attr": "purchases", "value": had["purchases"][-1]}])

    def _habit(self, day: float, kind: str, who: str, partner: str | None) -> None:
        options = [h for h in HABITS if h not in self.state["habits"]]
        if options:
            habit = _weighted(self.rng, {h: HABITS[h] for h in options}, self.stage)
            self.state["habits"].append(habit)
            self.add(day, kind, ["me"], [{"subject": "me", "attr": "habits", "value": habit}])

    def _relationship(self, day: float, kind: str, who: str, partner: str | None) -> None:
        if partner is not None:
            return
        people, attrs = self.people, self.attrs
        pid = f"p{len(people) + 2}"
        people[pid] = _person(self.rng, pid, "partner", self.taken_names, city=self.state["city"],
                              age=max(20, attrs["age"] + int(self.rng.integers(-5, 6))))
        self.state["partner"] = pid
        self.add(day, kind, ["me", pid], [{"subject": "me", "attr": "partner", "value": people[pid]["name"]}],
                 person=dict(people[pid]))

    def _breakup(self, day: float, kind: str, who: str, partner: str | None) -> None:
        if partner is None:
            return
        self.people[partner]["relation"] = "ex-partner"
        self.state["partner"] = None
        self.add(day, kind, ["me", partner], [{"subject": "me", "attr": "partner", "value": "single"}])

    def _taste(self, day: float, kind: str, who: str, partner: str | None) -> None:
        state, rng = self.state, self.rng
        if kind == "cuisine":
            value = _weighted(rng, [c for c, d in CUISINES.items() if state["diet"] in d and c != state["cuisine"]])
        elif kind == "diet":
            value = _weighted(rng, [d for d in DIETS if d != state["diet"]])
        else:
            value = _weighted(rng, MUSIC, self.stage, exclude=[state["music"]])
        state[kind] = value
        self.add(day, kind, ["me"], [{"subject": "me", "attr": kind, "value": value}])

    def _partner_job(self, day: float, kind: str, who: str, partner: str | None) -> None:
        if partner is None:
            return
        p = self.people[partner]
        employer = _weighted(self.rng, SECTORS[OCCUPATIONS[p["occupation"]][0]], exclude=[p["employer"]])
        p["employer"] = employer
        self.add(day, kind, [partner], [{"subject": partner, "attr": "employer", "value": employer}])

    def _relative_move(self, day: float, kind: str, who: str, partner: str | None) -> None:
        city = _weighted(self.rng, CITIES, exclude=[self.people[who]["city"]])
        self.people[who]["city"] = city
        self.add(day, kind, [who], [{"subject": who, "attr": "city", "value": city}])
