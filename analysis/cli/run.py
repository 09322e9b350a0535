"""``memsim run``, ``memsim demo``, ``memsim rerun`` and ``memsim list``."""

from __future__ import annotations

import textwrap

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsim.analysis.cli.options import input_path, int_in, run_folder

__all__ = [
    "run_arguments",
    "run_main",
    "demo_arguments",
    "demo_main",
    "rerun_arguments",
    "rerun_main",
    "listing_arguments",
    "listing_main",
    "print_outcome",
    "print_static",
    "embedding_line",
    "progress_bar",
]


def _common(parser: argparse.ArgumentParser) -> None:
    from memsim.analysis.cli.options import (
        add_answer_arguments,
        add_cache_dir_argument,
        add_no_progress_argument,
        add_out_argument,
        add_seed_argument,
        add_system_argument,
    )

    add_system_argument(parser, default=[], help="system under test (repeatable); default: the config's [run] systems")
    add_seed_argument(parser, default=None, help="seed (default: the config's)")
    parser.add_argument("-k", type=int_in("k"), default=None, help="memories retrieved per question (default: the config's)")
    add_out_argument(parser, help="run folder (default: runs/<scenario>-<time>); an unfinished run there is resumed")
    parser.add_argument("--no-report", action="store_true", help="do not write report.html")
    parser.add_argument("--keep-deleted-text", action="store_true", default=None,
                        help="keep the text of turns deleted later in the run folder (default: redacted; for debugging)")
    parser.add_argument("--placebo", action=argparse.BooleanOptionalAction, default=None,
                        help="play each learning system's placebo (its system's bits permuted within user and week: "
                             "the same calls and True bits, unrelated to the question) (default: the config's, else on)")
    parser.add_argument("--constant-arms", action=argparse.BooleanOptionalAction, default=None,
                        help="play each learning system told always False (~false) and always True (~true) "
                             "(default: the config's, else on); --no-constant-arms: neither")
    parser.add_argument("--balance-kinds", action="store_true", default=None,
                        help="weight questions so that both halves have the same question-kind mix")
    parser.add_argument("--data", type=input_path("data file", path=False, text=True), default=None, metavar="PATH",
                        help="the scenario's data file (scenario.data of locomo_stream, longmemeval_stream: "
                        "a path or a `memsim data` name)")
    add_cache_dir_argument(parser)
    add_no_progress_argument(parser)
    parser.add_argument("--workers", type=int_in("workers"), default=None, metavar="N",
                        help="worker processes that play the run's arms at once (default: the config's [run] workers, "
                             "else this machine's cores); the figures are the same for any N. A system that ends "
                             "its worker (a crash, os._exit, out of memory) fails the run with a message")
    parser.add_argument("--scheduler", default=None, metavar="WHERE",
                        help="play the arms on Dask: 'local' (a LocalCluster of --workers processes) or "
                             "dask://HOST:PORT (a running scheduler); default: the config's, else processes here")
    add_answer_arguments(parser)


def run_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim run``."""
    parser.add_argument("config", type=Path, help="scenario config (TOML); see scenarios/configs/")
    _common(parser)


def demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim demo``."""
    parser.add_argument("--config", type=Path, default=None,
                        help="scenario config (default: scenarios/configs/demo.toml, the life world at 30 users)")
    parser.add_argument("--quick", action="store_true",
                        help="a first look in under a minute: the life world's quick size (scenarios/configs/life_quick.toml)")
    _common(parser)


DEMO_ASK_FIRST: dict[str, str] = {
    "mem0": (
        "Mem0 took about half an hour at a sixth of the demo's size (retrieval about 300 ms a question); "
        "add --system mem0"
    ),
}
"""Installed systems the demo plays only when named, with the reason it prints."""

DEMO_INSTRUMENTS = ("control-learner",)
"""Instruments the demo plays too: control-learner's known positive learning from feedback shows
what the contrasts detect on the demo's design."""


def demo_systems() -> list[Any]:
    """Every standalone registered baseline and system, and control-learner (no ablation), naive first.

    Roles are the registry's (``memory_role``); run an ablation or an instrument with ``memsim run ... --system NAME``.
    """
    from memsim.memory.registry import SystemSpec, memory_names, memory_role

    names = [
        n for n in memory_names(standalone_only=True)
        if (memory_role(n) in ("baseline", "system") or n in DEMO_INSTRUMENTS) and n not in DEMO_ASK_FIRST
    ]
    names.sort(key=lambda n: (n != "naive", n))
    return [SystemSpec(n) for n in names]


def run_main(args: argparse.Namespace) -> int:
    """Run a config."""
    return _run(args, args.config, default_systems=None)


def demo_main(args: argparse.Namespace) -> int:
    """Run the demo: the life world against every registered system (``--quick``: its quick size)."""
    from memsim.memory.registry import memory_names, memory_role

    if not args.system:
        for name in sorted(set(DEMO_ASK_FIRST) & set(memory_names(standalone_only=True))):
            _say(f"demo: {name} is installed but left out: {DEMO_ASK_FIRST[name]}")
        from memsim.memory.registry import missing_extra

        absent: dict[str, list[str]] = {}
        for name in memory_names():
            extra = missing_extra(name)
            if extra is not None and memory_role(name) in ("baseline", "system"):
                absent.setdefault(extra, []).append(name)
        for extra, names in absent.items():
            print(f"demo: {', '.join(names)} left out: not installed (pip install 'memsim[{extra}]')")
    from memsim.scenarios.config import CONFIG_DIR
    from memsim.core.errors import UserError

    if args.quick and args.config is not None:
        raise UserError("memsim demo: give --quick or --config, not both")
    config = args.config or CONFIG_DIR / ("life_quick.toml" if args.quick else "demo.toml")
    return _run(args, config, default_systems=demo_systems())


def _run(args: argparse.Namespace, config_path: Path, *, default_systems: list[Any] | None) -> int:
    from memsim.analysis.pipeline import answer_options, default_out_dir, execute, spec_from_config
    from memsim.memory.registry import memory_names, parse_system
    from memsim.scenarios.config import load_config
    from memsim.core.errors import UserError

    config = load_config(config_path)
    if args.data is not None:  # checked against the scenario's own options, as a config's scenario.data is
        from memsim.scenarios.config import config_from_mapping

        config = config_from_mapping({**config.model_dump(exclude={"source"}, exclude_none=True),
                                      "scenario": {**config.scenario, "data": args.data}}, source=f"{config_path} with --data")
    try:
        systems = [parse_system(s) for s in args.system]
    except ValueError as exc:
        raise UserError(f"--system: {exc}") from None
    if not systems and not config.run.systems and default_systems:
        systems = default_systems
    if not systems and not config.run.systems:
        raise UserError(f"no systems: give --system or [run] systems in {config_path}; known: {', '.join(memory_names())}")
    spec = spec_from_config(config, systems=systems, seed=args.seed, k=args.k, answer=answer_options(args),
                            placebo=args.placebo, constant_arms=args.constant_arms, balance_kinds=args.balance_kinds,
                            keep_deleted_text=args.keep_deleted_text)
    from memsim.memory.http_health import check_http_systems

    check_http_systems(spec.systems)  # before the run folder exists: a dead server leaves nothing behind
    out = args.out or default_out_dir(spec.scenario.name)
    from memsim.sim.workers import default_worker_count, parse_scheduler

    workers = args.workers or config.run.workers or default_worker_count()
    scheduler = parse_scheduler(args.scheduler or config.run.scheduler)
    print(f"memsim run: scenario {spec.scenario.name} ({config_path}), seed {spec.seed}, k {spec.k}")
    _say(f"systems: {', '.join(s.display for s in spec.systems)}")
    from memsim.sim.recorder import RunFolderRefused

    try:
        outcome = execute(spec, out_dir=out, progress=progress_bar(enabled=not args.no_progress),
                          report=not args.no_report, embedder_factory=cache_dir_embedder(args.cache_dir),
                          workers=workers, scheduler=scheduler)
    except RunFolderRefused:
        raise  # nothing was played: there is nothing to resume
    except UserError:
        if any(Path(out, part).exists() for part in ("parts", "probes.parquet")):
            # Rows were played before the error: say where they are. An error before the first row stays one line.
            print(f"stopped; every row committed so far is in {out} (rerun the same command to resume)", file=sys.stderr)
        raise
    print_outcome(outcome)
    return exit_code(outcome, out)


def _say(line: str) -> None:
    """Print ``line`` folded to the terminal's width (whole, into a pipe or a file)."""
    from memsim.core.table import console_width

    width = console_width()
    print("\n".join(textwrap.wrap(line, width, subsequent_indent="  ", break_on_hyphens=False)) if width else line)


MAX_ANSWER_ERROR_SHARE = 0.05
"""Share of answered questions whose reader or judge may fail (a reply that is not a completion, an
unreadable one) before the run exits 1: past it the answer figures describe the endpoint, not the systems."""


def answer_failures(probes: Any) -> tuple[int, int, str]:
    """(answers that failed, questions answered, the first error) from a run's rows; (0, 0, '') without answers."""
    import polars as pl

    if probes is None or "error" not in getattr(probes, "columns", ()):
        return 0, 0, ""
    tried = pl.col("error").str.starts_with("answer:").fill_null(False)
    if "answer" in probes.columns:  # absent when every answer failed
        tried = tried | pl.col("answer").is_not_null()
    answered = probes.filter(tried)
    failed = answered.filter(pl.col("error").str.starts_with("answer:").fill_null(False))
    first = failed["error"][0] if failed.height else ""
    return failed.height, answered.height, first


def exit_code(outcome: Any, out: Any) -> int:
    """1 when a system failed mid-run (the run is incomplete; rerunning the command resumes it), or when
    more than ``MAX_ANSWER_ERROR_SHARE`` of the answers failed (reader or judge); else 0."""
    failed = outcome.summary.metrics.get("failed_systems")
    code = 0
    if failed:
        print(f"incomplete: {', '.join(failed)} failed; rerun the same command to resume into {out}", file=sys.stderr)
        code = 1
    bad, asked, first = answer_failures(getattr(outcome.result, "probes", None))
    if bad:
        cut = first if len(first) <= 300 else first[:297] + "..."
        print(f"answers failed: {bad} of {asked} questions ({100 * bad / asked:.1f}%) got no answer or verdict; "
              f"first error: {cut}", file=sys.stderr)
        if bad > MAX_ANSWER_ERROR_SHARE * asked:
            print(f"more than {100 * MAX_ANSWER_ERROR_SHARE:g}% of the answers failed: the answer figures are not "
                  "a measurement of the systems", file=sys.stderr)
            code = 1
    return code


def cache_dir_embedder(cache_dir: Path | None) -> Any:
    """A factory of the shared embedder on ``--cache-dir``, or None (the default cache)."""
    if cache_dir is None:
        return None
    import functools

    from memsim.memory.embed import Embedder

    return functools.partial(Embedder, cache_dir=cache_dir)  # picklable: a worker process makes its own


def progress_bar(*, enabled: bool = True) -> Any:
    """A checkpoint callback: the totals once known, then a bar in simulated days or episodes.

    None (no bar) when not ``enabled`` or when stderr is not a terminal: a log file gets no
    carriage-return updates.
    """
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    state: dict[str, Any] = {}

    def show(cp: Any) -> None:
        bar = state.get("bar")
        if bar is None:
            desc = {"day": "simulated", "arm-day": "simulated (arms x days)"}.get(cp.unit, "episodes")
            bar = state["bar"] = tqdm(total=cp.total, unit=cp.unit, desc=desc, file=sys.stderr, leave=False)
        bar.n = cp.done
        bar.set_postfix(probes=cp.probes, refresh=False)
        bar.refresh()
        if cp.result is not None:
            bar.close()
            # The tables, intervals and report take a while on a large run: say so rather than leave the screen blank.
            print("computing the tables, intervals and report ...", file=sys.stderr, flush=True)

    return show


def embedding_line(info: dict[str, Any]) -> str | None:
    """What the run embedded up front (``run.json``'s ``embedding``), as one line; None when nothing embeds."""
    emb = info.get("embedding")
    if not emb:
        return None
    repaired = f", {emb['repaired']} damaged entries recomputed" if emb.get("repaired") else ""
    rebuilt = f"; {len(info['cache_repairs'])} damaged cache file(s) set aside and rebuilt" if info.get("cache_repairs") else ""
    return (f"embedding ({info.get('embedder')}): {emb['texts']} distinct texts, {emb['embedded']} embedded, "
            f"{emb['cached']} found cached{repaired}, {emb['seconds']:.1f} s{rebuilt}")


def print_outcome(outcome: Any) -> None:
    """The learning table (longitudinal), per-system figures, failures and the run folder."""
    from memsim.analysis.learning import has_learners
    from memsim.core.table import console_width

    width = console_width()
    m = outcome.summary.metrics
    timings = outcome.summary.timings
    totals = m.get("totals") or {}
    say = _say
    if totals:
        say("totals: " + ", ".join(f"{k} {v}" for k, v in totals.items()) + f", span_days {m.get('span_days')}")
    line = embedding_line(outcome.result.info)
    if line:
        say(line)
    learners = outcome.summary.learning is not None and has_learners(outcome.summary.learning)
    if learners:
        _print_learning(m, outcome.summary.learning, width)
    _print_systems(m, timings, headline=not learners)
    if outcome.summary.learning is not None and not learners:
        _print_learning(m, outcome.summary.learning, width)  # nothing learns: the change through use comes second
    if outcome.result.info.get("llm"):
        from memsim.sim.answer.setup import format_cost

        print(format_cost(outcome.result.info["llm"]))
    load = m.get("load") or timings.get("load")
    if load:
        from memsim.analysis.load import format_load

        print()
        print("Latency under load (simulated time)")
        print(format_load(load, where="metrics.json" if m.get("load") else "perf.json"))
    worst = []
    systems = m.get("systems", {})
    for name, s in systems.items():
        users = {u: v for u, v in (s.get("per_user") or {}).items() if v.get("diff") is not None}
        if len(users) > 1:
            u, v = min(users.items(), key=lambda kv: kv[1]["diff"])
            worst.append(f"{name} {u} {100 * v['diff']:+.1f} pp")
    if worst:
        say("largest per-user decline (2nd - 1st half): " + "; ".join(worst))
    if m.get("isolation_failures"):
        print(f"ISOLATION FAILURES: {m['isolation_failures']} retrieved memories belonged to another user")
    if timings.get("time_compression"):
        print(f"wall time {timings.get('wall_seconds')} s; simulated time ran "
              f"{timings['time_compression']:,.0f}x faster than real time")
    for f in m.get("failures", []):
        print(f"FAILED: {f['system']} during {f['operation']} at {f['time']}: {f['error']}")
    if str(outcome.result.info.get("deleted_text", "")).startswith("kept"):
        print("deleted text kept: the run folder holds the text of turns users asked to forget (--keep-deleted-text)")
    if outcome.out_dir is not None:
        report = Path(outcome.out_dir) / "report.html"
        if report.exists():
            print(f"report: {report}")
        print(f"run folder: {outcome.out_dir}")



def _print_learning(m: dict[str, Any], learning: Any, width: int | None) -> None:
    """The learning (or change) through use tables, and the answer accuracy tables where a reader ran."""
    from memsim.analysis.learning import format_learning, learning_title

    print()
    title = learning_title(learning)
    channel = f" (feedback channel: {m.get('feedback')})" if title.startswith("Learning") else ""
    print(f"{title}{channel}: {m['metric']}, %")
    print(format_learning(learning, metric=m["metric"], control=m.get("control"),
                          missing_control=m.get("control_missing"), balance_kinds=bool(m.get("balance_kinds")),
                          placebos=m.get("placebos") or {}, width=width))
    for col, table in (m.get("answer_learning") or {}).items():
        # A reader ran and its answers were judged: answer accuracy gets halves and contrasts of its own.
        print()
        print(f"Answer accuracy through use, judge {col.removeprefix('answer_')} ({col}), %")
        print(format_learning(table, metric=col, control=m.get("control"), placebos=m.get("placebos") or {},
                              width=width))


def _print_systems(m: dict[str, Any], timings: dict[str, Any], *, headline: bool) -> None:
    """Per system: (``headline``: the metric over all questions, with its interval,) stale>cur, storage, latency,
    leaks, and what a forget request in words left retrievable."""
    from memsim.core.table import console_width, fit_table

    systems = m.get("systems", {})
    if not systems:
        return
    print()
    rows, notes = [], []
    # Requests in the user's own words to forget a topic: only a world that makes them has the column.
    in_words = any(s.get("forgotten_in_words") for s in systems.values())
    for name, s in systems.items():
        if s.get("failed"):
            rows.append([name] + [None] * headline + ["FAILED", None, None, None, None, None] + [None] * in_words)
            notes.append(f"{name} FAILED ({s['questions']} question rows kept, no figures): {s['failed']}")
            continue
        stale = s.get("stale_above_current")
        lat = timings.get("systems", {}).get(name, {}).get("retrieve_ms", {})
        score = ((s.get("overall") or {}).get("scores") or {}).get(m["metric"]) or {}
        rows.append([name] + ([_pct_ci(score)] if headline else []) + [
            "—" if stale is None else f"{100 * stale:.1f}", s.get("final_items") or 0,
            f"{(s.get('final_bytes') or 0) / 1e6:.2f}", f"{lat.get('p50') or 0:.2f}",
            f"{lat.get('p95') or 0:.2f}", (s.get("deleted_leaks") or 0) + (s.get("forget_probe_leaks") or 0)])
        if in_words:
            f = s.get("forgotten_in_words")
            rows[-1].append("—" if not f else f"{100 * f['share']:.1f}")
        answers = {k: v for k, v in s.items() if k.startswith("answer_") and v is not None}
        if answers:
            notes.append(f"answers of {name}: " + ", ".join(f"{k[7:]} {100 * v:.1f}%" for k, v in answers.items()))
    # A long label (http[url=...]) widens its column, never shifts the others; past the terminal's
    # width it wraps inside its own cell.
    head = (["system"] + [f"{m['metric']} % [95% CI]"] * headline
            + ["stale>cur %", "items", "MB", "ret p50 ms", "ret p95 ms", "leaks"] + ["forgot %"] * in_words)
    print(fit_table(head, rows, compact=range(len(head)), wrap=(0,), width=console_width(), what="systems"))
    if headline:
        notes.insert(0, f"{m['metric']}: over every scored question of the run; [lo, hi]: 95% bootstrap interval, "
                        "whole users resampled (metrics.json)")
    if in_words:
        f = next(s["forgotten_in_words"] for s in systems.values() if s.get("forgotten_in_words"))
        notes.insert(0, f"forgot %: of the {f['questions']} questions asked after a user asked in their own words "
                        "to forget a topic (nothing deleted through the API), the share whose top k still held "
                        "a turn that told it; leaks: retrieved memories of turns deleted through the API")
    for note in notes:
        _say(note)


def _pct_ci(score: dict[str, Any]) -> str:
    if score.get("mean") is None:
        return "—"
    if score.get("lo") is None or score.get("hi") is None:
        return f"{100 * score['mean']:.1f}"
    return f"{100 * score['mean']:.1f} [{100 * score['lo']:.1f}, {100 * score['hi']:.1f}]"

def rerun_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim rerun``."""
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder (its spec.json is replayed)")
    parser.add_argument("--out", type=run_folder, default=None, help="new run folder (default: RUN_DIR-rerun)")
    from memsim.analysis.cli.options import add_no_progress_argument

    add_no_progress_argument(parser)


def rerun_main(args: argparse.Namespace) -> int:
    """Replay a run from its spec and say whether ``metrics.json`` came out the same."""
    from memsim.analysis.pipeline import rerun

    out = args.out or args.run_dir.with_name(args.run_dir.name + "-rerun")
    outcome = rerun(args.run_dir, out_dir=out, progress=progress_bar(enabled=not args.no_progress))
    if outcome.spec.kind == "static":  # its tables are the static command's (recall by kind), not the learning table
        print_static(outcome)
        print(f"wall {outcome.result.wall_seconds:.1f} s; run folder: {out}")
    else:
        print_outcome(outcome)
    old, new = args.run_dir / "metrics.json", out / "metrics.json"
    failed = exit_code(outcome, out)  # a system that failed mid-rerun is not a reproduction
    if old.exists():
        same = old.read_bytes() == new.read_bytes()
        print(f"metrics.json {'identical to' if same else 'DIFFERS from'} {old}")
        return 0 if same and not failed else 1
    return failed


def listing_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim list``."""
    parser.add_argument("what", nargs="?", choices=("systems", "scenarios", "static", "readers", "judges", "scorers"),
                        help="one registry only (default: all)")


def listing_main(args: argparse.Namespace) -> int:
    """Print every registry with one line of help and the origin of each entry."""
    from memsim.memory.registry import memory_description, memory_names, memory_origin
    from memsim.scenarios.registry import BENCHMARKS, SCENARIOS
    from memsim.sim.answer.judges import JUDGES
    from memsim.sim.answer.readers import READERS
    from memsim.sim.scorers import SCORERS

    tables = {
        "systems": [(n, memory_description(n), memory_origin(n)) for n in memory_names()],
        "scenarios": SCENARIOS.rows(),
        "static": BENCHMARKS.rows(),
        "readers": [("none", "retrieval only, no answers", "memsim"), *READERS.rows()],
        "judges": JUDGES.rows(),
        "scorers": SCORERS.rows(),
    }
    for name, rows in tables.items():
        if args.what not in (None, name):
            continue
        print(f"{name}:")
        width = max(len(r[0]) for r in rows)
        for key, text, origin in rows:
            print(f"  {key:<{width}}  {text}" + ("" if origin == "memsim" else f"  [{origin}]"))
    return 0


def print_static(outcome: Any, *, kind_names: Mapping[str, str] | None = None) -> None:
    """A static run's tables: per system its scores by kind at every cut-off, answers, latency, storage, LLM cost."""
    from memsim.analysis.summary import format_answer_accuracy, format_compression, format_tables
    from memsim.sim.answer.setup import format_cost

    spec, m = outcome.spec, outcome.summary.metrics
    totals = m["totals"]
    print(f"\n{totals.get('episodes')} episodes, {totals.get('questions')} questions, k={spec.k} "
          f"(retrieved {spec.fetch_k}), seed {spec.seed}")
    line = embedding_line(outcome.result.info)
    if line:
        print(line)
    for system in m["systems"]:
        print(f"\nsystem {system}")
        if m["systems"][system].get("failed"):
            print(f"FAILED ({m['systems'][system]['questions']} question rows kept, no figures): {m['systems'][system]['failed']}")
            continue
        print(format_tables(m, system, kind_names=kind_names))
        if spec.answer is not None:
            print(format_answer_accuracy(m, outcome.result.probes, system, column=spec.metric))
        lat = outcome.summary.timings["systems"][system]["retrieve_ms"]
        if lat["p50"] is not None:
            print(f"retrieve latency: p50 {lat['p50']:.2f} ms, p95 {lat['p95']:.2f} ms")
        report = m.get("system_reports", {}).get(system, {})
        if "kept" in report:
            print(f"stored {report['turns_stored']} of {report['turns_seen']} turns: "
                  f"kept {report['kept']:.3f}, compression {report['compression']:.3f}")
    gated = format_compression(m, spec.metric)
    if gated:
        print("\n" + gated)
    if "llm" in outcome.result.info:
        print(format_cost(outcome.result.info["llm"]))
