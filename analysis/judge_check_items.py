"""The judge check's labelled set: items built deterministically from benchmark files and the persona scenario.

Each item is a (question, gold answer, candidate answer, label) where the
label says whether a careful grader would accept the candidate. Categories:

| category | candidate | label |
|---|---|---|
| ``correct`` | the gold answer itself | pass |
| ``paraphrase`` | the gold answer inside a sentence, in other case | pass |
| ``reformatted`` | a date or number written another way (``7 May 2023`` -> ``May 7, 2023``, ``4`` -> ``four``) | pass |
| ``wrong_value`` | another value of the same kind (a shifted date, another number, another answer of the same category) | fail |
| ``stale_value`` | the value a changed fact had before (persona) | fail |
| ``partial`` | the first item of a list answer | fail |
| ``other_question`` | the answer to a different question of the same conversation | fail |
| ``abstain_answerable`` | "not mentioned" to a question that has an answer | fail |
| ``abstention_declined`` | "not mentioned" to an abstention question | pass |
| ``abstention_answered`` | a concrete answer to an abstention question | fail |

Wrong candidates share no word with the gold answer (except for shifted
dates and numbers, whose framing words stay), so a fail label is never a
matter of taste.

Items come from the LoCoMo and LongMemEval files the user has and from the
persona scenario's gold (no file needed). ``CHECK_VERSION`` is bumped when the
way items are built changes; ``check_set_digest`` hashes the items into every
cached result's key.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memsim.core.errors import UserError
from memsim.core.streams import seeded

__all__ = [
    "CHECK_VERSION",
    "CATEGORIES",
    "PER_KIND",
    "CheckItem",
    "build_check_set",
    "check_set_digest",
    "draw_items",
    "category_counts",
]

CHECK_VERSION = 1
"""Bumped whenever the way items are built changes (part of every cache key)."""

CATEGORIES: Mapping[str, bool] = {
    "correct": True,
    "paraphrase": True,
    "reformatted": True,
    "wrong_value": False,
    "stale_value": False,
    "partial": False,
    "other_question": False,
    "abstain_answerable": False,
    "abstention_declined": True,
    "abstention_answered": False,
}
"""Category -> the label of its items (True: a careful grader accepts the candidate)."""

PER_KIND = 8
"""Questions drawn per LoCoMo category, persona question kind or LongMemEval type."""

_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)
_DAY_MONTH_YEAR = re.compile(r"\b(\d{1,2}) (" + "|".join(_MONTHS) + r"),? (\d{4})\b")
_MONTH_YEAR = re.compile(r"\b(" + "|".join(_MONTHS) + r"),? (\d{4})\b")
_NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve",
)
_NUMBER = re.compile(r"^\s*(\d{1,2}|" + "|".join(_NUMBER_WORDS) + r")\b(.*)$", re.IGNORECASE)
_PARAPHRASES = (
    "I believe it was {g}.",
    "From what you told me: {g}.",
    "That would be {g}, as far as I remember.",
    "Based on our conversations, the answer is {g}.",
)
_ABSTAIN_TEXTS = (
    "That was not mentioned in our conversations.",
    "I don't know; you never told me that.",
    "There is no information about that in the history.",
)


@dataclass(frozen=True, slots=True)
class CheckItem:
    """One labelled (question, gold, candidate) triple."""

    item_id: str
    """Stable id: source, question id and category."""
    source: str
    """``locomo``, ``longmemeval`` or ``persona``."""
    category: str
    """One of ``CATEGORIES``."""
    question: str
    """The question text."""
    gold: str
    """The gold answer as the benchmark gives it ("" for LoCoMo's adversarial questions)."""
    answer: str
    """The candidate answer a judge grades."""
    label: bool
    """Whether a careful grader accepts it."""
    kind: str
    """What the judge receives as ``category`` (LoCoMo's code, LongMemEval's type, persona's kind)."""
    question_id: str
    """What the judge receives as ``question_id`` (LongMemEval's ``_abs`` marks abstention)."""


def _words(text: str) -> set[str]:
    return set(re.sub(r"[^\w\s]", " ", str(text).lower()).split()) - {"a", "an", "the", "and", "of", "in", "to"}


def _disjoint(a: str, b: str) -> bool:
    wa, wb = _words(a), _words(b)
    return bool(wa) and bool(wb) and not (wa & wb)


def _reformat(gold: str) -> str | None:
    """The gold with a date or a small number written another way; None when it has neither."""
    m = _DAY_MONTH_YEAR.search(gold)
    if m:
        day, month, year = int(m.group(1)), m.group(2), m.group(3)
        return gold[: m.start()] + f"{month} {day}, {year}" + gold[m.end():]
    m = _MONTH_YEAR.search(gold)
    if m and not re.search(r"\d{1,2} " + m.group(1), gold):
        month_no = _MONTHS.index(m.group(1)) + 1
        return gold[: m.start()] + f"{month_no:02d}/{m.group(2)}" + gold[m.end():]
    m = _NUMBER.match(gold)
    if m:
        token = m.group(1).lower()
        if token.isdigit():
            n = int(token)
            return None if n > 12 else _NUMBER_WORDS[n] + m.group(2)
        return str(_NUMBER_WORDS.index(token)) + m.group(2)
    return None


def _shift(gold: str) -> str | None:
    """The gold with its date or number changed to another value of the same kind; None when it has neither."""
    m = _DAY_MONTH_YEAR.search(gold)
    if m:
        day, month = int(m.group(1)), _MONTHS.index(m.group(2))
        new_day = (day + 8) % 28 + 1
        new_month = _MONTHS[(month + 3) % 12]
        return gold[: m.start()] + f"{new_day} {new_month} {m.group(3)}" + gold[m.end():]
    m = _MONTH_YEAR.search(gold)
    if m:
        new_month = _MONTHS[(_MONTHS.index(m.group(1)) + 4) % 12]
        return gold[: m.start()] + f"{new_month} {m.group(2)}" + gold[m.end():]
    m = re.fullmatch(r"\s*(\d{4})\s*", gold)
    if m:
        return str(int(m.group(1)) - 3)
    m = _NUMBER.match(gold)
    if m:
        token = m.group(1).lower()
        n = int(token) if token.isdigit() else _NUMBER_WORDS.index(token)
        other = n + 3 if n < 3 else n - 2
        return (str(other) if token.isdigit() else _NUMBER_WORDS[other]) + m.group(2)
    return None


def _parts(gold: str) -> list[str]:
    parts = [p.strip() for p in re.split(r",| and ", gold) if p.strip()]
    return parts if len(parts) >= 2 else []


def _pick(rng: np.random.Generator, seq: Sequence[Any], n: int) -> list[Any]:
    if len(seq) <= n:
        return list(seq)
    idx = sorted(rng.choice(len(seq), size=n, replace=False).tolist())
    return [seq[i] for i in idx]


def _answer_items(
    *,
    source: str,
    qid: str,
    question: str,
    gold: str,
    kind: str,
    judge_qid: str,
    same_kind_golds: Sequence[str],
    other_golds: Sequence[str],
    stale: Sequence[str] = (),
    n: int,
) -> list[CheckItem]:
    """The items of one answerable question."""

    def item(category: str, answer: str) -> CheckItem:
        return CheckItem(
            item_id=f"{source}:{qid}:{category}",
            source=source,
            category=category,
            question=question,
            gold=gold,
            answer=answer,
            label=CATEGORIES[category],
            kind=kind,
            question_id=judge_qid,
        )

    out = [item("correct", gold)]
    g = gold[0].lower() + gold[1:] if gold[:2] != gold[:2].upper() else gold
    out.append(item("paraphrase", _PARAPHRASES[n % len(_PARAPHRASES)].format(g=g)))
    reformatted = _reformat(gold)
    if reformatted is not None and reformatted != gold:
        out.append(item("reformatted", reformatted))
    shifted = _shift(gold)
    wrong = shifted if shifted is not None and shifted != gold else None
    if wrong is None:
        wrong = next((c for c in same_kind_golds if _disjoint(c, gold)), None)
    if wrong is not None:
        out.append(item("wrong_value", wrong))
    old = next((s for s in stale if _disjoint(s, gold)), None)
    if old is not None:
        out.append(item("stale_value", old))
    parts = _parts(gold)
    if parts:
        out.append(item("partial", parts[0]))
    other = next((c for c in other_golds if _disjoint(c, gold)), None)
    if other is not None:
        out.append(item("other_question", other))
    out.append(item("abstain_answerable", _ABSTAIN_TEXTS[n % len(_ABSTAIN_TEXTS)]))
    return out


def _abstention_items(
    *, source: str, qid: str, question: str, gold: str, kind: str, judge_qid: str, answered: str, n: int
) -> list[CheckItem]:
    common = dict(source=source, question=question, gold=gold, kind=kind, question_id=judge_qid)
    return [
        CheckItem(item_id=f"{source}:{qid}:abstention_declined", category="abstention_declined",
                  answer=_ABSTAIN_TEXTS[n % len(_ABSTAIN_TEXTS)], label=True, **common),
        CheckItem(item_id=f"{source}:{qid}:abstention_answered", category="abstention_answered",
                  answer=answered, label=False, **common),
    ]


def _locomo_items(path: Path, rng: np.random.Generator, per_kind: int) -> list[CheckItem]:
    from memsim.static_benchmarks.locomo import ADVERSARIAL, load_locomo

    data = load_locomo(path)
    questions = list(data.questions)
    by_conv: dict[str, list[Any]] = {}
    for q in questions:
        by_conv.setdefault(q.sample_id, []).append(q)
    items: list[CheckItem] = []
    n = 0
    for cat in (1, 2, 3, 4, ADVERSARIAL):
        pool = [q for q in questions if q.category == cat and str(q.answer).strip()]
        for q in _pick(rng, pool, per_kind):
            siblings = by_conv[q.sample_id]
            gold = str(q.answer)
            if cat == ADVERSARIAL:
                items += _abstention_items(
                    source="locomo", qid=q.question_id, question=q.question, gold="", kind=str(cat),
                    judge_qid=q.question_id, answered=gold, n=n,
                )
            else:
                # Nearest siblings first, so the wrong answers come from the same conversation.
                order = sorted(siblings, key=lambda s: abs(s.index - q.index))
                items += _answer_items(
                    source="locomo", qid=q.question_id, question=q.question, gold=gold, kind=str(cat),
                    judge_qid=q.question_id,
                    same_kind_golds=[str(s.answer) for s in order if s.category == cat and s is not q],
                    other_golds=[str(s.answer) for s in order if s.category not in (cat, ADVERSARIAL)],
                    n=n,
                )
            n += 1
    return items


def _longmemeval_items(path: Path, rng: np.random.Generator, per_kind: int) -> list[CheckItem]:
    from memsim.static_benchmarks.longmemeval import iter_instances

    pool: list[Any] = []
    for inst in iter_instances(path):
        # Only the question fields are kept: a published file's haystacks are large.
        pool.append((inst.question_id, inst.question_type, inst.question, inst.answer))
        if len(pool) >= 40 * per_kind:
            break
    items: list[CheckItem] = []
    n = 0
    types = sorted({t for _, t, _, _ in pool})
    chosen: list[Any] = []
    for t in types:
        chosen += _pick(rng, [p for p in pool if p[1] == t and not p[0].endswith("_abs")], per_kind)
    chosen += _pick(rng, [p for p in pool if p[0].endswith("_abs")], per_kind)
    answers = {qid: ans for qid, _, _, ans in pool}
    for qid, qtype, question, gold in chosen:
        if qid.endswith("_abs"):
            base = answers.get(qid.removesuffix("_abs"))
            answered = base if base else next(a for q, _, _, a in pool if not q.endswith("_abs"))
            items += _abstention_items(
                source="longmemeval", qid=qid, question=question, gold=gold, kind=qtype, judge_qid=qid,
                answered=answered, n=n,
            )
        elif qtype == "single-session-preference":
            # The gold is a rubric, not an answer: only clear failures are labelled.
            others = [a for q, t, _, a in pool if t != qtype and not q.endswith("_abs")]
            items += [
                it for it in _answer_items(
                    source="longmemeval", qid=qid, question=question, gold=gold, kind=qtype, judge_qid=qid,
                    same_kind_golds=[], other_golds=others, n=n,
                )
                if it.category in ("other_question", "abstain_answerable")
            ]
        else:
            items += _answer_items(
                source="longmemeval", qid=qid, question=question, gold=gold, kind=qtype, judge_qid=qid,
                same_kind_golds=[a for q, t, _, a in pool if t == qtype and q != qid and not q.endswith("_abs")],
                other_golds=[a for q, t, _, a in pool if t != qtype and not q.endswith("_abs")],
                n=n,
            )
        n += 1
    return items


def _persona_items(seed: int, rng: np.random.Generator, per_kind: int) -> list[CheckItem]:
    from memsim.scenarios import persona_text as T
    from memsim.scenarios.persona import PersonaConfig, PersonaScenario
    from memsim.sim.events import Question, Session

    stream = PersonaScenario(PersonaConfig(users=4, months=6.0)).generate(seeded(seed))
    turns = {t.turn_id: t.text for e in stream.events if isinstance(e, Session) for t in e.turns}
    questions = [e for e in stream.events if isinstance(e, Question) and e.reask_of is None]
    items: list[CheckItem] = []
    n = 0
    for kind in sorted({q.kind for q in questions}):
        pool = [q for q in questions if q.kind == kind]
        # Questions about changed facts first: they give stale values.
        pool.sort(key=lambda q: (not q.superseded, q.question_id))
        for q in pool[:per_kind]:
            values = T.SLOTS[q.topic].values if q.topic in T.SLOTS else ()
            stale = [
                v for tid in reversed(q.superseded) for v in values
                if v.lower() in turns.get(tid, "").lower() and v != q.gold
            ]
            same = [v for v in values if v != q.gold] if kind in ("current", "previous", "preference") else []
            others = [o.gold for o in questions if o.user_id == q.user_id and o.topic != q.topic]
            items += _answer_items(
                source="persona", qid=q.question_id, question=q.text, gold=q.gold, kind=q.kind,
                judge_qid=q.question_id, same_kind_golds=same, other_golds=others, stale=stale, n=n,
            )
            n += 1
    return items


def build_check_set(
    *,
    locomo: str | Path | None = None,
    longmemeval: str | Path | None = None,
    persona_seed: int = 0,
    per_kind: int = PER_KIND,
    seed: int = 0,
) -> list[CheckItem]:
    """The labelled check set from the files given and the persona scenario's gold.

    Args:
        locomo: a LoCoMo file (``locomo10.json``); None: no LoCoMo items.
        longmemeval: a LongMemEval file (its first instances are read); None: no LongMemEval items.
        persona_seed: seed of the persona scenario whose questions are used.
        per_kind: questions drawn per LoCoMo category, LongMemEval type and persona kind.
        seed: seed of the draw.

    Raises:
        UserError: a file is missing or malformed (the loaders' messages).
    """
    rng = seeded([seed, CHECK_VERSION])
    items: list[CheckItem] = []
    if locomo is not None:
        items += _locomo_items(Path(locomo), rng, per_kind)
    if longmemeval is not None:
        items += _longmemeval_items(Path(longmemeval), rng, per_kind)
    items += _persona_items(persona_seed, rng, per_kind)
    ids = [it.item_id for it in items]
    if len(set(ids)) != len(ids):
        raise UserError("judge check: two items share an id; report this")
    return items


def check_set_digest(items: Sequence[CheckItem]) -> str:
    """A hash of the items (what was asked and the labels): part of every cached result's key."""
    blob = json.dumps([asdict(it) for it in items], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f"{CHECK_VERSION}\0{blob}".encode()).hexdigest()[:16]


def draw_items(items: Sequence[CheckItem], n: int | None) -> list[CheckItem]:
    """``n`` items drawn from the set without replacement, in the set's order (all of them when ``n`` is None or larger).

    The draw is seeded by ``n`` alone, so the same size gives the same items (and one cached check).
    """
    if n is None or n >= len(items):
        return list(items)
    rng = seeded([CHECK_VERSION, n])
    return [items[i] for i in sorted(rng.choice(len(items), size=n, replace=False).tolist())]


def category_counts(items: Iterable[CheckItem]) -> dict[str, int]:
    """Items per category, in ``CATEGORIES`` order."""
    counts: dict[str, int] = {}
    for it in items:
        counts[it.category] = counts.get(it.category, 0) + 1
    return {c: counts[c] for c in CATEGORIES if c in counts}
