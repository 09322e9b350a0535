"""The published neuroplastic mechanisms memsim lacked (issue #27, defect 8): abstractions and inhibition only."""

from __future__ import annotations

import numpy as np
import pytest

from memsim.memory.neuroplastic_published import ABSTRACTION_TEMPLATE
from memsim.memory.registry import Resources, build_memory, memory_names, memory_role
from tests.test_neuroplastic import FAR, T0, KeyedEmbedder, by_turn, ids, make, turn, unit


def _cluster_table() -> dict:
    # Three close memories (pairwise cosine above 0.88) and one far away.
    a, b, c = unit(1, 0.1), unit(1, -0.1), unit(1, 0.05, 0.15)
    assert min(float(a @ b), float(a @ c), float(b @ c)) >= 0.88
    return {"hike": a, "trail": b, "summit": c, "bread": unit(0, 1), "ask": unit(1)}


def test_consolidation_adds_an_abstraction_of_three_close_memories() -> None:
    table = _cluster_table()
    m = make(table, ltp=False, associations=False, inhibition=False)
    m.ingest([turn(0, "a hike"), turn(1, "the trail"), turn(2, "bread again"), turn(3, "the summit")],
             user_id="u", now=T0)
    m.maintain(now=FAR)
    assert m.report()["abstractions"] == 1 and m.stats().items == 5
    got = m.probe("ask", user_id="u", now=FAR, k=5)
    abstraction = next(r for r in got if len(r.source_turn_ids) > 1)
    assert sorted(abstraction.source_turn_ids) == ["u:0", "u:1", "u:3"]
    assert abstraction.text.startswith(ABSTRACTION_TEMPLATE.split("{")[0]) and "the summit" in abstraction.text
    # Its vector is the members' centroid and its weight 1.5 (one consolidation: x 0.95, never strengthened).
    centroid = table["hike"] + table["trail"] + table["summit"]
    centroid /= (centroid @ centroid) ** 0.5
    assert abstraction.score == pytest.approx(float(unit(1) @ centroid) * 1.5 * 0.95, rel=1e-4)
    assert got[0] is abstraction
    # Forgetting a member's turn removes the abstraction with it.
    m.forget(["u:1"], user_id="u", now=FAR)
    assert all(len(r.source_turn_ids) == 1 for r in m.probe("ask", user_id="u", now=FAR, k=5))


def test_no_abstraction_below_three_members_or_with_the_ablation() -> None:
    table = _cluster_table()
    two = make(table, ltp=False, associations=False, inhibition=False)
    two.ingest([turn(0, "a hike"), turn(1, "the trail"), turn(2, "bread")], user_id="u", now=T0)
    two.maintain(now=FAR)
    assert two.report()["abstractions"] == 0
    off = make(table, ltp=False, associations=False, inhibition=False, abstractions=False)
    off.ingest([turn(0, "a hike"), turn(1, "the trail"), turn(3, "the summit")], user_id="u", now=T0)
    off.maintain(now=FAR)
    assert off.report()["abstractions"] == 0 and off.stats().items == 3
    assert "neuroplastic-no-abstractions" in memory_names() and memory_role("neuroplastic-no-abstractions") == "ablation"


def test_inhibition_only_sets_a_fixed_0_8_for_every_older_memory_above_0_85() -> None:
    paris, berlin = unit(1, 0.2), unit(1, -0.3)
    table = {"paris": paris, "berlin": berlin, "where": unit(1, 0.6)}
    m = make(table, ltp=False, associations=False, consolidation=False, inhibition_fixed=0.8)
    # The same session: the stepped revision leaves it alone, inhibition only does not.
    m.ingest([turn(0, "Paris", session="s1"), turn(1, "Berlin", session="s1", day=30)], user_id="u", now=T0)
    m.maintain(now=FAR)
    scores = by_turn(m.probe("where", user_id="u", now=FAR, k=2))
    assert scores["u:0"] == pytest.approx(float(table["where"] @ paris) * 0.2, rel=1e-5)
    assert scores["u:1"] == pytest.approx(float(table["where"] @ berlin), rel=1e-5)
    assert ids(m.probe("where", user_id="u", now=FAR, k=2))[0] == "u:1"


def test_the_inhibition_only_variant_is_registered() -> None:
    built = build_memory("neuroplastic-inhibition-only", resources=Resources(
        rng=np.random.default_rng(0), embedder_factory=lambda: KeyedEmbedder({"x": unit(1)})))
    assert built.inhibition_fixed == 0.8 and built.inhibition  # type: ignore[attr-defined]
    assert not (built.ltp or built.associations or built.consolidation)  # type: ignore[attr-defined]
