"""Statistics, learning curves and reports over run folders.

``analysis.stats`` holds the statistics (bootstrap intervals, halves,
difference in differences, paired tests, rankings), ``analysis.curves`` the
learning curves and timelines, ``analysis.plots`` the figures and
``analysis.report`` the HTML and Markdown reports.
"""

from __future__ import annotations

from analysis.report import compare_runs, load_run, write_report
from analysis.stats import (
    bootstrap_ci,
    diff_in_diff,
    format_markdown,
    format_table,
    friedman_ranking,
    halves,
    learning_summary,
    mcnemar_exact,
    paired_permutation,
    summarise_seeds,
)

__all__ = [
    "bootstrap_ci",
    "halves",
    "diff_in_diff",
    "mcnemar_exact",
    "paired_permutation",
    "summarise_seeds",
    "friedman_ranking",
    "learning_summary",
    "format_table",
    "format_markdown",
    "write_report",
    "compare_runs",
    "load_run",
]
