"""Orchestration above runs, the one summariser, statistics and reports.

``memsim.analysis.pipeline`` runs a spec (and reruns a folder), ``memsim.analysis.summary``
turns a run folder's rows into its tables and ``metrics.json``,
``memsim.analysis.stats`` holds the statistics (bootstrap intervals, halves,
difference in differences, rankings), ``memsim.analysis.curves`` the
learning curves and timelines, ``memsim.analysis.plots`` the figures and
``memsim.analysis.report`` the HTML and Markdown reports. Names are imported on first
use, so that the command line starts without loading scipy or polars.
"""

from __future__ import annotations

from memsim.core.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "memsim.analysis.pipeline": ("execute", "make_spec", "rerun",),
        "memsim.analysis.summary": ("summarise", "summarise_folder",),
        "memsim.analysis.stats": ("bootstrap_ci", "halves", "diff_in_diff", "summarise_seeds", "friedman_ranking",),
        "memsim.analysis.report": ("write_report", "compare_runs", "load_run",),
    },
)
