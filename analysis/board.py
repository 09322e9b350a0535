"""``memsim board``: many run folders (and sweep folders) on one page, systems ranked under the same protocol.

Runs are grouped by what makes their figures comparable: run kind, scenario
(with its arguments), headline metric and k. Only runs of one group are
ranked together; every other group is shown apart with the reason. Each row
is one distinct system run, its figures read from the run's
``metrics.json``, ``perf.json`` and rows: the headline metric with its 95%
interval, the gain over its twin in the second half (longitudinal runs with
a twin), the estimated cost per user per simulated month
(``memsim.analysis.cost``) and the 95th percentile of retrieval latency.
The same system run (same spec, seed and system) found in several folders
is one row (``memsim.analysis.distinct``), its copies named under the
table. Instruments (known effects) and systems fed the oracle bit (channel
``evidence`` or ``noisy:P``) are marked and ranked apart. Two frontier plots
place every system by headline against latency and against cost, with tick
values and units on both axes and the names laid out in a column beside
the plot so that none is cut or printed over another; a system is on the
frontier when no other is at least as good on both and better on one. The
board renders, it computes no statistics of its own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memsim.core.errors import UserError

__all__ = ["BoardRow", "board_rows", "frontier", "frontier_sentence", "nice_ticks", "tick_text", "spread", "text_box", "write_board"]


@dataclass(frozen=True, slots=True)
class BoardRow:
    """One distinct system run, as the board shows it."""

    protocol: tuple[str, ...]
    """What the run is measured under: kind, scenario, its arguments, metric, k (``_PROTOCOL``)."""
    run: str
    system: str
    metric: str
    headline: float | None
    lo: float | None
    hi: float | None
    gain_second: float | None
    """Gain over the twin in the second half (None: no twin, or a static run)."""
    usd_user_month: float | None
    retrieve_p95_ms: float | None
    mark: str = ""
    """``""`` for a system ranked with the others; ``instrument`` (a known effect that checks the
    benchmark) or ``oracle-fed`` (a system that learns from the oracle bit, channel ``evidence`` or
    ``noisy:P``): shown and ranked apart."""
    copies: tuple[str, ...] = ()
    """Other folders given that hold the same run (same spec, seed and system): shown once."""
    identity: str = ""
    """``memsim.analysis.distinct.system_identity`` of the run."""


def _runs(paths: Sequence[str | Path]) -> list[Path]:
    """Run folders: each path given, or the finished cells of a sweep folder."""
    from memsim.analysis.sweep import is_sweep_dir

    out: list[Path] = []
    for p in map(Path, paths):
        if is_sweep_dir(p):
            out.extend(sorted(c.parent for c in (p / "cells").glob("*/metrics.json")))
        elif (p / "spec.json").is_file():
            out.append(p)
        else:
            raise UserError(f"board: {p} is neither a run folder (spec.json) nor a sweep folder (sweep.json)")
    if not out:
        raise UserError("board: no finished run among the folders given")
    return out


_PROTOCOL = ("kind", "scenario", "scenario arguments", "metric", "k")
"""What must be equal for two runs to be ranked together, in the order the board names a difference."""


def _protocol(spec: Any) -> tuple[str, ...]:
    args = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(spec.scenario.args.items()))
    return (spec.kind, spec.scenario.name, args, spec.metric, str(spec.k))


def _title(protocol: tuple[str, ...]) -> str:
    kind, scenario, _, metric, k = protocol
    return f"{kind} {scenario}, {metric}, k={k}"


def _apart(a: tuple[str, ...], b: tuple[str, ...]) -> str:
    """Why runs of protocol ``b`` are not ranked with those of ``a``."""
    differ = [f"{name} ({x} vs {y})" if name != "scenario arguments" else name
              for name, x, y in zip(_PROTOCOL, a, b) if x != y]
    return "not ranked with the first group: other " + "; other ".join(differ)


def _usd(run: Any, system: str) -> float | None:
    from memsim.analysis.cost import cost_table

    try:
        rows = [r for r in cost_table(run.probes, run.timeline) if r["system"] == system]
    except UserError:
        return None
    return sum(r["usd"] for r in rows) / len(rows) if rows else None


def _mark(spec: Any, system: str, twins: Any) -> str:
    """``instrument``, ``oracle-fed`` or ``""`` (see ``BoardRow.mark``)."""
    from memsim.memory.registry import memory_role

    entry = next((e for e in spec.systems if e.display == system), None)
    try:
        role = memory_role(entry.name) if entry is not None else "system"
    except Exception:  # a plugin's import path is not in the registry: a system like any other
        role = "system"
    if role == "instrument":
        return "instrument"
    channel = str(getattr(spec, "feedback_from", ""))
    if system in (twins or {}) and (channel == "evidence" or channel.startswith("noisy:")):
        return "oracle-fed"
    return ""


def board_rows(paths: Sequence[str | Path]) -> list[BoardRow]:
    """One row per distinct system run (twins and placebos left out), grouped, ranked best first within a group.

    The same system run (same spec, seed and system; ``memsim.analysis.distinct``) found in several
    folders is one row, its other folders listed in ``copies``. Within a group, systems ranked with
    the others come first, then the instruments and oracle-fed systems.
    """
    from memsim.analysis.distinct import system_identity
    from memsim.analysis.load import label_arms, read_run
    from memsim.analysis.summary import with_metrics

    rows: list[BoardRow] = []
    where: dict[str, int] = {}
    for path in _runs(paths):
        run = with_metrics(read_run(path))
        arms = label_arms(run.systems, run.info)
        twins = (run.metrics or {}).get("twins") or {}
        for system in run.systems:
            if arms[system][1] != "system":
                continue
            identity = system_identity(run.spec, system)
            if identity in where:
                first = rows[where[identity]]
                rows[where[identity]] = replace(first, copies=(*first.copies, str(path)))
                continue
            e = run.entry(system)
            score = e.get("overall", {}).get("scores", {}).get(run.metric) or {}
            lat = (run.perf.get("systems", {}).get(system, {}).get("retrieve_ms") or {}).get("p95")
            where[identity] = len(rows)
            rows.append(BoardRow(_protocol(run.spec), str(path), system, run.metric, score.get("mean"), score.get("lo"),
                                 score.get("hi"), e.get("gain_second"), _usd(run, system), lat,
                                 mark=_mark(run.spec, system, twins), identity=identity))
    groups = list(dict.fromkeys(r.protocol for r in rows))
    return sorted(rows, key=lambda r: (groups.index(r.protocol), r.mark != "",
                                       -(r.headline if r.headline is not None else -math.inf)))


def frontier(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For (score, cost) points, higher score and lower cost better: whether each is on the Pareto frontier."""
    return [not any(s2 >= s and c2 <= c and (s2 > s or c2 < c) for s2, c2 in points) for s, c in points]


FONT_PX = 11
"""Font size of every text in the frontier plots."""
EM_WIDTH = 0.62
"""Width of one character in em that the layout assumes: above the widest average of common sans-serif
fonts on digits and lower case, so that a box the layout keeps free holds the text drawn there."""
LINE_PX = 15
"""Vertical distance between two point labels in the label column."""


def text_box(x: float, y: float, text: str, *, size: float = FONT_PX, anchor: str = "start") -> tuple[float, float, float, float]:
    """(left, top, right, bottom) the layout reserves for ``text`` drawn at baseline ``(x, y)``."""
    w = len(text) * size * EM_WIDTH
    left = x - w / 2 if anchor == "middle" else x - w if anchor == "end" else x
    return (left, y - 0.85 * size, left + w, y + 0.25 * size)


def nice_ticks(lo: float, hi: float, *, most: int = 6) -> list[float]:
    """Round tick values covering ``[lo, hi]``: steps of 1, 2, 2.5 or 5 times a power of ten, at most ``most`` + 1."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"ticks need finite bounds, got {lo}, {hi}")
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:  # one value: a unit-sized span around it, so the axis still has a scale
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / most
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))
    first = math.floor(lo / step + 1e-9) * step
    ticks = [first]
    while ticks[-1] < hi - 1e-9 * step:
        ticks.append(first + len(ticks) * step)
    return [round(t, 12) for t in ticks]


def tick_text(value: float, ticks: Sequence[float]) -> str:
    """A tick value with the fewest decimals that tell every tick of its axis exactly (``0.25`` steps: two)."""
    for digits in range(0, 8):
        if all(math.isclose(round(t, digits), t, rel_tol=0, abs_tol=1e-9 * max(1.0, abs(t))) for t in ticks):
            return f"{value:.{digits}f}"
    return f"{value:.4g}"


def spread(wanted: Sequence[float], *, top: float, bottom: float, gap: float = LINE_PX) -> list[float]:
    """Positions as near ``wanted`` as they can be, in the same order, at least ``gap`` apart, within [top, bottom].

    Two sweeps: down from the top (pushing each below the previous), then up
    from the bottom (pulling back what ran past it). ``bottom - top`` must
    hold them all (``(len - 1) * gap``).
    """
    order = sorted(range(len(wanted)), key=lambda i: wanted[i])
    ys = [min(max(wanted[i], top), bottom) for i in order]
    for j in range(1, len(ys)):
        ys[j] = max(ys[j], ys[j - 1] + gap)
    if ys and ys[-1] > bottom:
        ys[-1] = bottom
        for j in range(len(ys) - 2, -1, -1):
            ys[j] = min(ys[j], ys[j + 1] - gap)
    out = [0.0] * len(wanted)
    for j, i in enumerate(order):
        out[i] = ys[j]
    return out


def _point_label(r: BoardRow, repeated: set[str]) -> str:
    name = f"{r.system} ({Path(r.run).name})" if r.system in repeated else r.system
    return f"{name} [{r.mark}]" if r.mark else name


def _svg(rows: Sequence[BoardRow], x: str, label: str, plot_id: str) -> str:
    """A scatter of the headline (%) against ``x`` (inline SVG) with ticks, frontier points filled and joined.

    Every point's name sits in a column right of the plot, at the point's
    height where it can and spread apart where names would touch, joined to
    its point by a thin line; the page is as wide as the longest name, so no
    text is cut or printed over another. Instruments and oracle-fed systems
    are grey squares and never on the frontier (they are ranked apart).
    """
    import html

    pts = [(r, getattr(r, x)) for r in rows if r.headline is not None and getattr(r, x) is not None]
    if not pts:
        return f'<p id="{plot_id}">no system of this group has both figures</p>'
    names = [r.system for r, _ in pts]
    repeated = {n for n in names if names.count(n) > 1}
    labels = [_point_label(r, repeated) for r, _ in pts]
    xt = nice_ticks(min(v for _, v in pts), max(v for _, v in pts), most=5)
    yt = nice_ticks(min(100 * r.headline for r, _ in pts), max(100 * r.headline for r, _ in pts), most=5)
    ylab = [tick_text(t, yt) for t in yt]
    xlab = [tick_text(t, xt) for t in xt]
    def half(text: str) -> float:  # half the width of a text centred on its tick
        return len(text) * FONT_PX * EM_WIDTH / 2

    # Room on the left for the y tick values and the axis title, and for half the first x tick value.
    left = max(24 + 2 * half(max(ylab, key=len)) + 8, half(xlab[0]) + 4)
    plot_w = max(300.0, len(xt) * (2 * half(max(xlab, key=len)) + 12))
    plot_h = max(220.0, (len(pts) + 1) * LINE_PX)
    top, bottom_pad = 14.0, 46.0
    column = left + plot_w + max(28.0, half(xlab[-1]) + 10)
    w = column + max(len(t) for t in labels) * FONT_PX * EM_WIDTH + 8
    h = top + plot_h + bottom_pad

    def px(v: float) -> float:
        return left + (v - xt[0]) / (xt[-1] - xt[0]) * plot_w

    def py(v: float) -> float:
        return top + plot_h - (100 * v - yt[0]) / (yt[-1] - yt[0]) * plot_h

    metric = rows[0].metric
    plain = [i for i, (r, _) in enumerate(pts) if not r.mark]
    on = dict(zip(plain, frontier([(pts[i][0].headline, pts[i][1]) for i in plain])))
    front = sorted((pts[i][1], pts[i][0].headline) for i in plain if on[i])
    e = html.escape
    parts = [f'<svg id="{plot_id}" class="frontier" xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" '
             f'height="{h:.0f}" viewBox="0 0 {w:.0f} {h:.0f}" font-family="sans-serif" font-size="{FONT_PX}" '
             f'role="img" aria-label="{e(metric)} (%) against {e(label)}">']
    for t, text in zip(yt, ylab):  # grid, ticks and tick values
        y = top + plot_h - (t - yt[0]) / (yt[-1] - yt[0]) * plot_h
        parts.append(f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{left + plot_w:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                     f'<line x1="{left - 4:.1f}" y1="{y:.1f}" x2="{left:.1f}" y2="{y:.1f}" stroke="#444"/>'
                     f'<text class="tick" x="{left - 6:.1f}" y="{y + 4:.1f}" text-anchor="end">{text}</text>')
    for t, text in zip(xt, xlab):
        xx = px(t)
        parts.append(f'<line x1="{xx:.1f}" y1="{top:.1f}" x2="{xx:.1f}" y2="{top + plot_h:.1f}" stroke="#eee"/>'
                     f'<line x1="{xx:.1f}" y1="{top + plot_h:.1f}" x2="{xx:.1f}" y2="{top + plot_h + 4:.1f}" stroke="#444"/>'
                     f'<text class="tick" x="{xx:.1f}" y="{top + plot_h + 19:.1f}" text-anchor="middle">{text}</text>')
    parts += [f'<line x1="{left:.1f}" y1="{top + plot_h:.1f}" x2="{left + plot_w:.1f}" y2="{top + plot_h:.1f}" stroke="#444"/>',
              f'<line x1="{left:.1f}" y1="{top:.1f}" x2="{left:.1f}" y2="{top + plot_h:.1f}" stroke="#444"/>',
              f'<text class="axis" x="{left + plot_w / 2:.1f}" y="{h - 8:.1f}" text-anchor="middle">{e(label)}</text>',
              f'<text class="axis" x="12" y="{top + plot_h / 2:.1f}" transform="rotate(-90 12 {top + plot_h / 2:.1f})" '
              f'text-anchor="middle">{e(metric)} (%)</text>']
    if len(front) > 1:
        path = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in front)
        parts.append(f'<polyline class="frontier-line" points="{path}" fill="none" stroke="#c33"/>')
    ys = spread([py(r.headline) for r, _ in pts], top=top + 4, bottom=top + plot_h)
    for i, ((r, v), text, ly) in enumerate(zip(pts, labels, ys)):
        cx, cy = px(v), py(r.headline)
        tip = f"{e(text)}: {e(metric)} {100 * r.headline:.1f}%, {e(label)} {v:.4g}"
        parts.append(f'<line class="leader" x1="{cx + 6:.1f}" y1="{cy:.1f}" x2="{column - 3:.1f}" y2="{ly - 4:.1f}" '
                     'stroke="#bbb" stroke-width="0.7"/>')
        if r.mark:
            parts.append(f'<rect class="apart" x="{cx - 4:.1f}" y="{cy - 4:.1f}" width="8" height="8" fill="#999">'
                         f'<title>{tip} (ranked apart: {e(r.mark)})</title></rect>')
        else:
            parts.append(f'<circle class="{"on" if on[i] else "off"}" cx="{cx:.1f}" cy="{cy:.1f}" r="5" '
                         f'fill="{"#c33" if on[i] else "#fff"}" stroke="#c33"><title>{tip}</title></circle>')
        parts.append(f'<text class="point-label" x="{column:.1f}" y="{ly:.1f}">{e(text)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def frontier_sentence(metric: str, label: str) -> str:
    """What the frontier of one plot means, in one sentence."""
    return (f"A filled red point is on the frontier: no other system ranked here has both a higher {metric} and a "
            f"lower {label} (at least as good on both and better on one); the red line joins them, and a point off "
            "it is beaten on both axes by some point on it. Grey squares (instruments, oracle-fed systems) are "
            "drawn for reference and never on the frontier.")


def _fmt(v: float | None, scale: float = 100.0, digits: int = 1, sign: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{scale * v:+.{digits}f}" if sign else f"{scale * v:.{digits}f}"


def _ranked(members: Sequence[BoardRow]) -> list[tuple[int, BoardRow]]:
    """Standard competition ranks by headline (ties share the better rank), best first."""
    return [(1 + sum((o.headline or -1) > (r.headline or -1) for o in members), r) for r in members]


def _copies(members: Sequence[BoardRow]) -> list[str]:
    """One sentence per folder that repeats runs of another: which folder, and which systems it repeats."""
    pairs: dict[tuple[str, str], list[str]] = {}
    for r in members:
        for c in r.copies:
            pairs.setdefault((c, r.run), []).append(r.system)
    return [f"{c} holds the same run of {', '.join(sorted(systems))} as {run} (same spec, seed and system): shown once"
            for (c, run), systems in pairs.items()]


_AXES = (("retrieve_p95_ms", "retrieval p95 (ms)", "latency"), ("usd_user_month", "USD per user-month", "cost"))
"""The frontier plots: the row's field, the axis title with its unit, the plot's id part."""


def write_board(paths: Sequence[str | Path], out_dir: str | Path) -> Path:
    """Write ``board.html`` (one self-contained page), ``board.md`` and ``board.json`` into ``out_dir``.

    Returns:
        Path of ``board.html``.

    Raises:
        UserError: a folder that is neither a run nor a sweep, or no finished run.
    """
    import jinja2

    rows = board_rows(paths)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups: list[dict[str, Any]] = []
    protocols = list(dict.fromkeys(r.protocol for r in rows))
    for i, protocol in enumerate(protocols):
        members = [r for r in rows if r.protocol == protocol]
        plots = [{"svg": _svg(members, field, label, f"frontier-{part}-{i}"),
                  "caption": frontier_sentence(members[0].metric, label)} for field, label, part in _AXES]
        groups.append({
            "name": _title(protocol), "args": protocol[2],
            "ranked": _ranked([r for r in members if not r.mark]),
            "apart": _ranked([r for r in members if r.mark]),
            "runs": len({r.run for r in members}),
            "copies": _copies(members),
            "reason": "" if i == 0 else _apart(protocols[0], protocol),
            "plots": plots,
        })
    env = jinja2.Environment(loader=jinja2.PackageLoader("memsim.analysis", "."), autoescape=True)
    env.filters["fmt"] = _fmt
    page = env.get_template("board.html.j2").render(groups=groups, markup=jinja2.utils.markupsafe.Markup)
    (out / "board.html").write_text(page, encoding="utf-8")
    md = ["# memsim board", ""]
    head = ["| rank | system | run | headline [95% CI] | gain over twin, 2nd half (pp) | USD / user-month | retrieval p95 (ms) |",
            "|---:|---|---|---|---|---:|---:|"]

    def md_rows(ranked: Sequence[tuple[int, BoardRow]]) -> list[str]:
        return [f"| {k} | {r.system}{f' ({r.mark})' if r.mark else ''} | {r.run} | {_fmt(r.headline)} [{_fmt(r.lo)}, "
                f"{_fmt(r.hi)}] | {_fmt(r.gain_second, sign=True)} | {_fmt(r.usd_user_month, 1.0, 4)} | "
                f"{_fmt(r.retrieve_p95_ms, 1.0, 2)} |" for k, r in ranked]

    for g in groups:
        md += [f"## {g['name']}", "", f"{g['runs']} run(s). {g['reason']}".strip(), ""]
        md += [*head, *md_rows(g["ranked"]), ""]
        if g["apart"]:
            md += ["Ranked apart: instruments (known effects that check the benchmark) and systems fed the oracle bit "
                   "(feedback channel evidence or noisy:P).", "", *head, *md_rows(g["apart"]), ""]
        md += [f"- {line}" for line in g["copies"]]
        if g["copies"]:
            md.append("")
    (out / "board.md").write_text("\n".join(md), encoding="utf-8")
    fields = [f for f in BoardRow.__slots__ if f not in ("protocol", "identity")]
    data = [{"group": g["name"], "scenario_args": g["args"], "reason": g["reason"],
             "ranking": [{"rank": k, **{f: getattr(r, f) for f in fields}} for k, r in g["ranked"]],
             "ranked_apart": [{"rank": k, **{f: getattr(r, f) for f in fields}} for k, r in g["apart"]]}
            for g in groups]
    (out / "board.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return out / "board.html"
