"""The judge kinds: deterministic text judges and LLM judges.

A deterministic judge scores with a text score (``memsim.sim.answer.text_scores``);
an LLM judge asks a model once per answer and reads its verdict
(``memsim.sim.answer.verdicts``). The judges are registered, and described, in
``memsim.sim.answer.judges``.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memsim.sim.answer.prompts import JUDGE_LOCOMO, JUDGE_LONGMEMEVAL, JUDGE_LONGMEMEVAL_TYPES, PromptTemplate
from memsim.sim.answer.text_scores import (
    abstains,
    as_text,
    bleu1,
    is_abstention_question,
    locomo_category,
    locomo_f1,
    mem0_f1,
    mem0_tokens,
    normalize,
    says_not_available,
)
from memsim.sim.answer.verdicts import (
    Verdict,
    json_label_verdict,
    longmemeval_verdict,
    one_word_verdict,
    yes_no_verdict,
)

if TYPE_CHECKING:
    from memsim.sim.answer.llm import LLMClient

__all__ = [
    "PARAPHRASE_NOTE",
    "ContainsJudge",
    "LocomoF1Judge",
    "Mem0F1Judge",
    "Bleu1Judge",
    "LocomoLLMJudge",
    "LongMemEvalLLMJudge",
]

PARAPHRASE_NOTE = "memsim paraphrase, not comparable to published numbers"
"""What every table says about an LLM judge that runs on memsim's own prompt wording."""


# --------------------------------------------------------------------------- deterministic judges


class _TextJudge:
    """A deterministic judge: a scoring function of (answer, gold, category); NaN when unscorable."""

    name = ""

    def score(
        self,
        *,
        question: str,
        gold: str,
        answer: str,
        category: str | int | None = None,
        question_id: str | None = None,
    ) -> float:
        """The judge's score in [0, 1]; NaN when the gold answer gives nothing to score against.

        Abstention questions are scored with the abstention rubric (see ``memsim.sim.answer.judges``).
        """
        if is_abstention_question(category, question_id) and not self._own_abstention_rule(category):
            return 1.0 if abstains(answer) else 0.0
        if self._unscorable(gold, category):
            return math.nan
        return self._score(answer, gold, category)

    def _unscorable(self, gold: str, category: str | int | None) -> bool:
        return not mem0_tokens(gold)

    def _own_abstention_rule(self, category: str | int | None) -> bool:
        return False

    def _score(self, answer: str, gold: str, category: str | int | None) -> float:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """What a run's spec records about this judge."""
        return {"name": self.name}


class ContainsJudge(_TextJudge):
    """1.0 when the normalised gold answer appears as whole words in the normalised answer."""

    name = "contains"

    def _unscorable(self, gold: str, category: str | int | None) -> bool:
        return not normalize(gold)

    def _score(self, answer: str, gold: str, category: str | int | None) -> float:
        return 1.0 if f" {normalize(gold)} " in f" {normalize(answer)} " else 0.0


class LocomoF1Judge(_TextJudge):
    """LoCoMo's token F1 with its per-category rules (see ``locomo_f1``); category 5 needs no gold."""

    name = "f1_locomo"

    def _unscorable(self, gold: str, category: str | int | None) -> bool:
        return locomo_category(category) != 5 and not as_text(gold).strip()

    def _score(self, answer: str, gold: str, category: str | int | None) -> float:
        return locomo_f1(answer, gold, category)

    def _own_abstention_rule(self, category: str | int | None) -> bool:
        # LoCoMo's published scorer has its own rule for category 5; it is kept.
        return locomo_category(category) == 5


class Mem0F1Judge(_TextJudge):
    """Mem0's set-based token F1 (see ``mem0_f1``)."""

    name = "f1_mem0"

    def _score(self, answer: str, gold: str, category: str | int | None) -> float:
        return mem0_f1(answer, gold)


class Bleu1Judge(_TextJudge):
    """Unigram BLEU on NLTK's word tokens, as Mem0 computes it (see ``bleu1``)."""

    name = "bleu1"

    def _score(self, answer: str, gold: str, category: str | int | None) -> float:
        return bleu1(answer, gold)


# --------------------------------------------------------------------------- LLM judges


class _LLMJudge:
    """Shared parts: one short, greedy call per answer, verdict read from the reply."""

    name = ""
    max_tokens = 8
    official_max_tokens = 64
    """Reply budget with official templates, some of which ask for a short JSON object."""

    def __init__(
        self,
        llm: LLMClient,
        *,
        temperature: float = 0.0,
        seed: int = 0,
        templates: Mapping[str, PromptTemplate] | None = None,
        prompt_source: str = "",
    ) -> None:
        """Args:
        llm: the client that judges.
        temperature: sampling temperature (0: greedy).
        seed: sampling seed sent with every call.
        templates: official templates read from the user's copy (``memsim.sim.answer.official``),
            keyed like the judge's own; None: memsim's paraphrase.
        prompt_source: where ``templates`` came from (file and its hash), recorded by ``describe``.
        """
        self.llm = llm
        self.temperature = float(temperature)
        self.seed = int(seed)
        self.templates: Mapping[str, PromptTemplate] = dict(templates) if templates else self._own_templates()
        self.official = bool(templates)
        self.prompt_source = prompt_source if templates else PARAPHRASE_NOTE
        if self.official:
            self.max_tokens = self.official_max_tokens
        self.unreadable = 0
        """Replies in which no verdict could be read (each scored 0.0, wrong)."""
        self.calls = 0
        """Replies this judge has read."""
        self._lock = threading.Lock()

    @staticmethod
    def _own_templates() -> dict[str, PromptTemplate]:
        raise NotImplementedError

    def _ask(self, template: PromptTemplate, *, json_mode: bool = False, **values: str) -> str:
        messages = template.render(**values)
        out = self.llm.chat(
            messages, max_tokens=self.max_tokens, temperature=self.temperature, seed=self.seed,
            **({"json_mode": True} if json_mode else {}),
        )
        return out.text

    @property
    def unparsed(self) -> int:
        """The unreadable count under its earlier name."""
        return self.unreadable

    def _read(self, verdict: float | None) -> Verdict:
        """Count a reply; no verdict is a wrong answer, flagged."""
        with self._lock:
            self.calls += 1
            if verdict is None:
                self.unreadable += 1
        return Verdict(0.0, readable=False) if verdict is None else Verdict(verdict)

    def score(
        self,
        *,
        question: str,
        gold: str,
        answer: str,
        category: str | int | None = None,
        question_id: str | None = None,
    ) -> float:
        """The score of ``verdict`` (an unreadable reply scores 0.0)."""
        return self.verdict(question=question, gold=gold, answer=answer, category=category,
                            question_id=question_id).score

    def verdict(
        self,
        *,
        question: str,
        gold: str,
        answer: str,
        category: str | int | None = None,
        question_id: str | None = None,
    ) -> Verdict:
        """The judgement of one answer, with whether the reply held a readable verdict."""
        raise NotImplementedError

    def _prompt_ids(self) -> list[str]:
        return [t.id for t in self.templates.values()]

    @property
    def prompt_hash(self) -> str:
        """A hash of every template this judge may send (part of its check's cache key)."""
        ids = "\0".join(sorted(self._prompt_ids()))
        return hashlib.sha256(f"{ids}\0{self.max_tokens}".encode()).hexdigest()[:16]

    def describe(self) -> dict[str, Any]:
        """Name, model, endpoint, temperature, prompt ids and prompt source of this judge."""
        return {
            "name": self.name,
            "kind": self.llm.name,
            "model": self.llm.model,
            "endpoint": getattr(self.llm, "endpoint", ""),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "prompt_ids": self._prompt_ids(),
            "prompts": "official" if self.official else "paraphrase",
            "prompt_source": self.prompt_source,
        }


class LocomoLLMJudge(_LLMJudge):
    """CORRECT/WRONG judgement against the gold answer (LoCoMo style).

    Abstention questions (LoCoMo's adversarial category 5, LongMemEval's
    ``_abs`` ids) have no gold answer to compare with: the answer is scored
    by the abstention rubric without a call (``says_not_available`` for
    category 5, as LoCoMo scores it; ``abstains`` otherwise). Official
    templates: Mem0's judge prompt (key ``default``).
    """

    name = "llm_locomo"

    @staticmethod
    def _own_templates() -> dict[str, PromptTemplate]:
        return {"default": JUDGE_LOCOMO}

    def verdict(
        self,
        *,
        question: str,
        gold: str,
        answer: str,
        category: str | int | None = None,
        question_id: str | None = None,
    ) -> Verdict:
        """1.0 (CORRECT), 0.0 (WRONG, or no readable verdict: flagged), NaN (no gold answer)."""
        if locomo_category(category) == 5:
            return Verdict(1.0 if says_not_available(answer) else 0.0)
        if is_abstention_question(category, question_id):
            return Verdict(1.0 if abstains(answer) else 0.0)
        if not as_text(gold).strip():
            return Verdict(math.nan)
        template = self.templates["default"]
        # A template that shows a JSON object asks for JSON (Mem0's, sent in JSON mode); memsim's asks for one word.
        asks_json = '"label"' in template.user or '"label"' in template.system
        reply = self._ask(template, json_mode=asks_json, question=question, gold=as_text(gold), answer=as_text(answer))
        return self._read(json_label_verdict(reply) if asks_json else one_word_verdict(reply))


class LongMemEvalLLMJudge(_LLMJudge):
    """A rubric per LongMemEval question type; ``category`` is the question type.

    Official templates: LongMemEval's QA evaluation script (keys as in
    ``JUDGE_LONGMEMEVAL``); a type the file has no template for uses its
    ``default``.
    """

    name = "llm_longmemeval"

    @staticmethod
    def _own_templates() -> dict[str, PromptTemplate]:
        return dict(JUDGE_LONGMEMEVAL)

    def template_for(self, category: str | int | None, question_id: str | None) -> PromptTemplate:
        """The rubric for a question: abstention by id (or LoCoMo category 5), else by question type."""
        if is_abstention_question(category, question_id):
            return self.templates["abstention"]
        key = JUDGE_LONGMEMEVAL_TYPES.get(str(category), "default")
        return self.templates.get(key, self.templates["default"])

    def verdict(
        self,
        *,
        question: str,
        gold: str,
        answer: str,
        category: str | int | None = None,
        question_id: str | None = None,
    ) -> Verdict:
        """Official templates: LongMemEval's rule (``longmemeval_verdict``); memsim's: the last word, yes or no."""
        template = self.template_for(category, question_id)
        reply = self._ask(template, question=question, gold=as_text(gold), answer=as_text(answer))
        return self._read(longmemeval_verdict(reply) if self.official else yes_no_verdict(reply))
