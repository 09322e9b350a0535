"""Judges: score an answer against the gold answer.

Deterministic judges:

- ``contains``: the normalised gold answer appears, as whole words, in the
  normalised answer. The default for synthetic scenarios, whose gold answers
  are short values.
- ``f1_locomo``: LoCoMo's token F1. Text is lowercased, commas, punctuation
  and the words a/an/the/and are removed, tokens are Porter-stemmed and
  compared as multisets. Per category: 1 (multi-hop) splits gold and answer on
  commas and averages, over gold parts, the best F1 of any answer part;
  3 (open-domain) keeps the gold up to its first ``;``; 5 (adversarial) is 1
  when the answer says the information is not available (``no information
  available`` or ``not mentioned``), else 0. Integer gold answers are read as
  text.
- ``f1_mem0``: Mem0's token F1: lowercase, split on whitespace after turning
  ``. , ! ?`` into spaces, compare token sets, no stemming.
- ``bleu1``: unigram BLEU as Mem0 and the seed compute it: NLTK's
  ``sentence_bleu`` with weights (1, 0, 0, 0) and smoothing method 1, on the
  lowercased text tokenised as NLTK's ``word_tokenize`` does (sentences
  split at ``. ! ?`` before a space, each tokenised by NLTK's word
  tokenizer; no tokenizer data is downloaded).

Abstention questions (a LongMemEval id ending in ``_abs``, LoCoMo's
adversarial category 5) have no answer to compare with: every judge scores
them with the abstention rubric, 1.0 when the answer says the information is
not there. ``f1_locomo`` keeps LoCoMo's own rule for category 5
(``says_not_available``); the other deterministic judges use ``abstains``.

LLM judges (their model, temperature and prompt source are recorded by ``describe``):

- ``llm_locomo``: CORRECT/WRONG against the gold answer, lenient on wording
  and date formats. memsim's prompt asks for one word: a reply that is not
  one of CORRECT, WRONG (or INCORRECT) is unjudged. Mem0's prompt asks for
  JSON: the reply is read as a JSON object and its ``label`` field must be
  CORRECT or WRONG, else it is unjudged.
- ``llm_longmemeval``: a rubric per LongMemEval question type (``category``):
  temporal questions forgive off-by-one counts of days, weeks or months;
  knowledge-update answers may mention older values beside the updated one;
  preference answers are checked against the rubric in the gold field;
  questions whose id ends in ``_abs`` are correct when the answer says the
  question cannot be answered from the history. The verdict is read as
  LongMemEval's script reads it: correct when ``'yes' in reply.lower()``.

An unjudged reply is scored NaN and counted (``unparsed``); no verdict is
ever guessed from free text.

Both LLM judges ship with memsim's own wording of these rubrics (a
paraphrase: its figures are not comparable to published numbers). Official
templates are read at run time from the user's copy of the benchmark's
evaluation code (``memsim.sim.answer.official``) and passed as ``templates``.

A score is 1.0/0.0, or an F1 in [0, 1]. NaN means unscored (no gold answer,
or an LLM verdict that could not be read), never zero; ``JUDGE_PASS`` turns
a score into a verdict.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import re
import string
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memsim.sim.answer.prompts import JUDGE_LOCOMO, JUDGE_LONGMEMEVAL, JUDGE_LONGMEMEVAL_TYPES, PromptTemplate
from memsim.sim.core.errors import UserError

if TYPE_CHECKING:
    from memsim.sim.answer.llm import LLMClient

__all__ = [
    "JUDGE_PASS",
    "PARAPHRASE_NOTE",
    "abstains",
    "is_abstention_question",
    "judge_description",
    "Judge",
    "ContainsJudge",
    "LocomoF1Judge",
    "Mem0F1Judge",
    "Bleu1Judge",
    "LocomoLLMJudge",
    "LongMemEvalLLMJudge",
    "JUDGE_NAMES",
    "LLM_JUDGES",
    "make_judge",
    "build_judge",
    "register_judge",
    "judge_names",
    "normalize",
    "locomo_f1",
    "mem0_f1",
    "bleu1",
    "nltk_tokens",
    "says_not_available",
]


@runtime_checkable
class Judge(Protocol):
    """Scores one answer; ``name`` is the column suffix in rows (``answer_<name>``)."""

    name: str

    def score(
        self,
        *,
        question: str,
        gold: str,
        answer: str,
        category: str | int | None = None,
        question_id: str | None = None,
    ) -> float:
        """1.0/0.0 or an F1 in [0, 1]; NaN when the answer cannot be scored."""
        ...


# --------------------------------------------------------------------------- text helpers

_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_LOCOMO_STOP = re.compile(r"\b(?:a|an|the|and)\b")


def _text(value: Any) -> str:
    # LoCoMo stores some answers as integers (years, counts).
    return "" if value is None else str(value)


def normalize(text: Any) -> str:
    """Lowercase, punctuation and the articles a/an/the removed, whitespace collapsed."""
    return " ".join(_ARTICLES.sub(" ", _text(text).lower().translate(_PUNCT)).split())


def says_not_available(answer: str) -> bool:
    """LoCoMo's adversarial rule: the answer says the information is not there."""
    low = _text(answer).lower()
    return "no information available" in low or "not mentioned" in low


JUDGE_PASS = 0.5
"""A score at or above this is a pass (an accepted answer); F1 judges are read through it too."""

PARAPHRASE_NOTE = "memsim paraphrase, not comparable to published numbers"
"""What every table says about an LLM judge that runs on memsim's own prompt wording."""

_ABSTAINS = re.compile(
    r"\b(?:not (?:been )?(?:mentioned|specified|stated|provided|discussed|available|known|enough)"
    r"|no (?:information|mention|record|details?|data)|never (?:mentioned|said|told|discussed)"
    r"|(?:do not|don't|does not|doesn't|did not|didn't) (?:know|say|mention|have)"
    r"|cannot (?:be )?(?:answer|determine|tell|find)|can't (?:answer|determine|tell|find)"
    r"|unable to (?:answer|determine|find)|unknown|not answerable|insufficient information)\b",
    re.IGNORECASE,
)


def abstains(answer: Any) -> bool:
    """Whether an answer declines: says the information is unknown, missing or never mentioned."""
    return bool(_ABSTAINS.search(_text(answer))) or says_not_available(_text(answer))


def is_abstention_question(category: str | int | None, question_id: str | None) -> bool:
    """LongMemEval's ``_abs`` ids and LoCoMo's adversarial category 5: the right answer is to decline."""
    return (question_id is not None and str(question_id).endswith("_abs")) or _locomo_category(category) == 5


@lru_cache(maxsize=1)
def _stemmer() -> Callable[[str], str]:
    try:
        from nltk.stem import PorterStemmer
    except ImportError:
        raise UserError("the f1_locomo judge needs nltk (pip install nltk)") from None
    return PorterStemmer().stem


_stem_lock = threading.Lock()


def _locomo_tokens(text: str) -> list[str]:
    low = _text(text).replace(",", "").lower().translate(_PUNCT)
    words = _LOCOMO_STOP.sub(" ", low).split()
    stem = _stemmer()
    # nltk's stemmer keeps a shared cache; stem under a lock when judges run in threads.
    with _stem_lock:
        return [stem(w) for w in words]


def _f1_counts(pred: Sequence[str], gold: Sequence[str]) -> float:
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


def _locomo_category(category: str | int | None) -> int | None:
    if category is None or isinstance(category, bool):
        return None
    try:
        return int(category)
    except (TypeError, ValueError):
        return None


def locomo_f1(answer: str, gold: Any, category: str | int | None = None) -> float:
    """LoCoMo's F1 of ``answer`` against ``gold`` under the rules of ``category``."""
    cat = _locomo_category(category)
    if cat == 5:
        return 1.0 if says_not_available(answer) else 0.0
    gold_text = _text(gold)
    if cat == 3:
        gold_text = gold_text.split(";")[0].strip()
    if cat == 1:
        answers = [a.strip() for a in _text(answer).split(",")]
        golds = [g.strip() for g in gold_text.split(",")]
        answer_tokens = [_locomo_tokens(a) for a in answers]
        per_gold = [max(_f1_counts(a, _locomo_tokens(g)) for a in answer_tokens) for g in golds]
        return sum(per_gold) / len(per_gold)
    return _f1_counts(_locomo_tokens(_text(answer)), _locomo_tokens(gold_text))


_MEM0_SPLIT = str.maketrans({".": " ", ",": " ", "!": " ", "?": " "})


def _mem0_tokens(text: Any) -> list[str]:
    return _text(text).lower().translate(_MEM0_SPLIT).split()


def mem0_f1(answer: str, gold: Any) -> float:
    """Mem0's F1: token sets, no stemming; 0 when either side has no tokens."""
    pred, ref = set(_mem0_tokens(answer)), set(_mem0_tokens(gold))
    if not pred or not ref:
        return 0.0
    same = len(pred & ref)
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


# NLTK's word_tokenize splits sentences with punkt first (a data download); a
# sentence ends at . ! or ? before whitespace in every case the short answers
# of these benchmarks have, so the split below needs no data.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@lru_cache(maxsize=1)
def _word_tokenizer() -> Any:
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()


def nltk_tokens(text: Any) -> list[str]:
    """The tokens of ``nltk.word_tokenize(text.lower())``, without punkt's data."""
    tokenizer = _word_tokenizer()
    low = _text(text).lower().strip()
    return [tok for sent in _SENTENCE_END.split(low) if sent for tok in tokenizer.tokenize(sent)]


def bleu1(answer: str, gold: Any) -> float:
    """Unigram BLEU as published: NLTK's ``sentence_bleu`` (weights 1,0,0,0; smoothing method 1) on NLTK tokens."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    pred, ref = nltk_tokens(answer), nltk_tokens(gold)
    if not pred or not ref:
        return 0.0
    return float(sentence_bleu([ref], pred, weights=(1, 0, 0, 0), smoothing_function=SmoothingFunction().method1))


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

        Abstention questions are scored with the abstention rubric (see the module docstring).
        """
        if is_abstention_question(category, question_id) and not self._own_abstention_rule(category):
            return 1.0 if abstains(answer) else 0.0
        if self._unscorable(gold, category):
            return math.nan
        return self._score(answer, gold, category)

    def _unscorable(self, gold: str, category: str | int | None) -> bool:
        return not _mem0_tokens(gold)

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
        return _locomo_category(category) != 5 and not _text(gold).strip()

    def _score(self, answer: str, gold: str, category: str | int | None) -> float:
        return locomo_f1(answer, gold, category)

    def _own_abstention_rule(self, category: str | int | None) -> bool:
        # LoCoMo's published scorer has its own rule for category 5; it is kept.
        return _locomo_category(category) == 5


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

_ONE_WORD = {"CORRECT": 1.0, "WRONG": 0.0, "INCORRECT": 0.0}
_JSON_LABELS = {"CORRECT": 1.0, "WRONG": 0.0}


def one_word_verdict(reply: str) -> float | None:
    """memsim's CORRECT/WRONG prompt: the reply must be that one word (case, spaces and a full stop aside)."""
    return _ONE_WORD.get(reply.strip().strip(".!*_`\"'").strip().upper())


def json_label_verdict(reply: str) -> float | None:
    """Mem0's JSON prompt: the reply is a JSON object whose ``label`` is CORRECT or WRONG; None otherwise."""
    try:
        data = json.loads(reply)
    except ValueError:
        return None
    label = data.get("label") if isinstance(data, dict) else None
    return _JSON_LABELS.get(label.strip().upper()) if isinstance(label, str) else None


def yes_in_reply(reply: str) -> float:
    """LongMemEval's rule: the verdict is yes when ``'yes'`` occurs anywhere in the lowercased reply."""
    return 1.0 if "yes" in reply.lower() else 0.0


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
        self.unparsed = 0
        """Replies in which no verdict could be found (scored NaN)."""
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

    def _unparsed(self) -> float:
        with self._lock:
            self.unparsed += 1
        return math.nan

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

    def score(
        self,
        *,
        question: str,
        gold: str,
        answer: str,
        category: str | int | None = None,
        question_id: str | None = None,
    ) -> float:
        """1.0 (CORRECT), 0.0 (WRONG) or NaN (no verdict in the reply, or no gold)."""
        if _locomo_category(category) == 5:
            return 1.0 if says_not_available(answer) else 0.0
        if is_abstention_question(category, question_id):
            return 1.0 if abstains(answer) else 0.0
        if not _text(gold).strip():
            return math.nan
        template = self.templates["default"]
        # A template that shows a JSON object asks for JSON (Mem0's, sent in JSON mode); memsim's asks for one word.
        asks_json = '"label"' in template.user or '"label"' in template.system
        reply = self._ask(template, json_mode=asks_json, question=question, gold=_text(gold), answer=_text(answer))
        verdict = json_label_verdict(reply) if asks_json else one_word_verdict(reply)
        return self._unparsed() if verdict is None else verdict


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

    def score(
        self,
        *,
        question: str,
        gold: str,
        answer: str,
        category: str | int | None = None,
        question_id: str | None = None,
    ) -> float:
        """1.0 when ``'yes'`` is in the lowercased reply, else 0.0 (LongMemEval's rule)."""
        template = self.template_for(category, question_id)
        return yes_in_reply(self._ask(template, question=question, gold=_text(gold), answer=_text(answer)))


# --------------------------------------------------------------------------- factory

@dataclass(frozen=True, slots=True)
class _JudgeEntry:
    target: str | Callable[..., Judge]
    description: str
    llm: bool


_JUDGES: dict[str, _JudgeEntry] = {}


def register_judge(name: str, target: str | Callable[..., Judge], *, description: str, llm: bool = False) -> None:
    """Register a judge: ``"module:attribute"`` (imported when first built) or a factory.

    A factory is called with no arguments, or, for an LLM judge (``llm=True``),
    as ``factory(client, temperature=..., templates=..., prompt_source=...)``.
    A duplicate name is an error.
    """
    if name in _JUDGES:
        raise ValueError(f"judge {name!r} is already registered")
    if isinstance(target, str) and ":" not in target:
        raise ValueError(f"target {target!r} must look like 'module:attribute'")
    _JUDGES[name] = _JudgeEntry(target, description, llm)


def judge_names() -> list[str]:
    """Registered judge names, in registration order (the built-in deterministic ones first)."""
    return list(_JUDGES)


def _entry(name: str) -> _JudgeEntry:
    if name not in _JUDGES:
        raise UserError(f"--judge: unknown judge {name!r}; choose from: {', '.join(_JUDGES)}")
    return _JUDGES[name]


class _Names(Sequence[str]):
    """A live view of the registry's names (``llm``: LLM judges only), so a judge registered later is a valid choice."""

    def __init__(self, llm: bool = False) -> None:
        self._llm = llm

    def __getitem__(self, i: Any) -> Any:
        return [n for n, e in _JUDGES.items() if e.llm or not self._llm][i]

    def __len__(self) -> int:
        return sum(1 for e in _JUDGES.values() if e.llm or not self._llm)


JUDGE_NAMES: Sequence[str] = _Names()
"""Every registered judge name (a live view of the registry)."""
LLM_JUDGES: Sequence[str] = _Names(llm=True)
"""Registered judges that call an LLM (a live view of the registry)."""


def judge_description(name: str) -> str:
    """One line of help for the registered judge ``name``."""
    return _entry(name).description


def build_judge(
    name: str,
    llm: LLMClient | None = None,
    *,
    temperature: float = 0.0,
    templates: Mapping[str, PromptTemplate] | None = None,
    prompt_source: str = "",
) -> Judge:
    """Build the registered judge ``name``; LLM judges use ``llm`` and, when given, official ``templates``.

    Raises:
        UserError: unknown name (the message lists the known ones), or an LLM
            judge without a client.
    """
    entry = _entry(name)
    target = entry.target
    if isinstance(target, str):
        module_name, attr = target.split(":", 1)
        target = getattr(importlib.import_module(module_name), attr)
    if not entry.llm:
        return target()
    if llm is None:
        raise UserError(f"--judge {name}: this judge needs an LLM (use --llm, and a reader other than none)")
    return target(llm, temperature=temperature, templates=templates, prompt_source=prompt_source)


make_judge = build_judge
"""The judge factory under its earlier name (``sim/answer/setup.py`` and the commands call it)."""


def _first_line(cls: type) -> str:
    return (cls.__doc__ or "").strip().splitlines()[0]


for _cls in (ContainsJudge, LocomoF1Judge, Mem0F1Judge, Bleu1Judge):
    register_judge(_cls.name, _cls, description=_first_line(_cls))
for _cls in (LocomoLLMJudge, LongMemEvalLLMJudge):
    register_judge(_cls.name, _cls, description=_first_line(_cls), llm=True)
