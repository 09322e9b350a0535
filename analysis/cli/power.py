"""``memsim power RUN_DIR`` or ``memsim power CONFIG.toml --seeds N``: design-based power of a learning contrast.

Given a run folder, prints the power curve of one of its contrasts (by
default the headline: a feedback-using system's learning from feedback,
system minus the best content-ignoring arm in that half) over a range of
effects, losses and gains, and the smallest loss and gain at 80% power.
It is the computation behind the run's printed MDE
(``memsim.analysis.power.contrast_power``), so the two agree, and at effect 0 about 5% of
replicates reject.

Given a config, plays it on ``--seeds`` seeds as a sweep
(``memsim.analysis.power.power_sweep``, one cell per seed under ``--sweep-dir``, on a
process pool or Dask, resumable) and prints each seed's curve and MDE and
their mean. ``--against control`` measures the older DiD against the static
control instead (``memsim.analysis.power.power_curve``, injected oracle fixes).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from memsim.analysis.cli.options import int_in

__all__ = ["power_arguments", "power_main"]

CONTRAST_NAMES = ("learning_from_feedback", "system_vs_placebo", "effect_of_feedback_calls", "effect_of_use",
                  "system_vs_always_false", "system_vs_always_true")
"""``--contrast`` choices, as ``metrics.json`` keys them."""


def power_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim power``."""
    parser.add_argument("target", type=Path, metavar="RUN_DIR|CONFIG",
                        help="a run folder (its own rows), or a scenario config (TOML) to play on --seeds seeds")
    parser.add_argument("--effect", type=float, default=0.05, help="effect of interest (metric units, e.g. 0.05)")
    parser.add_argument("--system", default=None,
                        help="the feedback-using system (default: the first one in the run, or the config's first "
                             "system other than the control)")
    parser.add_argument("--contrast", choices=CONTRAST_NAMES, default=None,
                        help="default: learning_from_feedback (system - the best content-ignoring arm in that half)")
    parser.add_argument("--half", type=int, choices=(1, 2), default=2, help="half of each user's questions (default 2)")
    parser.add_argument("--seeds", type=int_in("seeds"), default=10, help="seeds to simulate for a config (default 10)")
    parser.add_argument("--against", choices=("contrast", "control"), default="contrast",
                        help="contrast: the learning table's contrasts (default); control: DiD against the static "
                             "control with injected oracle fixes (configs only)")
    parser.add_argument("--embedder", choices=("minilm", "hash"), default="minilm",
                        help="minilm (packaged all-MiniLM-L6-v2) or hash (fast bag-of-words, for quick looks)")
    parser.add_argument("--n-boot", type=int_in("n_boot"), default=1000, help="bootstrap resamples per interval (--against control)")
    parser.add_argument("--sweep-dir", type=Path, default=None,
                        help="sweep folder of the seeds' runs (default runs/power-<config name>); finished seeds are reused")
    from memsim.analysis.cli.sweep import add_executor_arguments

    add_executor_arguments(parser)


def _arms(probes: Any, info: Any, system: str | None, contrast: str | None, *, metric: str, half: int,
          unit: str | None, balance_kinds: bool = False, channel: str | None = None) -> tuple[str, str, str]:
    """(contrast name, system, reference) of the contrast asked for, among a run's arms."""
    from memsim.analysis.power import contrast_arms

    return contrast_arms(probes, info, metric=metric, system=system, contrast=contrast, half=half, unit=unit,
                         balance_kinds=balance_kinds, channel=channel)


def _print_curve(points: Any, effect: float) -> None:
    from memsim.core.table import text_table

    rows = [[f"{100 * e:.1f}%", f"{100 * p:.1f}%", "<- --effect" if e == effect else ""]
            for e, p in zip(points.effects, points.power)]
    print(text_table(["effect", "power", ""], rows, align="rrl"))


def power_main(args: argparse.Namespace) -> int:
    """Compute and print the curve."""
    from memsim.core.errors import UserError

    if not 0 <= args.effect <= 1:
        raise UserError(f"--effect must be in [0, 1], got {args.effect}")
    if args.target.is_dir():
        if args.against == "control":
            raise UserError("--against control plays a config on seeds; give a config, not a run folder")
        return _run_folder(args)
    if args.seeds < 2:
        raise UserError(f"--seeds must be at least 2, got {args.seeds}")
    return _config(args)


def _run_folder(args: argparse.Namespace) -> int:
    from memsim.analysis.load import read_run
    from memsim.analysis.power import CONTRAST_EFFECTS, contrast_power

    from memsim.analysis.learning import design_unit

    run = read_run(args.target)
    unit = design_unit(run.info, run.probes)[0]
    name, a, b = _arms(run.probes, run.info, args.system, args.contrast, metric=run.metric, half=args.half - 1,
                       unit=unit, balance_kinds=run.spec.balance_kinds, channel=run.spec.feedback_from)
    effects = sorted({*CONTRAST_EFFECTS, float(args.effect)})
    cp = contrast_power(run.probes, metric=run.metric, system=a, reference=b, seed=run.spec.seed, effects=effects,
                        half=args.half - 1, balance_kinds=run.spec.balance_kinds, unit=unit)
    print(f"Design-based power of {name} ({a} - {b}), half {args.half}, {run.metric}, run {args.target} "
          f"(seed {run.spec.seed}): {cp.questions} questions of {b} redrawn as Bernoulli(user's base rate + effect), "
          f"{cp.units} {cp.unit}s, effects varying between them with spread {100 * cp.spread:.1f} points, "
          "sign-flip p < 0.05")
    _print_curve(cp, args.effect)
    printed = ((run.metrics or {}).get("systems", {}).get(_owner(name, a, b, run), {}).get("contrasts", {})
               .get(name, {}).get("second_mde" if args.half == 2 else "first_mde"))
    print()
    print("minimum detectable effect at 80% power: "
          + ("not reached" if cp.mde is None else f"{100 * cp.mde:.1f} points")
          + ("" if printed is None else f" (metrics.json: {100 * printed:.1f})")
          + f"; gain {'not reached' if cp.mde_gain is None else f'{100 * cp.mde_gain:.1f}'}, "
          + f"loss {'not reached' if cp.mde_loss is None else f'{100 * cp.mde_loss:.1f}'}")
    return 0


def _owner(name: str, a: str, b: str, run: Any) -> str:
    """The feedback-using system whose ``contrasts`` hold this contrast (the placebo's system for calls)."""
    if name != "effect_of_feedback_calls":
        return a
    from memsim.analysis.learning import family_arms

    families = family_arms(list(dict.fromkeys(run.probes["system"].to_list())), run.info)
    return next(s for s, fam in families.items() if fam.get("twin") == b)


def _config(args: argparse.Namespace) -> int:
    import polars as pl

    from memsim.analysis.power import (
        CONTRAST_EFFECTS,
        DEFAULT_EFFECTS,
        contrast_power,
        minimum_detectable_effect,
        power_curve,
        power_sweep,
        seed_runs_from_sweep,
    )
    from memsim.analysis.sweep import run_sweep
    from memsim.memory.registry import SystemSpec, parse_system
    from memsim.scenarios.config import load_config
    from memsim.core.streams import streams

    config = load_config(args.target)
    control = config.run.control
    listed = [parse_system(s).name for s in config.run.systems]
    base = args.system or next((s for s in listed if s != control), control)
    if args.against == "contrast":
        systems = [parse_system(base)]
    else:
        systems = [SystemSpec(control)] + ([parse_system(base)] if base != control else [])
    spec = power_sweep(config, systems=systems, seeds=args.seeds, embedder=args.embedder)
    out = args.sweep_dir or Path("runs") / f"power-{args.target.stem}"
    result = run_sweep(spec, out, executor=args.executor, workers=args.workers, scheduler=args.scheduler,
                       progress=lambda line: print(line, flush=True))
    runs = seed_runs_from_sweep(result)
    print()
    if args.against == "control":
        effects = sorted({*DEFAULT_EFFECTS, float(args.effect)})
        points = power_curve(list(runs.probes), system=base, control=control, effects=effects, k=runs.k,
                             span_days=runs.span_days, metric=runs.metric, rng=streams(config.run.seed)["stats"],
                             n_boot=args.n_boot)
        print(f"Power of the halves DiD of {base} against {control} (95% user-level interval above 0) to detect an "
              f"effect injected into {base}'s own rows, {args.seeds} seeds, {args.target}, metric {runs.metric}")
        from memsim.core.table import text_table

        rows = [[f"{100 * p.effect:.1f}%", f"{100 * p.power:.0f}%", p.seeds, f"{100 * p.mean_did:+.1f}%",
                 "<- --effect" if p.effect == args.effect else ""] for p in points]
        print(text_table(["effect", "power", "seeds", "measured DiD", ""], rows, align="rrrrl"))
        mde = minimum_detectable_effect(points)
        print()
        print("minimum detectable effect at 80% power: " + ("not reached on this grid" if mde is None else f"{100 * mde:.1f} points"))
        return 0
    effects = sorted({*CONTRAST_EFFECTS, float(args.effect)})
    curves = []
    from memsim.analysis.learning import design_unit

    for i, (seed, probes) in enumerate(zip(runs.seeds, runs.probes)):
        info = runs.infos[i] if i < len(runs.infos) else None
        unit = design_unit(info, probes)[0]
        name, a, b = _arms(probes, info, systems[0].display, args.contrast, metric=runs.metric, half=args.half - 1,
                           unit=unit, channel=config.run.feedback_from)
        curves.append(contrast_power(probes, metric=runs.metric, system=a, reference=b, seed=seed, effects=effects,
                                     half=args.half - 1, unit=unit))
        mde = curves[-1].mde
        print(f"seed {seed}: {name} ({a} - {b}), {probes.filter(pl.col('system') == b).height} questions of {b}, "
              f"MDE {'not reached' if mde is None else f'{100 * mde:.1f} points'} (as that seed's run prints)")
    print()
    print(f"Design-based power of {name}, half {args.half}, {runs.metric}, mean over {len(curves)} seeds of {args.target}")
    mean = type(curves[0])(a, b, args.half - 1, tuple(effects),
                           tuple(sum(c.power[i] for c in curves) / len(curves) for i in range(len(effects))),
                           None, sum(c.questions for c in curves), sum(c.units for c in curves))
    _print_curve(mean, args.effect)
    mdes = [c.mde for c in curves if c.mde is not None]
    print()
    print("minimum detectable effect at 80% power, mean over seeds: "
          + (f"{100 * sum(mdes) / len(mdes):.1f} points ({len(mdes)} of {len(curves)} seeds reached it)" if mdes
             else "not reached"))
    return 0
