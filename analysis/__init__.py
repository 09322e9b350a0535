"""Orchestration above runs, the one summariser, statistics and reports.

``analysis.pipeline`` runs a spec (and reruns a folder), ``analysis.summary``
turns a run folder's rows into its tables and ``metrics.json``,
``analysis.stats`` holds the statistics (bootstrap intervals, halves,
difference in differences, rankings), ``analysis.curves`` the
learning curves and timelines, ``analysis.plots`` the figures and
``analysis.report`` the HTML and Markdown reports. Names are imported on first
use, so that the command line starts without loading scipy or polars.
"""

from __future__ import annotations

from sim.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "analysis.pipeline": ("execute", "make_spec", "rerun",),
        "analysis.summary": ("summarise", "summarise_folder",),
        "analysis.stats": ("bootstrap_ci", "halves", "diff_in_diff", "summarise_seeds", "friedman_ranking",),
        "analysis.report": ("write_report", "compare_runs", "load_run",),
    },
)
