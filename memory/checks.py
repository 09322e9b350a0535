"""Conformance checks every registered memory system must pass.

``iter_checks()`` yields ``(check_id, fn)``; each ``fn(subject)`` builds fresh
systems through ``subject.build()`` (so through the registry, with recorded
name and args), plays a small two-user conversation at them and raises
``AssertionError`` naming what broke, or ``CheckSkipped`` with a reason. The
test suite parametrises registry x checks, so a new system gets every check
for free.

What is checked: an empty system retrieves nothing; nothing created after
``now`` is returned; users never see each other's memories; ``forget``
removes every memory derived from the forgotten turns, merged and
consolidated ones included (by provenance and by text); same inputs and seed
give identical outputs; ``stats()`` agrees with what is held; ``ingest`` does
not change its input; a system rebuilt from its recorded name and args
behaves identically; ``probe`` ranks as ``retrieve`` does and changes nothing
(stats, reports and everything the stream does later stay as on a twin that
was never probed); what ``retrieve``, ``probe`` and ``stats`` return is of
the protocol's types and sizes (``returns_well_formed``).

``check_results`` and ``check_stats`` are the same contract as functions, for
whoever calls a system (the engine, a server): a return value that breaks
it raises ``ContractError``, one line naming the method and what is wrong.
"""

from __future__ import annotations

import copy
import inspect
import json
import math
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from memsim.memory.base import MemoryStats, MemorySystem, Retrieved, Turn
from memsim.memory.inject import receives_gold
from memsim.memory.registry import Resources, SystemSpec, build_memory

__all__ = [
    "CheckSkipped",
    "ContractError",
    "check_results",
    "check_stats",
    "CheckSubject",
    "iter_checks",
    "conversation",
    "QUERIES",
    "FORGET_TURNS",
]


class CheckSkipped(Exception):
    """A check does not apply to a system; the message says why."""


class ContractError(Exception):
    """A system's return value breaks the protocol (wrong type, too many results, a negative count).

    Not a ``UserError``: the system failed, not the user's input; a run marks the system failed with this message.
    """


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_results(got: Any, *, k: int, method: str = "retrieve", now: datetime | None = None,
                  known: Collection[str] | None = None) -> list[Retrieved]:
    """``got`` if it is what ``retrieve``/``probe`` must return: a list of at most ``k`` ``Retrieved``.

    Each result has a string ``memory_id`` (unique in the list), string
    ``text``, a finite ``score``, a timezone-aware ``created_at`` (not after
    ``now`` when given) and ``source_turn_ids`` of strings (among ``known``
    turn ids when given).

    Raises:
        ContractError: one line naming ``method``, the result's index and what is wrong.
    """
    if not isinstance(got, (list, tuple)):
        raise ContractError(f"{method} returned {type(got).__name__} {_shown(got)}, not a list of Retrieved")
    if len(got) > k:
        raise ContractError(f"{method} returned {len(got):,} results for k={k}")
    seen: set[str] = set()
    for i, r in enumerate(got):
        if not isinstance(r, Retrieved):
            raise ContractError(f"{method} result {i} is {type(r).__name__} {_shown(r)}, not a Retrieved")
        if not isinstance(r.memory_id, str) or r.memory_id in seen:
            raise ContractError(f"{method} result {i}: memory_id {_shown(r.memory_id)} is not a string or repeats")
        seen.add(r.memory_id)
        if not isinstance(r.text, str):
            raise ContractError(f"{method} result {i}: text is {type(r.text).__name__}, not a string")
        if isinstance(r.score, bool) or not isinstance(r.score, (int, float)) or not math.isfinite(r.score):
            raise ContractError(f"{method} result {i}: score {_shown(r.score)} is not a finite number")
        if not isinstance(r.created_at, datetime) or r.created_at.tzinfo is None:
            raise ContractError(f"{method} result {i}: created_at {_shown(r.created_at)} is not a timezone-aware datetime")
        if now is not None and r.created_at > now:
            raise ContractError(f"{method} result {i}: created_at {r.created_at.isoformat()} is after now {now.isoformat()}")
        sources = r.source_turn_ids
        if not isinstance(sources, (tuple, list)) or not all(isinstance(t, str) for t in sources):
            raise ContractError(f"{method} result {i}: source_turn_ids {_shown(sources)} is not a sequence of turn ids")
        if known is not None:
            stray = [t for t in sources if t not in known]
            if stray:
                raise ContractError(f"{method} result {i}: source turn {_shown(stray[0])} was never ingested")
    return list(got)


def check_stats(stats: Any, *, method: str = "stats") -> MemoryStats:
    """``stats`` if it is a ``MemoryStats`` of non-negative integers.

    Raises:
        ContractError: one line naming ``method`` and the field.
    """
    if not isinstance(stats, MemoryStats):
        raise ContractError(f"{method} returned {type(stats).__name__} {_shown(stats)}, not a MemoryStats")
    for name in ("items", "vector_bytes", "text_bytes", "metadata_bytes", "llm_calls", "tokens"):
        value = getattr(stats, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ContractError(f"{method} returned {name}={_shown(value)}, not a non-negative integer")
    return stats


@dataclass(frozen=True, slots=True)
class CheckSubject:
    """A system under check: its registered name, args, and how to make run resources."""

    name: str
    """Registered name."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """Constructor args (JSON-serialisable)."""
    make_resources: Callable[[], Resources] = Resources
    """Fresh resources per built system (same seed each time)."""

    def build(self) -> MemorySystem:
        """A fresh system from the registry."""
        return build_memory(self.name, dict(self.args), resources=self.make_resources())


_T0 = datetime(2024, 1, 1, 9, 0, tzinfo=timezone.utc)
_FAR = datetime(2100, 1, 1, tzinfo=timezone.utc)

# (session day offset, [(speaker, text)]) per user. The locker-code lines are
# near-duplicates across sessions so that consolidating systems merge them;
# the check then forgets them.
_SCRIPT: dict[str, list[tuple[int, list[tuple[str, str]]]]] = {
    "u1": [
        (0, [
            ("Alice", "I just adopted a puppy named Biscuit from the shelter."),
            ("Sam", "That is lovely, what breed is Biscuit?"),
            ("Alice", "Biscuit is a beagle mix and loves chasing squirrels."),
            ("Alice", "My gym locker code is 7731, zebra reminder."),
        ]),
        (14, [
            ("Alice", "I started a new job at the Lisbon aquarium last week."),
            ("Sam", "Congratulations! What do you do at the aquarium?"),
            ("Alice", "I care for the octopus tank and feed the sea turtles."),
        ]),
        (40, [
            ("Alice", "My gym locker code is 7731, zebra reminder!"),
            ("Alice", "I moved to Porto in March because the rent was cheaper."),
            ("Sam", "Porto has wonderful bridges and port wine cellars."),
        ]),
        (70, [
            ("Alice", "I live in Porto now and commute by train."),
            ("Alice", "Biscuit learned to fetch the newspaper every morning."),
            ("Sam", "Does Biscuit still chase squirrels in Porto?"),
        ]),
    ],
    "u2": [
        (3, [
            ("Bob", "My violin recital at the conservatory is on Friday."),
            ("Kim", "Which piece are you playing at the recital?"),
            ("Bob", "A Bach partita; my teacher Ingrid says it is ready."),
        ]),
        (33, [
            ("Bob", "I broke my wrist skiing in the Dolomites."),
            ("Bob", "The recital is postponed until my wrist heals."),
        ]),
    ],
}

QUERIES: tuple[str, ...] = (
    "What is the name of Alice's puppy?",
    "Where does Alice work?",
    "Where does Alice live now?",
    "What is the gym locker code?",
    "zebra reminder 7731",
    "What instrument does Bob play?",
    "How did Bob hurt his wrist?",
    "Where did Alice use to live before?",
)
"""Queries the checks ask (about both users, so isolation is tested from both sides)."""

FORGET_TURNS: tuple[str, ...] = ("u1:s0:3", "u1:s2:0", "u1:s1:0")
"""Turns the forget check deletes: both locker-code lines and the job line."""


def conversation() -> dict[str, list[list[Turn]]]:
    """The checks' conversation: per user, sessions of turns (new objects each call).

    Turn ids are ``"<user>:s<session>:<n>"``; each turn carries a plain
    (mutable) ``metadata`` dict so that mutation by ``ingest`` would show.
    """
    out: dict[str, list[list[Turn]]] = {}
    for user, sessions in _SCRIPT.items():
        out[user] = []
        for s, (day, lines) in enumerate(sessions):
            start = _T0 + timedelta(days=day)
            out[user].append([
                Turn(
                    turn_id=f"{user}:s{s}:{n}",
                    user_id=user,
                    speaker=speaker,
                    text=text,
                    created_at=start + timedelta(minutes=n),
                    session_id=f"{user}:s{s}",
                    metadata={"session_index": s, "tags": ["check"]},
                )
                for n, (speaker, text) in enumerate(lines)
            ])
    return out


def _all_turns(conv: Mapping[str, list[list[Turn]]]) -> dict[str, Turn]:
    return {t.turn_id: t for sessions in conv.values() for session in sessions for t in session}


def _ingest_all(system: MemorySystem, conv: Mapping[str, list[list[Turn]]]) -> None:
    # Sessions of both users interleaved in time order, as the engine would deliver them.
    batches = [(session[0].created_at, user, session) for user, sessions in conv.items() for session in sessions]
    for at, user, session in sorted(batches, key=lambda b: (b[0], b[1])):
        system.ingest(session, user_id=user, now=session[-1].created_at)


def _snap(results: Sequence[Retrieved]) -> list[tuple[Any, ...]]:
    return [
        (r.memory_id, r.text, repr(float(r.score)), r.created_at.isoformat(), tuple(r.source_turn_ids))
        for r in results
    ]


def _play(system: MemorySystem) -> list[Any]:
    """Ingest, ask, feed back (three rounds, so links can form), maintain, ask again."""
    _ingest_all(system, conversation())
    return _use(system)


def _use(system: MemorySystem) -> list[Any]:
    """The stream after ingest: ask, feed back, maintain (three rounds), ask again; then stats and report."""
    conv = conversation()
    trace: list[Any] = []
    for rnd in range(3):
        for q_n, query in enumerate(QUERIES):
            for user in sorted(conv):
                got = system.retrieve(query, user_id=user, now=_FAR, k=4)
                trace.append(_snap(got))
                system.feedback(
                    f"q{rnd}:{q_n}", [r.memory_id for r in got], (q_n + rnd) % 2 == 0, user_id=user, now=_FAR
                )
        system.maintain(now=_FAR)
    for query in QUERIES:
        for user in sorted(conv):
            trace.append(_snap(system.retrieve(query, user_id=user, now=_FAR, k=6)))
    trace.extend(_state(system))
    return trace


def _state(system: MemorySystem) -> list[str]:
    """What a system says about itself: ``stats()`` and, when it has one, ``report()``."""
    out = [repr(system.stats())]
    report = getattr(system, "report", None)
    if callable(report):
        out.append(json.dumps(report(), sort_keys=True, default=repr))
    return out


# ----------------------------------------------------------------------------- checks


def check_empty_retrieve(subject: CheckSubject) -> None:
    """A fresh system (and one only maintained) retrieves nothing."""
    system = subject.build()
    for query in QUERIES:
        got = system.retrieve(query, user_id="u1", now=_FAR, k=5)
        assert got == [], f"fresh system returned {len(got)} memories for {query!r}"
    system.maintain(now=_FAR)
    got = system.retrieve(QUERIES[0], user_id="u1", now=_FAR, k=5)
    assert got == [], "system with nothing ingested returned memories after maintain"


def check_no_future_memories(subject: CheckSubject) -> None:
    """Nothing created after ``now`` comes back, by date and by provenance."""
    system = subject.build()
    conv = conversation()
    turns = _all_turns(conv)
    _ingest_all(system, conv)
    system.maintain(now=_FAR)
    # Before any turn, and one minute into each later session of u1 (part of it said, part not).
    cutoffs = [_T0 - timedelta(days=1)] + [s[0].created_at + timedelta(minutes=1) for s in conv["u1"][1:]]
    for now in cutoffs:
        for query in QUERIES:
            got = system.retrieve(query, user_id="u1", now=now, k=50)
            for r in got:
                assert r.created_at <= now, f"{r.memory_id} created {r.created_at} returned at now={now}"
                late = [t for t in r.source_turn_ids if turns[t].created_at > now]
                assert not late, f"{r.memory_id} derives from turns {late} said after now={now}"
        if now < _T0:
            assert not system.retrieve(QUERIES[0], user_id="u1", now=now, k=50), "returned memories before any turn"


def check_users_isolated(subject: CheckSubject) -> None:
    """A user's retrieval only ever contains that user's turns; an unknown user gets nothing."""
    system = subject.build()
    conv = conversation()
    _ingest_all(system, conv)
    owner = {t.turn_id: t.user_id for t in _all_turns(conv).values()}
    for query in QUERIES:
        for user in conv:
            got = system.retrieve(query, user_id=user, now=_FAR, k=50)
            # A memory id of the other user fed back must not leak or crash.
            other = "u2" if user == "u1" else "u1"
            foreign = [r.memory_id for r in system.retrieve(query, user_id=other, now=_FAR, k=3)]
            system.feedback("x", foreign, True, user_id=user, now=_FAR)
            for r in got:
                wrong = [t for t in r.source_turn_ids if owner.get(t) != user]
                assert not wrong, f"retrieval for {user} returned {r.memory_id} derived from {wrong}"
        assert system.retrieve(query, user_id="nobody", now=_FAR, k=10) == [], "unknown user got memories"


def check_forget_removes_derived(subject: CheckSubject) -> None:
    """After ``forget`` nothing derived from the forgotten turns is retrieved, even after maintenance."""
    system = subject.build()
    _play(system)
    conv = conversation()
    turns = _all_turns(conv)
    before = system.stats().items
    system.forget(list(FORGET_TURNS), user_id="u1", now=_FAR)
    gone_texts = [turns[t].text for t in FORGET_TURNS]

    def verify(when: str) -> None:
        for query in (*QUERIES, *gone_texts):
            for r in system.retrieve(query, user_id="u1", now=_FAR, k=100):
                hit = set(FORGET_TURNS).intersection(r.source_turn_ids)
                assert not hit, f"{when}: {r.memory_id} still derives from forgotten {sorted(hit)}"
                for text in gone_texts:
                    assert text not in r.text, f"{when}: forgotten text {text!r} still in {r.memory_id}"

    verify("right after forget")
    assert system.stats().items < before, "forget removed nothing from stats().items"
    for _ in range(2):
        for query in QUERIES:
            got = system.retrieve(query, user_id="u1", now=_FAR, k=4)
            system.feedback("after", [r.memory_id for r in got], True, user_id="u1", now=_FAR)
        system.maintain(now=_FAR)
    verify("after feedback and maintain")
    assert system.retrieve("violin recital", user_id="u2", now=_FAR, k=5), "forget on u1 emptied u2"


def check_deterministic(subject: CheckSubject) -> None:
    """Two systems built alike, fed alike, give identical retrievals, stats and reports."""
    a, b = _play(subject.build()), _play(subject.build())
    for n, (x, y) in enumerate(zip(a, b, strict=True)):
        assert x == y, f"step {n} differs between two identical runs:\n{x}\n{y}"


def check_stats_consistent(subject: CheckSubject) -> None:
    """``stats()`` is zero when empty, covers what can be retrieved, and returns to zero when all is forgotten."""
    system = subject.build()
    empty = system.stats()
    assert empty.items == 0 and empty.bytes == 0, f"fresh system reports {empty}"
    conv = conversation()
    items_seen = 0
    for user, sessions in conv.items():
        for session in sessions:
            system.ingest(session, user_id=user, now=session[-1].created_at)
            items = system.stats().items
            assert items >= items_seen, f"ingest lowered stats().items from {items_seen} to {items}"
            items_seen = items
    stats = system.stats()
    assert stats.items >= 1, "nothing stored after ingesting the conversation"
    assert stats.text_bytes > 0, f"{stats.items} items but no text bytes"
    found: dict[str, str] = {}
    for query in QUERIES:
        for user in conv:
            for r in system.retrieve(query, user_id=user, now=_FAR, k=1000):
                found[f"{user}\x1f{r.memory_id}"] = r.text
    assert len(found) <= stats.items, f"{len(found)} distinct memories retrieved, stats says {stats.items}"
    shown = sum(len(t.encode("utf-8")) for t in found.values())
    assert shown <= stats.text_bytes, f"retrieved {shown} text bytes, stats says {stats.text_bytes}"
    for user, sessions in conv.items():
        system.forget([t.turn_id for s in sessions for t in s], user_id=user, now=_FAR)
    system.maintain(now=_FAR)
    after = system.stats()
    assert after.items == 0 and after.text_bytes == 0 and after.vector_bytes == 0, (
        f"everything forgotten, yet stats says {after}"
    )
    for query in QUERIES:
        assert system.retrieve(query, user_id="u1", now=_FAR, k=5) == [], "memories left after forgetting all"


def check_ingest_does_not_mutate(subject: CheckSubject) -> None:
    """``ingest`` leaves the turn list, the turns and their metadata as they were."""
    system = subject.build()
    conv = conversation()
    for user, sessions in conv.items():
        for session in sessions:
            before = copy.deepcopy(session)
            ids = [id(t) for t in session]
            system.ingest(session, user_id=user, now=session[-1].created_at)
            assert [id(t) for t in session] == ids, "ingest reordered or replaced the turns it was given"
            assert session == before, "ingest changed the turns or their metadata"
    got = system.retrieve(QUERIES[0], user_id="u1", now=_FAR, k=3)
    ids_given = [r.memory_id for r in got]
    given = list(ids_given)
    system.feedback("q", ids_given, True, user_id="u1", now=_FAR)
    assert ids_given == given, "feedback changed the id list it was given"


def check_rebuilt_from_spec(subject: CheckSubject) -> None:
    """A system rebuilt from its recorded spec (JSON round trip) behaves identically."""
    spec = SystemSpec(name=subject.name, args=dict(subject.args))
    recorded = json.loads(json.dumps(spec.to_json()))
    original = subject.build()
    rebuilt = build_memory(recorded["name"], recorded["args"], resources=subject.make_resources())
    assert type(rebuilt) is type(original), f"rebuilt a {type(rebuilt).__name__}, not {type(original).__name__}"
    for pname, param in inspect.signature(type(original).__init__).parameters.items():
        if pname == "self" or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        assert param.kind is param.KEYWORD_ONLY, f"constructor argument {pname!r} is not keyword-only"
        if param.default is not param.empty:
            assert not isinstance(param.default, (list, dict, set)), f"argument {pname!r} has a mutable default"
            try:
                json.dumps(param.default)
            except TypeError:
                raise AssertionError(f"default of argument {pname!r} is not JSON-serialisable") from None
    a, b = _play(original), _play(rebuilt)
    assert a == b, "the rebuilt system behaves differently from the original"


_MID = _T0 + timedelta(days=20)
"""A moment in the middle of the conversation (u1 has said two sessions, u2 one)."""


def _require_probe(system: MemorySystem) -> None:
    assert callable(getattr(system, "probe", None)), (
        f"{type(system).__name__} has no probe(): measuring it would have to call retrieve"
    )


def _probe_burst(system: MemorySystem) -> None:
    """Probe every query for both users and a stranger, late and mid-history, short and long lists."""
    for query in QUERIES:
        for user in ("u1", "u2", "nobody"):
            for now in (_FAR, _MID):
                for k in (4, 50):
                    system.probe(query, user_id=user, now=now, k=k)


def check_probe_changes_nothing(subject: CheckSubject) -> None:
    """Probes, however many and between whatever feedback and maintenance, change nothing.

    One system is probed between the steps of a stream, its twin (built
    alike) never is; both get the same stream. ``stats()`` and ``report()``
    must not move under probes, every ``retrieve`` must match the twin's, and
    so must a whole later stream of retrieve, feedback and maintain. Feedback
    that names what only a probe returned reaches both, so a system that took
    a probe for a served question would learn from it and drift. Instruments
    that receive gold get the oracle call before each question, so a probe in
    between that used it up or acted on it would show.
    """
    probed, twin = subject.build(), subject.build()
    _require_probe(probed)
    conv = conversation()
    gold = receives_gold(subject.name, probed)
    for system in (probed, twin):
        _ingest_all(system, conv)

    def burst(when: str) -> None:
        before = _state(probed)
        _probe_burst(probed)
        after = _state(probed)
        assert after == before, f"{when}: probes changed what the system reports:\n{before}\n{after}"
        twin_state = _state(twin)
        assert after == twin_state, f"{when}: the probed system reports otherwise than its twin:\n{after}\n{twin_state}"

    burst("after ingest")
    for rnd in range(2):
        for q_n, query in enumerate(QUERIES):
            for user in sorted(conv):
                qid = f"p{rnd}:{q_n}"
                if gold:
                    evidence = tuple(t.turn_id for session in conv[user] for t in session)
                    for system in (probed, twin):
                        system.oracle(qid, evidence, user_id=user, t_days=1e6)  # type: ignore[attr-defined]
                # A list no retrieve serves (k=3 against the stream's 4), fed back below.
                only_probed = [r.memory_id for r in probed.probe(query, user_id=user, now=_FAR, k=3)]
                probed.probe(query, user_id=user, now=_MID, k=4)
                got = [_snap(system.retrieve(query, user_id=user, now=_FAR, k=4)) for system in (probed, twin)]
                assert got[0] == got[1], (
                    f"round {rnd}, {query!r} for {user}: retrieve after probes differs from the unprobed twin:\n"
                    f"{got[0]}\n{got[1]}"
                )
                served = [row[0] for row in got[0]]
                for system in (probed, twin):
                    system.feedback(qid, served, (q_n + rnd) % 2 == 0, user_id=user, now=_FAR)
                    system.feedback(f"{qid}:probe", only_probed, True, user_id=user, now=_FAR)
        burst(f"round {rnd}, before maintain")
        for system in (probed, twin):
            system.maintain(now=_FAR)
        burst(f"round {rnd}, after maintain")
    later, unprobed = _use(probed), _use(twin)
    for n, (x, y) in enumerate(zip(later, unprobed, strict=True)):
        assert x == y, f"step {n} of the later stream differs from the unprobed twin:\n{x}\n{y}"


def check_probe_matches_retrieve(subject: CheckSubject) -> None:
    """``probe`` gives what ``retrieve`` gives at the same moment on a twin: ids, order and scores.

    Checked on an empty system, then at every step of a stream that learns
    (feedback, maintenance), at several moments and list lengths. Both
    systems also retrieve each time, so that they stay alike.
    """
    probed, twin = subject.build(), subject.build()
    _require_probe(probed)
    conv = conversation()

    def compare(query: str, user: str, now: datetime, k: int, when: str) -> list[str]:
        seen = _snap(probed.probe(query, user_id=user, now=now, k=k))
        want = _snap(twin.retrieve(query, user_id=user, now=now, k=k))
        assert seen == want, f"{when}: probe({query!r}, {user}, k={k}, now={now}) is not retrieve's:\n{seen}\n{want}"
        mine = _snap(probed.retrieve(query, user_id=user, now=now, k=k))
        assert mine == want, f"{when}: retrieve after a probe differs from the twin's:\n{mine}\n{want}"
        return [row[0] for row in want]

    compare(QUERIES[0], "u1", _FAR, 4, "empty system")
    for system in (probed, twin):
        _ingest_all(system, conv)
    for rnd in range(3):
        for q_n, query in enumerate(QUERIES):
            for user in (*sorted(conv), "nobody"):
                when = f"round {rnd}"
                compare(query, user, _MID, 2, when)
                compare(query, user, _T0 - timedelta(days=1), 4, when)
                served = compare(query, user, _FAR, 4, when)
                for system in (probed, twin):
                    system.feedback(f"m{rnd}:{q_n}", served, (q_n + rnd) % 2 == 0, user_id=user, now=_FAR)
        for system in (probed, twin):
            system.maintain(now=_FAR)


def check_returns_well_formed(subject: CheckSubject) -> None:
    """``retrieve``, ``probe`` and ``stats`` return the protocol's types: at most k results, known sources, counts >= 0."""
    system = subject.build()
    check_stats(system.stats(), method="stats (empty)")
    conv = conversation()
    _ingest_all(system, conv)
    known = set(_all_turns(conv))
    check_stats(system.stats())
    for query in QUERIES:
        for user in conv:
            for k in (1, 3):
                try:
                    check_results(system.retrieve(query, user_id=user, now=_FAR, k=k), k=k, method="retrieve",
                                  now=_FAR, known=known)
                    probe = getattr(system, "probe", None)
                    if callable(probe):
                        check_results(probe(query, user_id=user, now=_FAR, k=k), k=k, method="probe", now=_FAR,
                                      known=known)
                except ContractError as exc:
                    raise AssertionError(str(exc)) from None


_CHECKS: tuple[tuple[str, Callable[[CheckSubject], None]], ...] = (
    ("empty_retrieve_is_empty", check_empty_retrieve),
    ("no_future_memories", check_no_future_memories),
    ("users_isolated", check_users_isolated),
    ("forget_removes_derived", check_forget_removes_derived),
    ("deterministic", check_deterministic),
    ("stats_consistent", check_stats_consistent),
    ("ingest_does_not_mutate", check_ingest_does_not_mutate),
    ("rebuilt_from_spec", check_rebuilt_from_spec),
    ("probe_changes_nothing", check_probe_changes_nothing),
    ("probe_matches_retrieve", check_probe_matches_retrieve),
    ("returns_well_formed", check_returns_well_formed),
)


def iter_checks() -> Iterator[tuple[str, Callable[[CheckSubject], None]]]:
    """Every conformance check as ``(check_id, fn)``."""
    yield from _CHECKS

