"""``memsim run CONFIG.toml`` and ``memsim demo``: longitudinal runs from the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from memory.registry import SystemSpec, memory_names, parse_system
from sim.config import CONFIG_DIR, load_config
from sim.errors import UserError

__all__ = ["add_arguments", "main", "add_demo_arguments", "demo_main", "DEMO_CONFIG", "demo_systems"]

DEMO_CONFIG = CONFIG_DIR / "demo.toml"
"""The persona scenario the demo runs."""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--system", action="append", default=[], metavar="NAME[:k=v,...]",
                        help="system under test (repeatable); default: the config's [run] systems")
    parser.add_argument("--seed", type=int, default=None, help="seed (default: the config's)")
    parser.add_argument("-k", type=int, default=None, help="memories retrieved per question (default: the config's)")
    parser.add_argument("--out", type=Path, default=None, help="run folder (default: runs/<scenario>-<time>)")
    parser.add_argument("--no-report", action="store_true", help="do not write report.html")
    try:
        from sim.answer import add_answer_arguments
    except ImportError:  # answering is part of the package; absent only in a broken install
        return
    add_answer_arguments(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim run``."""
    parser.add_argument("config", type=Path, help="scenario config (TOML); see scenarios/configs/")
    _common(parser)


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim demo``."""
    parser.add_argument("--config", type=Path, default=DEMO_CONFIG, help="scenario config (default: the demo persona)")
    _common(parser)


def demo_systems() -> list[SystemSpec]:
    """Every standalone registered system except the ``control-`` instruments, naive first."""
    names = [n for n in memory_names(standalone_only=True) if not n.startswith("control-")]
    names.sort(key=lambda n: (n != "naive", n))
    return [SystemSpec(n) for n in names]


def main(args: argparse.Namespace) -> int:
    """Run a config."""
    return _run(args, args.config, default_systems=None)


def demo_main(args: argparse.Namespace) -> int:
    """Run the demo: the persona scenario against every registered system."""
    return _run(args, args.config, default_systems=demo_systems())


def _run(args: argparse.Namespace, config_path: Path, *, default_systems: list[SystemSpec] | None) -> int:
    from sim.runner import default_out_dir, iter_run, spec_from_config

    config = load_config(config_path)
    try:
        systems = [parse_system(s) for s in args.system]
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if not systems and not config.run.systems and default_systems:
        systems = default_systems
    if not systems and not config.run.systems:
        raise UserError(f"no systems: give --system or [run] systems in {config_path}; known: {', '.join(memory_names())}")
    if args.k is not None and args.k <= 0:
        raise UserError(f"-k must be positive, got {args.k}")
    try:
        spec = spec_from_config(config, systems=systems, seed=args.seed, k=args.k)
    except ValueError as exc:
        raise UserError(f"{config_path}: {exc}") from None
    answer_setup = _answer_setup(args)
    out = args.out or default_out_dir(spec.scenario)

    print(f"memsim run: scenario {spec.scenario} ({config_path}), seed {spec.seed}, k {spec.k}")
    print(f"systems: {', '.join(s.display for s in spec.systems)}")
    result = None
    try:
        for cp in _progress(iter_run(spec, out_dir=out, answer_setup=answer_setup), out):
            result = cp.result
    except UserError:
        print(f"stopped; every row recorded so far is in {out}", file=sys.stderr)
        raise
    assert result is not None
    _print_summary(result)
    if not args.no_report:
        _report(result.out_dir)
    print(f"run folder: {result.out_dir}")
    return 0


def _progress(checkpoints: Any, out: Path) -> Any:
    """Pass checkpoints through, with the totals printed first and a bar in simulated days."""
    from tqdm import tqdm

    bar = None
    for cp in checkpoints:
        if bar is None:
            totals = _totals(out)
            if totals:
                print("totals: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
            bar = tqdm(total=cp.total_days, unit="day", desc="simulated", file=sys.stderr, leave=False)
        bar.n = cp.day
        bar.set_postfix(probes=cp.probes, refresh=False)
        bar.refresh()
        if cp.result is not None:
            bar.close()
        yield cp


def _answer_setup(args: argparse.Namespace) -> Any:
    if getattr(args, "reader", "none") in (None, "none"):
        return None
    from sim.answer import answer_setup_from_args

    return answer_setup_from_args(args, default_judges=("contains", "f1_locomo"))


def _totals(out: Path) -> dict[str, Any]:
    import json

    try:
        return json.loads((Path(out) / "spec.json").read_text())["totals"]
    except (OSError, KeyError, ValueError):
        return {}


def _print_summary(result: Any) -> None:
    from analysis.stats import format_table

    metric = result.metrics.get("metric")
    print()
    if result.summary is not None:
        print(f"Learning through use: {metric} = recall_all@{result.metrics.get('k')} (evidence accuracy, %), "
              f"first vs second half of the question stream, 95% bootstrap intervals")
        print(format_table(result.summary))
    systems = result.metrics.get("systems", {})
    if systems:
        print()
        print(f"{'system':<28} {'stale>cur %':>11} {'items':>7} {'MB':>7} {'ret p50 ms':>10} {'ret p95 ms':>10} {'leaks':>5}")
        for name, m in systems.items():
            stale = m.get("stale_above_current")
            mb = (m.get("final_bytes") or 0) / 1e6
            print(f"{name:<28} {('—' if stale is None else f'{100 * stale:.1f}'):>11} {m.get('final_items') or 0:>7} "
                  f"{mb:>7.2f} {m.get('retrieve_ms_p50') or 0:>10.2f} {m.get('retrieve_ms_p95') or 0:>10.2f} "
                  f"{(m.get('deleted_leaks') or 0) + (m.get('forget_probe_leaks') or 0):>5}")
            answers = {k: v for k, v in m.items() if k.startswith("answer_") and v is not None}
            if answers:
                print("    answers: " + ", ".join(f"{k[7:]} {100 * v:.1f}%" for k, v in answers.items()))
    worst = []
    for name, m in systems.items():
        users = {u: v for u, v in (m.get("per_user") or {}).items() if v.get("diff") is not None}
        if len(users) > 1:
            u, v = min(users.items(), key=lambda kv: kv[1]["diff"])
            worst.append(f"{name} {u} {100 * v['diff']:+.1f} pp")
    if worst:
        print("largest per-user decline (2nd - 1st half): " + "; ".join(worst))
    iso = result.metrics.get("isolation_failures")
    if iso:
        print(f"ISOLATION FAILURES: {iso} retrieved memories belonged to another user")
    comp = result.metrics.get("time_compression")
    if comp:
        print(f"wall time {result.metrics.get('wall_seconds')} s; simulated time ran {comp:,.0f}x faster than real time")
    for f in result.failures:
        print(f"FAILED: {f['system']} during {f['operation']} at {f['time']}: {f['error']}")


def _report(out_dir: Path) -> None:
    try:
        from analysis.report import write_report
    except ImportError:
        return
    path = write_report(out_dir)
    print(f"report: {path}")
