"""MADial-Bench's memory recall as a static benchmark: this module and its data registration.

MADial-Bench (He et al., NAACL 2025; ``hejunqing/MADial-Bench``, MIT licence)
gives two users (Bart and Lisa) a memory archive of dated events (160 in
English) and 160 dialogues in which the assistant should bring one of them
back. Its first stage, *memory recall*, is a retrieval task: the dialogue up
to the turn to be predicted (``test-turn``) is the query, the user's memories
are the pool, and ``relevant-id`` names the memories that fit. memsim plays it
as every static benchmark: one episode per dialogue, its user's memories
ingested (one session each, on the memory's date) into fresh systems, then the
dialogue asked as a question, scored on the memory ids in the provenance of
what a system returns.

What follows the published scripts (``Embedding.py``, ``embedding_top_20_new.py``,
``embedding_score_new.py`` at commit 572e3a1):

- the pool of a dialogue is its user's memories (the English file has no
  ``user-id``: a memory belongs to the user its event names; the published
  top-20 lists hold only such ids);
- the query is the dialogue's lines before the first test turn, joined as they
  are (``<BOD>`` and the ``<Name>:`` tags included);
- a memory's text is what ``gen_summary_embedding`` indexes: the Python text of
  ``{'scene', 'emotion', 'event'}``, stored verbatim (``--memory-format dated``: memsim's
  usual ``<date> | <user>: <event>``);
- the figures at k = 1, 3, 5, 10 of the top 20: MAP, MRR, nDCG, recall and
  precision as ``embedding_score_new.py`` defines them (``MadialScorer``).

What memsim cannot follow: the second and third stages (memory recognition and
response generation) are judged by people in the paper, whose authors found
LLM judges unable to do it; memsim runs the recall stage only and refuses a
reader. The Chinese files are not registered (memsim's embedder is English).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from memsim.core.errors import UserError
from memsim.core.files import decode_utf8, read_limited
from memsim.memory.base import Turn
from memsim.scenarios.base import FileScenario, ScenarioStream, StaticOptions, StaticProtocol, StaticRun
from memsim.sim.events import Episode, Question, Session
from memsim.sim.scorers import register_scorer
from memsim.static_benchmarks.data import (
    Dataset,
    fetch_hint,
    locate,
    register_dataset,
    register_kind,
    resolve_given,
    sha256_file,
)

if TYPE_CHECKING:
    from memsim.memory.base import Retrieved

__all__ = [
    "MADIAL_COMMIT", "MADIAL_KS", "MadialData", "MadialMemory", "MadialDialogue", "load_madial", "madial_episodes",
    "published_figures", "MadialScorer", "MadialConfig", "MadialBenchmark", "MadialOptions", "PROTOCOLS",
]

MADIAL_COMMIT = "572e3a10d6d01852a65e4508e0b3ab2a00d0710c"
_RAW = f"https://raw.githubusercontent.com/hejunqing/MADial-Bench/{MADIAL_COMMIT}/data/en"
_LICENCE = ("MIT (MADial-Bench, Copyright (c) 2025 Junqing He; He et al., NAACL 2025, "
            "https://aclanthology.org/2025.naacl-long.499/)")

register_kind("madial", env="MEMSIM_MADIAL", defaults=("madial-en",))
register_kind("madial-memory", env="MEMSIM_MADIAL_MEMORY", defaults=("madial-en-memory",))
register_dataset(Dataset(
    "madial-en", "madial", f"{_RAW}/MADial-Bench-en-dialogue.json", "MADial-Bench-en-dialogue.json",
    "ba987172b4a720dd108c9a3b04855b8489ecde96fdf5d484d6522602ec6f4a31", _LICENCE,
    "MADial-Bench: 160 English dialogues and the memories each should recall (hejunqing/MADial-Bench at 572e3a1)",
))
register_dataset(Dataset(
    "madial-en-memory", "madial-memory", f"{_RAW}/MADial-Bench-en-memory.json", "MADial-Bench-en-memory.json",
    "d384b2d35e01ed364165001911af7f8193c808d168b106dea7b23435c7717aa5", _LICENCE,
    "MADial-Bench: the 160 dated memories of its two English users (the pool of madial-en)",
))

MAX_MADIAL_BYTES = 64 * 1024 * 1024
"""Either file (the published ones: 193 KB and 32 KB); ``memsim --no-size-limits`` lifts it."""
MADIAL_KS: tuple[int, ...] = (1, 3, 5, 10)
"""The cut-offs of the published figures."""
MADIAL_DEPTH = 20
"""Memories ranked per dialogue in the published scripts (their top 20)."""
_ASSISTANT = "Assistant"


@dataclass(frozen=True, slots=True)
class MadialMemory:
    """One memory of the archive."""

    memory_id: int
    user_id: int
    day: date
    scene: str
    emotion: str
    event: str


@dataclass(frozen=True, slots=True)
class MadialDialogue:
    """One dialogue: its lines, the turns to predict and the memories that fit."""

    line: int
    user_id: int
    lines: tuple[str, ...]
    test_turns: tuple[int, ...]
    relevant: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MadialData:
    """Both files, checked against each other."""

    dialogues: tuple[MadialDialogue, ...]
    memories: dict[int, MadialMemory]
    names: dict[int, str]
    sha256: dict[str, str]


def _records(path: Path, what: str) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSON-lines file with their line numbers; an unreadable line names itself."""
    text = decode_utf8(read_limited(path, what, MAX_MADIAL_BYTES), str(path))
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}: line {number}: not valid JSON ({exc.msg}); expected one {what} record per line") from None
        if not isinstance(record, dict):
            raise UserError(f"{path}: line {number}: expected a JSON object, got {type(record).__name__}")
        out.append((number, record))
    if not out:
        raise UserError(f"{path}: no records; expected the {what} (one JSON object per line)")
    return out


def _ints(value: Any, where: str, field: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or not all(type(v) is int for v in value):
        raise UserError(f"{where}: field {field!r}: expected a non-empty list of integers, got {str(value)[:80]}")
    return tuple(value)


def _speaker(line: str) -> str | None:
    """The ``<Name>`` a dialogue line starts with (None for ``<BOD>``/``<EOD>`` or an untagged line)."""
    if line.startswith("<") and ">:" in line:
        return line[1:line.index(">:")]
    return None


def _dialogue(path: Path, number: int, record: dict[str, Any]) -> MadialDialogue:
    where = f"{path}: line {number}"
    missing = {"dialogue", "test-turn", "relevant-id", "user-id"} - set(record)
    if missing:
        raise UserError(f"{where}: missing field(s) {', '.join(sorted(missing))}")
    lines = record["dialogue"]
    if not isinstance(lines, list) or not lines or not all(isinstance(t, str) for t in lines):
        raise UserError(f"{where}: field 'dialogue': expected a non-empty list of strings")
    uid = record["user-id"]
    if type(uid) is not int:
        raise UserError(f"{where}: field 'user-id': expected an integer, got {str(uid)[:40]}")
    tests = _ints(record["test-turn"], where, "test-turn")
    if not all(0 < t < len(lines) for t in tests):
        raise UserError(f"{where}: field 'test-turn': {list(tests)} is not a line of its {len(lines)}-line dialogue after the first")
    return MadialDialogue(number, uid, tuple(lines), tests, _ints(record["relevant-id"], where, "relevant-id"))


def _user_names(path: Path, dialogues: Sequence[MadialDialogue]) -> dict[int, str]:
    """Each user's name, from the tags of the dialogues' lines; a user with two names is an error."""
    names: dict[int, str] = {}
    for d in dialogues:
        speakers = {s for s in map(_speaker, d.lines) if s and s != _ASSISTANT}
        if len(speakers) != 1:
            raise UserError(f"{path}: line {d.line}: expected one speaker besides {_ASSISTANT}, found {sorted(speakers)}")
        (name,) = speakers
        if names.setdefault(d.user_id, name) != name:
            raise UserError(f"{path}: line {d.line}: user-id {d.user_id} is {name}, earlier {names[d.user_id]}")
    return names


def _memory(path: Path, number: int, record: dict[str, Any], names: dict[int, str]) -> MadialMemory:
    where = f"{path}: line {number}"
    if len(record) != 1:
        raise UserError(f"{where}: expected one memory as {{\"<id>\": {{...}}}}, got {len(record)} keys")
    (key, body), = record.items()
    if not key.isdigit() or not isinstance(body, dict):
        raise UserError(f"{where}: expected {{\"<numeric id>\": {{time, scene, emotion, event}}}}, got key {key[:40]!r}")
    missing = {"time", "scene", "emotion", "event"} - set(body)
    if missing or not all(isinstance(body[f], str) for f in ("time", "scene", "emotion", "event")):
        raise UserError(f"{where}: memory {key}: needs text fields time, scene, emotion and event")
    try:
        day = date.fromisoformat(body["time"])
    except ValueError:
        raise UserError(f"{where}: memory {key}: field 'time': {body['time'][:40]!r} is not a date (YYYY-MM-DD)") from None
    if "user-id" in body:  # the Chinese file's layout
        uid = body["user-id"]
    else:  # the English file has none: the memory is the user's whose name its event says
        owners = [u for u, n in names.items() if n in body["event"]]
        if len(owners) != 1:
            said = "names no user" if not owners else "names more than one user"
            raise UserError(f"{where}: memory {key}: its event {said} of {sorted(names.values())}, so its pool is unknown")
        uid = owners[0]
    return MadialMemory(int(key), uid, day, body["scene"], body["emotion"], body["event"])


def load_madial(dialogue_path: Path, memory_path: Path) -> MadialData:
    """Read and cross-check both files: every relevant id a memory of the dialogue's own user.

    Raises:
        UserError: a file that is missing, too large, not UTF-8 JSON lines or not MADial-shaped, naming file, line and field.
    """
    dialogues = tuple(_dialogue(dialogue_path, n, r) for n, r in _records(dialogue_path, "MADial-Bench dialogue"))
    names = _user_names(dialogue_path, dialogues)
    memories: dict[int, MadialMemory] = {}
    for number, record in _records(memory_path, "MADial-Bench memory"):
        m = _memory(memory_path, number, record, names)
        if m.memory_id in memories:
            raise UserError(f"{memory_path}: line {number}: memory id {m.memory_id} appears twice")
        memories[m.memory_id] = m
    for d in dialogues:
        for rid in d.relevant:
            if rid not in memories:
                raise UserError(f"{dialogue_path}: line {d.line}: relevant-id {rid} is not in {memory_path.name}")
            if memories[rid].user_id != d.user_id:
                raise UserError(f"{dialogue_path}: line {d.line}: relevant-id {rid} is a memory of user "
                                f"{memories[rid].user_id}, not of the dialogue's user {d.user_id}")
    return MadialData(dialogues, memories, names, {"dialogue": sha256_file(dialogue_path), "memory": sha256_file(memory_path)})


def memory_text(m: MadialMemory, memory_format: str) -> str:
    """A memory's turn text: the published index text (the Python text of scene, emotion, event) or the event."""
    if memory_format == "dated":
        return m.event
    return str({"scene": m.scene, "emotion": m.emotion, "event": m.event})


def _turn_id(episode: str, memory_id: int) -> str:
    return f"{episode}:m{memory_id}"


def madial_episodes(data: MadialData, *, memory_format: str = "official") -> Iterator[Episode]:
    """One episode per dialogue: its user's memories, each a session on its date (noon UTC), then the dialogue.

    Each dialogue is ranked against its user's pool alone, as in the published scripts, so fresh
    systems per dialogue (nothing one retrieval does changes the next). The question is asked the
    day after the user's latest memory (the data dates no dialogue); its text is the dialogue
    before the first test turn, its gold the first test turn's line, its evidence the relevant
    memories, its kind the scene of the first of them.
    """
    pools = {u: sorted((m for m in data.memories.values() if m.user_id == u), key=lambda m: (m.day, m.memory_id))
             for u in data.names}
    for d in data.dialogues:
        mine = pools[d.user_id]
        episode = f"madial-d{d.line}"
        sessions = []
        for m in mine:
            at = datetime.combine(m.day, time(12), tzinfo=timezone.utc)
            tid = _turn_id(episode, m.memory_id)
            turn = Turn(tid, episode, data.names[d.user_id], memory_text(m, memory_format), at, tid,
                        metadata={"scene": m.scene, "emotion": m.emotion, "memory_id": m.memory_id,
                                  "verbatim": memory_format == "official"})
            sessions.append(Session(tid, episode, at, (turn,)))
        asked_at = datetime.combine(mine[-1].day + timedelta(days=1), time(12), tzinfo=timezone.utc)
        question = Question(f"{episode}:q", episode, asked_at, "".join(d.lines[:d.test_turns[0]]),
                            d.lines[d.test_turns[0]].strip(), data.memories[d.relevant[0]].scene,
                            tuple(_turn_id(episode, r) for r in d.relevant),
                            extra={"line": d.line, "user": data.names[d.user_id]})
        yield Episode(episode, (*sessions, question))


# The published figures (embedding_score_new.py): each on the ranked memory ids, cut at k.


def average_precision(gold: Collection[str], ranked: Sequence[str], k: int) -> float:
    """Precision at each new hit in the top k, summed, over ``min(|gold|, k)``."""
    hits, total, seen = 0, 0.0, set()
    for i, r in enumerate(ranked[:k]):
        if r in gold and r not in seen:
            hits += 1
            total += hits / (i + 1)
        seen.add(r)
    return total / min(len(gold), k) if gold else 0.0


def reciprocal_rank(gold: Collection[str], ranked: Sequence[str], k: int) -> float:
    """1 / rank of the first hit in the top k, else 0."""
    return next((1.0 / (i + 1) for i, r in enumerate(ranked[:k]) if r in gold), 0.0)


def ndcg_published(gold: Collection[str], ranked: Sequence[str], k: int) -> float:
    """nDCG as published: binary gains of the top k over the DCG of those same gains sorted (not of the gold set).

    A list whose hits are all in front scores 1 however few gold memories it found.
    """
    gains = [1.0 if r in gold else 0.0 for r in ranked[:k]]
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(gains, reverse=True)))
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains)) / ideal if ideal else 0.0


def recall(gold: Collection[str], ranked: Sequence[str], k: int) -> float:
    """Distinct gold memories in the top k over the gold set."""
    return len(set(ranked[:k]) & set(gold)) / len(gold) if gold else 0.0


def precision(gold: Collection[str], ranked: Sequence[str], k: int) -> float:
    """Distinct gold memories in the top k over k."""
    return len(set(ranked[:k]) & set(gold)) / k


_FIGURES = {"map": average_precision, "mrr": reciprocal_rank, "ndcg": ndcg_published, "recall": recall,
            "precision": precision}


def published_figures(gold: Collection[str], ranked: Sequence[str], ks: Sequence[int] = MADIAL_KS) -> dict[str, float]:
    """``madial_<figure>@k`` of one ranking, for each figure and cut-off."""
    return {f"madial_{name}@{k}": fn(gold, ranked, k) for k in ks for name, fn in _FIGURES.items()}


def ranked_sources(retrieved: Sequence[Retrieved]) -> list[str]:
    """The memory ids in rank order: each memory's provenance in turn, an id kept at its first place."""
    out: list[str] = []
    for m in retrieved:
        out.extend(t for t in m.source_turn_ids if t not in out)
    return out


@dataclass(frozen=True, slots=True)
class MadialScorer:
    """MADial-Bench's published recall figures on the provenance of what was retrieved."""

    name: str = "madial"

    def columns(self, ks: Sequence[int]) -> list[str]:
        """One column per figure and cut-off."""
        return [f"madial_{f}@{k}" for k in ks for f in _FIGURES]

    def score(self, question: Question, retrieved: Sequence[Retrieved], *, ks: Sequence[int]) -> dict[str, Any]:
        """The five figures at each cut-off; NaN for an excluded question or one without gold."""
        if question.excluded is not None or not question.evidence:
            return {c: math.nan for c in self.columns(ks)}
        return published_figures(set(question.evidence), ranked_sources(retrieved), ks)


register_scorer("madial", "memsim.scenarios.static_madial:MadialScorer",
                description="MADial-Bench's published MAP, MRR, nDCG (its definition), recall and precision at k on memory ids")


class MadialConfig(BaseModel):
    """Arguments of the static ``madial`` benchmark."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: str = Field("", description="the dialogue file (empty: $MEMSIM_MADIAL or the fetched madial-en)")
    memory: str = Field("", description="the memory file (empty: $MEMSIM_MADIAL_MEMORY or the fetched madial-en-memory)")
    memory_format: Literal["official", "dated"] = Field(
        "official", description="memory text: official = what the published script indexes (scene, emotion, event "
        "as Python text), verbatim; dated = memsim's '<date> | <user>: <event>'")

    def path(self) -> Path:
        """The dialogue file to read."""
        return _given(self.data, "madial", "dialogue")

    def memory_path(self) -> Path:
        """The memory file to read."""
        return _given(self.memory, "madial-memory", "memory")


def _given(value: str, kind: str, what: str) -> Path:
    path = resolve_given(value, kind) if value else locate(kind)
    if path is None:
        raise UserError(f"no MADial-Bench {what} file: name one (--{'data' if kind == 'madial' else 'memory'}), "
                        f"or {fetch_hint(kind)}")
    return path


class MadialBenchmark(FileScenario):
    """Static MADial-Bench memory recall: one episode per dialogue, its user's memories then the dialogue."""

    name = "madial"
    config_model = MadialConfig

    def __init__(self, config: MadialConfig, *, source: str = "") -> None:
        self.config = config
        self.data = load_madial(config.path(), config.memory_path())

    def spec_args(self) -> dict[str, Any]:
        """Resolved arguments: the paths actually read."""
        return {**self.config.model_dump(mode="json"), "data": str(self.config.path().resolve()),
                "memory": str(self.config.memory_path().resolve())}

    def meta(self) -> dict[str, Any]:
        """Both files' sha256 and what they hold."""
        d = self.data
        per_user = {d.names[u]: sum(m.user_id == u for m in d.memories.values()) for u in sorted(d.names)}
        lines = [f"{len(d.dialogues)} dialogues, {len(d.memories)} memories ("
                 + ", ".join(f"{n}: {c}" for n, c in per_user.items()) + f"); memory file sha256 {d.sha256['memory']}"]
        return {"sha256": d.sha256["dialogue"], "memory_sha256": d.sha256["memory"], "load_lines": lines}

    def generate(self, rng: np.random.Generator) -> ScenarioStream:
        """The dialogues as episodes (no random draws)."""
        episodes = list(madial_episodes(self.data, memory_format=self.config.memory_format))
        return ScenarioStream(start=None, end=None, meta=self.meta(), streamed=episodes)


class MadialOptions(StaticOptions):
    """The options of ``memsim static madial``."""

    memory: str | None = Field(None, description="the memory file, a path or a `memsim data` name (default: "
                               "$MEMSIM_MADIAL_MEMORY, the fetched madial-en-memory)")
    memory_format: Literal["official", "dated"] = Field(
        "official", description="memory text: official (published: scene, emotion and event as the script indexes "
        "them, verbatim) or dated (memsim's '<date> | <user>: <event>')")

    def plan(self, run: StaticRun) -> StaticRun:
        """Retrieval only: the response stage is judged by people in the paper."""
        if run.answer is not None:
            raise UserError("MADial-Bench's recognition and response stages are judged by people in its paper; "
                            "memsim runs its memory recall stage only: leave --reader out")
        args = {"memory_format": self.memory_format, **({"memory": self.memory} if self.memory else {}),
                **run.scenario_args}
        return replace(run, scenario_args=args)


PROTOCOLS = (
    StaticProtocol(
        name="madial", title="MADial-Bench", scenario="memsim.scenarios.static_madial:MadialBenchmark",
        options="memsim.scenarios.static_madial:MadialOptions",
        description="static MADial-Bench memory recall: each dialogue's user's memories ingested into fresh "
        "systems, then the dialogue asks for the memories it should bring back",
        data="MADial-Bench-en-dialogue.json, a path or a `memsim data` name (default: $MEMSIM_MADIAL, the fetched madial-en)",
        k=10, ks=MADIAL_KS, depth=MADIAL_DEPTH, scorers=("evidence", "madial"), metric="madial_recall@{k}",
    ),
)
"""MADial-Bench's protocol, registered by ``memsim.scenarios.registry`` (``memsim static madial``)."""
