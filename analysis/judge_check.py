"""Judges are checked before they are believed: a labelled set of answers, and how each judge does on it.

The check set is built deterministically from the benchmark files the user
has and from the persona scenario's gold (no file needed). Each item is a
(question, gold answer, candidate answer, label) where the label says
whether a careful grader would accept the candidate. Categories:

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

For every judge: accuracy against the labels (an unjudged item, NaN, counts
as a miss), false-accept rate (fail items it accepted), false-reject rate
(pass items it rejected), Cohen's kappa of its verdicts against the labels
(judged items), the unjudged count, and the same per category and source.
A judge below ``RELIABLE_ACCURACY`` is marked unreliable wherever its
figures appear, deterministic judges included: their check
(``deterministic_check``) is made on the file-free set (persona items only,
what ``memsim judge-check --no-locomo`` checks), so the same code gives the
same mark on every machine and ``metrics.json`` stays a function of the rows.

A run with an LLM judge records the check result in its spec
(``judge_checks_for_run``); the result is cached by judge, model, prompt
hash and check-set digest in ``judge_checks.sqlite`` (a ``memsim.memory.kvcache``
store), so the check runs once per judge configuration. A run sizes its
check with ``--judge-check N`` (N items drawn from the set, 0: no check,
the judge is then marked unreliable) or reuses an earlier ``memsim
judge-check`` result (``--judge-check-from``); a dry run counts the check's
calls (``judge_check_estimate``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memsim.core.errors import UserError
from memsim.core.table import text_table
from memsim.core.streams import seeded

__all__ = [
    "CHECK_VERSION",
    "CATEGORIES",
    "RELIABLE_ACCURACY",
    "CheckItem",
    "build_check_set",
    "check_set_digest",
    "score_judge",
    "check_metrics",
    "cohen_kappa",
    "check_judge",
    "judge_checks_for_run",
    "judge_check_estimate",
    "format_check_estimate",
    "draw_items",
    "read_check_result",
    "format_check_table",
    "write_check",
    "judge_mark",
    "deterministic_check",
    "stderr_progress",
    "category_counts",
]

log = logging.getLogger(__name__)

CHECK_VERSION = 1
"""Bumped whenever the way items are built changes (part of every cache key)."""

RELIABLE_ACCURACY = 0.90
"""A judge whose check accuracy is below this is marked unreliable."""

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


# --------------------------------------------------------------------------- building the set


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


# --------------------------------------------------------------------------- scoring


def score_judge(judge: Any, items: Sequence[CheckItem], progress: Callable[[int], None] | None = None) -> list[float]:
    """The judge's score of every item (NaN: no readable verdict, a miss whatever the label)."""
    from memsim.sim.answer.judges import judge_verdict

    out = []
    for i, it in enumerate(items):
        verdict = judge_verdict(judge, question=it.question, gold=it.gold, answer=it.answer, category=it.kind,
                                question_id=it.question_id)
        # A run scores an unreadable reply wrong; the check must not credit it with rejecting a fail item.
        out.append(float(verdict.score) if verdict.readable else math.nan)
        if progress is not None:
            progress(i + 1)
    return out


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's kappa of two binary raters; None with no items; 1.0 when both are constant and equal."""
    x, y = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if x.size == 0:
        return None
    po = float((x == y).mean())
    px, py = float(x.mean()), float(y.mean())
    pe = px * py + (1 - px) * (1 - py)
    if pe >= 1.0:
        return 1.0 if po == 1.0 else 0.0
    return (po - pe) / (1 - pe)


def _rates(labels: np.ndarray, scores: np.ndarray) -> dict[str, Any]:
    from memsim.sim.answer.judges import JUDGE_PASS

    judged = ~np.isnan(scores)
    verdict = np.where(judged, scores >= JUDGE_PASS, False)
    right = judged & (verdict == labels)
    fails, passes = ~labels, labels
    return {
        "n": int(labels.size),
        "unjudged": int((~judged).sum()),
        "accuracy": float(right.mean()) if labels.size else None,
        "false_accept": float((judged & fails & verdict).sum() / fails.sum()) if fails.any() else None,
        "false_reject": float((judged & passes & ~verdict).sum() / passes.sum()) if passes.any() else None,
        "kappa": cohen_kappa(verdict[judged].tolist(), labels[judged].tolist()),
    }


def check_metrics(items: Sequence[CheckItem], scores: Sequence[float]) -> dict[str, Any]:
    """Accuracy, false-accept and false-reject rates, kappa and unjudged count: overall, per category, per source.

    Accuracy counts an unjudged item as a miss; kappa is over judged items;
    the rates divide by every fail (pass) item.
    """
    labels = np.array([it.label for it in items], dtype=bool)
    x = np.array(scores, dtype=float)
    out = _rates(labels, x)
    for group in ("category", "source"):
        keys = list(dict.fromkeys(getattr(it, group) for it in items))
        out[f"per_{group}"] = {
            k: _rates(labels[[getattr(it, group) == k for it in items]], x[[getattr(it, group) == k for it in items]])
            for k in keys
        }
    out["reliable"] = out["accuracy"] is not None and out["accuracy"] >= RELIABLE_ACCURACY
    return out


# --------------------------------------------------------------------------- one judge, cached


def _judge_key(judge: Any, digest: str) -> bytes:
    desc = dict(judge.describe()) if hasattr(judge, "describe") else {"name": judge.name}
    desc.pop("endpoint", None) if desc.get("kind") == "local" else None
    # The settings that shape replies (sampling, the model file) live on the client under any wrappers.
    llm = getattr(judge, "llm", None)
    while llm is not None and not callable(getattr(llm, "request_settings", None)):
        llm = getattr(llm, "inner", None)
    settings = getattr(llm, "request_settings", None)
    payload = {
        "version": CHECK_VERSION,
        "judge": desc,
        "prompt_hash": getattr(judge, "prompt_hash", ""),
        "settings": settings() if callable(settings) else None,
        "items": digest,
    }
    blob = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).digest()


def check_judge(
    judge: Any,
    items: Sequence[CheckItem],
    *,
    digest: str | None = None,
    cache: bool = True,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """A judge's check result, from the cache when the same judge, model, prompts and items were checked before.

    Deterministic judges are never cached (they are fast). The result holds
    ``check_metrics`` plus ``scores`` (per item, in order), the judge's
    description, ``items`` (the digest) and ``cached``.
    """
    from memsim.sim.answer.judges import LLM_JUDGES

    digest = digest or check_set_digest(items)
    store = None
    key = _judge_key(judge, digest)
    if cache and judge.name in LLM_JUDGES:
        from memsim.memory.kvcache import KVCache, default_cache_dir

        store = KVCache(default_cache_dir() / "judge_checks.sqlite", label="judge check cache").open()
        hit = store.get(key)
        if hit is not None:
            store.close()
            result = json.loads(hit)
            result["cached"] = True
            return result
    scores = score_judge(judge, items, progress)
    result = {
        **check_metrics(items, scores),
        "judge": dict(judge.describe()) if hasattr(judge, "describe") else {"name": judge.name},
        "items": digest,
        "scores": [None if math.isnan(s) else s for s in scores],
        "cached": False,
    }
    if store is not None:
        store.put(key, json.dumps(result).encode("utf-8"))
        store.close()
    return result


def draw_items(items: Sequence[CheckItem], n: int | None) -> list[CheckItem]:
    """``n`` items drawn from the set without replacement, in the set's order (all of them when ``n`` is None or larger).

    The draw is seeded by ``n`` alone, so the same size gives the same items (and one cached check).
    """
    if n is None or n >= len(items):
        return list(items)
    rng = seeded([CHECK_VERSION, n])
    return [items[i] for i in sorted(rng.choice(len(items), size=n, replace=False).tolist())]


def read_check_result(path: str | Path) -> dict[str, Any]:
    """An earlier ``memsim judge-check`` result: its folder or its ``judge_check.json``.

    Raises:
        UserError: the file is missing or is not a judge-check result.
    """
    p = Path(path)
    file = p / "judge_check.json" if p.is_dir() else p
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"--judge-check-from {path}: cannot read a judge-check result ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("judges"), dict) or "items" not in data:
        raise UserError(f"--judge-check-from {file}: not a memsim judge-check result (no 'judges' and 'items')")
    return data


_MATCHED = ("name", "kind", "model", "temperature", "max_tokens", "prompt_ids", "prompts")
"""What a reused check must share with the run's judge (the endpoint and the prompt file's path may differ)."""


def _reused(judge: Any, data: Mapping[str, Any], path: str | Path) -> dict[str, Any]:
    """The entry of ``data`` that checked this judge (same name, model, settings and prompts)."""
    want = {k: judge.describe().get(k) for k in _MATCHED}
    for entry in data["judges"].values():
        desc = entry.get("judge") or {}
        if {k: desc.get(k) for k in _MATCHED} == want:
            return dict(entry)
    held = ", ".join(data["judges"]) or "none"
    raise UserError(f"--judge-check-from {path}: no check of {judge.name} with model {want['model']} and "
                    f"{want['prompts']} prompts in it (it holds: {held}); run memsim judge-check with them")


def _run_judges(options: Any, default_judges: Sequence[str]) -> tuple[Any, list[str]]:
    """The options (validated) and the LLM judges they name."""
    from memsim.sim.answer.judges import LLM_JUDGES
    from memsim.sim.answer.options import AnswerOptions

    options = AnswerOptions.model_validate(options)  # an AnswerOptions, or a mapping of its fields
    return options, [n for n in (options.judge or default_judges) if n in LLM_JUDGES]


def judge_checks_for_run(
    options: Any,
    *,
    default_judges: Sequence[str],
    locomo: str | Path | None = None,
    longmemeval: str | Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """The check result of every LLM judge a run's answer options name, as its spec records it.

    Builds the judges exactly as the run will (model, official prompts), runs
    or reuses each check on ``options.judge_check`` items of the set (all by
    default), or takes it from ``options.judge_check_from``, and returns
    ``{"items": digest, "n_items": n, "sources": [...], "self_judging": bool,
    "judges": {name: summary}}`` (``"from"``: the file reused); ``{}`` when the
    options name no LLM judge, ask for a dry run or for no check
    (``judge_check`` 0).

    Raises:
        UserError: as ``answer_setup`` (self-judging without the flag, bad prompt files, ...); a reused
            result that lacks one of the run's judges.
    """
    from memsim.sim.answer.judges import LLM_JUDGES
    from memsim.sim.answer.setup import answer_setup

    options, llm_names = _run_judges(options, default_judges)
    if not llm_names or options.dry_run or options.judge_check == 0:
        return {}
    setup = answer_setup(options.model_copy(update={"no_cache": True}), default_judges=default_judges)
    if setup is None:
        return {}
    try:
        llm_judges = [j for j in setup.judges if j.name in LLM_JUDGES]
        if options.judge_check_from:
            data = read_check_result(options.judge_check_from)
            return {
                "items": data["items"],
                "n_items": data.get("n_items"),
                "sources": list((data.get("meta") or {}).get("sources") or []),
                "threshold": RELIABLE_ACCURACY,
                "self_judging": setup.self_judging,
                "from": str(options.judge_check_from),
                "judges": {j.name: _summary_of(_reused(j, data, options.judge_check_from),
                                               self_judging=setup.self_judging) for j in llm_judges},
            }
        items = draw_items(build_check_set(locomo=locomo, longmemeval=longmemeval), options.judge_check)
        digest = check_set_digest(items)
        judges: dict[str, Any] = {}
        for judge in llm_judges:
            step = (lambda i, _n=judge.name: progress(_n, i, len(items))) if progress else None
            result = check_judge(judge, items, digest=digest, cache=not options.no_cache, progress=step)
            judges[judge.name] = _summary_of(result, self_judging=setup.self_judging)
        return {
            "items": digest,
            "n_items": len(items),
            "sources": sorted({it.source for it in items}),
            "threshold": RELIABLE_ACCURACY,
            "self_judging": setup.self_judging,
            "judges": judges,
        }
    finally:
        setup.close()


def judge_check_estimate(
    options: Any,
    *,
    default_judges: Sequence[str],
    locomo: str | Path | None = None,
    longmemeval: str | Path | None = None,
) -> dict[str, Any]:
    """What the run's judge check would spend, counted by the dry-run clients (no model is called).

    Returns ``{}`` when the options name no LLM judge, else ``{"n_items": n,
    "judges": [...], "calls", "prompt_tokens", "completion_tokens",
    "cost_usd"}`` (``"skipped"``: ``judge_check`` 0; ``"from"``: a reused
    result, which costs nothing). Like the run's estimate it ignores the
    caches: a check cached before makes no call.
    """
    from memsim.sim.answer.judges import LLM_JUDGES
    from memsim.sim.answer.setup import answer_setup

    options, llm_names = _run_judges(options, default_judges)
    if not llm_names:
        return {}
    none = {"n_items": 0, "judges": llm_names, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    if options.judge_check == 0:
        return {**none, "skipped": True}
    if options.judge_check_from:
        read_check_result(options.judge_check_from)  # a bad file fails now, not after the dry run
        return {**none, "from": str(options.judge_check_from)}
    setup = answer_setup(options.model_copy(update={"dry_run": True, "no_cache": True}), default_judges=default_judges)
    if setup is None:
        return {}
    try:
        items = draw_items(build_check_set(locomo=locomo, longmemeval=longmemeval), options.judge_check)
        for judge in setup.judges:
            if judge.name in LLM_JUDGES:
                score_judge(judge, items)
        spent = setup.meter.summary()
    finally:
        setup.close()
    return {**none, **{k: spent.get(k, 0) for k in ("calls", "prompt_tokens", "completion_tokens", "cost_usd")},
            "n_items": len(items)}


def format_check_estimate(estimate: Mapping[str, Any] | None) -> str:
    """The dry run's line about the judge check ("" when the run has no LLM judge)."""
    if not estimate:
        return ""
    judges = ", ".join(estimate["judges"])
    if estimate.get("skipped"):
        return f"  judge check: skipped (--judge-check 0): {judges} will be marked unreliable (no check)"
    if estimate.get("from"):
        return f"  judge check: reused from {estimate['from']}: 0 calls"
    cost = estimate["cost_usd"]
    cost_text = "unknown (no price)" if isinstance(cost, float) and math.isnan(cost) else f"${cost:.4f}"
    return (
        f"  judge check before the run ({judges} on {estimate['n_items']} labelled items, --judge-check N to size it): "
        f"{estimate['calls']} calls, {estimate['prompt_tokens']:,} prompt tokens, at most "
        f"{estimate['completion_tokens']:,} completion tokens, at most {cost_text}; none if cached"
    )


def stderr_progress(judge: str, done: int, total: int) -> None:
    """Progress of a judge check, logged at INFO (standard error at the command line): at the start and every 100 items."""
    if done == 1 or done % 100 == 0 or done == total:
        log.info("judge check %s: %d/%d items", judge, done, total)


def _summary_of(result: Mapping[str, Any], *, self_judging: bool) -> dict[str, Any]:
    # Whether the result came from the cache is left out: a resumed run must record the same spec.
    desc = result.get("judge", {})
    return {
        "accuracy": result["accuracy"],
        "false_accept": result["false_accept"],
        "false_reject": result["false_reject"],
        "kappa": result["kappa"],
        "unjudged": result["unjudged"],
        "n": result["n"],
        "reliable": bool(result["reliable"]),
        "self_judging": self_judging,
        "model": desc.get("model"),
        "prompts": desc.get("prompts", "paraphrase"),
        "prompt_source": desc.get("prompt_source", ""),
    }


@functools.lru_cache(maxsize=None)
def _file_free_items() -> tuple[CheckItem, ...]:
    return tuple(build_check_set())


@functools.lru_cache(maxsize=None)
def _deterministic_check(name: str) -> tuple[tuple[str, Any], ...]:
    from memsim.sim.answer.judges import make_judge

    items = _file_free_items()
    result = check_judge(make_judge(name), items, cache=False)
    summary = {k: result[k] for k in ("accuracy", "false_accept", "false_reject", "kappa", "unjudged", "n")}
    return tuple({**summary, "reliable": bool(result["reliable"]), "deterministic": True,
                  "items": result["items"]}.items())


def deterministic_check(name: str) -> dict[str, Any]:
    """A deterministic judge's check on the file-free set (persona items), in the shape a run records an LLM judge's.

    Computed once per process (a fraction of a second): the judge is code, so
    its check is the same for every run and needs no record in the spec.
    """
    return dict(_deterministic_check(name))


def judge_mark(check: Mapping[str, Any] | None) -> str:
    """The marks beside a judge's figures: unreliable, self-judging, paraphrase; "" when none apply.

    A deterministic judge (``check["deterministic"]``) is marked only when it is below the bar.
    """
    if not check:
        return ""
    from memsim.sim.answer.judges import PARAPHRASE_NOTE

    marks = []
    acc = check.get("accuracy")
    if not check.get("reliable"):
        acc_text = "no check" if acc is None else f"check {100 * acc:.1f}% < {100 * RELIABLE_ACCURACY:.0f}%"
        marks.append(f"unreliable ({acc_text})")
    elif check.get("deterministic"):
        return ""
    else:
        marks.append(f"check {100 * acc:.1f}%")
    if check.get("self_judging"):
        marks.append("self-judging")
    if not check.get("deterministic") and check.get("prompts", "paraphrase") != "official":
        marks.append(PARAPHRASE_NOTE)
    return "; ".join(marks)


# --------------------------------------------------------------------------- output


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def format_check_table(results: Mapping[str, Mapping[str, Any]], *, n_items: int | None = None) -> str:
    """One row per judge (accuracy, false accept, false reject, kappa, unjudged, mark), then per category."""
    names = list(results)
    rows = []
    for name, r in results.items():
        kappa = "-" if r.get("kappa") is None else f"{r['kappa']:.3f}"
        mark = "reliable" if r.get("reliable") else f"UNRELIABLE (< {100 * RELIABLE_ACCURACY:.0f}%)"
        rows.append([name, _pct(r["accuracy"]), _pct(r["false_accept"]), _pct(r["false_reject"]), kappa,
                     r["unjudged"], mark])
    lines = [text_table(["judge", "acc%", "FA%", "FR%", "kappa", "unjudged", "mark"], rows, align="lrrrrrl")]
    cats = [c for c in CATEGORIES if any(c in r.get("per_category", {}) for r in results.values())]
    if cats:
        lines += ["", "accuracy % per category (label: pass/fail, n items)"]
        first = next(iter(results.values()))
        rows = [
            [c, "pass" if CATEGORIES[c] else "fail", first.get("per_category", {}).get(c, {}).get("n", 0),
             *(_pct(r.get("per_category", {}).get(c, {}).get("accuracy")) for r in results.values())]
            for c in cats
        ]
        lines.append(text_table(["category", "label", "n", *names], rows))
    if n_items is not None:
        lines.append("")
        lines.append(
            f"{n_items} labelled items; accuracy counts an unjudged item as a miss; FA = fail items accepted, "
            f"FR = pass items rejected; a judge below {100 * RELIABLE_ACCURACY:.0f}% is unreliable"
        )
    return "\n".join(lines)


def write_check(
    out_dir: str | Path,
    items: Sequence[CheckItem],
    results: Mapping[str, Mapping[str, Any]],
    *,
    meta: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``items.csv`` (every item with every judge's score), ``judge_check.json`` and ``table.txt``."""
    import polars as pl

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frame = pl.DataFrame([asdict(it) for it in items])
    for name, r in results.items():
        frame = frame.with_columns(pl.Series(f"score_{name}", [math.nan if s is None else s for s in r["scores"]],
                                             dtype=pl.Float64))
    frame.write_csv(out / "items.csv")
    summary = {
        "meta": dict(meta or {}),
        "n_items": len(items),
        "items": check_set_digest(items),
        "threshold": RELIABLE_ACCURACY,
        "judges": {n: {k: v for k, v in r.items() if k != "scores"} for n, r in results.items()},
    }
    (out / "judge_check.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out / "table.txt").write_text(format_check_table(results, n_items=len(items)) + "\n", encoding="utf-8")
    return out


def category_counts(items: Iterable[CheckItem]) -> dict[str, int]:
    """Items per category, in ``CATEGORIES`` order."""
    counts: dict[str, int] = {}
    for it in items:
        counts[it.category] = counts.get(it.category, 0) + 1
    return {c: counts[c] for c in CATEGORIES if c in counts}
