"""The static benchmarks as episode streams (LoCoMo conversations, LongMemEval instances) and their options.

A static benchmark is the engine with two settings (``RunSpec.kind =
"static"``): fresh systems per episode and questions after ingest. These
scenarios only read the official files into episodes (through the loaders of
``static_benchmarks``, with their quirk reports); the engine, recorder,
scorers and summariser are the same as for every longitudinal run. The
options models are the flags of ``memsim static locomo|longmemeval`` and what
they make of a run. Both protocols are declared in ``PROTOCOLS`` at the end,
which ``memsim.scenarios.registry`` registers.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from memsim.scenarios.base import FileScenario, ScenarioStream, StaticOptions, StaticProtocol, StaticRun
from memsim.scenarios.locomo_stream import default_locomo_path
from memsim.scenarios.longmemeval_stream import LongMemEvalFileArgs
from memsim.core.errors import UserError
from memsim.static_benchmarks.data import check_data_file, fetch_hint, resolve_given
from memsim.static_benchmarks.longmemeval import QUESTION_TYPES, RETRIEVAL_KS

__all__ = [
    "LocomoConfig", "LocomoBenchmark", "LocomoOptions", "LongMemEvalConfig", "LongMemEvalBenchmark",
    "LongMemEvalOptions", "default_locomo_path", "PROTOCOLS",
]


class LocomoConfig(BaseModel):
    """Arguments of the static ``locomo`` benchmark."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: str = Field("", description="locomo10.json path (empty: $MEMSIM_LOCOMO or ../shared/data/locomo/)")
    captions: bool = Field(False, description="append ' [image: <caption>]' to turns that shared an image")
    limit_conversations: int | None = Field(None, ge=1, description="only the first N conversations")
    protocol: str = Field("mem0", description="the answer protocol of the run (recorded so that every table names it)")
    answer_excluded: tuple[str, ...] = Field(
        ("adversarial",), description="reasons of exclusion whose questions answer accuracy leaves out (reported apart)")

    def path(self) -> Path:
        """The data file to read."""
        return resolve_given(self.data, "locomo") if self.data else default_locomo_path()


class LocomoBenchmark(FileScenario):
    """Static LoCoMo: one episode per conversation, every question after its last session.

    ``spec_args`` records the file's sha256, so a run folder names the exact data it read.
    """

    name = "locomo"
    config_model = LocomoConfig

    def __init__(self, config: LocomoConfig, *, source: str = "") -> None:
        self.config = config
        path = config.path()
        if not path.exists():
            raise UserError(
                f"no such LoCoMo data file: {path}; give --data (or scenario.data), or set MEMSIM_LOCOMO, "
                f"or {fetch_hint('locomo')}"
            )
        from memsim.static_benchmarks.locomo import load_locomo

        self.dataset = load_locomo(path)

    def spec_args(self) -> dict[str, Any]:
        """Resolved arguments: the path actually read."""
        return {**self.config.model_dump(mode="json"), "data": str(self.config.path().resolve())}

    def meta(self) -> dict[str, Any]:
        """The file's hash and its load summary (quirks)."""
        summary = self.dataset.summary
        return {"sha256": self.dataset.sha256, "load_summary": summary.to_json(), "load_lines": summary.lines()}

    def generate(self, rng: np.random.Generator) -> ScenarioStream:
        """The conversations as episodes (no random draws)."""
        from memsim.static_benchmarks.locomo import locomo_episodes

        eps = locomo_episodes(
            self.dataset, captions=self.config.captions, limit_conversations=self.config.limit_conversations
        )
        return ScenarioStream(start=None, end=None, meta=self.meta(), streamed=eps)


LOCOMO_PROTOCOLS: dict[str, tuple[str, ...]] = {"mem0": ("adversarial",), "locomo": ()}
"""LoCoMo answer protocol -> the reasons of exclusion its answer accuracy leaves out.

``mem0`` (Mem0's protocol, which the seed follows): category 5 (adversarial) is
left out of answer accuracy and reported in a table of its own; ``locomo``
(the benchmark's own evaluation): category 5 counts, scored by its abstention rule.
"""


def true_k(run: StaticRun) -> StaticRun:
    """The run asks its systems for ``k`` and scores only the cut-offs within it.

    A protocol that does not declare a deeper depth never fetches more than the
    reader sees: a system whose candidate pool grows with the request (recency
    over 2k candidates) would otherwise rank a different top k.
    """
    return replace(run, ks=tuple(c for c in run.ks if c <= run.k) or (run.k,), depth=run.k)


def split_by_speaker(run: StaticRun, what: str) -> StaticRun:
    """Each system in one store per speaker (``what``: speaker or role), the top k of each: the one cut-off is ``2k``."""
    from memsim.memory.registry import SystemSpec

    inner = tuple(SystemSpec("per-speaker", {"inner": s.name, "inner_args": dict(s.args), "k_per_speaker": run.k},
                             label=f"{s.display}/per-{what}") for s in run.systems)
    return replace(run, systems=inner, k=2 * run.k, ks=(2 * run.k,), depth=2 * run.k)


class LocomoOptions(StaticOptions):
    """The options of ``memsim static locomo``."""

    protocol: Literal["mem0", "locomo"] = Field(
        "mem0", description="answer protocol: mem0 (published: category 5 left out of answer accuracy, reported "
        "apart) or locomo (every category counts)")
    labels: Literal["locomo", "mem0"] = Field(
        "locomo", description="category names: locomo (the data's codes) or mem0 (Mem0's table names)")
    captions: bool = Field(False, description="append ' [image: <caption>]' to turns with an image")
    limit_conversations: int | None = Field(None, description="only the first N conversations")
    per_speaker: bool = Field(False, description="published retrieval: one store per speaker, top k of each "
                              "(up to 2k memories to the reader), evidence recall on the union")

    def plan(self, run: StaticRun) -> StaticRun:
        """A true k retrieval, cut-offs up to k; with ``per_speaker`` the one cut-off is ``2k`` (two speakers), on the union."""
        from memsim.static_benchmarks.locomo import CATEGORY_LABELS

        names = {CATEGORY_LABELS["locomo"][c]: f"{c} {n}" for c, n in CATEGORY_LABELS[self.labels].items()}
        args = {"captions": self.captions, "limit_conversations": self.limit_conversations, "protocol": self.protocol,
                "answer_excluded": list(LOCOMO_PROTOCOLS[self.protocol]), **run.scenario_args}
        run = true_k(replace(run, scenario_args=args, kind_names=names))
        return split_by_speaker(run, "speaker") if self.per_speaker else run


class LongMemEvalConfig(LongMemEvalFileArgs):
    """Arguments of the static ``longmemeval`` benchmark (``data`` and ``types`` as the stream's)."""

    granularity: Literal["turn", "session"] = Field(
        "turn", description="memory items: user turns (also scored at session level) or whole sessions"
    )
    user_only: bool = Field(True, description="ingest only user turns (the official retrieval corpus); false: every turn")
    question_ids: tuple[str, ...] = Field((), description="only the instances with these question ids (empty: all), "
                                          "e.g. a published subset; an id the file lacks is an error")
    question_ids_file: str = Field("", description="where question_ids were read from, with its sha256 (recorded)")
    sample: int | None = Field(None, ge=1, description="a sample of N instances, stratified by question type")
    sample_seed: int = Field(0, ge=0, description="seed of the sample (the run's seed)")
    limit: int | None = Field(None, ge=0, description="only the first N selected instances")
    include_abstention: bool = Field(False, description="also ask abstention (_abs) questions (judged, not scored)")
    empty_gold: Literal["skip", "official"] = Field(
        "skip", description="no gold user turn: skip = unscored; official = 0 / 1 / 0 as the official script"
    )
    memory_format: Literal["official", "seed"] = Field(
        "seed", description="memory text: official = what the official retrieval script indexes (the content alone); "
        "seed = the seed's '<date> | <role>: <content>'")
    protocol: str = Field("", description="the protocol of the run (recorded so that every table names it)")


# One survey per file version and selection per process: a spec is made and then
# executed in the same process, and the survey reads the whole selection.
_SURVEYS: dict[tuple[Any, ...], dict[str, Any]] = {}


class LongMemEvalBenchmark(FileScenario):
    """Static LongMemEval: one episode per instance, its haystack then its question.

    Instances stream from the file one at a time (``memsim.static_benchmarks.longmemeval``),
    so memory stays flat on the 2.7 GB M file. ``meta`` (recorded in the spec)
    holds the file's sha256, the load warnings and what the selection holds.
    """

    name = "longmemeval"
    config_model = LongMemEvalConfig

    def __init__(self, config: LongMemEvalConfig, *, source: str = "") -> None:
        self.config = config
        where = f" in {source}" if source else ""
        path = config.path()
        if path is None:
            raise UserError(
                f"name a LongMemEval file with --data or scenario.data{where} (or set MEMSIM_LONGMEMEVAL), "
                f"or {fetch_hint('longmemeval')}"
            )
        check_data_file(path, "LongMemEval JSON file", f"{fetch_hint('longmemeval')} (or another release: memsim data list)")
        self.path = path
        from memsim.static_benchmarks.longmemeval import select

        self.selection = select(
            path,
            types=config.types or None,
            sample=config.sample,
            seed=config.sample_seed,
            limit=config.limit,
            ids=config.question_ids or None,
        )

    def spec_args(self) -> dict[str, Any]:
        """Resolved arguments: the path actually read."""
        return {**self.config.model_dump(mode="json"), "data": str(self.path.resolve())}

    def meta(self) -> dict[str, Any]:
        """The file's sha256, its load warnings and the selection's counts (one pass over the selection)."""
        from memsim.memory.embed import file_sha256

        st = self.path.stat()
        key = (str(self.path.resolve()), st.st_size, st.st_mtime_ns, self.config.model_dump_json())
        if key not in _SURVEYS:
            _SURVEYS[key] = {"sha256": file_sha256(self.path), **self._survey()}
        return copy.deepcopy(_SURVEYS[key])

    def _survey(self) -> dict[str, Any]:
        from memsim.static_benchmarks.longmemeval import LoadWarnings, gold_session_ids

        warnings = LoadWarnings()
        per_type: dict[str, int] = {}
        abstention = no_gold = 0
        for inst in self.selection.instances(self.path, warnings=warnings):
            if inst.is_abstention:
                abstention += 1
                if not self.config.include_abstention:
                    continue
            elif not gold_session_ids(inst):
                no_gold += 1
            per_type[inst.question_type] = per_type.get(inst.question_type, 0) + 1
        episodes = sum(per_type.values())
        lines = [
            f"{episodes} instances"
            + (f", {abstention} abstention" if self.config.include_abstention else f", {abstention} abstention left out")
            + f", {no_gold} without a gold user turn ({'unscored' if self.config.empty_gold == 'skip' else 'scored as officially'})",
            *warnings.lines(),
        ]
        return {
            "selection": {
                "instances": episodes,
                "per_type": {t: per_type[t] for t in QUESTION_TYPES if t in per_type},
                "abstention": abstention,
                "abstention_included": self.config.include_abstention,
                "no_gold_user_turn": no_gold,
            },
            "load_warnings": warnings.to_json(),
            "load_lines": lines,
        }

    def generate(self, rng: np.random.Generator) -> ScenarioStream:
        """The selected instances as streamed episodes (``rng`` is not drawn from: the sample has its own seed)."""
        from memsim.static_benchmarks.longmemeval import iter_episodes

        cfg = self.config
        episodes = iter_episodes(
            self.path,
            self.selection,
            granularity=cfg.granularity,
            user_only=cfg.user_only,
            include_abstention=cfg.include_abstention,
            empty_gold=cfg.empty_gold,
            memory_format=cfg.memory_format,
        )
        return ScenarioStream(start=None, end=None, meta=self.meta(), streamed=episodes)


class LongMemEvalOptions(StaticOptions):
    """The options of ``memsim static longmemeval``.

    Without a reader, the official retrieval protocol: user turns only, abstention left out, headline
    ``turn_recall_all@k`` (``session_`` at session granularity). With one, the QA protocol: every turn,
    abstention asked (judged, not scored on evidence), headline the first judge's ``answer_<judge>``.
    """

    granularity: Literal["turn", "session"] = Field(
        "turn", description="memory items: user turns (also scored at session level) or whole sessions")
    types: str | None = Field(None, description=f"only these question types (comma-separated): {', '.join(QUESTION_TYPES)}")
    sample: int | None = Field(None, description="a sample of N instances, stratified by type (seeded by --seed)")
    question_ids: str | None = Field(None, description="a file naming the instances to run by question id (a JSON "
                                     "list, or one id per line), e.g. a published subset; the ids go into the spec")
    limit: int | None = Field(None, description="only the first N (selected) instances")
    empty_gold: Literal["skip", "official"] | None = Field(
        None, description="instances with no gold user turn (single-session-assistant): skip = unscored "
        "(default); official = scored 0 / 1 / 0 as the official script, whose averages include them")
    protocol: Literal["official", "seed"] = Field(
        "official", description="official (published: memories are the text the official retrieval script indexes) "
        "or seed (the seed's dated '<date> | <role>: <content>' memories)")
    per_role: bool = Field(False, description="with a reader, as the seed answers: one store per role (user, "
                           "assistant), top k of each (up to 2k memories to the reader)")
    depth: int = Field(max(RETRIEVAL_KS), description="memories fetched per question; the session figures of a turn ranking "
                       "need the prefix that covers k sessions, and a cut-off the fetched list cannot decide is "
                       "unscored: --depth 1000 ranks an S haystack whole, as the official script does")

    def _ids(self) -> dict[str, Any]:
        """The ``--question-ids`` file's ids and its path and sha256, for the spec (nothing without the flag)."""
        if not self.question_ids:
            return {}
        from memsim.memory.embed import file_sha256
        from memsim.static_benchmarks.longmemeval import read_question_ids

        ids = read_question_ids(self.question_ids)
        path = Path(self.question_ids).expanduser().resolve()
        return {"question_ids": list(ids), "question_ids_file": f"{path} sha256 {file_sha256(path)}"}

    def plan(self, run: StaticRun) -> StaticRun:
        """The retrieval protocol (user turns, no abstention) or, with a reader, the QA protocol (a true k retrieval)."""
        if self.depth <= 0:
            raise UserError(f"--depth must be a positive integer, got {self.depth}")
        qa = run.answer is not None
        if self.per_role and not qa:
            raise UserError("--per-role retrieves from the user's and the assistant's turns apart; the retrieval "
                            "protocol indexes user turns only: give a reader (--reader short|cot) or leave --per-role out")
        if qa and self.empty_gold is not None:
            raise UserError("--empty-gold applies to evidence scoring; with a reader the answers are judged "
                            "and every question (abstention ones too) is asked: leave --empty-gold out")
        args = {
            # The retrieval corpus is the user turns (a reader sees whole conversations); abstention
            # questions have no evidence to score, and the QA protocol still asks them.
            "granularity": self.granularity, "user_only": not qa, "include_abstention": qa,
            "types": [t.strip() for t in (self.types or "").split(",") if t.strip()],
            "sample": self.sample, "sample_seed": run.seed, "limit": self.limit, **self._ids(),
            "empty_gold": self.empty_gold or "skip", "protocol": self.protocol,
            "memory_format": "seed" if self.protocol == "seed" else "official", **run.scenario_args,
        }
        session = self.granularity == "session"
        # At session granularity the items are sessions: there is no turn ranking to score.
        run = replace(run, scenario_args=args, depth=self.depth, scorers=("lme_session",) if session else run.scorers,
                      metric=f"answer_{run.judges[0]}" if qa else ("session" if session else "turn") + "_recall_all@{k}",
                      kind_names={t: t for t in QUESTION_TYPES})
        if not qa:
            return run  # the official retrieval figures rank a declared depth (--depth)
        run = true_k(run)
        return split_by_speaker(run, "role") if self.per_role else run


PROTOCOLS = (
    StaticProtocol(
        name="locomo", title="LoCoMo", scenario="memsim.scenarios.static:LocomoBenchmark", options="memsim.scenarios.static:LocomoOptions",
        description="static LoCoMo: each conversation ingested into fresh systems, then its questions",
        data="locomo10.json, a path or a `memsim data` name (default: $MEMSIM_LOCOMO, the fetched copy, ../shared/data/locomo/)",
        judges=("contains", "f1_locomo"), checks_judges=True,
    ),
    StaticProtocol(
        name="longmemeval", title="LongMemEval",
        scenario="memsim.scenarios.static:LongMemEvalBenchmark", options="memsim.scenarios.static:LongMemEvalOptions",
        description="static LongMemEval: each instance's haystack ingested into fresh systems, then its question",
        data="longmemeval_s.json, _m, _oracle or a *_cleaned.json release, a path or a `memsim data` name "
        "(default: $MEMSIM_LONGMEMEVAL, the fetched S file; streamed)",
        ks=RETRIEVAL_KS, scorers=("lme_turn", "lme_session"), metric="turn_recall_all@{k}", judges=("contains", "f1_mem0"),
    ),
)
"""The static protocols of this module, registered by ``memsim.scenarios.registry`` (``memsim static locomo|longmemeval``)."""
