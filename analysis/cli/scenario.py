"""``memsim scenario stats|render|check CONFIG``: what a scenario's stream is like, a world file of it, its gold checked.

- ``stats``: the difficulty profile of the config's stream
  (``memsim.analysis.profile``): sizes, distinct texts, store size at question
  time, evidence per question, changed facts, question-evidence similarity,
  naive retrieval ranks and ``recall_all@k`` by kind and half. Printed, and
  written as JSON with ``--json``.
- ``render``: the config's stream written as a hashed world file
  (``memsim.scenarios.world_file``), its turns rewritten through an
  OpenAI-compatible endpoint when ``--llm`` is given (``memsim.analysis.render``),
  each fact-bearing rewrite verified; ``[scenario] name = "world"`` replays it.
- ``check``: every question's gold, evidence and supporting turns re-derived
  from the claims the world's text makes, at the dates they were said
  (``memsim.scenarios.world_check``), and the text checked to carry each claim
  and no unlogged value; counts by kind are printed, and the exit code is 1 on
  any disagreement (2 for a stream that logs no claims).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memsim.analysis.cli.options import int_in, nonempty_path

__all__ = ["scenario_arguments", "scenario_main"]


def _add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", type=Path, help="scenario config (TOML), e.g. scenarios/configs/locomo_stream.toml")
    p.add_argument("--seed", type=int_in("seed"), default=None, help="seed of the scenario stream (default: the config's)")


def _add_stats(p: argparse.ArgumentParser) -> None:
    _add_config(p)
    p.add_argument("--json", type=nonempty_path, default=None, metavar="OUT", help="also write the profile as JSON to OUT")
    p.add_argument("--k", type=int_in("k"), default=10, help="cut-off of naive recall_all@k (default 10)")


def _stats(args: argparse.Namespace) -> int:
    from memsim.analysis.profile import config_stream, format_profile, profile
    from memsim.core.errors import UserError
    from memsim.core.files import write_text_atomic

    if args.k < 1:
        raise UserError(f"--k: must be at least 1, got {args.k}")
    scenario, stream, seed = config_stream(args.config, seed=args.seed)
    if stream.streamed is not None:
        raise UserError(f"{args.config}: scenario {scenario.name} is a static benchmark; stats profiles longitudinal streams")
    figures = {"config": str(args.config), "scenario": scenario.name, "args": scenario.spec_args(), "seed": seed,
               **profile(stream, k=args.k)}
    print(f"memsim scenario stats: {scenario.name} ({args.config}), seed {seed}")
    print(format_profile(figures))
    if args.json is not None:
        write_text_atomic(args.json, json.dumps(figures, indent=2) + "\n")
    return 0


def _add_render(p: argparse.ArgumentParser) -> None:
    _add_config(p)
    p.add_argument("--out", type=nonempty_path, required=True, metavar="WORLD.jsonl", help="the world file to write")
    p.add_argument("--llm", choices=("openai",), default=None,
                   help="rewrite the turns through an OpenAI-compatible endpoint (default: write the stream unchanged)")
    p.add_argument("--llm-base-url", default=None, metavar="URL", help="the endpoint (e.g. http://127.0.0.1:8080/v1)")
    p.add_argument("--llm-model", default=None, metavar="M", help="model name the endpoint serves (default: its first)")
    p.add_argument("--judge", action="append", default=None, metavar="NAME",
                   help="registered judge that must also accept each fact-bearing rewrite (repeatable)")
    p.add_argument("--retries", type=int_in("retries"), default=2, help="rewrites tried again after a failed verification (default 2)")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="folder of the LLM response cache (default $MEMSIM_CACHE_DIR or ~/.cache/memsim)")


def _render(args: argparse.Namespace) -> int:
    from memsim.analysis.profile import config_stream
    from memsim.analysis.render import format_counts, render_stream
    from memsim.scenarios.world_file import write_world
    from memsim.core.errors import UserError

    if args.llm is None and (args.llm_base_url or args.llm_model or args.judge):
        raise UserError("--llm-base-url, --llm-model and --judge need --llm openai")
    if args.retries < 0:
        raise UserError(f"--retries: must be at least 0, got {args.retries}")
    scenario, stream, seed = config_stream(args.config, seed=args.seed)
    if stream.streamed is not None:
        raise UserError(f"{args.config}: scenario {scenario.name} is a static benchmark; render writes longitudinal streams")
    counts: dict[str, int] = {}
    render_info: dict[str, object] = {}
    if args.llm is not None:
        from memsim.sim.answer.cache import CachedLLM
        from memsim.sim.answer.llm import OpenAICompatibleLLM, make_llm

        model = args.llm_model
        if not model:
            served = OpenAICompatibleLLM.served_models(args.llm_base_url)
            if not served:
                raise UserError(f"--llm-base-url {args.llm_base_url}: the endpoint lists no model; name one with --llm-model")
            model = served[0]
        client = CachedLLM(make_llm(args.llm, model=model, base_url=args.llm_base_url), cache_dir=args.cache_dir)
        try:
            stream, counts = render_stream(stream, client, judges=tuple(args.judge or ()), retries=args.retries)
        finally:
            client.close()
        render_info = {"llm": client.describe(), "judges": list(args.judge or ()), "retries": args.retries}
        print(format_counts(counts))
    source = {"name": scenario.name, "args": scenario.spec_args(), "seed": seed, **({"render": render_info} if render_info else {})}
    digest = write_world(args.out, stream, source=source, counts=counts)
    print(f"memsim scenario render: wrote {args.out} ({stream.totals()['turns']:,} turns, sha256 {digest[:12]})")
    return 0


def _check(args: argparse.Namespace) -> int:
    from memsim.analysis.profile import config_stream
    from memsim.scenarios.world_check import check_claims, format_check
    from memsim.core.errors import UserError

    scenario, stream, seed = config_stream(args.config, seed=args.seed)
    try:
        report = check_claims(stream)
    except ValueError as e:
        raise UserError(f"{args.config}: scenario {scenario.name}: {e}") from None
    print(f"memsim scenario check: {scenario.name} ({args.config}), seed {seed}")
    print(format_check(report))
    return 0 if report.ok else 1


_SUBCOMMANDS = (
    ("check", "re-derive every question's gold from the claims the world's text makes; exit 1 on any disagreement",
     _add_config, _check),
    ("stats", "difficulty profile of a scenario's stream (sizes, store at question time, naive recall)", _add_stats, _stats),
    ("render", "write a scenario's stream as a hashed world file, rewritten by an LLM with --llm", _add_render, _render),
)


def scenario_arguments(parser: argparse.ArgumentParser) -> None:
    """One sub-command per action."""
    sub = parser.add_subparsers(dest="scenario_command", required=True, metavar="ACTION")
    for name, help_text, add, run in _SUBCOMMANDS:
        p = sub.add_parser(name, help=help_text, description=help_text)
        add(p)
        p.set_defaults(_scenario_main=run)


def scenario_main(args: argparse.Namespace) -> int:
    """Run the chosen action."""
    return int(args._scenario_main(args) or 0)
