"""``memsim board``: many run folders (and sweep folders) on one page, systems ranked under the same protocol.

Runs are grouped by what makes their figures comparable: run kind, scenario
(with its arguments), headline metric and k. Only runs of one group are
ranked together; every other group is shown apart with the reason. Each row
is a system of a run, its figures read from the run's ``metrics.json``,
``perf.json`` and rows: the headline metric with its 95% interval, the
gain over its twin in the second half (longitudinal runs with a twin), the
estimated cost per user per simulated month (``memsim.analysis.cost``) and
the 95th percentile of retrieval latency. Two frontier plots place every
system by headline against latency and against cost; a system is on the
frontier when no other is at least as good on both and better on one. The
board renders, it computes no statistics of its own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsim.sim.core.errors import UserError

__all__ = ["BoardRow", "board_rows", "frontier", "write_board"]


@dataclass(frozen=True, slots=True)
class BoardRow:
    """One system of one run, as the board shows it."""

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


def board_rows(paths: Sequence[str | Path]) -> list[BoardRow]:
    """Every system of every run (twins and placebos left out), grouped and ranked best first within a group."""
    from memsim.analysis.load import label_arms, read_run
    from memsim.analysis.summary import with_metrics

    rows: list[BoardRow] = []
    for path in _runs(paths):
        run = with_metrics(read_run(path))
        arms = label_arms(run.systems, run.info)
        for system in run.systems:
            if arms[system][1] != "system":
                continue
            e = run.entry(system)
            score = e.get("overall", {}).get("scores", {}).get(run.metric) or {}
            lat = (run.perf.get("systems", {}).get(system, {}).get("retrieve_ms") or {}).get("p95")
            rows.append(BoardRow(_protocol(run.spec), str(path), system, run.metric, score.get("mean"), score.get("lo"),
                                 score.get("hi"), e.get("gain_second"), _usd(run, system), lat))
    groups = list(dict.fromkeys(r.protocol for r in rows))
    return sorted(rows, key=lambda r: (groups.index(r.protocol), -(r.headline if r.headline is not None else -math.inf)))


def frontier(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For (score, cost) points, higher score and lower cost better: whether each is on the Pareto frontier."""
    return [not any(s2 >= s and c2 <= c and (s2 > s or c2 < c) for s2, c2 in points) for s, c in points]


def _svg(rows: Sequence[BoardRow], x: str, label: str, plot_id: str) -> str:
    """A scatter of headline against ``x`` (inline SVG), frontier points filled and joined."""
    import html

    pts = [(r, getattr(r, x)) for r in rows if r.headline is not None and getattr(r, x) is not None]
    w, h, pad = 460, 300, 50
    if not pts:
        return f'<p id="{plot_id}">no system of this group has both figures</p>'
    xs, ys = [v for _, v in pts], [r.headline for r, _ in pts]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(ys), max(ys) if max(ys) > min(ys) else min(ys) + 0.01

    def px(v: float) -> float:
        return pad + (v - x0) / (x1 - x0) * (w - 2 * pad)

    def py(v: float) -> float:
        return h - pad - (v - y0) / (y1 - y0) * (h - 2 * pad)

    on = frontier([(r.headline, v) for r, v in pts])
    front = sorted((v, r.headline) for (r, v), f in zip(pts, on) if f)
    parts = [f'<svg id="{plot_id}" class="frontier" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             f'role="img" aria-label="{html.escape(rows[0].metric)} against {html.escape(label)}">',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#444"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#444"/>',
             f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle" font-size="12">{html.escape(label)}</text>',
             f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle" font-size="12">'
             f'{html.escape(rows[0].metric)}</text>']
    if len(front) > 1:
        path = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in front)
        parts.append(f'<polyline class="frontier-line" points="{path}" fill="none" stroke="#c33"/>')
    for (r, v), f in zip(pts, on):
        parts.append(f'<circle class="{"on" if f else "off"}" cx="{px(v):.1f}" cy="{py(r.headline):.1f}" r="5" '
                     f'fill="{"#c33" if f else "#fff"}" stroke="#c33"><title>{html.escape(r.system)}: '
                     f'{100 * r.headline:.1f}, {label} {v:.4g}</title></circle>')
        parts.append(f'<text x="{px(v) + 7:.1f}" y="{py(r.headline) - 7:.1f}" font-size="11">{html.escape(r.system)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _fmt(v: float | None, scale: float = 100.0, digits: int = 1, sign: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{scale * v:+.{digits}f}" if sign else f"{scale * v:.{digits}f}"


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
        ranked = [(1 + sum((o.headline or -1) > (r.headline or -1) for o in members), r) for r in members]
        groups.append({
            "name": _title(protocol), "args": protocol[2], "ranked": ranked, "runs": len({r.run for r in members}),
            "reason": "" if i == 0 else _apart(protocols[0], protocol),
            "latency": _svg(members, "retrieve_p95_ms", "retrieval p95 (ms)", f"frontier-latency-{i}"),
            "cost": _svg(members, "usd_user_month", "USD per user-month", f"frontier-cost-{i}"),
        })
    env = jinja2.Environment(loader=jinja2.PackageLoader("memsim.analysis", "."), autoescape=True)
    env.filters["fmt"] = _fmt
    page = env.get_template("board.html.j2").render(groups=groups, markup=jinja2.utils.markupsafe.Markup)
    (out / "board.html").write_text(page, encoding="utf-8")
    md = ["# memsim board", ""]
    for g in groups:
        md += [f"## {g['name']}", "", f"{g['runs']} run(s). {g['reason']}".strip(), "",
               "| rank | system | run | headline [95% CI] | gain over twin, 2nd half (pp) | USD / user-month | retrieval p95 (ms) |",
               "|---:|---|---|---|---|---:|---:|"]
        md += [f"| {k} | {r.system} | {r.run} | {_fmt(r.headline)} [{_fmt(r.lo)}, {_fmt(r.hi)}] | "
               f"{_fmt(r.gain_second, sign=True)} | {_fmt(r.usd_user_month, 1.0, 4)} | {_fmt(r.retrieve_p95_ms, 1.0, 2)} |"
               for k, r in g["ranked"]]
        md.append("")
    (out / "board.md").write_text("\n".join(md), encoding="utf-8")
    data = [{"group": g["name"], "scenario_args": g["args"], "reason": g["reason"],
             "ranking": [{"rank": k, **{f: getattr(r, f) for f in BoardRow.__slots__ if f != "protocol"}}
                         for k, r in g["ranked"]]} for g in groups]
    (out / "board.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return out / "board.html"
