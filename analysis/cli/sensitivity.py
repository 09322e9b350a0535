"""``memsim sensitivity CONFIG.toml``: how a system's DiD against the control moves with the scenario knobs.

Varies re-ask rate, topic skew, fact change rate and feedback delay one at a
time around the config's values (``memsim.analysis.sensitivity``), prints the table
and writes the four-panel plot. The grid's runs are a sweep
(``memsim.analysis.sensitivity.sensitivity_sweep``: one cell per point and seed, a
run folder each under ``--sweep-dir``) played on a process pool or Dask and
resumed where a killed run stopped.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from memsim.analysis.cli.options import int_in, nonempty_path

__all__ = ["sensitivity_arguments", "sensitivity_main"]


def sensitivity_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim sensitivity``."""
    parser.add_argument("config", type=Path, help="base scenario config (TOML), e.g. scenarios/configs/persona.toml")
    parser.add_argument("--system", default="neuroplastic", help="system under study (name or name:key=value,...)")
    parser.add_argument("--seeds", type=int_in("seeds"), default=3, help="seeds per grid point (default 3)")
    parser.add_argument("--embedder", choices=("hash", "minilm"), default="hash",
                        help="hash (fast bag-of-words, default) or minilm (packaged all-MiniLM-L6-v2)")
    parser.add_argument("--n-boot", type=int_in("n_boot"), default=1000, help="bootstrap resamples per interval")
    parser.add_argument("--out", type=nonempty_path, default=Path("analysis/figures/sensitivity.png"), help="plot file (PNG or SVG)")
    parser.add_argument("--sweep-dir", type=Path, default=None,
                        help="sweep folder of the grid's runs (default runs/sensitivity-<config name>); finished cells are reused")
    from memsim.analysis.cli.sweep import add_executor_arguments

    add_executor_arguments(parser)


def sensitivity_main(args: argparse.Namespace) -> int:
    """Run the grid, print the table, write the plot."""
    from memsim.analysis.sensitivity import DEFAULT_KNOBS, format_table, grid_from_sweep, plot_grid, sensitivity_sweep
    from memsim.analysis.sweep import run_sweep
    from memsim.memory.registry import parse_system
    from memsim.scenarios.config import load_config
    from memsim.core.errors import UserError

    if args.seeds < 1:
        raise UserError(f"--seeds must be at least 1, got {args.seeds}")
    if args.out.suffix.lower() not in (".png", ".svg"):
        raise UserError(f"--out must end in .png or .svg, got {args.out}")
    config = load_config(args.config)
    system = parse_system(args.system)
    spec = sensitivity_sweep(config, system=system, knobs=DEFAULT_KNOBS, seeds=args.seeds, embedder=args.embedder)
    out = args.sweep_dir or Path("runs") / f"sensitivity-{args.config.stem}"
    result = run_sweep(spec, out, executor=args.executor, workers=args.workers, scheduler=args.scheduler,
                       progress=lambda line: print(line, flush=True))
    points = grid_from_sweep(result, config, system=system, knobs=DEFAULT_KNOBS, n_boot=args.n_boot)
    print()
    print(f"DiD of {system.display} against {config.run.control}, one knob at a time around {args.config}, "
          f"{args.seeds} seeds pooled per point, {args.embedder} embedder")
    print(format_table(points))
    metric = points[0].metric if points else "metric"
    title = (f"{system.display} vs {config.run.control}: DiD ({metric}) by knob, "
             f"{args.seeds} seeds pooled, {args.embedder} embedder")
    path = plot_grid(points, args.out, title=title)
    print(f"\nplot: {path}")
    return 0
