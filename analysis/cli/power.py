"""``memsim power CONFIG.toml --effect 0.05 --seeds N``: power curve and minimum detectable effect.

Runs the config's scenario on ``--seeds`` seeds with the system under test,
then injects known effects into that system's own recorded rows and prints
the share of seeds whose second-half gain (per-user halves, users
resampled: how a run's headline gain over the twin is read) has an interval
above 0 (``memsim.analysis.power.gain_power_curve``), per effect, and the smallest effect
reaching 80% power. ``--against control`` measures the older DiD against
the static control instead (``memsim.analysis.power.power_curve``).

The seeds are played as a sweep (``memsim.analysis.power.power_sweep``, one cell per
seed, one run folder each under ``--sweep-dir``) on a process pool or Dask,
so they run in parallel and a killed run resumes where it stopped.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["power_arguments", "power_main"]


def power_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim power``."""
    parser.add_argument("config", type=Path, help="scenario config (TOML), e.g. scenarios/configs/persona.toml")
    parser.add_argument("--effect", type=float, default=0.05, help="effect of interest (DiD in metric units)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds to simulate (default 10)")
    parser.add_argument("--system", default=None,
                        help="system under test, the base the effect is injected into "
                             "(default: the config's first system other than the control, else the control)")
    parser.add_argument("--against", choices=("twin", "control"), default="twin",
                        help="twin: the headline, second-half gain over the system's twin (default); "
                             "control: DiD against the static control")
    parser.add_argument("--embedder", choices=("minilm", "hash"), default="minilm",
                        help="minilm (packaged all-MiniLM-L6-v2) or hash (fast bag-of-words, for quick looks)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples per interval")
    parser.add_argument("--sweep-dir", type=Path, default=None,
                        help="sweep folder of the seeds' runs (default runs/power-<config name>); finished seeds are reused")
    from memsim.analysis.cli.sweep import add_executor_arguments

    add_executor_arguments(parser)


def power_main(args: argparse.Namespace) -> int:
    """Simulate and print the curve."""
    import polars as pl

    from memsim.analysis.power import (
        DEFAULT_EFFECTS,
        gain_power_curve,
        minimum_detectable_effect,
        power_curve,
        power_sweep,
        seed_runs_from_sweep,
    )
    from memsim.analysis.sweep import run_sweep
    from memsim.memory.registry import SystemSpec
    from memsim.scenarios.config import load_config
    from memsim.sim.core.errors import UserError
    from memsim.sim.core.streams import streams

    if args.seeds < 2:
        raise UserError(f"--seeds must be at least 2, got {args.seeds}")
    if not 0 <= args.effect <= 1:
        raise UserError(f"--effect must be in [0, 1], got {args.effect}")
    config = load_config(args.config)
    from memsim.memory.registry import parse_system

    control = config.run.control
    listed = [parse_system(s).name for s in config.run.systems]
    base = args.system or next((s for s in listed if s != control), control)
    if args.against == "twin":
        systems = [parse_system(base)]
    else:
        systems = [SystemSpec(control)] + ([parse_system(base)] if base != control else [])
    spec = power_sweep(config, systems=systems, seeds=args.seeds, embedder=args.embedder)
    out = args.sweep_dir or Path("runs") / f"power-{args.config.stem}"
    result = run_sweep(spec, out, executor=args.executor, workers=args.workers, scheduler=args.scheduler,
                       progress=lambda line: print(line, flush=True))
    runs = seed_runs_from_sweep(result)
    label = systems[-1].display if args.against == "twin" else base
    for seed, probes in zip(runs.seeds, runs.probes):
        print(f"seed {seed}: {probes.filter(pl.col('system') == label).height} questions")
    effects = sorted({*DEFAULT_EFFECTS, float(args.effect)})
    rng = streams(config.run.seed)["stats"]
    if args.against == "twin":
        points = gain_power_curve(list(runs.probes), system=label, effects=effects, k=runs.k,
                                  span_days=runs.span_days, metric=runs.metric, rng=rng, n_boot=args.n_boot)
        what, measured = f"second-half gain of {label} (as over its twin)", "measured gain"
    else:
        points = power_curve(list(runs.probes), system=base, control=control, effects=effects, k=runs.k,
                             span_days=runs.span_days, metric=runs.metric, rng=rng, n_boot=args.n_boot)
        what, measured = f"halves DiD of {base} against {control}", "measured DiD"
    print()
    print(f"Power of the {what} (95% user-level interval above 0) to detect an effect injected into {label}'s "
          f"own rows, {args.seeds} seeds, {config.scenario['name']} ({args.config}), {args.embedder} embedder, "
          f"metric {runs.metric}")
    print(f"{'effect':>8} {'power':>7} {'seeds':>6} {measured:>13}")
    for p in points:
        mark = "  <- --effect" if p.effect == args.effect else ""
        print(f"{100 * p.effect:>7.1f}% {100 * p.power:>6.0f}% {p.seeds:>6} {100 * p.mean_did:>+12.1f}%{mark}")
    mde = minimum_detectable_effect(points)
    print()
    print("minimum detectable effect at 80% power: " + ("not reached on this grid" if mde is None else f"{100 * mde:.1f} points"))
    return 0
