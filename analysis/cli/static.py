"""``memsim static NAME``: a registered static protocol (``memsim.scenarios.registry``), played by the one engine.

The common options plus one flag per field of the protocol's options model
make a spec of kind ``static`` (fresh systems per episode, questions after
ingest, no feedback), executed by ``memsim.analysis.pipeline`` like every run.
"""

from __future__ import annotations

import argparse
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from memsim.analysis.cli.options import float_in, input_path, int_in, run_folder

__all__ = ["static_arguments", "static_main", "static_spec"]


def _common(p: argparse.ArgumentParser, protocol: Any) -> None:
    from memsim.analysis.cli.options import add_answer_arguments, add_cache_dir_argument, add_no_progress_argument

    p.add_argument("--data", type=input_path("data file", text=True), default=None, help=protocol.data)
    p.add_argument("--system", action="append", default=None, metavar="NAME[:k=v,...]",
                   help="memory system (repeatable; default naive)")
    p.add_argument("-k", type=int_in("k"), default=protocol.k, help=f"headline cut-off (default {protocol.k})")
    p.add_argument("--seed", type=int_in("seed"), default=0, help="seed (sampling, bootstrap; default 0)")
    p.add_argument("--n-boot", type=int_in("n_boot"), default=2000, help="bootstrap resamples per interval (default 2000)")
    p.add_argument("--call-deadline", type=float_in("seconds"), default=None, metavar="SECONDS",
                   help="longest one call of an in-process system may take before the system is failed "
                   "(default 600 s, as a run's call_deadline_s)")
    p.add_argument("--out", type=run_folder, default=None,
                   help=f"run folder (default runs/static-{protocol.name}-<time>); an unfinished run there is resumed")
    p.add_argument("--no-report", action="store_true", help="do not write report.html")
    add_cache_dir_argument(p)
    add_no_progress_argument(p)
    add_answer_arguments(p)


def _option_flags(p: argparse.ArgumentParser, title: str, model: Any) -> None:
    """One flag per field of the options model: its type, default, choices (a ``Literal``) and description."""
    g = p.add_argument_group(f"{title} options")
    for name, field in model.model_fields.items():
        flag, kind, default = "--" + name.replace("_", "-"), field.annotation, field.default
        plain = [a for a in get_args(kind) if a is not type(None)]
        if get_origin(kind) in (Union, types.UnionType) and len(plain) == 1:
            kind = plain[0]  # ``X | None``: the flag takes an X, absent is None
        help_text = (field.description or "").replace("%", "%%")  # argparse formats help with %
        if kind is bool:
            g.add_argument(flag, action=argparse.BooleanOptionalAction if default else "store_true",
                           default=default, help=help_text)
            continue
        choices = get_args(kind) if get_origin(kind) is Literal else None
        if default is not None:
            help_text += f" (default {default})"
        # Counts are bounded when parsed; a file option is refused when it names a FIFO or a device.
        parse = (type(choices[0]) if choices else int_in("items", floor=False) if kind is int
                 else input_path(name.replace("_", " ") + " file", path=False, text=True) if name.endswith(("_ids", "_file")) else kind)
        g.add_argument(flag, type=parse, choices=choices, default=default,
                       metavar="N" if kind is int else None, help=help_text)


def static_arguments(parser: argparse.ArgumentParser) -> None:
    """One sub-command per registered static protocol."""
    from memsim.scenarios.registry import protocol_names, static_protocol

    sub = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    for name in protocol_names():
        protocol = static_protocol(name)
        p = sub.add_parser(name, help=protocol.description, description=protocol.description)
        _common(p, protocol)
        _option_flags(p, protocol.title, protocol.options_model())


def _systems(args: argparse.Namespace) -> tuple[Any, ...]:
    from memsim.memory.registry import parse_system
    from memsim.core.errors import UserError

    try:
        return tuple(parse_system(s) for s in (args.system or ["naive"]))
    except ValueError as exc:
        raise UserError(f"--system: {exc}") from None


def _resources(args: argparse.Namespace) -> Any:
    from memsim.memory.registry import Resources
    from memsim.core.streams import streams

    from memsim.analysis.cli.run import cache_dir_embedder

    return Resources(rng=streams(args.seed)["systems"], embedder_factory=cache_dir_embedder(args.cache_dir))


def static_spec(args: argparse.Namespace) -> tuple[Any, Any]:
    """The spec the options describe for protocol ``args.benchmark``, and the run its options planned.

    Raises:
        UserError: bad options, a missing file, unknown systems.
    """
    from memsim.analysis.pipeline import answer_options, make_spec
    from memsim.scenarios.registry import static_protocol
    from memsim.core.errors import UserError

    if args.k <= 0:
        raise UserError(f"-k must be a positive integer, got {args.k}")
    protocol = static_protocol(args.benchmark)
    systems, answer = _systems(args), answer_options(args)
    run = protocol.plan({f: getattr(args, f) for f in protocol.options_model().model_fields}, systems=systems,
                        data=args.data, k=args.k, seed=args.seed, answer=answer)
    deadline = {} if args.call_deadline is None else {"call_deadline_s": args.call_deadline}
    spec = make_spec("static", protocol.name, run.scenario_args, run.systems, **run.settings(),
                     n_boot=args.n_boot, control=None, answer=answer, **deadline)
    return spec, run


def static_main(args: argparse.Namespace) -> int:
    """Run the chosen benchmark and print its tables."""
    from memsim.analysis.cli.run import exit_code, print_static, progress_bar
    from memsim.analysis.pipeline import default_out_dir, execute
    from memsim.scenarios.registry import static_protocol
    from memsim.core.errors import UserError

    protocol = static_protocol(args.benchmark)
    spec, planned = static_spec(args)
    from memsim.memory.http_health import check_http_systems

    check_http_systems(spec.systems)  # before the run folder exists: a dead server leaves nothing behind
    chosen = spec.scenario.args.get("protocol")
    print(f"{protocol.title} {spec.scenario.args['data']} (sha256 {spec.scenario_meta['sha256'][:12]})"
          + (f", protocol {chosen}" if chosen else ""))
    for line in spec.scenario_meta.get("load_lines", []):
        print(f"  {line}")
    out = args.out or default_out_dir(f"static-{protocol.name}")
    try:
        outcome = execute(
            spec,
            out_dir=out,
            resources=_resources(args),
            default_judges=protocol.judges,
            progress=progress_bar(enabled=not args.no_progress),
            report=not args.no_report,
        )
    except UserError:
        if any(Path(out, part).exists() for part in ("parts", "probes.parquet")):
            # Only where episodes were written: a dry run, or an error before the first episode, leaves no folder.
            print(f"stopped; every finished episode is in {out} (rerun the same command to resume)")
        raise
    print_static(outcome, kind_names=planned.kind_names)
    if not args.no_report:
        print(f"report: {Path(out) / 'report.html'}")
    print(f"wall {outcome.result.wall_seconds:.1f} s; run folder: {out}")
    return exit_code(outcome, out)

