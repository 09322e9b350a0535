"""Writing a report's page: the HTML of ``report.html.j2``, the Markdown of the worst questions, the run's one-line spec."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from memsim.analysis.load import RunData
from memsim.analysis.report_tables import SHOWN_MEMORIES, number, shade

__all__ = ["render_page", "spec_summary", "worst_markdown"]


def render_page(title: str, subtitle: str, sections: Sequence[tuple[str, str, list[tuple[str, Any]]]]) -> str:
    """The page (``report.html.j2``): ``sections`` are ``(id, title, blocks)``, a block ``(kind, value)``."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("memsim.analysis", "."), autoescape=True, keep_trailing_newline=True
    )
    env.globals.update(shade=shade, num=number, shown=SHOWN_MEMORIES,
                       b64=lambda svg: base64.b64encode(svg.encode("utf-8")).decode("ascii"))
    env.filters["judge_text"] = lambda kv: f"{kv[0].removeprefix('answer_')}={number(kv[1], 2)}"
    return env.get_template("report.html.j2").render(title=title, subtitle=subtitle, sections=sections)


def worst_markdown(worst: dict[str, list[dict[str, Any]]], metric: str, limit: int = 5) -> str:
    out = []
    for system, items in worst.items():
        out.append(f"**{system}**\n")
        for it in items[:limit]:
            out.append(f"- `{it['question_id']}` {it['question']} — gold: {it['gold']}; {metric} = {number(it['score'], 2)}")
        out.append("")
    return "\n".join(out)


def spec_summary(run: RunData) -> str:
    spec = run.spec
    if run.longitudinal:
        bits = [f"longitudinal run of scenario {spec.scenario.name}", f"seed {spec.seed}"]
    else:
        bits = [f"static run of {spec.scenario.name} (fresh systems per episode, questions after ingest)",
                f"seed {spec.seed}"]
    bits.append(f"k {spec.k}")
    bits.append(f"metric {run.metric}")
    bits.append(f"systems {', '.join(run.systems)}")
    if run.control:
        bits.append(f"control {run.control}")
    if run.probes.height:
        if run.longitudinal:
            bits.append(f"{run.probes['user_id'].n_unique()} user(s)")
        else:
            bits.append(f"{run.probes['episode'].n_unique()} episode(s)")
    return "; ".join(bits)
