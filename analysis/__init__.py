"""Orchestration above runs, the one summariser, statistics and reports.

``analysis.pipeline`` runs a spec (and reruns a folder), ``analysis.summary``
turns a run folder's rows into its tables and ``metrics.json``,
``analysis.stats`` holds the statistics (bootstrap intervals, halves,
difference in differences, paired tests, rankings), ``analysis.curves`` the
learning curves and timelines, ``analysis.plots`` the figures and
``analysis.report`` the HTML and Markdown reports. Names are imported on first
use, so that the command line starts without loading scipy or polars.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "execute": "analysis.pipeline",
    "make_spec": "analysis.pipeline",
    "rerun": "analysis.pipeline",
    "summarise": "analysis.summary",
    "summarise_folder": "analysis.summary",
    "bootstrap_ci": "analysis.stats",
    "halves": "analysis.stats",
    "diff_in_diff": "analysis.stats",
    "mcnemar_exact": "analysis.stats",
    "paired_permutation": "analysis.stats",
    "summarise_seeds": "analysis.stats",
    "friedman_ranking": "analysis.stats",
    "learning_summary": "analysis.stats",
    "format_table": "analysis.stats",
    "format_markdown": "analysis.stats",
    "write_report": "analysis.report",
    "compare_runs": "analysis.report",
    "load_run": "analysis.report",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'analysis' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)
