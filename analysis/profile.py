"""The difficulty profile of a scenario stream: how hard its questions are for a plain vector store.

``profile(stream)`` reads a generated stream (any scenario, real or
synthetic) and measures what makes retrieval easy or hard:

- size: users, sessions, turns, and the distinct-text ratio (distinct turn
  texts / turns; 1.0 when no text repeats);
- store size at question time: the asking user's turns ingested before the
  question, minus those a deletion removed (median, p10, p90);
- evidence turns per question (distribution, share with two or more) and the
  share of questions on changed facts (a non-empty ``superseded``);
- question-evidence similarity: the cosine of the question and each of its
  evidence turns' text (MiniLM through ``memsim.memory.embed``, so the
  vectors come from and go to the shared embedding cache), and the share of
  the question's content words that occur in its evidence turns;
- naive retrieval: memsim's ``naive`` system replays the stream (sessions
  ingested, deletions forgotten) and is probed at each question with the whole
  store as ``k``; the rank of the first evidence turn and of the last one
  (where all evidence is covered), and ``recall_all@k`` by kind and by half
  (each user's scored questions split at that user's median, as the learning
  tables split them).

A question is scored when it has evidence and is not excluded; only scored
questions enter the evidence, similarity and retrieval figures.

``text_diversity(stream)`` (also under ``profile(...)["diversity"]``) measures
how varied the text is, so that a synthetic world can be held against a
real-text stream:

- prefix share, per role: the share of turns of at least six words whose
  first six words (lowercased) are one of the role's 20 most frequent
  six-word openings. Roles are ``user`` and ``assistant``; in a stream of
  two named people (LoCoMo) the one who speaks first in a user's first
  session counts as the user, the other as the assistant;
- skeleton ratio: distinct sentence skeletons per sentence, over every turn.
  A sentence ends at ``. ! ?`` before a space; its skeleton is the sentence
  with every run of digits written ``0`` and every word that starts with a
  capital letter written ``X`` (the first word of a sentence too), the rest
  as written;
- best cue precision (where the stream says which turns bear facts, as a
  synthetic world's claim log does): over the openings of user turns (their
  first one, two or three words, lowercased) seen in at least 20 user turns,
  the highest share of fact-bearing turns among the turns with that opening,
  with the opening and its count; "n/a" (None) for a stream that does not
  say;
- best n-gram cue precision: the same, over every word n-gram (n = 1 to 3,
  lowercased, anywhere in a user turn) found in at least 30 user turns: a
  phrase that marks fact-bearing turns wherever it stands (the life world's
  bound is 0.5).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memsim.memory.base import render_turn
from memsim.scenarios.base import ScenarioStream
from memsim.sim.events import Deletion, Question, Session
from memsim.sim.scorers import evidence_scores, first_evidence_rank

__all__ = ["profile", "format_profile", "config_stream", "content_words", "skeleton", "text_diversity", "STOPWORDS"]

STOPWORDS = frozenset(
    """a about after again all also am an and any are as at be been before being but by can could did do does
    doing for from had has have having he her here hers him his how i if in into is it its just me more most my
    no nor not now of off on once only or other our ours out over own same she should so some such than that
    the their theirs them then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours yourself yeah oh ok okay really don didn
    doesn isn wasn aren won""".split()
)
"""Function words left out of the content-word overlap (English; a short fixed list, so the figure is stable)."""

_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` that are not ``STOPWORDS`` (a clitic such as ``'s`` or ``'m`` dropped)."""
    words = (re.split("['’]", w)[0] for w in _WORD.findall(text.lower()))
    return {w for w in words if w not in STOPWORDS}


def _scored(q: Question) -> bool:
    return bool(q.evidence) and q.excluded is None


def _spread(values: Sequence[float]) -> dict[str, float | int | None]:
    """n, mean, p10, median, p90 of ``values`` (None when empty)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return {"n": 0, "mean": None, "p10": None, "median": None, "p90": None}
    p10, med, p90 = np.percentile(x, [10, 50, 90])
    return {"n": int(x.size), "mean": round(float(x.mean()), 4), "p10": round(float(p10), 4),
            "median": round(float(med), 4), "p90": round(float(p90), 4)}


def _mean(values: Iterable[float]) -> float | None:
    x = [v for v in values if not math.isnan(v)]
    return round(float(np.mean(x)), 4) if x else None


def _naive_default() -> Any:
    from memsim.memory.naive import NaiveMemory
    from memsim.memory.resources import Resources

    return NaiveMemory(resources=Resources())


def profile(stream: ScenarioStream, *, k: int = 10, system: Callable[[], Any] | None = None,
            fact_bearing: Collection[str] | None = None) -> dict[str, Any]:
    """The difficulty profile of ``stream`` (see the module docstring), JSON-ready.

    Args:
        stream: a generated longitudinal stream (``stream.events``).
        k: the cut-off of ``recall_all@k``.
        system: makes the store that is replayed and probed (default: memsim's
            ``naive`` on the packaged MiniLM and the shared cache); it must
            have ``ingest``, ``forget``, ``probe`` and an ``embedder``.
        fact_bearing: ids of the turns that bear facts, for the diversity figures (``text_diversity``;
            default: from the stream's claim log where it has one).

    Raises:
        ValueError: ``k`` < 1, or the stream is streamed episodes (a static benchmark) rather than events.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if stream.streamed is not None:
        raise ValueError("profile reads a longitudinal stream (events), not a static benchmark's episodes")
    naive = (system or _naive_default)()
    sessions = [e for e in stream.events if isinstance(e, Session)]
    questions = [e for e in stream.events if isinstance(e, Question)]
    texts = [t.text for s in sessions for t in s.turns]
    turn_by_id = {t.turn_id: t for s in sessions for t in s.turns}
    scored = [q for q in questions if _scored(q)]

    # Every text the profile embeds, embedded once in large batches (as a run does before its clock starts).
    rendered = [render_turn(t) for t in turn_by_id.values()]
    naive.embedder.encode(list(dict.fromkeys([*rendered, *texts, *(q.text for q in scored)])))

    held_at, ranks = _replay(stream, naive, turn_by_id, k)
    cosines, overlaps = _similarity(scored, turn_by_id, naive.embedder)

    n_ev = Counter(len(q.evidence) for q in scored)
    half = _halves(scored)
    recall = {q.question_id: ranks[q.question_id][2] for q in scored if q.question_id in ranks}
    kinds = sorted({q.kind for q in scored})
    firsts = [r[0] for r in ranks.values()]
    lasts = [r[1] for r in ranks.values()]
    totals = stream.totals()
    return {
        "diversity": text_diversity(stream, fact_bearing=fact_bearing),
        "users": totals["users"],
        "sessions": totals["sessions"],
        "turns": totals["turns"],
        "questions": totals["questions"],
        "scored_questions": len(scored),
        "deletions": totals["deletions"],
        "span_days": totals["span_days"],
        "distinct_texts": len(set(texts)),
        "distinct_text_ratio": round(len(set(texts)) / len(texts), 4) if texts else None,
        "store_at_question": _spread([held_at[q.question_id] for q in questions]),
        "evidence_per_question": {str(n): c for n, c in sorted(n_ev.items())},
        "share_evidence_2plus": round(sum(c for n, c in n_ev.items() if n >= 2) / len(scored), 4) if scored else None,
        "share_changed_fact": round(sum(bool(q.superseded) for q in scored) / len(scored), 4) if scored else None,
        "question_evidence_cosine": _spread(cosines),
        "content_word_overlap": _spread(overlaps),
        "k": k,
        "naive_first_evidence_rank": {**_spread([r for r in firsts if r is not None]),
                                      "not_found": sum(r is None for r in firsts)},
        "naive_all_evidence_rank": {**_spread([r for r in lasts if r is not None]),
                                    "not_found": sum(r is None for r in lasts)},
        f"naive_recall_all@{k}": _recall_summary(scored, recall, half, kinds),
    }


def _replay(stream: ScenarioStream, naive: Any, turn_by_id: Mapping[str, Any],
            k: int) -> tuple[dict[str, int], dict[str, tuple[int | None, int | None, float]]]:
    """Replay the stream into the store, probing it at each scored question with the whole store as ``k``.

    Returns:
        ``question_id -> turns the asking user's store holds`` (every question), and ``question_id ->
        (rank of the first evidence turn, rank where all evidence is covered, recall_all@k)`` (scored ones).
    """
    store: dict[str, int] = Counter()
    deleted: set[str] = set()
    held_at: dict[str, int] = {}
    ranks: dict[str, tuple[int | None, int | None, float]] = {}
    for e in stream.events:  # time-ordered: what the naive store holds when each question is asked
        if isinstance(e, Session):
            naive.ingest(e.turns, user_id=e.user_id, now=e.time)
            store[e.user_id] += len(e.turns)
        elif isinstance(e, Deletion):
            gone = [t for t in e.turn_ids if t not in deleted and t in turn_by_id]
            deleted.update(gone)
            store[e.user_id] -= len(gone)
            naive.forget(e.turn_ids, user_id=e.user_id, now=e.time)
        elif isinstance(e, Question):
            held_at[e.question_id] = store[e.user_id]
            if _scored(e):
                hits = naive.probe(e.text, user_id=e.user_id, now=e.time, k=max(1, store[e.user_id]))
                prov = [h.source_turn_ids for h in hits]
                first = first_evidence_rank(prov, e.evidence)
                found = [i for i, p in enumerate(prov, start=1) if set(p) & set(e.evidence)]
                covered = set().union(*prov) >= set(e.evidence) if prov else False
                ranks[e.question_id] = (first, found[-1] if covered and found else None,
                                        evidence_scores(prov, e.evidence, ks=(k,))[f"recall_all@{k}"])
    return held_at, ranks


def _similarity(scored: Sequence[Question], turn_by_id: Mapping[str, Any], vec: Any) -> tuple[list[float], list[float]]:
    """Question-evidence cosines (one per evidence turn) and content-word overlaps (one per question)."""
    cosines: list[float] = []
    overlaps: list[float] = []
    for q in scored:
        ev = [turn_by_id[t] for t in q.evidence if t in turn_by_id]
        if not ev:
            continue
        qv = vec.encode_one(q.text)
        cosines.extend(float(np.dot(qv, v)) for v in vec.encode([t.text for t in ev]))
        words = content_words(q.text)
        if words:
            said = set().union(*(content_words(t.text) for t in ev))
            overlaps.append(len(words & said) / len(words))
    return cosines, overlaps


def _recall_summary(scored: Sequence[Question], recall: Mapping[str, float], half: Mapping[str, int],
                    kinds: Sequence[str]) -> dict[str, Any]:
    """``recall_all@k`` over every scored question, by half and by kind (each by half)."""
    return {
        "all": _mean(recall.values()),
        "first_half": _mean(v for q, v in recall.items() if half[q] == 0),
        "second_half": _mean(v for q, v in recall.items() if half[q] == 1),
        "by_kind": {kind: {"n": sum(q.kind == kind for q in scored),
                           "all": _mean(recall[q.question_id] for q in scored if q.kind == kind),
                           "first_half": _mean(recall[q.question_id] for q in scored if q.kind == kind and half[q.question_id] == 0),
                           "second_half": _mean(recall[q.question_id] for q in scored if q.kind == kind and half[q.question_id] == 1)}
                    for kind in kinds},
    }


_TOKEN = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_DIGITS = re.compile(r"\d+")
_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*")

PREFIX_WORDS = 6
"""Words in the openings the prefix share counts."""
TOP_PREFIXES = 20
"""How many of the most frequent openings the prefix share counts."""
CUE_MIN_TURNS = 20
"""Turns an opening must start before its precision as a cue for fact-bearing turns is counted."""
NGRAM_MIN_TURNS = 30
"""User turns an n-gram must occur in before its precision as a cue for fact-bearing turns is counted."""


def _roles(sessions: Sequence[Session]) -> dict[str, str]:
    """turn id -> ``user`` or ``assistant`` (a named speaker: ``user`` when first to speak in the user's first session)."""
    first: dict[str, str] = {}
    out: dict[str, str] = {}
    for s in sessions:
        for t in s.turns:
            if t.speaker in ("user", "assistant"):
                out[t.turn_id] = t.speaker
                continue
            opener = first.setdefault(t.user_id, t.speaker)
            out[t.turn_id] = "user" if t.speaker == opener else "assistant"
    return out


def skeleton(sentence: str) -> str:
    """A sentence with digit runs written ``0`` and capitalised words ``X``, spaces collapsed (the rest as written)."""
    return " ".join(_CAPITALISED.sub("X", _DIGITS.sub("0", sentence)).split())


def _prefix_share(words: Sequence[Sequence[str]]) -> dict[str, Any]:
    long = [tuple(w[:PREFIX_WORDS]) for w in words if len(w) >= PREFIX_WORDS]
    if not long:
        return {"turns": 0, "share": None, "top": []}
    counts = Counter(long).most_common(TOP_PREFIXES)
    return {"turns": len(long), "share": round(sum(n for _, n in counts) / len(long), 4),
            "top": [[" ".join(p), n] for p, n in counts[:3]]}


def text_diversity(stream: ScenarioStream, *, fact_bearing: Collection[str] | None = None) -> dict[str, Any]:
    """Prefix share per role, skeleton ratio and best cue precision of a stream's text (module docstring).

    Args:
        stream: a generated longitudinal stream.
        fact_bearing: the ids of the turns that bear facts (a synthetic world's claim log says;
            ``memsim.scenarios.claims.fact_bearing``); None: taken from ``stream.meta["claims"]``
            when the stream has one, else the cue precision is None.
    """
    sessions = [e for e in stream.events if isinstance(e, Session)]
    roles = _roles(sessions)
    if fact_bearing is None and "claims" in (stream.meta or {}):
        from memsim.scenarios.claims import fact_bearing as from_claims

        fact_bearing = from_claims(stream.meta)
    words: dict[str, list[list[str]]] = {"user": [], "assistant": []}
    sentences = 0
    skeletons: set[str] = set()
    openings: Counter[tuple[str, ...]] = Counter()
    bearing: Counter[tuple[str, ...]] = Counter()
    grams: Counter[tuple[str, ...]] = Counter()
    gram_bearing: Counter[tuple[str, ...]] = Counter()
    marked = set(fact_bearing) if fact_bearing is not None else set()
    for s in sessions:
        for t in s.turns:
            tokens = _TOKEN.findall(t.text.lower())
            role = roles[t.turn_id]
            words[role].append(tokens)
            for sentence in _SENTENCE_END.split(t.text.strip()):
                if sentence:
                    sentences += 1
                    skeletons.add(skeleton(sentence))
            if fact_bearing is not None and role == "user":
                bears = t.turn_id in marked
                for n in (1, 2, 3):
                    if len(tokens) >= n:
                        openings[tuple(tokens[:n])] += 1
                        bearing[tuple(tokens[:n])] += bears
                found = {tuple(tokens[i:i + n]) for n in (1, 2, 3) for i in range(len(tokens) - n + 1)}
                grams.update(found)
                if bears:
                    gram_bearing.update(found)
    cue: dict[str, Any] | None = None
    if fact_bearing is not None:
        ranked = sorted(((bearing[o] / n, n, " ".join(o)) for o, n in openings.items() if n >= CUE_MIN_TURNS),
                        key=lambda x: (-x[0], -x[1], x[2]))
        cue = ({"precision": round(ranked[0][0], 4), "opening": ranked[0][2], "turns": ranked[0][1],
                "fact_bearing_turns": len(marked)} if ranked else {"precision": None, "opening": "", "turns": 0,
                                                                   "fact_bearing_turns": len(marked)})
    ngram: dict[str, Any] | None = None
    if fact_bearing is not None:
        best = min(((-gram_bearing[g] / n, -n, " ".join(g)) for g, n in grams.items() if n >= NGRAM_MIN_TURNS),
                   default=None)
        ngram = ({"precision": round(-best[0], 4), "ngram": best[2], "turns": -best[1]} if best is not None
                 else {"precision": None, "ngram": "", "turns": 0})
    return {
        "prefix_share": {role: _prefix_share(w) for role, w in words.items()},
        "sentences": sentences,
        "skeletons": len(skeletons),
        "skeleton_ratio": round(len(skeletons) / sentences, 4) if sentences else None,
        "best_cue": cue,
        "best_ngram_cue": ngram,
    }


def _halves(scored: Sequence[Question]) -> dict[str, int]:
    """``question_id -> 0 | 1``: each user's scored questions split at that user's median index."""
    by_user: dict[str, list[str]] = {}
    for q in scored:
        by_user.setdefault(q.user_id, []).append(q.question_id)
    out: dict[str, int] = {}
    for ids in by_user.values():
        med = float(np.median(np.arange(len(ids))))
        out.update({qid: int(i >= med) for i, qid in enumerate(ids)})
    return out


def format_profile(p: Mapping[str, Any]) -> str:
    """The profile as aligned text lines, for the terminal."""

    def spread(s: Mapping[str, Any]) -> str:
        if not s["n"]:
            return "-"
        return f"median {s['median']:g} (p10 {s['p10']:g}, p90 {s['p90']:g}), n {s['n']:,}"

    k = p["k"]
    r = p[f"naive_recall_all@{k}"]

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"

    lines = [
        f"users {p['users']:,}  sessions {p['sessions']:,}  turns {p['turns']:,}  questions {p['questions']:,} "
        f"(scored {p['scored_questions']:,})  deletions {p['deletions']:,}  span {p['span_days']:g} days",
        f"distinct texts          {p['distinct_texts']:,} ({pct(p['distinct_text_ratio'])} of turns)",
        f"store at question time  {spread(p['store_at_question'])}",
        f"evidence per question   {', '.join(f'{n}: {c:,}' for n, c in p['evidence_per_question'].items())}; "
        f"share with 2+ {pct(p['share_evidence_2plus'])}",
        f"changed facts           {pct(p['share_changed_fact'])} of scored questions",
        f"question-evidence cos   {spread(p['question_evidence_cosine'])}",
        f"content-word overlap    {spread(p['content_word_overlap'])}",
        f"naive first-evid. rank  {spread(p['naive_first_evidence_rank'])}; not found {p['naive_first_evidence_rank']['not_found']:,}",
        f"naive all-evid. rank    {spread(p['naive_all_evidence_rank'])}; not found {p['naive_all_evidence_rank']['not_found']:,}",
        f"naive recall_all@{k:<5}  all {pct(r['all'])}  first half {pct(r['first_half'])}  second half {pct(r['second_half'])}",
    ]
    d = p.get("diversity")
    if d:
        share = d["prefix_share"]

        def prefix(role: str) -> str:
            x = share[role]
            return f"{role} {pct(x['share'])} of {x['turns']:,}" if x["turns"] else f"{role} -"

        cue = d["best_cue"]
        cue_text = "n/a (the stream does not say which turns bear facts)" if cue is None else (
            "-" if cue["precision"] is None else
            f"{cue['precision']:.3f} (\"{cue['opening']}\", {cue['turns']:,} user turns; "
            f"{cue['fact_bearing_turns']:,} fact-bearing turns)")
        gram = d.get("best_ngram_cue")
        gram_text = "n/a" if gram is None else "-" if gram["precision"] is None else (
            f"{gram['precision']:.3f} (\"{gram['ngram']}\", {gram['turns']:,} user turns)")
        lines += [
            f"top-{TOP_PREFIXES} {PREFIX_WORDS}-word openings  {prefix('user')}; {prefix('assistant')} (turns of "
            f"{PREFIX_WORDS}+ words)",
            f"sentence skeletons      {d['skeletons']:,} of {d['sentences']:,} sentences ({pct(d['skeleton_ratio'])})",
            f"best cue precision      {cue_text}",
            f"best n-gram cue         {gram_text} (any 1-3 words, {NGRAM_MIN_TURNS}+ user turns)",
        ]
    width = max((len(kind) for kind in r["by_kind"]), default=4)
    for kind, v in r["by_kind"].items():
        lines.append(f"  {kind:<{width}}  n {v['n']:>5,}  all {pct(v['all'])}  first half {pct(v['first_half'])}  "
                     f"second half {pct(v['second_half'])}")
    return "\n".join(lines)


def config_stream(config: str | Path, *, seed: int | None = None) -> tuple[Any, Any, int]:
    """``(scenario, stream, seed)`` of a config file: its scenario built and generated as ``memsim run`` would.

    ``seed`` None: the config's ``[run] seed``. The stream is drawn from the
    seed's ``scenario`` stream, so it is the stream a run of the config plays.

    Raises:
        UserError: a missing or bad config, a bad scenario argument.
    """
    from memsim.scenarios.config import load_config
    from memsim.analysis.pipeline import scenario_for
    from memsim.core.streams import streams

    cfg = load_config(config)
    seed = cfg.run.seed if seed is None else int(seed)
    args = {k: v for k, v in cfg.scenario.items() if k != "name"}
    scenario = scenario_for(str(cfg.scenario["name"]), args, source=cfg.source)
    return scenario, scenario.generate(streams(seed)["scenario"]), seed
