"""``memsim power CONFIG.toml --effect 0.05 --seeds N``: power curve and minimum detectable effect.

Runs the config's scenario on ``--seeds`` seeds with the control (and the
base system, when it is another one), then injects known effects into the
base system's recorded rows (``analysis.power.power_curve``) and prints the
share of seeds whose DiD interval lies above 0, per effect, and the smallest
effect reaching 80% power.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from analysis.power import DEFAULT_EFFECTS, minimum_detectable_effect, power_curve
from memory.registry import Resources, SystemSpec
from scenarios.config import load_config
from sim.errors import UserError

__all__ = ["power_arguments", "power_main"]


def power_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim power``."""
    parser.add_argument("config", type=Path, help="scenario config (TOML), e.g. scenarios/configs/persona.toml")
    parser.add_argument("--effect", type=float, default=0.05, help="effect of interest (DiD in metric units)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds to simulate (default 10)")
    parser.add_argument("--system", default=None, help="base system the effect is injected into (default: the control)")
    parser.add_argument("--embedder", choices=("minilm", "hash"), default="minilm",
                        help="minilm (packaged all-MiniLM-L6-v2) or hash (fast bag-of-words, for quick looks)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples per interval")


def power_main(args: argparse.Namespace) -> int:
    """Simulate and print the curve."""
    from sim.runner import run, spec_from_config

    if args.seeds < 2:
        raise UserError(f"--seeds must be at least 2, got {args.seeds}")
    if not 0 <= args.effect <= 1:
        raise UserError(f"--effect must be in [0, 1], got {args.effect}")
    config = load_config(args.config)
    control = config.run.control
    base = args.system or control
    systems = [SystemSpec(control)] + ([SystemSpec(base)] if base != control else [])
    spec0 = spec_from_config(config, systems=systems)
    embedder = None
    if args.embedder == "hash":
        from memory.embed import HashEmbedder

        embedder = lambda: HashEmbedder(256)  # noqa: E731
    runs, span, k = [], 0.0, spec0.k
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.seeds):
            seed = spec0.seed + i
            spec = spec_from_config(config, systems=systems, seed=seed)
            res = run(spec, out_dir=Path(tmp) / f"s{seed}",
                      resources=Resources(rng=np.random.default_rng(seed).spawn(3)[1], embedder_factory=embedder))
            runs.append(res.probes)
            span = max(span, float(res.metrics["totals"]["span_days"]))
            print(f"seed {seed}: {res.probes.filter(res.probes['system'] == control).height} questions", flush=True)
    effects = sorted({*DEFAULT_EFFECTS, float(args.effect)})
    points = power_curve(runs, system=base, control=control, effects=effects, k=k, span_days=span,
                         rng=np.random.default_rng(spec0.seed), n_boot=args.n_boot)
    print()
    print(f"Power of the halves DiD (95% interval above 0) to detect an effect injected into {base} "
          f"against {control}, {args.seeds} seeds, {config.scenario['name']} ({args.config}), {args.embedder} embedder")
    print(f"{'effect':>8} {'power':>7} {'seeds':>6} {'measured DiD':>13}")
    for p in points:
        mark = "  <- --effect" if p.effect == args.effect else ""
        print(f"{100 * p.effect:>7.1f}% {100 * p.power:>6.0f}% {p.seeds:>6} {100 * p.mean_did:>+12.1f}%{mark}")
    mde = minimum_detectable_effect(points)
    print()
    print("minimum detectable effect at 80% power: " + ("not reached on this grid" if mde is None else f"{100 * mde:.1f} points"))
    return 0
