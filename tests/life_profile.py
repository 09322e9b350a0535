"""A small difficulty profile of a stream, used to calibrate the ``life`` world.

Run as a script (``python tests/life_profile.py life|locomo [SEED] [USERS]``)
it prints one JSON line: distinct-text ratio, memories in the asking user's
store at question time and at the end, evidence turns per question, share of
questions on changed facts, the median question-evidence MiniLM cosine, and
naive ``recall_all@10`` in each half of every user's questions (split at the
user's median question, as the learning contrasts are). Naive is computed
here as naive stores: every turn rendered by ``render_turn``, top 10 by
cosine within the user, deleted turns gone.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from typing import Any

import numpy as np

from memsim.memory.base import render_turn
from memsim.scenarios.base import ScenarioStream
from memsim.sim.events import Deletion, Question, Session


def profile(stream: ScenarioStream, embedder: Any, *, k: int = 10) -> dict[str, Any]:
    """The calibration figures of ``stream`` (see the module docstring)."""
    turns = {t.turn_id: t for e in stream.events if isinstance(e, Session) for t in e.turns}
    texts = [t.text for t in turns.values()]
    questions = [e for e in stream.events if isinstance(e, Question)]
    scored = [q for q in questions if q.excluded is None and q.evidence]
    ids = list(turns)
    index = {tid: i for i, tid in enumerate(ids)}
    rendered = embedder.encode([render_turn(turns[t]) for t in ids])
    qvec = embedder.encode([q.text for q in scored]) if scored else np.zeros((0, rendered.shape[1]))
    # The cosine is of the plain texts (no date prefix): only the evidence turns need them.
    evidence = sorted({t for q in scored for t in q.evidence if t in index})
    raw = dict(zip(evidence, embedder.encode([turns[t].text for t in evidence])))
    cos = [float(raw[t] @ qvec[i]) for i, q in enumerate(scored) for t in q.evidence if t in index]

    store: dict[str, list[tuple[Any, int]]] = defaultdict(list)
    for e in stream.events:
        if isinstance(e, Session):
            store[e.user_id].extend((e.time, index[t.turn_id]) for t in e.turns)
    deleted: dict[str, list[tuple[Any, set[str]]]] = defaultdict(list)
    for e in stream.events:
        if isinstance(e, Deletion):
            deleted[e.user_id].append((e.time, set(e.turn_ids)))

    sizes, hits, half = [], [], []
    by_user: dict[str, list[int]] = defaultdict(list)
    for i, q in enumerate(scored):
        by_user[q.user_id].append(i)
    first_half = set()
    for rows in by_user.values():
        first_half.update(rows[: len(rows) // 2])
    for i, q in enumerate(scored):
        gone = set().union(*[s for when, s in deleted[q.user_id] if when <= q.time]) if deleted[q.user_id] else set()
        held = [j for when, j in store[q.user_id] if when < q.time and ids[j] not in gone]
        sizes.append(len(held))
        top = np.asarray(held)[np.argsort(-(rendered[held] @ qvec[i]), kind="stable")[:k]] if held else []
        got = {ids[j] for j in top}
        hits.append(float(set(q.evidence) <= got))
        half.append(0 if i in first_half else 1)
    hits_a, half_a = np.asarray(hits), np.asarray(half)
    end_sizes = [len(v) for v in store.values()]
    return {
        "users": len(stream.users),
        "turns": len(texts),
        "questions": len(questions),
        "scored": len(scored),
        "distinct_text_ratio": round(len(set(texts)) / max(1, len(texts)), 4),
        "store_at_question_median": float(np.median(sizes)) if sizes else 0.0,
        "store_at_end_median": float(np.median(end_sizes)) if end_sizes else 0.0,
        "multi_evidence_share": round(float(np.mean([len(q.evidence) >= 2 for q in questions])), 4),
        "changed_share": round(float(np.mean([bool(q.superseded) for q in questions])), 4),
        "cosine_median": round(float(np.median(cos)), 4) if cos else None,
        f"naive_recall_all@{k}_first_half": round(float(hits_a[half_a == 0].mean()), 4),
        f"naive_recall_all@{k}_second_half": round(float(hits_a[half_a == 1].mean()), 4),
        "by_kind": {kind: round(float(np.mean([h for h, q in zip(hits, scored) if q.kind == kind])), 3)
                    for kind in sorted({q.kind for q in scored})},
    }


def main(argv: list[str]) -> None:
    """``life|locomo [SEED] [USERS]``: print the profile as one JSON line."""
    from memsim.memory.embed import Embedder
    from memsim.scenarios.registry import build_scenario
    from memsim.core.streams import streams

    which, seed = argv[0], int(argv[1]) if len(argv) > 1 else 0
    if which == "locomo":
        scenario = build_scenario("locomo_stream", {"data": "/work/shared/data/locomo/locomo10.json"})
    else:
        args = {"users": int(argv[2]) if len(argv) > 2 else 6}
        scenario = build_scenario("life", args)
    stream = scenario.generate(streams(seed)["scenario"])
    print(json.dumps({"world": which, "seed": seed, **profile(stream, Embedder())}))


if __name__ == "__main__":
    main(sys.argv[1:])
