"""LoCoMo conversations replayed on their real calendar, questions interleaved.

Each LoCoMo conversation is one user: both speakers' turns are that user's
history (the memory serves the pair). Sessions arrive at their real
``session_N_date_time`` and are built exactly as the static protocol builds
them (``memsim.static_benchmarks.locomo.locomo_episodes``): the same turn ids
(``"<sample_id>:<dia_id>"``), the same text, ``created_at`` = the session's
time and ``metadata["date_text"]`` = the session's date string, so a memory
renders the same text in both protocols.

Each question is asked at a time chosen by ``question_time``:

- ``after_evidence``: shortly after the last session that holds its evidence,
  ``U(min_delay_hours, max_delay_hours)`` later, but before the
  conversation's next session (the upper bound shrinks to the gap when the
  next session comes sooner; LoCoMo's gaps are all longer than a day). The
  question is asked while the conversation is still on that topic, and later
  sessions bring the distractors a memory has to live with.
- ``uniform``: uniformly between ``min_delay_hours`` after its last evidence
  session and the conversation's end (``QUESTION_DELAY`` after its last
  session).
- ``end``: every question at the conversation's end, as the static protocol
  asks them. Run through the engine, the naive store then scores exactly as
  in the static protocol: the control of the longitudinal runs.

With the first two policies no question precedes its evidence. Category-5
(adversarial) questions are left out unless ``include_adversarial``; they then
keep the file's evidence (the turns the adversarial answer points at) and
kind ``adversarial``. Questions with no usable evidence id after cleaning are
left out and counted (``meta["excluded"]``). A share ``question_fraction`` of
the remaining questions is kept (the question-rate knob), drawn per
conversation.

Re-asks: each kept question is asked again with probability ``reask_rate``,
``U(reask_min_days, reask_max_days)`` after its first asking, verbatim or
(with probability ``paraphrase_rate``) in one of ``PARAPHRASES``: wrappers
such as "Remind me: ..." that keep the meaning and the gold fields. A re-ask
has its own id (``"<question_id>:r1"``), ``reask_of`` = the first asking and
``topic`` = the first asking's id, so a system that learned from answering it
once can show it.

Same generator state, same stream.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from memsim.scenarios.base import FileScenario, ScenarioStream
from memsim.core.errors import UserError
from memsim.sim.events import Episode, Event, Question, Session, sort_events
from memsim.static_benchmarks.data import fetch_hint, locate, resolve_given
from memsim.static_benchmarks.locomo import QUESTION_DELAY, LocomoDataset, load_locomo, locomo_episodes
from memsim.core.streams import spawn

__all__ = [
    "LocomoStreamConfig",
    "LocomoStreamScenario",
    "PARAPHRASES",
    "default_locomo_path",
    "paraphrase",
]

PARAPHRASES: tuple[str, ...] = (
    "Remind me: {q}",
    "Sorry, asking again: {q}",
    "I asked this before, but {lq}",
    "Can you remind me, {lq}",
    "{q} I forgot what we said.",
    "Quick check, {lq}",
)
"""Meaning-preserving rewrites of a question (``{q}`` as asked, ``{lq}`` with a lowered question word)."""

_QUESTION_WORDS = frozenset(
    "what when where who whom whose which why how did do does is are was were would could can has have had "
    "should will in on at according".split()
)
_HOUR = 3600.0
_DAY = 86400.0


def default_locomo_path() -> Path:
    """``$MEMSIM_LOCOMO``, else the fetched copy, else ``../shared/data/locomo/locomo10.json`` next to the repository."""
    return locate("locomo") or Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / "locomo10.json"


def paraphrase(question: str, template: str) -> str:
    """``question`` rewritten with one of ``PARAPHRASES``.

    The first word is lowered (for ``{lq}``) only when it is a question word,
    so a question that opens with a name keeps its capital.
    """
    q = question.strip()
    first = q.split(" ", 1)[0]
    lq = q[0].lower() + q[1:] if first.lower() in _QUESTION_WORDS else q
    return template.format(q=q, lq=lq)


class LocomoStreamConfig(BaseModel):
    """Arguments of the ``locomo_stream`` scenario (validated; unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: str = Field("", description="locomo10.json path (empty: $MEMSIM_LOCOMO or ../shared/data/locomo/)")
    conversations: tuple[str, ...] = Field((), description="sample ids to replay (empty: all)")
    limit_conversations: int | None = Field(None, ge=1, description="keep only the first N conversations")
    question_time: Literal["after_evidence", "uniform", "end"] = Field(
        "after_evidence", description="when a question is asked relative to its evidence"
    )
    min_delay_hours: float = Field(1.0, ge=0, description="earliest question time after its last evidence session")
    max_delay_hours: float = Field(48.0, gt=0, description="latest question time after it (after_evidence)")
    include_adversarial: bool = Field(False, description="also ask category-5 (adversarial) questions")
    question_fraction: float = Field(1.0, gt=0, le=1, description="share of questions asked (per conversation)")
    reask_rate: float = Field(0.0, ge=0, le=1, description="chance a question is asked again later")
    paraphrase_rate: float = Field(0.5, ge=0, le=1, description="chance a re-ask uses a paraphrase")
    reask_min_days: float = Field(1.0, ge=0, description="earliest re-ask after the first asking")
    reask_max_days: float = Field(30.0, gt=0, description="latest re-ask after the first asking")
    captions: bool = Field(False, description="append image captions to turn text, as the static --captions")

    @model_validator(mode="after")
    def _check(self) -> LocomoStreamConfig:
        if self.min_delay_hours >= self.max_delay_hours:
            raise ValueError(
                f"min_delay_hours ({self.min_delay_hours}) must be below max_delay_hours ({self.max_delay_hours})"
            )
        if self.reask_min_days >= self.reask_max_days:
            raise ValueError(
                f"reask_min_days ({self.reask_min_days}) must be below reask_max_days ({self.reask_max_days})"
            )
        return self

    def path(self) -> Path:
        """The data file to read."""
        return resolve_given(self.data, "locomo") if self.data else default_locomo_path()


class LocomoStreamScenario(FileScenario):
    """The ``locomo_stream`` scenario: see the module docstring."""

    name = "locomo_stream"
    config_model = LocomoStreamConfig

    def __init__(self, config: LocomoStreamConfig | None = None, *, source: str = "") -> None:
        self.config = config or LocomoStreamConfig()
        path = self.config.path()
        if not path.is_file():
            where = f" (scenario.data in {source})" if source else " (scenario.data)"
            raise UserError(
                f"LoCoMo data file not found: {path}{where}; set scenario.data or MEMSIM_LOCOMO to locomo10.json, "
                f"or {fetch_hint('locomo')}"
            )

    # -- generation -------------------------------------------------------

    def generate(self, rng: np.random.Generator) -> ScenarioStream:
        """Load the file and build every conversation's sessions and questions."""
        cfg = self.config
        dataset = load_locomo(cfg.path())
        events: list[Event] = []
        excluded = {"adversarial": 0, "no_usable_evidence": 0, "not_sampled": 0}
        per_user: dict[str, dict[str, int]] = {}
        for conv in self._conversations(dataset):
            # One child generator per conversation, drawn in file order: a conversation's
            # questions do not depend on how many questions the ones before it had.
            conv_events, per_user[conv.episode_id] = self._conversation(conv, spawn(rng), excluded)
            events.extend(conv_events)
        if not events:
            raise UserError(f"scenario locomo_stream: no conversations selected from {cfg.path()}")
        ordered = tuple(sort_events(events))
        start = ordered[0].time
        # A minute after the last event, so the final day's run covers it.
        end_all = ordered[-1].time + timedelta(minutes=1)
        meta = {
            "data": str(cfg.path()),
            "sha256": dataset.sha256,
            "question_time": cfg.question_time,
            "excluded": excluded,
            "per_user": per_user,
        }
        return ScenarioStream(start=start, end=end_all, events=ordered, meta=meta)

    def _conversations(self, dataset: LocomoDataset) -> list[Episode]:
        """The file's conversations as episodes, those the config selects, in file order."""
        cfg = self.config
        convs = locomo_episodes(dataset, captions=cfg.captions)
        if cfg.conversations:
            known = [c.episode_id for c in convs]
            unknown = [c for c in cfg.conversations if c not in known]
            if unknown:
                raise UserError(
                    f"scenario.conversations: unknown sample id(s) {unknown} in {cfg.path()}; valid: {', '.join(known)}"
                )
            wanted = set(cfg.conversations)
            convs = [c for c in convs if c.episode_id in wanted]
        if cfg.limit_conversations is not None:
            convs = convs[: cfg.limit_conversations]
        return convs

    def _conversation(
        self, conv: Episode, conv_rng: np.random.Generator, excluded: dict[str, int]
    ) -> tuple[list[Event], dict[str, int]]:
        """One conversation's sessions and the questions asked on it, and its counts; ``excluded`` counts the rest."""
        cfg = self.config
        uid = conv.episode_id
        sessions = [e for e in conv.events if isinstance(e, Session)]
        questions = [e for e in conv.events if isinstance(e, Question)]
        session_times = [s.time for s in sessions]
        at = {t.turn_id: s.time for s in sessions for t in s.turns}
        end = max(session_times) + QUESTION_DELAY
        events: list[Event] = list(sessions)
        asked = 0
        reasks = 0
        for sq in questions:
            if sq.excluded == "adversarial" and not cfg.include_adversarial:
                excluded["adversarial"] += 1
                continue
            if not sq.evidence:
                excluded["no_usable_evidence"] += 1
                continue
            # Draws happen for every candidate, kept or not, so the fraction only thins the stream.
            keep = conv_rng.random() < cfg.question_fraction
            when = self._ask_time(conv_rng, max(at[t] for t in sq.evidence), session_times, end)
            reask = conv_rng.random() < cfg.reask_rate
            re_delay = conv_rng.uniform(cfg.reask_min_days, cfg.reask_max_days) * _DAY
            re_para = conv_rng.random() < cfg.paraphrase_rate
            re_template = PARAPHRASES[int(conv_rng.integers(len(PARAPHRASES)))]
            if not keep:
                excluded["not_sampled"] += 1
                continue
            # Asked on the stream, an adversarial question keeps the file's answer and evidence.
            gold = sq.extra.get("adversarial_answer", sq.gold)
            first = Question(
                question_id=sq.question_id,
                user_id=uid,
                time=when,
                text=sq.text,
                gold=gold,
                kind=sq.kind,
                evidence=sq.evidence,
                topic=sq.question_id,
                extra=sq.extra,
            )
            events.append(first)
            asked += 1
            if reask:
                # The same question again: only its id, time, wording and link back differ.
                events.append(
                    replace(
                        first,
                        question_id=f"{sq.question_id}:r1",
                        time=when + timedelta(seconds=float(re_delay)),
                        text=paraphrase(sq.text, re_template) if re_para else sq.text,
                        reask_of=sq.question_id,
                    )
                )
                reasks += 1
        counts = {"sessions": len(sessions), "turns": sum(len(s.turns) for s in sessions), "questions": asked,
                  "reasks": reasks}
        return events, counts

    def _ask_time(
        self, rng: np.random.Generator, evidence_at: datetime, session_times: list[datetime], end: datetime
    ) -> datetime:
        """When a question whose last evidence session starts at ``evidence_at`` is asked."""
        cfg = self.config
        # Both draws are made whatever the policy, so switching policy leaves the other draws alone.
        u_after = rng.random()
        u_uniform = rng.random()
        if cfg.question_time == "end":
            return end
        lo = cfg.min_delay_hours * _HOUR
        if cfg.question_time == "after_evidence":
            later = [t for t in session_times if t > evidence_at]
            gap = (min(later) - evidence_at).total_seconds() if later else math.inf
            hi = min(cfg.max_delay_hours * _HOUR, gap)
            # A next session sooner than the minimum delay: ask halfway to it.
            lo = min(lo, hi / 2.0)
            return evidence_at + timedelta(seconds=lo + u_after * (hi - lo))
        hi = max((end - evidence_at).total_seconds(), lo)
        return evidence_at + timedelta(seconds=lo + u_uniform * (hi - lo))

