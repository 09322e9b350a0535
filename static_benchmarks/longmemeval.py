"""LongMemEval: streaming loader, episodes and the official retrieval metrics.

The published files (``longmemeval_s``, ``longmemeval_m``,
``longmemeval_oracle`` and the ``*_cleaned`` releases) are JSON arrays of
instances. Each instance has one question and its own haystack:

- ``question_id`` (abstention questions end in ``_abs``), ``question_type``
  (one of ``QUESTION_TYPES``), ``question``, ``answer`` (string or number),
  ``question_date``;
- ``haystack_session_ids``, ``haystack_dates``, ``haystack_sessions``
  (parallel lists; a session is a list of ``{role, content, has_answer?}``
  turns) and ``answer_session_ids``.

Dates look like ``2023/05/30 (Tue) 23:40`` and carry no time zone (read as
UTC). Sessions are ordered by parsed date, not by file order (ties keep file
order). The M file is about 2.7 GB, so files are streamed instance by instance
with ``ijson``: memory is bounded by the largest instance, not the file.

Each instance becomes one ``Episode`` (``instance_episode``): its haystack
sessions at their dates, then its question. The engine plays it against
fresh systems (``memsim.scenarios.static.LongMemEvalBenchmark``); the scorers here
(``TurnScorer``, ``SessionScorer``) compute the official figures:

- Turn level: the keys are the *user* turns, id ``<session_id>_<index + 1>``
  where the index counts all turns of the session. Only user turns are
  ingested by the retrieval protocol, as the official corpus holds only user
  turns; the gold keys are the user turns with ``has_answer`` inside answer
  sessions. Session-level figures of a turn ranking are derived the way the
  official ``turn2session`` evaluation does (the cut-off grows until it
  covers k distinct sessions; relevance stays per retrieved item).
- Session level (``granularity="session"``): one key per session, the text of
  its user turns joined by spaces; gold sessions are the answer sessions with
  at least one user turn marked ``has_answer``.
- ``recall_any@k``, ``recall_all@k`` and ``ndcg_any@k`` for k in
  ``RETRIEVAL_KS``, with the official DCG (rank 1 weighs 1, rank r >= 2
  weighs ``1 / log2(r)``). Abstention questions are not scored.
- Instances without any gold key (single-session-assistant questions, whose
  evidence is an assistant turn) are unscored (NaN) by default; with
  ``empty_gold="official"`` they score as the official script scores them
  (recall_any 0, recall_all 1, nDCG 0), which its published averages include.

Ids that reveal gold never reach a system: answer sessions are named
``answer_...`` and abstention question ids end in ``_abs``, so every session
id becomes ``s`` + 16 hex digits of its sha256 (``opaque_session_id``), turn
keys keep their official form on that id, and user and question ids are
opaque too. The mapping is a hash, so the same session gets the same id in
every instance; the question carries its original id in ``extra``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any


from memsim.memory.base import Turn
from memsim.core.errors import UserError
from memsim.core.files import decode_utf8, read_limited
from memsim.sim.events import Episode, Question, Session
from memsim.core.streams import seeded
from memsim.static_benchmarks.longmemeval_load import (QUESTION_TYPES, Instance, LmeSession, LmeTurn, LoadWarnings,
                                                       instance_from_json, iter_instances, load_instances,
                                                       parse_lme_date, scan_instances)
from memsim.static_benchmarks.longmemeval_scoring import (RETRIEVAL_KS, SessionScorer, TurnScorer, official_dcg, score_ranking,
                                                          score_turn2session, session_of, turn_key)

if TYPE_CHECKING:
    pass

__all__ = [
    "QUESTION_TYPES",
    "RETRIEVAL_KS",
    "GRANULARITIES",
    "LmeTurn",
    "LmeSession",
    "Instance",
    "LoadWarnings",
    "parse_lme_date",
    "instance_from_json",
    "iter_instances",
    "load_instances",
    "scan_instances",
    "read_question_ids",
    "select_indices",
    "Selection",
    "select",
    "turn_key",
    "gold_turn_keys",
    "gold_session_ids",
    "memory_turns",
    "opaque_id",
    "opaque_session_id",
    "opaque_turn_key",
    "session_of",
    "instance_episode",
    "iter_episodes",
    "official_dcg",
    "score_ranking",
    "score_turn2session",
    "TurnScorer",
    "SessionScorer",
]

GRANULARITIES: tuple[str, ...] = ("turn", "session")
"""Key granularities of the retrieval protocol."""

# ---------------------------------------------------------------------------
# Records


# ---------------------------------------------------------------------------
# Loading


MAX_QUESTION_IDS_BYTES = 1024 * 1024 * 1024
"""Largest ``--question-ids`` file read; ``--no-size-limits`` lifts it."""


def read_question_ids(path: str | Path) -> tuple[str, ...]:
    """The question ids listed in ``path``, in its order: a subset of instances named by id.

    The file is a JSON list of ids, a JSON list of instances (objects with a
    ``question_id``, as a LongMemEval file or a saved subset of one), or text
    with one id per line (blank lines and lines starting with ``#`` skipped).

    Raises:
        UserError: the file is unreadable, empty, not one of those shapes, or
            names an id twice (each named with the file and the entry).
    """
    p = Path(path).expanduser()
    try:
        # A regular file only, read up to the limit (a saved subset of instances can be a whole S file), UTF-8 only.
        text = decode_utf8(read_limited(p, "--question-ids file", MAX_QUESTION_IDS_BYTES), f"--question-ids {p}")
    except OSError as exc:
        raise UserError(f"--question-ids {p}: cannot read ({type(exc).__name__}: {exc})") from None
    ids: list[str] = []
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"--question-ids {p}: malformed JSON at line {exc.lineno}: {exc.msg}") from None
        for n, item in enumerate(items):
            qid = item.get("question_id") if isinstance(item, dict) else item
            if not isinstance(qid, str) or not qid.strip():
                raise UserError(f"--question-ids {p}: entry {n} is not a question id (a string, or an object with "
                                f"a 'question_id' string): {str(item)[:60]!r}")
            ids.append(qid.strip())
    else:
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if line and not line.startswith("#"):
                if any(c.isspace() for c in line):
                    raise UserError(f"--question-ids {p}: line {n} holds more than one id: {line[:60]!r}")
                ids.append(line)
    if not ids:
        raise UserError(f"--question-ids {p}: lists no question id")
    seen: set[str] = set()
    for qid in ids:
        if qid in seen:
            raise UserError(f"--question-ids {p}: question id {qid!r} is listed twice")
        seen.add(qid)
    return tuple(ids)


def select_indices(
    index: Sequence[tuple[str, str]],
    *,
    types: Collection[str] | None = None,
    sample: int | None = None,
    seed: int = 0,
    limit: int | None = None,
    ids: Collection[str] | None = None,
) -> list[int]:
    """File positions to run: the named ids, filtered by type, then a stratified sample, then the first ``limit``.

    The sample keeps each type's share (largest remainders, ties by type
    order) and draws within each type with ``memsim.core.streams.seeded(seed)`` (numpy's generator seeded by ``seed``),
    so the same seed picks the same instances.

    Args:
        index: ``scan_instances`` output.
        types: question types to keep (``None``: all).
        sample: number of instances to draw (``None``: all).
        seed: seed of the draw.
        limit: keep at most this many, in file order.
        ids: only the instances with these question ids (``None``: all); an
            id the file does not hold is an error, so a published subset is
            run whole or not at all.
    """
    if types is not None:
        unknown = sorted(set(types) - set(QUESTION_TYPES))
        if unknown:
            raise UserError(f"--types: unknown question type(s) {', '.join(unknown)}; valid: {', '.join(QUESTION_TYPES)}")
    wanted = None if ids is None else set(ids)
    if wanted is not None:
        missing = sorted(wanted - {q for q, _ in index})
        if missing:
            raise UserError(f"--question-ids: {len(missing)} of {len(wanted)} ids are not in the file "
                            f"(first: {', '.join(missing[:5])})")
    chosen = [i for i, (q, t) in enumerate(index) if (types is None or t in types) and (wanted is None or q in wanted)]
    if sample is not None:
        if sample <= 0:
            raise UserError(f"--sample must be positive, got {sample}")
        if sample < len(chosen):
            by_type: dict[str, list[int]] = {}
            for i in chosen:
                by_type.setdefault(index[i][1], []).append(i)
            order = sorted(by_type, key=lambda t: (QUESTION_TYPES.index(t) if t in QUESTION_TYPES else 99, t))
            quotas = {t: sample * len(by_type[t]) / len(chosen) for t in order}
            alloc = {t: int(math.floor(q)) for t, q in quotas.items()}
            left = sample - sum(alloc.values())
            for t in sorted(order, key=lambda t: -(quotas[t] - alloc[t]))[:left]:
                alloc[t] += 1
            rng = seeded(seed)
            picked: list[int] = []
            for t in order:
                members = by_type[t]
                take = rng.choice(len(members), size=alloc[t], replace=False)
                picked.extend(members[j] for j in take)
            chosen = sorted(picked)
    if limit is not None:
        if limit < 0:
            raise UserError(f"--limit must not be negative, got {limit}")
        chosen = chosen[:limit]
    return chosen


# ---------------------------------------------------------------------------
# Keys, gold and memory turns


MEMORY_FORMATS: tuple[str, ...] = ("official", "seed")
"""What a memory's text is: the official retrieval corpus's, or the seed's dated form."""


def gold_turn_keys(inst: Instance) -> frozenset[str]:
    """User turns marked ``has_answer`` inside answer sessions."""
    return frozenset(
        turn_key(s.session_id, t.index)
        for s in inst.sessions
        if s.is_answer
        for t in s.turns
        if t.role == "user" and t.has_answer
    )


def gold_session_ids(inst: Instance) -> frozenset[str]:
    """Answer sessions with at least one user turn marked ``has_answer``."""
    return frozenset(
        s.session_id for s in inst.sessions if s.is_answer and any(t.role == "user" and t.has_answer for t in s.turns)
    )


def memory_turns(
    inst: Instance,
    *,
    granularity: str = "turn",
    user_only: bool = True,
    rename: Callable[[str], str] | None = None,
    user_id: str | None = None,
    memory_format: str = "seed",
) -> list[list[Turn]]:
    """The instance's haystack as memory turns, one list per session, oldest first.

    Args:
        inst: the instance.
        granularity: ``"turn"``: one ``Turn`` per turn, id ``turn_key``;
            ``"session"``: one ``Turn`` per session, id the session id, text
            the session's user turns joined by spaces (the official session key).
        user_only: at turn granularity, keep only user turns (the retrieval
            protocol's corpus); ``False`` keeps every turn (QA protocol).
        rename: maps a session id to the id systems see (``opaque_session_id``);
            None keeps the file's ids.
        user_id: the turns' user (default the question id).
        memory_format: ``"official"``: a memory's text is what the official
            retrieval script indexes (a user turn's content; a session's user
            turns joined by spaces); ``"seed"``: the seed's dated form,
            ``"<date> | <role>: <content>"``.

    Every turn carries ``metadata["date_text"]`` (the file's date string);
    in the official format also ``metadata["verbatim"]``, so that
    ``render_turn`` gives the text alone.
    """
    if granularity not in GRANULARITIES:
        raise UserError(f"granularity {granularity!r} unknown; valid: {', '.join(GRANULARITIES)}")
    if memory_format not in MEMORY_FORMATS:
        raise UserError(f"memory_format {memory_format!r} unknown; valid: {', '.join(MEMORY_FORMATS)}")
    out: list[list[Turn]] = []
    uid = inst.question_id if user_id is None else user_id
    for s in inst.sessions:
        sid = s.session_id if rename is None else rename(s.session_id)
        meta: dict[str, Any] = {"date_text": s.date_text}
        if memory_format == "official":
            meta["verbatim"] = True
        if granularity == "session":
            text = " ".join(t.content for t in s.turns if t.role == "user")
            out.append([Turn(sid, uid, "user", text, s.date, sid, meta)])
            continue
        out.append(
            [
                Turn(turn_key(sid, t.index), uid, t.role, t.content, s.date, sid, meta)
                for t in s.turns
                if t.role == "user" or not user_only
            ]
        )
    return out


def opaque_id(prefix: str, original: str) -> str:
    """``prefix`` + 16 hex digits of the sha256 of ``original``: stable, reveals nothing."""
    return prefix + hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def opaque_session_id(session_id: str) -> str:
    """The id systems see for a session (``answer_...`` names would reveal gold)."""
    return opaque_id("s", session_id)


def opaque_turn_key(key: str) -> str:
    """An official turn key ``<session_id>_<n>`` on the session's opaque id."""
    sid, _, n = key.rpartition("_")
    return f"{opaque_session_id(sid)}_{n}"


# ---------------------------------------------------------------------------
# Official metrics



# ---------------------------------------------------------------------------
# Selection and episodes


@dataclass(frozen=True, slots=True)
class Selection:
    """Which instances of a file a run takes."""

    indices: tuple[int, ...] | None
    """File positions to run (None: every instance in file order, up to ``limit``)."""
    limit: int | None = None
    """At most this many, in file order (already applied when ``indices`` is set)."""

    def instances(self, path: str | Path, *, warnings: LoadWarnings | None = None) -> Iterator[Instance]:
        """Stream the selected instances."""
        it = iter_instances(path, warnings=warnings, indices=self.indices)
        if self.indices is None and self.limit is not None:
            return itertools.islice(it, self.limit)
        return it


def select(
    path: str | Path,
    *,
    types: Collection[str] | None = None,
    sample: int | None = None,
    seed: int = 0,
    limit: int | None = None,
    ids: Collection[str] | None = None,
) -> Selection:
    """Resolve named ids, a type filter, a stratified sample and a limit (``select_indices``).

    Ids, type filters and samples need the ids and types of all instances
    first: a light scan of the file. A limit alone reads only as far as it needs.
    """
    if limit is not None and limit < 0:
        raise UserError(f"--limit must not be negative, got {limit}")
    if not types and sample is None and not ids:
        return Selection(None, limit)
    chosen = select_indices(
        scan_instances(path), types=set(types) if types else None, sample=sample, seed=seed, limit=limit,
        ids=ids or None,
    )
    return Selection(tuple(chosen), limit)


def instance_episode(
    inst: Instance, *, granularity: str = "turn", user_only: bool = True, empty_gold: str = "skip",
    memory_format: str = "seed",
) -> Episode:
    """One instance as an episode: its haystack sessions at their dates, then its question.

    Every id a system sees is opaque (``opaque_id``): sessions, turns (the
    official key on the opaque session id), the user and the question. The
    question is asked at ``inst.latest`` (its date, or the newest session's
    when the file dates a session after it), so every session is ingested and
    retrievable first, as in the official corpus.

    ``evidence`` holds the gold keys at the ingested granularity (user turns
    marked ``has_answer`` in answer sessions, or those sessions); abstention
    questions have none and are ``excluded="abstention"`` (still answered and
    judged). ``extra`` carries what the official scorers need and systems
    never see: ``question_id`` (the file's), ``question_date`` (as written),
    ``granularity``, ``gold_sessions`` (opaque ids), ``n_items`` (items
    ingested), ``n_gold_items`` (items ingested from gold sessions: the ideal
    DCG of ``turn2session``), ``empty_gold``, ``question_type`` and
    ``abstention``.

    Raises:
        UserError: two session ids of the instance share an opaque id.
    """
    if empty_gold not in ("skip", "official"):
        raise UserError(f"empty_gold {empty_gold!r} unknown; valid: skip, official")
    user = opaque_id("u", inst.question_id)
    renamed = {s.session_id: opaque_session_id(s.session_id) for s in inst.sessions}
    if len(set(renamed.values())) != len(renamed):
        raise UserError(f"instance {inst.question_id}: two session ids share an opaque id; report this")
    gold_sessions = frozenset() if inst.is_abstention else gold_session_ids(inst)
    sessions: list[Session] = []
    n_items = n_gold_items = 0
    for s, turns in zip(
        inst.sessions,
        memory_turns(inst, granularity=granularity, user_only=user_only, rename=renamed.__getitem__, user_id=user,
                     memory_format=memory_format),
    ):
        if not turns:
            continue
        n_items += len(turns)
        if s.session_id in gold_sessions:
            n_gold_items += len(turns)
        sessions.append(Session(session_id=renamed[s.session_id], user_id=user, time=s.date, turns=tuple(turns)))
    if inst.is_abstention:
        evidence: tuple[str, ...] = ()
    elif granularity == "session":
        evidence = tuple(sorted(renamed[sid] for sid in gold_sessions))
    else:
        evidence = tuple(sorted(opaque_turn_key(key) for key in gold_turn_keys(inst)))
    question = Question(
        question_id=opaque_id("q", inst.question_id),
        user_id=user,
        time=inst.latest,
        text=inst.question,
        gold=inst.answer,
        kind=inst.question_type,
        evidence=evidence,
        topic=inst.question_id,
        excluded="abstention" if inst.is_abstention else None,
        extra={
            "question_id": inst.question_id,
            "question_date": inst.question_date_text,
            "granularity": granularity,
            "gold_sessions": tuple(sorted(renamed[sid] for sid in gold_sessions)),
            "n_items": n_items,
            "n_gold_items": n_gold_items,
            "empty_gold": empty_gold,
            "question_type": inst.question_type,
            "abstention": inst.is_abstention,
        },
    )
    # The episode id is the file's question id: rows show it, no system sees it.
    return Episode(inst.question_id, (*sessions, question))


def iter_episodes(
    path: str | Path,
    selection: Selection,
    *,
    granularity: str = "turn",
    user_only: bool = True,
    include_abstention: bool = False,
    empty_gold: str = "skip",
    warnings: LoadWarnings | None = None,
    memory_format: str = "seed",
) -> Iterator[Episode]:
    """The selected instances as episodes, read one at a time (flat memory on the M file).

    Abstention instances are left out unless ``include_abstention``.
    """
    for inst in selection.instances(path, warnings=warnings):
        if inst.is_abstention and not include_abstention:
            continue
        yield instance_episode(inst, granularity=granularity, user_only=user_only, empty_gold=empty_gold,
                               memory_format=memory_format)


# ---------------------------------------------------------------------------
# Scorers (``memsim.sim.scorers`` registry: ``lme_turn``, ``lme_session``)

