"""What each arm of a run is and what it is told: the system under test, the engine's settings, feedback doses.

A system is told its channel's verdict (``verdict_of``); a twin nothing; an
``always_false`` / ``always_true`` arm a constant bit; a placebo the bits its
system was told, permuted within the same user and week (``placebo_doses``).
Under the ``correction`` channel a user restates a fact after a wrong answer
(``restatement``, in one of ``CORRECTION_FRAMES``). The harness
(``memsim.sim.engine``) plays these rules.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from memsim.core.streams import streams
from memsim.memory.base import MemorySystem
from memsim.memory.inject import receives_gold

__all__ = ["FEEDBACK_MODES", "WEEK_S", "CORRECTION_FRAMES", "Dose", "week_of", "verdict_of", "restatement",
           "placebo_doses", "SystemUnderTest", "EngineConfig"]

FEEDBACK_MODES = ("given", "withheld", "shuffled", "false", "true")
"""What an arm is told: its channel's bit (the system), nothing (its twin), its system's bits permuted within
user and week (its placebo), always False, always True (its constant arms)."""


WEEK_S = 7 * 86400.0
"""The placebo's matching window: bits are permuted within the same user and the same simulated week."""


CORRECTION_FRAMES: tuple[str, ...] = (
    'To correct you: the answer to "{question}" is {answer}.',
    'That is not right. If I ask "{question}", the answer is {answer}.',
    'Let me set that straight: {answer}. That is what "{question}" should get.',
    'For the record, about "{question}": {answer}.',
    'No. "{question}" The answer is {answer}.',
)
"""How a user restates a fact after a wrong answer (``correction``): the question and its gold answer, never the
text of a stored turn. ``{question}`` is the question without its end mark, ``{answer}`` the gold answer."""


Dose = tuple[bool | None, str | None]
"""One feedback decision of a system: the bit it was told (None: nothing) and, under ``implicit``, the kind of
reaction that carried it (``reask``, ``complain``, ``thank``; ``silent`` for none)."""


def week_of(when: datetime, start: datetime) -> int:
    """The simulated week ``when`` falls in, counted from the run's start (week 0 is its first 7 days)."""
    return int((when - start).total_seconds() // WEEK_S)


def verdict_of(row: Mapping[str, Any], *, channel: str, metric: str, judge_keys: Sequence[str]) -> bool | None:
    """Whether a question was served well, as the channel knows it; None when it is not scored.

    ``answer`` reads the first judge; ``implicit`` too when a reader ran (the user knows the
    answer they got), else the headline metric; every other channel reads the headline metric.
    """
    if row.get("error") is not None:
        return None
    judged = bool(judge_keys) and channel.startswith(("answer", "implicit"))
    if judged and row.get("unreadable_" + judge_keys[0].removeprefix("answer_")):
        return None  # the judge said nothing readable: scored wrong, but telling the system so would be made up
    value = row.get(judge_keys[0] if judged else metric)
    if value is None or math.isnan(value):
        return None
    return bool(value >= (0.5 if judged else 1.0))


def restatement(question: str, answer: str, rng: np.random.Generator) -> str:
    """A user's restatement of a fact: the question and its answer in a frame drawn by ``rng``."""
    frame = CORRECTION_FRAMES[int(rng.integers(len(CORRECTION_FRAMES)))]
    return frame.format(question=question.strip().rstrip("?.! "), answer=answer.strip().rstrip(".! "))


def placebo_doses(
    rows: Iterable[Mapping[str, Any]], systems: Collection[str], config: EngineConfig, judge_keys: Sequence[str] = ()
) -> dict[tuple[str, str, int], list[Dose]]:
    """The doses each placebo gets: its system's told bits, permuted within the same user and week.

    Args:
        rows: the systems' probe rows in the order they were recorded (the order of their feedback decisions).
        systems: labels of the systems whose placebos are played.
        config: the run's engine settings (channel, metric, start, seed).
        judge_keys: the run's judge columns (the channel's verdict may read the first).

    Returns:
        ``(system label, user id, week) -> doses``: the placebo's n-th scored question of that user
        and week gets the n-th. Each window's permutation comes from its own named stream of the
        run's seed (``placebo:<label>:<user>:<week>``), so it does not depend on the order of windows.
    """
    wanted = set(systems)
    got: dict[tuple[str, str, int], list[Dose]] = {}
    for row in rows:
        label = row.get("system")
        if label not in wanted:
            continue
        if verdict_of(row, channel=config.feedback_from, metric=config.metric, judge_keys=judge_keys) is None:
            continue  # no feedback decision was made (unscored): nothing to match
        told = row.get("told")
        key = (str(label), str(row["user_id"]), week_of(row["time"], config.start))
        got.setdefault(key, []).append((None if told is None else bool(told), row.get("reaction")))
    named = streams(config.seed)
    out: dict[tuple[str, str, int], list[Dose]] = {}
    for key, doses in got.items():
        label, user, week = key
        order = named[f"placebo:{label}:{user}:{week}"].permutation(len(doses))
        out[key] = [doses[int(i)] for i in order]
    return out


@dataclass(slots=True)
class SystemUnderTest:
    """A built system, its registered name and label, and whether it has failed."""

    name: str
    """Registered name (decides whether it is an instrument)."""
    label: str
    """The system's key in rows and tables."""
    system: MemorySystem
    failed: str | None = None
    """The error that stopped it, if any; a failed system receives no more events."""
    feedback: str = "given"
    """``given``; ``withheld`` (a twin: the same system, told nothing); ``shuffled`` (a placebo: its system's
    bits permuted within user and week); ``false`` / ``true`` (told only that bit). See ``FEEDBACK_MODES``."""
    twin_of: str | None = None
    """For a twin, the label of the system it is the twin of."""

    @property
    def receives_gold(self) -> bool:
        """Whether this is an instrument that gets gold evidence (``memsim.memory.inject.receives_gold``)."""
        return receives_gold(self.name, self.system)


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """How the harness scores and when it gives feedback."""

    start: datetime
    """Simulated time zero."""
    k: int = 10
    """Memories a reader sees."""
    ks: tuple[int, ...] = (10,)
    """Cut-offs scored."""
    fetch_k: int = 10
    """Memories fetched per question (>= k; cut-offs above it are scored on what came back)."""
    metric: str = "recall_all@10"
    """The headline column; with ``feedback_from = "evidence"`` a question is correct when it is 1."""
    feedback_delay_s: float = 3600.0
    """Seconds between a question and its feedback."""
    feedback_from: str = "evidence"
    """The channel (``memsim.sim.spec.FEEDBACK_CHANNELS``): ``evidence`` (the oracle bit: the headline metric is 1),
    ``answer`` (first judge >= 0.5), ``noisy:P`` (the oracle bit flipped with probability P), ``none``,
    ``correction`` (no feedback call: after a wrong answer the user restates the fact in their next session),
    ``implicit`` / ``implicit:P`` (the user reacts in a turn of their own; ``memsim.sim.implicit``)."""
    maintenance_every_s: float = 86400.0
    """Seconds between maintenance ticks (0 = none)."""
    seed: int = 0
    """Seed of the feedback noise, restatement frames and placebo permutations (named streams per system)."""
