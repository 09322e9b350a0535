"""How the harness tells each arm about its answers: doses, restatements, reactions and feedback calls.

``FeedbackRules`` is mixed into ``memsim.sim.engine.Harness``; its methods read
and write the harness's state (its settings, doses, queues and named random
streams). The rules themselves (what each arm is told) are in ``memsim.sim.arms``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memsim.core.streams import labelled
from memsim.memory.base import Turn, render_turn
from memsim.sim.arms import Dose, SystemUnderTest, restatement, verdict_of, week_of
from memsim.sim.events import Feedback, Question
from memsim.sim.implicit import read_reaction

__all__ = ["FeedbackRules"]


class FeedbackRules:
    """The harness's feedback: what an arm is told about a question, and how it is told (mixed into ``Harness``)."""

    # The harness's state these rules use (declared on ``Harness``).
    config: Any
    doses: Mapping[tuple[str, str, int], Sequence[Dose]]
    _dosed: dict[tuple[str, str, int], int]
    beyond_dose: dict[str, int]
    _threads: dict[str, str]
    _rngs: dict[str, np.random.Generator]

    def _dose(self, sut: SystemUnderTest, q: Question, verdict: bool) -> Dose:
        """What the arm's channel carries for a scored question: (bit or None, implicit reaction kind or None)."""
        if sut.feedback == "shuffled":
            base = sut.twin_of or sut.label
            week = week_of(q.time, self.config.start)
            doses = self.doses.get((base, q.user_id, week), ())
            key = (sut.label, q.user_id, week)
            n = self._dosed.get(key, 0)
            self._dosed[key] = n + 1
            if n >= len(doses):
                self.beyond_dose[sut.label] = self.beyond_dose.get(sut.label, 0) + 1
                return None, None
            return doses[n]
        if sut.feedback in ("false", "true"):
            return sut.feedback == "true", None
        channel = self.config.feedback_from
        if channel.startswith("noisy:") and self._rng(sut.label).random() < float(channel.split(":", 1)[1]):
            verdict = not verdict
        return verdict, None

    def _thread(self, q: Question) -> str:
        """Id of the first asking of a question that is asked again (itself otherwise)."""
        root = self._threads.get(q.reask_of, q.reask_of) if q.reask_of else q.question_id
        self._threads[q.question_id] = root
        return root

    def _rng(self, label: str) -> np.random.Generator:
        """One named stream per system label, so adding a system leaves the others' draws alone."""
        rng = self._rngs.get(label)
        if rng is None:
            rng = self._rngs[label] = labelled(self.config.seed, label)
        return rng

    def _fresh_id(self, sut: SystemUnderTest) -> str:
        """An opaque id for a turn the engine writes, drawn from this system's own id stream.

        It is derived from nothing the turn is about, so it cannot name the turn a restatement restates.
        """
        return f"u-{self._rng(f'ids:{sut.label}').bytes(8).hex()}"

    def _restate(self, sut: SystemUnderTest, q: Question) -> list[str]:
        """Queue a restated fact for this arm's next session of the user; the ids of the questions restated.

        The system restates the question's own fact. Every other arm (placebo, always False)
        restates another fact of the same user (``_other_fact``): a correction it gets says
        nothing about the question it follows, as its bit says nothing about its answer. When
        the user has no other fact yet, the correction is owed and said as soon as one is asked
        about (``_pay_owed``), so the arm gets as many corrections as its bits say.
        """
        fact = q if sut.feedback == "given" else self._other_fact(sut, q)
        if fact is None:
            self._owed.setdefault((sut.label, q.user_id), []).append(q)
            return []
        self._queue(sut, q.user_id, fact)
        return [fact.question_id]

    def _pay_owed(self, sut: SystemUnderTest, q: Question) -> list[str]:
        """Queue the corrections this arm owes ``q``'s user, now that ``q`` is asked; the ids of the questions restated.

        An owed correction states a fact other than its own question's and other than ``q``'s.
        """
        owed = self._owed.get((sut.label, q.user_id))
        out: list[str] = []
        while owed:
            fact = self._other_fact(sut, owed[0], also=q)
            if fact is None:
                break
            self._queue(sut, q.user_id, fact)
            out.append(fact.question_id)
            owed.pop(0)
        return out

    def _queue(self, sut: SystemUnderTest, user_id: str, fact: Question) -> None:
        """Queue a restatement of ``fact`` (its question and answer, in a frame) for the arm's next session."""
        restated_id = self._fresh_id(sut)
        text = restatement(fact.text, fact.gold, self._rng(f"restate:{sut.label}"))
        self._restates[restated_id] = tuple(fact.evidence)
        for tid in fact.evidence:
            self._restated.setdefault((sut.label, tid), set()).add(restated_id)
        # A new utterance of the user's, stated from the question and its answer: no stored turn's text,
        # id or metadata comes along. Its time and session are those of the session that will carry it.
        self._corrections.setdefault((sut.label, user_id), []).append(
            Turn(restated_id, user_id, "user", text, self.now(), restated_id))

    def owed(self) -> dict[str, int]:
        """label -> corrections still owed at the end (their users never asked about another fact)."""
        out: dict[str, int] = {}
        for (label, _), qs in self._owed.items():
            if qs:
                out[label] = out.get(label, 0) + len(qs)
        return out

    def _other_fact(self, sut: SystemUnderTest, q: Question, *, also: Question | None = None) -> Question | None:
        """A fact of the user's other than ``q``'s, drawn by the arm's stream; None when there is none yet.

        Drawn from the questions the user has asked so far (a fact not yet asked about would tell
        the arm a future answer), leaving out ``q``'s thread (and ``also``'s), any question sharing
        their evidence or answer, excluded questions, and facts the user has since superseded or
        asked to forget.
        """
        avoid = [q] if also is None else [q, also]
        own = {tid for a in avoid for tid in a.evidence}
        golds = {a.gold for a in avoid}
        threads = {self._threads.get(a.question_id, a.question_id) for a in avoid}
        stale = self._superseded.get(q.user_id, set()) | self._gone.get(q.user_id, set())
        seen: set[str] = set()
        pool: list[Question] = []
        for other, other_thread in self._asked.get(q.user_id, ()):
            if other_thread in threads or other_thread in seen or other.excluded is not None or not other.evidence:
                continue
            if own.intersection(other.evidence) or stale.intersection(other.evidence) or other.gold in golds:
                continue
            seen.add(other_thread)
            pool.append(other)
        if not pool:
            return None
        return pool[int(self._rng(f"facts:{sut.label}").integers(len(pool)))]

    def react_now(self, sut: SystemUnderTest, q: Question, retrieved: Sequence[str], text: str) -> None:
        """Ingest the user's reaction to an answer as a turn of theirs, then tell the system what the rule reads in it."""
        if sut.failed is not None:
            return
        now = self.now()
        turn_id = self._fresh_id(sut)
        turn = Turn(turn_id, q.user_id, "user", text, now, turn_id)
        self.turn_owner[turn_id] = q.user_id
        self.turn_text[turn_id] = text
        self._prepare([render_turn(turn)])
        try:
            sut.system.ingest((turn,), user_id=q.user_id, now=now)
        except Exception as exc:
            self._fail(sut, "ingest", exc)
            return
        told = read_reaction(text)
        if told is not None:
            self.deliver_feedback(sut, Feedback(q.question_id, q.user_id, now, told), retrieved)

    def _verdict(self, row: Mapping[str, Any]) -> bool | None:
        """Whether the question was served well, as the channel knows it (``verdict_of``); None when it is not scored."""
        return verdict_of(row, channel=self.config.feedback_from, metric=self.config.metric, judge_keys=self.judge_keys)

    def deliver_feedback(self, sut: SystemUnderTest, fb: Feedback, retrieved: Sequence[str]) -> None:
        """Hand a question's correctness signal to one system."""
        if sut.failed is not None:
            return
        try:
            sut.system.feedback(fb.question_id, list(retrieved), fb.correct, user_id=fb.user_id, now=fb.time)
        except Exception as exc:
            self._fail(sut, "feedback", exc)
