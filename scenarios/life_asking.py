"""The questions of the ``life`` world: which ones a user's tellings make answerable, and what each carries.

``question_candidates`` lists, by kind, the questions worth trying at a
moment with the context their wording needs; the scenario draws a kind by
``QUESTION_WEIGHTS``, derives the gold of each candidate
(``life_gold.derive``) and asks one of those answerable.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

from memsim.scenarios import life_gold as G
from memsim.scenarios import life_truth as W
from memsim.scenarios.life_user import UserTruth

__all__ = ["QUESTION_WEIGHTS", "RELATIVES", "question_candidates", "question_extra"]

QUESTION_WEIGHTS: Mapping[str, float] = {
    "current": 0.15, "previous": 0.11, "as_of": 0.07, "since": 0.09, "count": 0.14, "latest": 0.04,
    "preference": 0.08, "hop": 0.16, "assistant": 0.07, "abstain": 0.06, "name": 0.03,
}
"""How often each kind of question is asked, among those a user's tellings make answerable."""

RELATIVES = ("partner", "sister", "brother", "mother", "father", "daughter", "son")
"""The relations a question may name ("Where does my sister live?"), the partner first."""
_ABSTAIN_TOPICS = ("car", "school", "allergy", "salary", "anniversary")


def question_candidates(user: UserTruth, when: str) -> dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
    """Question specs worth trying at ``when`` by kind, each with the context its wording needs."""
    out: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {k: [] for k in QUESTION_WEIGHTS}
    index = user.index

    def told(subject: str, attr: str) -> list[Any]:
        return G.by_valid(G.told(index, subject, attr, when))

    for attr in ("city", "employer", "occupation", "partner", "music"):
        t = told("me", attr)
        if not t:
            continue
        cur = t[-1]["value"]
        out["current"].append(({"kind": "current", "attr": attr}, {}))
        if attr != "partner":
            out["previous"].append(({"kind": "previous", "attr": attr, "value": cur}, {"cur": cur}))
        if attr in ("city", "employer"):
            out["since"].append(({"kind": "since", "attr": attr, "value": cur}, {"cur": cur}))
            changes = [i for i in range(1, len(t)) if t[i]["aspect"] == "began" and t[i]["value"] != t[i - 1]["value"]]
            if changes:
                i = changes[int(user.rng.integers(len(changes)))]
                lo, hi = date.fromisoformat(t[i - 1]["valid"]), date.fromisoformat(t[i]["valid"])
                if (hi - lo).days >= 3:
                    at_day = lo + timedelta(days=int(user.rng.integers(1, (hi - lo).days)))
                    at = user.instant((at_day - user.day0).days, 12.0)
                    out["as_of"].append(({"kind": "as_of", "attr": attr, "at": at.isoformat()},
                                         {"date": f"{at_day.day} {at_day:%B %Y}"}))
    for attr in W.ACCUMULATING:
        t = told("me", attr)
        if not t:
            continue
        out["count"].append(({"kind": "count", "attr": attr}, {}))
        out["latest"].append(({"kind": "latest", "attr": attr}, {}))
        if attr in ("trips", "illnesses", "purchases"):
            v = t[int(user.rng.integers(len(t)))]["value"]
            out["since"].append(({"kind": "since", "attr": attr, "value": v}, {"cur": v}))
    for attr in ("diet", "cuisine"):
        if told("me", attr):
            out["preference"].append(({"kind": "preference", "attr": attr}, {}))
    relations = [p["relation"] for p in user.people.values()]
    for pid, p in user.people.items():
        rel = p["relation"]
        if relations.count(rel) != 1 or rel not in RELATIVES:
            continue
        out["name"].append(({"kind": "current", "subject": pid, "attr": "name", "rel": rel}, {"rel": rel}))
        for attr in ("city", "employer", "occupation"):
            out["hop"].append(({"kind": "hop", "subject": pid, "attr": attr, "rel": rel}, {"rel": rel}))
    for attr in ("book", "film"):
        for genre in sorted({t["genre"] for t in G.told(index, "assistant", attr, when)}):
            out["assistant"].append(({"kind": "assistant", "attr": attr, "genre": genre}, {"cur": genre}))
    for topic in _ABSTAIN_TOPICS:
        out["abstain"].append(({"kind": "abstain", "attr": topic}, {}))
    for d in user.truth["deletions"]:
        # A topic forgotten at the user's request: nothing said of it counts any more.
        if d.get("in_text") and d["time"] < when:
            out["abstain"].append(({"kind": "abstain", "attr": d["topic"]}, {}))
    for rel in ("sister", "brother"):
        if rel not in relations:
            out["abstain"].append(({"kind": "abstain", "attr": "relative", "rel": rel}, {"rel": rel}))
    return {k: v for k, v in out.items() if v}


def question_extra(user: UserTruth, gold: dict[str, Any], when: str) -> dict[str, Any]:
    """A question's ``extra``: its support groups and, once the user has asked in words to forget a topic,
    the turns that told it (``forgotten``: what the run counts in ``forgotten_leaks``; never shown to systems)."""
    extra: dict[str, Any] = {"support": tuple(tuple(g) for g in gold["support"])}
    forgotten = sorted({t for d in user.truth["deletions"] if d.get("in_text") and d["time"] < when for t in d["turns"]})
    if forgotten:
        extra["forgotten"] = tuple(forgotten)
    return extra
