"""``memsim static longmemeval``: its options, and the static run spec they describe.

With ``--reader none`` (the default) the run is the offline retrieval
protocol: only user turns are ingested and abstention questions are left
out, as the official evaluation does; the headline is ``turn_recall_all@k``
(``session_recall_all@k`` at session granularity). With ``--reader short``
or ``cot`` it is the QA protocol: every turn is ingested, abstention
questions are asked (judged, not scored on evidence), the reader sees the
top ``-k`` (default 30) and the headline is the first judge's
``answer_<judge>``. Either way the run is played by the one engine
(``memsim.analysis.pipeline.execute``, called by ``memsim.analysis.cli.static``), which
resumes an interrupted run pointed at its own ``--out`` folder.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memsim.static_benchmarks.longmemeval import GRANULARITIES, QUESTION_TYPES, RETRIEVAL_KS

__all__ = ["DEFAULT_K", "DEFAULT_DEPTH", "add_longmemeval_arguments", "longmemeval_spec"]

DEFAULT_K = 30
"""Memories the reader sees (and the headline cut-off) unless ``-k`` says otherwise."""

DEFAULT_DEPTH = max(RETRIEVAL_KS)
"""Memories fetched per question unless ``--depth`` says otherwise: the deepest official cut-off."""


def add_longmemeval_arguments(sub: Any, common: Callable[..., None]) -> None:
    """Add the ``longmemeval`` sub-command to ``memsim static``'s sub-parsers.

    Args:
        sub: the sub-parsers of ``memsim static``.
        common: adds the options every static benchmark has (``--data``,
            ``--system``, ``-k``, ``--seed``, ``--out``, the reader and judges ...).
    """
    p = sub.add_parser(
        "longmemeval",
        help="LongMemEval: ingest each instance's haystack, ask its question",
        description="The data is a LongMemEval file: longmemeval_s.json, longmemeval_m.json, "
        "longmemeval_oracle.json or a *_cleaned.json release (streamed; see the README for where to get them).",
    )
    common(p, default_k=DEFAULT_K)
    p.add_argument(
        "--granularity",
        choices=GRANULARITIES,
        default="turn",
        help="memory items: user turns (also scored at session level) or whole sessions (default turn)",
    )
    p.add_argument(
        "--types",
        default=None,
        metavar="T1,T2",
        help=f"only these question types (comma-separated): {', '.join(QUESTION_TYPES)}",
    )
    p.add_argument("--sample", type=int, default=None, metavar="N", help="a sample of N instances, stratified by type (seeded by --seed)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N (selected) instances")
    p.add_argument(
        "--empty-gold",
        choices=("skip", "official"),
        default=None,
        help="instances with no gold user turn (single-session-assistant): skip = unscored (default); "
        "official = scored 0 / 1 / 0 as the official script, whose averages include them",
    )
    p.add_argument(
        "--depth",
        type=int,
        default=DEFAULT_DEPTH,
        metavar="N",
        help=f"memories fetched per question (default {DEFAULT_DEPTH}); the session figures of a turn ranking "
        "need the prefix that covers k sessions, and a cut-off the fetched list cannot decide is unscored: "
        "--depth 1000 ranks an S haystack whole, as the official script does",
    )


def _types(text: str | None) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()] if text else []


def longmemeval_spec(
    args: argparse.Namespace,
    *,
    make_spec: Callable[..., Any],
    systems: Sequence[Any],
    answer: Mapping[str, Any] | None,
) -> tuple[Any, dict[str, str]]:
    """The static LongMemEval spec the options describe, and the names of its kinds (question types).

    ``make_spec`` (``memsim.analysis.pipeline.make_spec``) and the answer options are
    handed in by the command, which sits above this layer.

    Args:
        args: the parsed options.
        make_spec: builds and validates the spec (resolves the scenario, hashes the file).
        systems: the systems under test.
        answer: reader and judge options (None: ``--reader none``, the retrieval protocol).

    Raises:
        UserError: a missing file, an unknown type, bad settings.
    """
    from memsim.sim.answer.setup import DEFAULT_JUDGES
    from memsim.sim.core.errors import UserError

    if args.depth <= 0:
        raise UserError(f"--depth must be a positive integer, got {args.depth}")
    qa = answer is not None
    if qa and args.empty_gold is not None:
        raise UserError("--empty-gold applies to evidence scoring; with a reader the answers are judged "
                        "and every question (abstention ones too) is asked: leave --empty-gold out")
    scenario_args: dict[str, Any] = {
        "granularity": args.granularity,
        # The retrieval corpus is the user turns; a reader sees whole conversations.
        "user_only": not qa,
        "types": _types(args.types),
        "sample": args.sample,
        "sample_seed": args.seed,
        "limit": args.limit,
        # Abstention questions have no evidence to score; the QA protocol still asks them.
        "include_abstention": qa,
        "empty_gold": args.empty_gold or "skip",
    }
    if args.data is not None:
        scenario_args["data"] = str(args.data)
    if args.sample is not None and args.sample <= 0:
        raise UserError(f"--sample must be positive, got {args.sample}")
    if args.limit is not None and args.limit < 0:
        raise UserError(f"--limit must not be negative, got {args.limit}")
    level = "session" if args.granularity == "session" else "turn"
    if qa:
        judges = answer.judge or DEFAULT_JUDGES["longmemeval"]
        metric = f"answer_{judges[0]}"
    else:
        metric = f"{level}_recall_all@{args.k}"
    # At session granularity the items are sessions: there is no turn ranking to score.
    scorers = ("lme_session",) if level == "session" else ("lme_turn", "lme_session")
    spec = make_spec(
        "static",
        "longmemeval",
        scenario_args,
        systems,
        k=args.k,
        ks=RETRIEVAL_KS,
        retrieve_k=max(args.depth, args.k, *RETRIEVAL_KS),
        scorers=scorers,
        metric=metric,
        seed=args.seed,
        n_boot=args.n_boot,
        control=None,
        answer=answer,
    )
    return spec, {t: t for t in QUESTION_TYPES}
