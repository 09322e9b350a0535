"""``memsim check SYSTEM``: the conformance suite (``memory/checks.py``) on any system, one line per check.

SYSTEM is what ``--system`` takes: a registered name, an entry point of group
``memsim.systems``, ``package.module:Class`` or ``http:url=...``, each with
``:key=value`` arguments. Exit code 0 when every check passed or was
skipped, 1 when one failed.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

from memsim.analysis.cli.options import float_in, int_in
from memsim.core.streams import seeded

__all__ = ["check_arguments", "check_main"]


def check_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim check``."""
    p.add_argument("system", metavar="SYSTEM",
                   help="name[:key=value,...], package.module:Class[:key=value,...] or http:url=http://host:port")
    p.add_argument("--embedder", choices=("hash", "minilm"), default="hash",
                   help="hash: deterministic hashed vectors, no model, seconds (default); "
                   "minilm: the packaged all-MiniLM-L6-v2, whose cosines make merging systems merge for real")
    p.add_argument("--only", action="append", default=[], metavar="CHECK",
                   help="run only this check (repeatable); ids as printed")
    p.add_argument("--seed", type=int_in("seed"), default=7, help="seed of the resources every built system gets")
    p.add_argument("--deadline", type=float_in("seconds"), default=CHECK_DEADLINE_S, metavar="SECONDS",
                   help=f"longest a check may take before it fails (default {CHECK_DEADLINE_S:g} s): a system that "
                   "hangs fails that check instead of holding the command")


CHECK_DEADLINE_S = 120.0
"""Seconds a conformance check may take (``--deadline``): every check plays a handful of turns."""


class _Overran(BaseException):
    """Raised into a check by the interval timer (a ``BaseException``: a system's ``except Exception`` keeps it)."""


def _overran(signum: int, frame: object) -> None:
    raise _Overran()


def _timed(fn: object, subject: object, seconds: float) -> None:
    """``fn(subject)``, interrupted past ``seconds`` where this thread can keep a timer (the main thread)."""
    import signal
    import threading

    from memsim.memory.guard import refusing_exit  # a system's os._exit fails its check, not the command

    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        with refusing_exit():
            fn(subject)  # type: ignore[operator]
        return
    previous = signal.signal(signal.SIGALRM, _overran)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        with refusing_exit():
            fn(subject)  # type: ignore[operator]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_main(args: argparse.Namespace) -> int:
    """Run every conformance check on the system and print PASS, FAIL or SKIP with the reason."""

    from memsim.memory.checks import CheckSkipped, CheckSubject, iter_checks
    from memsim.memory.registry import Resources, parse_system
    from memsim.core.errors import UserError

    try:
        spec = parse_system(args.system)
    except ValueError as exc:
        raise UserError(f"memsim check {args.system}: {exc}") from None
    from memsim.memory.http_health import check_http_systems

    check_http_systems([spec])  # a dead server said once, not once per check
    checks = dict(iter_checks())
    unknown = sorted(set(args.only) - set(checks))
    if unknown:
        raise UserError(f"--only: unknown check(s) {', '.join(unknown)}; checks: {', '.join(checks)}")
    if args.embedder == "hash":
        from memsim.memory.embed import HashEmbedder as make_embedder
    else:
        from memsim.memory.embed import Embedder as make_embedder
    subject = CheckSubject(
        name=spec.name, args=dict(spec.args),
        make_resources=lambda: Resources(rng=seeded(args.seed), embedder_factory=make_embedder),
    )
    print(f"memsim check {spec.display} ({args.embedder} embedder)")
    failed = skipped = 0
    chosen = [(cid, fn) for cid, fn in checks.items() if not args.only or cid in args.only]
    for cid, fn in chosen:
        started = time.perf_counter()
        try:
            _timed(fn, subject, args.deadline)
        except _Overran:
            failed += 1
            print(f"  FAIL  {cid}: took longer than {args.deadline:g} s (--deadline): the system hangs or is too slow")
            continue
        except CheckSkipped as exc:
            skipped += 1
            print(f"  SKIP  {cid}: {exc}")
            continue
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - a failing check, or the system raising anything: sys.exit and
            # GeneratorExit included, which must not end the command as if every check had run
            failed += 1
            text = str(exc).strip()
            reason = text.splitlines()[0][:300] if text else type(exc).__name__
            if not isinstance(exc, Exception) or not text:
                reason = f"the system raised {type(exc).__name__}({text[:200]})"
            print(f"  FAIL  {cid}: {reason}")
            if args.debug:
                traceback.print_exc(file=sys.stderr)
            continue
        print(f"  PASS  {cid} ({time.perf_counter() - started:.2f} s)")
    passed = len(chosen) - failed - skipped
    print(f"{passed} passed, {failed} failed, {skipped} skipped of {len(chosen)} checks")
    return 1 if failed else 0
