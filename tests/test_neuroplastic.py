"""The published neuroplastic mechanisms, pinned with hand-computed numbers.

``KeyedEmbedder`` maps a text to the vector of the first key it contains, so
each test fixes the cosines that drive scores, inhibition and merges. Most
tests run the mechanisms on every turn (``gate="none"``); one checks that the
default stores exactly what the multi-signal gate stores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from memsim.memory.base import Retrieved, Turn
from memsim.memory.embed import HashEmbedder
from memsim.memory.neuroplastic_published import PAST_STATE_CUES, PublishedNeuroplasticMemory, past_state_cue
from memsim.memory.registry import Resources, build_memory
from memsim.core.errors import UserError

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)
FAR = datetime(2100, 1, 1, tzinfo=timezone.utc)
DIM = 8


def unit(*xs: float) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(xs)] = xs
    return v / np.linalg.norm(v)


def axis(n: int, lead: float = 0.0) -> np.ndarray:
    """``lead`` on axis 0 and the rest on axis ``n``: cosine ``lead`` to ``unit(1)``."""
    v = np.zeros(DIM, dtype=np.float32)
    v[0], v[n] = lead, np.sqrt(1.0 - lead * lead)
    return v


class KeyedEmbedder:
    """Vector of the first key (longest first) found in the lower-cased text; else the last axis."""

    model_id = "keyed"
    dim = DIM

    def __init__(self, table: Mapping[str, np.ndarray]) -> None:
        self.table = {k.lower(): np.asarray(v, dtype=np.float32) for k, v in table.items()}
        self.keys = sorted(self.table, key=len, reverse=True)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            low = text.lower()
            key = next((k for k in self.keys if k in low), None)
            out[i] = self.table[key] if key is not None else axis(DIM - 1)
        return out

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


def make(table: Mapping[str, np.ndarray], **kwargs: object) -> PublishedNeuroplasticMemory:
    kwargs.setdefault("gate", "none")
    resources = Resources(rng=np.random.default_rng(0), embedder_factory=lambda: KeyedEmbedder(table))
    return PublishedNeuroplasticMemory(resources=resources, **kwargs)  # type: ignore[arg-type]


def turn(n: int, text: str, *, session: str = "s1", day: int = 0, speaker: str = "Ann") -> Turn:
    return Turn(f"u:{n}", "u", speaker, text, T0 + timedelta(days=day, minutes=n), session)


def by_turn(results: Sequence[Retrieved]) -> dict[str, float]:
    return {r.source_turn_ids[0]: r.score for r in results}


def ids(results: Sequence[Retrieved]) -> list[str]:
    return [r.source_turn_ids[0] for r in results]


# ----------------------------------------------------------------------------- strengthening and decay


def test_weight_after_n_correct_answers_is_1_05_to_the_n_capped_at_5() -> None:
    table = {"fact": unit(1), "ask": unit(1)}
    m = make(table, associations=False, inhibition=False, consolidation=False)
    m.ingest([turn(0, "fact")], user_id="u", now=T0)
    mid = m.probe("ask", user_id="u", now=FAR, k=1)[0].memory_id
    for _ in range(3):
        m.feedback("q", [mid], True, user_id="u", now=FAR)
    assert m.probe("ask", user_id="u", now=FAR, k=1)[0].score == pytest.approx(1.157625, rel=1e-6)  # 1.05 ** 3
    m.feedback("q", [mid], False, user_id="u", now=FAR)  # a wrong answer strengthens nothing
    assert m.probe("ask", user_id="u", now=FAR, k=1)[0].score == pytest.approx(1.157625, rel=1e-6)
    for _ in range(30):
        m.feedback("q", [mid], True, user_id="u", now=FAR)
    # 1.05 ** 33 = 5.0032 > 5: capped.
    assert m.probe("ask", user_id="u", now=FAR, k=1)[0].score == pytest.approx(5.0, rel=1e-6)
    assert m.report()["strengthened"] == 33


def test_decay_every_10_questions_not_per_tick() -> None:
    table = {"fact": unit(1), "ask": unit(1)}
    m = make(table, associations=False, inhibition=False, consolidation=False)
    m.ingest([turn(0, "fact")], user_id="u", now=T0)
    m.maintain(now=FAR)  # a tick is not a question
    for n in range(9):
        assert m.retrieve("ask", user_id="u", now=FAR, k=1)[0].score == pytest.approx(1.0)
    m.probe("ask", user_id="u", now=FAR, k=1)  # a probe is not a question either
    # The 10th question is ranked with the old weight, then all weights decay.
    assert m.retrieve("ask", user_id="u", now=FAR, k=1)[0].score == pytest.approx(1.0)
    assert m.probe("ask", user_id="u", now=FAR, k=1)[0].score == pytest.approx(0.99, rel=1e-6)
    for _ in range(10):
        m.retrieve("ask", user_id="u", now=FAR, k=1)
    assert m.probe("ask", user_id="u", now=FAR, k=1)[0].score == pytest.approx(0.9801, rel=1e-6)
    assert m.report()["decay_rounds"] == 2 and m.report()["questions"] == 20


def test_decay_composes_with_strengthening_and_floors() -> None:
    table = {"fact": unit(1), "ask": unit(1)}
    m = make(table, associations=False, inhibition=False, consolidation=False)
    m.ingest([turn(0, "fact")], user_id="u", now=T0)
    got = m.retrieve("ask", user_id="u", now=FAR, k=1)
    m.feedback("q", [got[0].memory_id], True, user_id="u", now=FAR)  # 1.05
    for _ in range(9):
        m.retrieve("ask", user_id="u", now=FAR, k=1)
    assert m.probe("ask", user_id="u", now=FAR, k=1)[0].score == pytest.approx(1.05 * 0.99, rel=1e-6)
    m.feedback("q", [got[0].memory_id], True, user_id="u", now=FAR)
    assert m.probe("ask", user_id="u", now=FAR, k=1)[0].score == pytest.approx(1.05 * 0.99 * 1.05, rel=1e-6)
    steep = make(table, associations=False, inhibition=False, consolidation=False, decay=0.5)
    steep.ingest([turn(0, "fact")], user_id="u", now=T0)
    for _ in range(30):
        steep.retrieve("ask", user_id="u", now=FAR, k=1)
    assert steep.probe("ask", user_id="u", now=FAR, k=1)[0].score == pytest.approx(0.125)  # 0.5 ** 3
    for _ in range(10):
        steep.retrieve("ask", user_id="u", now=FAR, k=1)
    assert steep.probe("ask", user_id="u", now=FAR, k=1)[0].score == pytest.approx(0.1)  # 0.0625, floored


@pytest.mark.parametrize(
    ("name", "strengthened", "decayed"),
    [("neuroplastic", True, True), ("neuroplastic-no-ltp", False, False), ("neuroplastic-decay-only", False, True)],
)
def test_ablations_separate_learning_from_ageing(name: str, strengthened: bool, decayed: bool) -> None:
    table = {"fact": unit(1), "ask": unit(1)}
    resources = Resources(embedder_factory=lambda: KeyedEmbedder(table))
    m = build_memory(name, {"gate": "none", "consolidation": False}, resources=resources)
    m.ingest([turn(0, "fact")], user_id="u", now=T0)
    for _ in range(10):
        got = m.retrieve("ask", user_id="u", now=FAR, k=1)
        m.feedback("q", [got[0].memory_id], True, user_id="u", now=FAR)
    want = (1.05**10 if strengthened else 1.0) * (0.99 if decayed else 1.0)
    assert m.probe("ask", user_id="u", now=FAR, k=1)[0].score == pytest.approx(want, rel=1e-6)


def test_consolidation_decays_never_strengthened_memories_once_per_consolidation() -> None:
    table = {"used": unit(1), "idle": unit(0, 1), "ask": unit(1)}
    m = make(table, associations=False, inhibition=False)
    m.ingest([turn(0, "used"), turn(1, "idle")], user_id="u", now=T0)
    got = m.retrieve("ask", user_id="u", now=FAR, k=1)
    m.feedback("q", [got[0].memory_id], True, user_id="u", now=FAR)
    m.maintain(now=FAR)
    m.maintain(now=FAR)  # nothing new since the last pass: no consolidation, no extra decay
    assert by_turn(m.probe("idle", user_id="u", now=FAR, k=2))["u:1"] == pytest.approx(0.95, rel=1e-6)
    m.ingest([turn(2, "fresh news", session="s2")], user_id="u", now=T0)
    m.maintain(now=FAR)
    assert by_turn(m.probe("idle", user_id="u", now=FAR, k=3))["u:1"] == pytest.approx(0.95**2, rel=1e-6)
    assert by_turn(m.probe("ask", user_id="u", now=FAR, k=1))["u:0"] == pytest.approx(1.05, rel=1e-6)
    assert m.report()["consolidations"] == 2


# ----------------------------------------------------------------------------- associations


@pytest.mark.parametrize("associations", [True, False])
def test_link_forms_at_the_third_co_retrieval_right_or_wrong(associations: bool) -> None:
    # The anchor answers the query; six fillers (cosine 0.08) fill the pool of 3 x k = 6; the
    # partner (cosine 0) is outside it and can only come back through a link.
    table = {"anchor": unit(1), "partner": axis(7), "ask": unit(1)}
    table |= {f"filler{n}": axis(n, 0.08) for n in range(1, 7)}
    m = make(table, ltp=False, inhibition=False, consolidation=False, associations=associations)
    fillers = [turn(1 + n, f"filler{n}") for n in range(1, 7)]
    m.ingest([turn(0, "anchor"), turn(1, "partner"), *fillers], user_id="u", now=T0)
    everything = m.probe("ask", user_id="u", now=FAR, k=8)
    pair = [r.memory_id for r in everything if r.source_turn_ids[0] in ("u:0", "u:1")]
    assert len(pair) == 2
    for n in range(2):
        m.feedback(f"q{n}", pair, n == 0, user_id="u", now=FAR)
        assert ids(m.probe("ask", user_id="u", now=FAR, k=2)) == ["u:0", "u:2"], f"linked after {n + 1}"
    m.feedback("q2", pair, False, user_id="u", now=FAR)
    top = m.probe("ask", user_id="u", now=FAR, k=2)
    if associations:
        assert ids(top) == ["u:0", "u:1"] and top[1].score == pytest.approx(0.15)  # 0.05 x 3
        m.feedback("q3", pair, False, user_id="u", now=FAR)
        assert m.probe("ask", user_id="u", now=FAR, k=2)[1].score == pytest.approx(0.2)  # 0.05 x 4
        assert m.report()["links"] == 1
    else:
        assert ids(top) == ["u:0", "u:2"] and m.report()["links"] == 0


# ----------------------------------------------------------------------------- inhibition


def test_inhibition_pass_older_memory_of_another_session_gets_0_7_once() -> None:
    paris, berlin, rome = unit(1, 0.2), unit(1, -0.3), unit(1, 0.05, 0.3)
    table = {"paris": paris, "berlin": berlin, "rome": rome, "where": unit(1, 0.6)}
    assert float(paris @ berlin) > 0.85 and float(berlin @ rome) > 0.85 and float(paris @ rome) > 0.85
    m = make(table, ltp=False, associations=False, consolidation=False)
    m.ingest([turn(0, "I live in Paris", session="s1")], user_id="u", now=T0)
    m.ingest([turn(1, "I live in Berlin", session="s2", day=30)], user_id="u", now=T0)
    cos = {t: float(table["where"] @ v) for t, v in (("u:0", paris), ("u:1", berlin), ("u:2", rome))}
    # The pass runs at maintenance: nothing is inhibited before it.
    assert by_turn(m.probe("where", user_id="u", now=FAR, k=2))["u:0"] == pytest.approx(cos["u:0"], rel=1e-5)
    m.maintain(now=FAR)
    scores = by_turn(m.probe("where", user_id="u", now=FAR, k=2))
    assert scores["u:0"] == pytest.approx(cos["u:0"] * 0.3, rel=1e-5)
    assert scores["u:1"] == pytest.approx(cos["u:1"], rel=1e-5)
    # A third statement revises Berlin; Paris was revised already and stays at 0.7.
    m.ingest([turn(2, "I live in Rome", session="s3", day=60)], user_id="u", now=T0)
    m.maintain(now=FAR)
    scores = by_turn(m.probe("where", user_id="u", now=FAR, k=3))
    assert scores["u:0"] == pytest.approx(cos["u:0"] * 0.3, rel=1e-5)
    assert scores["u:1"] == pytest.approx(cos["u:1"] * 0.3, rel=1e-5)
    assert scores["u:2"] == pytest.approx(cos["u:2"], rel=1e-5)
    assert m.report()["inhibitions"] == 2


@pytest.mark.parametrize(
    ("kwargs", "session", "speaker"),
    [({}, "s1", "Ann"), ({}, "s2", "Ben"), ({"inhibition": False}, "s2", "Ann")],
    ids=["same-session", "other-speaker", "switched-off"],
)
def test_no_inhibition_within_a_session_across_speakers_or_switched_off(
    kwargs: dict[str, object], session: str, speaker: str
) -> None:
    table = {"paris": unit(1, 0.2), "berlin": unit(1, -0.3), "where": unit(1, 0.6)}
    m = make(table, ltp=False, associations=False, consolidation=False, **kwargs)
    m.ingest([turn(0, "Paris", session="s1")], user_id="u", now=T0)
    m.ingest([turn(1, "Berlin", session=session, day=30, speaker=speaker)], user_id="u", now=T0)
    m.maintain(now=FAR)
    assert by_turn(m.probe("where", user_id="u", now=FAR, k=2))["u:0"] == pytest.approx(
        float(table["where"] @ table["paris"]), rel=1e-5
    )
    assert m.report()["inhibitions"] == 0


def test_past_state_cue_relieves_70_percent_on_whole_words_only() -> None:
    table = {"paris": unit(1, 0.2), "berlin": unit(1, -0.3), "where": unit(1, 0.6)}
    m = make(table, ltp=False, associations=False, consolidation=False)
    m.ingest([turn(0, "Paris", session="s1")], user_id="u", now=T0)
    m.ingest([turn(1, "Berlin", session="s2", day=30)], user_id="u", now=T0)
    m.maintain(now=FAR)
    cos = float(table["where"] @ table["paris"])
    # Inhibition 0.7; a past-state cue leaves 30% of it: 0.21.
    for query, kept in (
        ("where I used to live", 0.21),
        ("where did I live originally", 0.21),
        ("where had I lived BEFORE", 0.21),
        ("where have I refused to live", 0.7),
        ("where, beforehand, did I go", 0.7),
        ("where is the older flat", 0.7),
        ("where formerly", 0.7),
    ):
        score = by_turn(m.probe(query, user_id="u", now=FAR, k=2))["u:0"]
        assert score == pytest.approx(cos * (1 - kept), rel=1e-5), query
    assert past_state_cue("What did she use to do? She used to paint.") == "used to"
    assert past_state_cue("She refused to paint") is None and past_state_cue("boldly") is None
    assert past_state_cue("How OLD is the dog?") == "old"
    assert len(PAST_STATE_CUES) == 10


# ----------------------------------------------------------------------------- consolidation


@pytest.mark.parametrize("inhibition", [True, False])
def test_merge_inhibits_the_weaker_near_duplicate_and_deletes_nothing(inhibition: bool) -> None:
    a, b = unit(1, 0.05), unit(1, -0.05)
    table = {"locker": a, "code": b, "other": unit(0, 1), "ask": unit(1)}
    assert float(a @ b) > 0.92
    m = make(table, ltp=True, associations=False, inhibition=inhibition)
    m.ingest([turn(0, "locker is 7731"), turn(1, "other thing"), turn(2, "code is 7731")], user_id="u", now=T0)
    m.maintain(now=FAR)
    assert m.stats().items == 3 and m.report()["merges"] == 1
    cos = float(unit(1) @ a)
    # Equal weights: the older memory wins and the newer one is inhibited by 0.7 (with or without
    # the inhibition mechanism: that switch governs belief revision and the past-state relief).
    scores = by_turn(m.probe("ask", user_id="u", now=FAR, k=3))
    assert scores["u:0"] == pytest.approx(cos * 0.95, rel=1e-5)  # one consolidation: never strengthened
    assert scores["u:2"] == pytest.approx(cos * 0.95 * 0.3, rel=1e-5)
    # Forgetting the winner leaves the loser, still inhibited: nothing was merged into it.
    m.forget(["u:0"], user_id="u", now=FAR)
    left = m.probe("ask", user_id="u", now=FAR, k=3)
    assert ids(left)[0] == "u:2" and left[0].text.endswith("code is 7731")
    assert left[0].score == pytest.approx(cos * 0.95 * 0.3, rel=1e-5)


def test_merge_keeps_the_stronger_memory() -> None:
    a, b = unit(1, 0.05), unit(1, -0.05)
    table = {"locker": a, "code": b, "ask": unit(1)}
    m = make(table, associations=False, inhibition=False)
    m.ingest([turn(0, "locker is 7731"), turn(1, "code is 7731")], user_id="u", now=T0)
    newer = next(r for r in m.probe("ask", user_id="u", now=FAR, k=2) if r.source_turn_ids == ("u:1",))
    m.feedback("q", [newer.memory_id], True, user_id="u", now=FAR)
    m.maintain(now=FAR)
    scores = by_turn(m.probe("ask", user_id="u", now=FAR, k=2))
    cos = float(unit(1) @ a)
    assert scores["u:1"] == pytest.approx(cos * 1.05, rel=1e-5)
    assert scores["u:0"] == pytest.approx(cos * 0.95 * 0.3, rel=1e-5)
    # A second pass does not merge the same pair again.
    m.maintain(now=FAR)
    assert m.report()["merges"] == 1


# ----------------------------------------------------------------------------- the gate, arguments


def test_default_stores_what_the_multisignal_gate_stores() -> None:
    resources = Resources(embedder_factory=lambda: HashEmbedder())
    gate = build_memory("multisignal", resources=resources)
    neuro = build_memory("neuroplastic", resources=resources)
    lines = [
        "I adopted a puppy named Biscuit.", "I adopted a puppy named Biscuit!", "Biscuit likes the park.",
        "Biscuit likes the park a lot.", "We moved to Porto last week.", "The weather is nice.",
        "The weather is nice today.", "I met Ingrid at the conservatory.", "The weather is nice.",
    ]
    turns = [Turn(f"u:{n}", "u", "Ann", text, T0 + timedelta(minutes=n), "s1") for n, text in enumerate(lines)]
    for m in (gate, neuro):
        m.ingest(turns, user_id="u", now=T0)
    assert 0 < neuro.stats().items == gate.stats().items < len(lines)
    want = sorted(r.source_turn_ids[0] for r in gate.probe("weather", user_id="u", now=FAR, k=20))
    assert sorted(r.source_turn_ids[0] for r in neuro.probe("weather", user_id="u", now=FAR, k=20)) == want
    report = neuro.report()  # type: ignore[attr-defined]
    assert report["gate_turns_seen"] == len(lines) and report["gate_turns_stored"] == gate.stats().items
    neuro.forget(["u:0"], user_id="u", now=FAR)
    assert neuro._gate.decision("u:0", user_id="u") is None  # type: ignore[attr-defined]


class CountingEmbedder(HashEmbedder):
    """Counts the texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        return super().encode(texts)


def test_memories_are_the_gates_embedded_once_held_once_and_counted_once() -> None:
    emb = CountingEmbedder()
    neuro = build_memory("neuroplastic", {"gate": "surprise"}, resources=Resources(embedder_factory=lambda: emb))
    lines = [f"line {n % 5} about topic {n % 3}" for n in range(12)] + ["I met Ingrid at the conservatory."]
    turns = [Turn(f"u:{n}", "u", ("Ann", "Bob")[n % 2], x, T0 + timedelta(minutes=n), "s1") for n, x in enumerate(lines)]
    neuro.ingest(turns, user_id="u", now=T0)
    neuro.bulk_load([turn(100, "loaded"), turn(101, "loaded too", speaker="Bob")], user_id="u")
    stored = neuro.report()["gate_turns_stored"] + 2  # type: ignore[attr-defined]  # bulk loads are not reported
    assert 0 < stored - 2 < len(lines)
    assert emb.texts == len(lines) + 2  # every turn embedded once, by the gate; none again for the stored ones
    # One copy of each memory: the stats count it once, and every held vector is a stored memory.
    st = neuro.stats()
    assert st.items == stored and st.vector_bytes == stored * emb.dim * 4
    assert neuro._gate.index.store.count() == stored  # type: ignore[attr-defined]
    # The plasticity state follows the shared memories: forgetting drops it, and the gate's copy with it.
    gone = neuro.probe("loaded", user_id="u", now=FAR, k=1)[0]
    neuro.forget(list(gone.source_turn_ids), user_id="u", now=FAR)
    assert neuro.stats().items == stored - 1
    assert gone.memory_id not in [r.memory_id for r in neuro.probe("loaded", user_id="u", now=FAR, k=50)]
    neuro.maintain(now=FAR)  # the passes run on what is left: one consolidation, nothing strengthened
    assert neuro.report()["mean_weight"] == pytest.approx(0.95)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "args",
    [
        {"gate": "bm25"}, {"decay_every": 0}, {"ltp": "maybe"}, {"decay": 1.5}, {"inhibition_cap": 2},
        {"gate": "none", "gate_args": {"warmup": 1}},
    ],
    ids=["gate", "decay_every", "ltp", "decay", "cap", "gate_args"],
)
def test_bad_arguments_are_user_errors(args: dict[str, object]) -> None:
    with pytest.raises(UserError, match="neuroplastic"):
        build_memory("neuroplastic", args, resources=Resources(embedder_factory=lambda: HashEmbedder()))
