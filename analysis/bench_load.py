"""How busy the machine was around a measurement: every bench ends with it.

``machine_load`` reads the load average and the number of other runnable
threads (``/proc/loadavg``), the machine's busy CPU seconds (``/proc/stat``)
and this process's own (itself and its finished children). ``load_report``
marks a measurement "under load" when the CPU the rest of the machine used
while it ran (busy CPU less this process's) exceeds ``OTHERS_THRESHOLD`` of
the cores. The load averages and runnable counts are reported beside it but
judged only where ``/proc/stat`` cannot be read: a load average before a run
includes the bench's own previous run (a second interleaved pair always
starts at a load near the cores), and a runnable count is one instant.
Without the CPU figures, a measurement is under load when the load average
per core before it was above ``LOAD_THRESHOLD`` or another thread was
runnable at either end.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "LOAD_THRESHOLD", "OTHERS_THRESHOLD", "cpu_model", "machine_load", "others_cpu", "load_report", "merge_load",
    "format_load",
]

LOAD_THRESHOLD = 0.5
"""Load average per core above which a measurement counts as taken under load (without ``/proc/stat``)."""
OTHERS_THRESHOLD = 0.05
"""Share of the cores the rest of the machine may use during a measurement before it counts as under load."""


def _busy_cpu_seconds(path: str | os.PathLike[str]) -> float | None:
    """Non-idle CPU seconds of the whole machine since boot (user, nice, system, irq, softirq, steal)."""
    try:
        fields = Path(path).read_text(encoding="ascii").splitlines()[0].split()
        if fields[0] != "cpu":
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    except (OSError, ValueError, IndexError):
        return None
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    """CPU seconds of this process (all its threads) and of its children that have been waited for."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


_INT8_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
"""CPU flags of an 8-bit dot-product instruction: without one, int8 matrix products run no faster than float here."""


def cpu_model(path: str | os.PathLike[str] = "/proc/cpuinfo") -> dict[str, Any]:
    """The CPU's model name, whether it has AVX2 and AVX-512, and its 8-bit dot-product flags (None where unknown)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {"model": None, "avx2": None, "avx512": None, "int8_dot": None}
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), None)
    flags = set(next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []))
    return {"model": model, "avx2": "avx2" in flags, "avx512": "avx512f" in flags,
            "int8_dot": [f for f in _INT8_FLAGS if f in flags]}


def machine_load(path: str | os.PathLike[str] = "/proc/loadavg", stat: str | os.PathLike[str] = "/proc/stat") -> dict[str, Any]:
    """How busy the machine is now: load averages, other runnable threads, usable cores, CPU seconds.

    ``runnable_others`` is the kernel's count of runnable threads less the one
    reading the file. ``cpu_busy_s`` (the machine's), ``own_cpu_s`` (this
    process's and its waited children's) and ``at`` (a monotonic clock) let
    ``load_report`` tell what the rest of the machine did between two
    snapshots. Where a file cannot be read (not Linux), its figures are None.
    """
    from memsim.memory.embed import usable_cores

    cores = usable_cores()
    cpu = {"cpu_busy_s": _busy_cpu_seconds(stat), "own_cpu_s": _own_cpu_seconds(), "at": time.monotonic()}
    try:
        fields = Path(path).read_text(encoding="ascii").split()
        one, five, fifteen = (float(x) for x in fields[:3])
        runnable = int(fields[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return {"load_1m": None, "load_5m": None, "load_15m": None, "runnable_others": None, "cores": cores, **cpu}
    return {"load_1m": one, "load_5m": five, "load_15m": fifteen, "runnable_others": max(runnable - 1, 0), "cores": cores,
            **cpu}


def others_cpu(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, float] | None:
    """CPU seconds the rest of the machine used between two snapshots, and that as a share of the cores; None without figures."""
    keys = ("cpu_busy_s", "own_cpu_s", "at")
    if any(before.get(k) is None or after.get(k) is None for k in keys):
        return None
    wall = float(after["at"]) - float(before["at"])
    others = max(0.0, (after["cpu_busy_s"] - before["cpu_busy_s"]) - (after["own_cpu_s"] - before["own_cpu_s"]))
    cores = before.get("cores") or 1
    return {"others_cpu_s": others, "wall_s": wall, "share": others / (wall * cores) if wall > 0 else 0.0}


def load_report(
    before: Mapping[str, Any], after: Mapping[str, Any], *, threshold: float = LOAD_THRESHOLD
) -> dict[str, Any]:
    """The load around one measurement and whether it was taken under load.

    Args:
        before: ``machine_load()`` just before the measurement.
        after: ``machine_load()`` just after it.
        threshold: load average per core (before) above which it is under load.

    Returns:
        ``before``, ``after``, ``threshold``, ``under_load`` and ``reasons``
        (why it is under load; empty when it is not).
    """
    reasons = []
    one, cores = before.get("load_1m"), before.get("cores") or 1
    rest = others_cpu(before, after)
    if rest is not None:
        if rest["share"] > OTHERS_THRESHOLD:
            reasons.append(f"the rest of the machine used {rest['others_cpu_s']:.1f} CPU s in {rest['wall_s']:.1f} s "
                           f"({100 * rest['share']:.0f}% of {cores} cores, above {100 * OTHERS_THRESHOLD:g}%)")
    else:
        if one is not None and one / cores > threshold:
            reasons.append(f"load average {one:.2f} on {cores} cores before (above {threshold:g} per core)")
        for name, snap in (("before", before), ("after", after)):
            others = snap.get("runnable_others")
            if others:
                reasons.append(f"{others} other runnable {'thread' if others == 1 else 'threads'} {name}")
    return {"before": dict(before), "after": dict(after), "threshold": threshold, "others": rest, "cpu": cpu_model(),
            "under_load": bool(reasons), "reasons": reasons}


def merge_load(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One report over several measurements in a row: the first's before, the last's after, the reasons summed up.

    ``runs_under_load`` counts the measurements marked under load; the reasons
    give that count, the highest load average before any of them and the most
    other runnable threads seen.
    """
    busy = [r for r in reports if r["under_load"]]
    rests = [r.get("others") for r in reports]
    rest = None
    if rests and all(x is not None for x in rests):
        cores = reports[0]["before"].get("cores") or 1
        cpu, wall = sum(x["others_cpu_s"] for x in rests), sum(x["wall_s"] for x in rests)
        rest = {"others_cpu_s": cpu, "wall_s": wall, "share": cpu / (wall * cores) if wall > 0 else 0.0,
                "share_max": max(x["share"] for x in rests)}
    reasons = []
    if busy:
        reasons.append(f"{len(busy)} of {len(reports)} runs under load")
        if rest is not None:
            reasons.append(f"the rest of the machine used up to {100 * rest['share_max']:.0f}% of the cores in one run")
        else:
            worst = max((r["before"].get("load_1m") or 0.0 for r in reports), default=0.0)
            reasons.append(f"load average before up to {worst:.2f} on {reports[0]['before'].get('cores')} cores")
            others = max((s.get("runnable_others") or 0 for r in reports for s in (r["before"], r["after"])), default=0)
            if others:
                reasons.append(f"up to {others} other runnable threads")
    return {"before": dict(reports[0]["before"]), "after": dict(reports[-1]["after"]), "threshold": reports[0]["threshold"],
            "others": rest, "cpu": reports[0].get("cpu"), "under_load": bool(busy), "runs_under_load": len(busy),
            "reasons": reasons}


def format_load(report: Mapping[str, Any]) -> str:
    """One line: the load before and after, and the mark when it was measured under load."""

    def snap(s: Mapping[str, Any]) -> str:
        if s.get("load_1m") is None:
            return "load unknown"
        return (f"load average {s['load_1m']:.2f} {s['load_5m']:.2f} {s['load_15m']:.2f}, "
                f"{s['runnable_others']} other runnable")

    b = report["before"]
    cpu = report.get("cpu") or {}
    what = f"{b['cores']} cores"
    if cpu.get("model"):
        isa = "AVX-512" if cpu.get("avx512") else "AVX2" if cpu.get("avx2") else "no AVX2"
        dot = ", ".join(cpu.get("int8_dot") or []) or "no 8-bit dot product"
        what += f", {cpu['model']}, {isa}, {dot}"
    line = f"machine ({what}): before {snap(b)}; after {snap(report['after'])}"
    rest = report.get("others")
    if rest is not None:
        line += f"; the rest of the machine used {rest['others_cpu_s']:.1f} CPU s during it ({100 * rest['share']:.1f}% of the cores)"
    if report["under_load"]:
        line += f"; UNDER LOAD ({'; '.join(dict.fromkeys(report['reasons']))})"
    return line
