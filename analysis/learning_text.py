"""The learning table as text: its contrasts and arms as rows, its title, header and notes (``format_learning``).

The numbers come from ``memsim.analysis.learning.learning_table``; the
report (``memsim.analysis.report``) and the terminal both print these rows.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Collection, Mapping, Sequence
from typing import Any


from memsim.analysis.stats import (
    MDE_METHOD,
)
from memsim.core.table import fit_table, table_width, text_table
from memsim.analysis.contrasts import CONTRASTS, ROLE_NAMES

__all__ = ["format_diff", "format_p", "contrast_rows", "contrast_headers", "arm_rows", "arm_headers", "has_learners",
           "learning_title", "learning_header", "learning_notes", "format_learning"]


def _pp(v: Any, lo: Any = None, hi: Any = None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    text = f"{100 * v:+.1f}"
    if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
        text += f" [{100 * lo:+.1f}, {100 * hi:+.1f}]"
    return text


def format_diff(e: Mapping[str, Any], key: str) -> str:
    """A difference of a learning-table entry in percentage points with its interval (``key``, ``key_lo``, ``key_hi``)."""
    return _pp(e.get(key), e.get(f"{key}_lo"), e.get(f"{key}_hi"))


def format_p(v: Any) -> str:
    """A p-value as the tables print it."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return "<0.001" if v < 0.001 else f"{v:.3f}"


def _mde_text(c: Mapping[str, Any], half: str) -> str:
    """The smaller of a half's gain and loss MDEs, signed by which it is (``+2.9``: a gain, ``-2.7``: a loss)."""
    gain, loss = c.get(f"{half}_mde_gain"), c.get(f"{half}_mde_loss")
    if gain is None and loss is None:
        v = c.get(f"{half}_mde")
        return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"
    if loss is None or (gain is not None and gain <= loss):
        return f"+{100 * gain:.1f}"
    return f"-{100 * loss:.1f}"


def _text_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return text_table(head, rows, align="l" * len(head)).split("\n")


def _contrast_name(key: str, name: str, c: Mapping[str, Any]) -> str:
    """The contrast's name; the headline's says which arm was its reference in each half."""
    if key != "learning_from_feedback":
        return name
    r1, r2 = c.get("first_reference_arm"), c.get("second_reference_arm")
    if r1 is None and r2 is None:
        return name
    refs = (ROLE_NAMES.get(r2, r2) if r1 == r2 or r1 is None else
            f"1st {ROLE_NAMES.get(r1, r1)}, 2nd {ROLE_NAMES.get(r2, r2)}")
    return f"learning from feedback (system - best arm: {refs})"


def contrast_rows(table: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    """One row per feedback-using system and contrast, learning from feedback first (text cells, pp).

    Columns: system, contrast, then per half the difference [interval], p and
    MDE, the DiD [interval] and p, and the contrast in stale>cur, 2nd half.
    """
    rows: list[list[str]] = []
    for label, e in table.items():
        for key, name in CONTRASTS:
            c = (e.get("contrasts") or {}).get(key)
            if c is None:
                continue
            stale = c.get("stale") or {}
            rows.append([
                label, _contrast_name(key, name, c),
                format_diff(c, "first"), format_p(c.get("first_p")), _mde_text(c, "first"),
                format_diff(c, "second"), format_p(c.get("second_p")), _mde_text(c, "second"),
                format_diff(c, "did"), format_p(c.get("did_p")),
                format_diff(stale, "second") if stale else "—",
            ])
    return rows


def contrast_headers(metric: str) -> list[str]:
    """Headers of ``contrast_rows``, naming the metric."""
    return ["system", "contrast", f"1st half, {metric} (pp)", "p", "MDE", f"2nd half, {metric} (pp)", "p", "MDE",
            "DiD 2nd - 1st (pp)", "p", "stale>cur, 2nd half (pp)"]


def _role(label: str, e: Mapping[str, Any], table: Mapping[str, Mapping[str, Any]], placebos: Collection[str]) -> str:
    """How the arms table names an arm: ``twin of x``, ``placebo of x``, ``always False (x)``... from its entry."""
    arm, of = e.get("arm"), e.get("of")
    if arm == "system":
        return "feedback-using"
    if arm in ROLE_NAMES and of is not None:
        return f"{arm} of {of}" if arm in ("twin", "placebo") else f"{ROLE_NAMES[arm]} ({of})"
    # Entries written before arms were named: the twin is what a system's ``twin`` key names.
    twin_of = {t["twin"]: s for s, t in table.items() if "twin" in t and s not in placebos and "contrasts" in t}
    if label in twin_of:
        return f"twin of {twin_of[label]}"
    if label in placebos:
        return "placebo"
    return "feedback-using" if "contrasts" in e else "no feedback use"


def arm_rows(table: Mapping[str, Mapping[str, Any]], placebos: Collection[str] = ()) -> list[list[str]]:
    """One row per arm: each half of the metric and of stale>cur (%), and the DiD vs the static control."""
    def pct(v: Any) -> str:
        return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"

    rows = []
    for label, e in table.items():
        rows.append([label, _role(label, e, table, placebos), pct(e.get("first")), pct(e.get("second")),
                     pct(e.get("stale_first")), pct(e.get("stale_second")),
                     format_diff(e, "did_control") if "did_control" in e else "",
                     format_p(e.get("did_control_p")) if "did_control" in e else ""])
    return rows


def arm_headers(metric: str) -> list[str]:
    """Headers of ``arm_rows``, naming the metric."""
    return ["system", "arm", f"{metric} 1st half %", f"{metric} 2nd half %", "stale>cur 1st %", "stale>cur 2nd %",
            "DiD vs static control (pp) [95% CI]", "p"]


def has_learners(table: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether any system of the table uses feedback (and so has contrasts against arms that ignore it)."""
    return any(e.get("contrasts") for e in table.values())


def learning_title(table: Mapping[str, Mapping[str, Any]]) -> str:
    """"Learning through use" where a system learns from feedback; else "Change through use", named as not learning."""
    return "Learning through use" if has_learners(table) else \
        "Change through use (no system here learns from feedback: each half and the change, not learning)"


def learning_header(table: Mapping[str, Mapping[str, Any]], metric: str) -> str:
    """The line above the learning tables: the metric and the unit of inference, with the reason for it."""
    e = next(iter(table.values()), {})
    unit = e.get("unit", "user")
    reason = e.get("unit_reason") or f"{e.get('users', 0)} users"
    return f"{learning_title(table).split(' (')[0]}, {metric}; inference unit: {unit}s ({reason})"


def learning_notes(
    table: Mapping[str, Mapping[str, Any]],
    *,
    metric: str,
    control: str | None,
    missing_control: str | None = None,
    balance_kinds: bool = False,
) -> list[str]:
    """The footnotes every learning table carries (CLI, report): halves, contrasts, intervals, p, MDE, control."""
    any_entry = next(iter(table.values()), {})
    unit = any_entry.get("unit", "user")
    lines = [
        f"metric: {metric} (every halves figure above is {metric}); halves: each user's questions split at that "
        "user's median",
    ]
    if has_learners(table):
        lines += [
            "learning from feedback = system - the best arm that ignores the content of feedback (twin: told nothing; "
            "placebo: the system's own bits permuted within user and week, the same calls and dose; always False / "
            "always True: the same calls, a constant bit), the arm chosen per half as the one with the highest "
            f"{metric} there (named in the row): a system that noise harms cannot show learning unless it beats every "
            "such arm. Choosing the highest by its point estimate makes the headline conservative (with arms that "
            "differ by chance it leans below 0; its p and interval are those of the chosen pair)",
            "system - placebo / - always False / - always True: against one arm; effect of feedback calls = placebo - "
            "twin: what being told anything did; effect of use = system - twin: both together",
        ]
    else:
        lines.append("no system in this run uses feedback, so none has arms that ignore it: the halves and the "
                     "change between them (and against the control) say how each system fared through use, not "
                     "what feedback taught it")
    users = any_entry.get("users", 0)
    unit_text = f"whole users ({users})" if unit == "user" else \
        f"whole question threads (a question and its re-asks), CONDITIONAL ON THESE {users} USERS"
    lines.append(f"p: sign-flip test of the question-weighted difference, signs of {unit_text} flipped; [lo, hi]: "
                 "95% interval inverted from that test (the shifts it does not reject at 5%, on the same sign "
                 "patterns), so it excludes 0 exactly when p < 0.05")
    mix1, mix2 = any_entry.get("mix_first") or {}, any_entry.get("mix_second") or {}
    if mix1 or mix2:
        kinds = sorted(set(mix1) | set(mix2))
        lines.append("kind mix (questions, 1st/2nd half): " + ", ".join(f"{k} {mix1.get(k, 0)}/{mix2.get(k, 0)}" for k in kinds)
                     + ("; halves balanced by kind (each question weighted by its kind's share)" if balance_kinds
                        else "; not balanced (--balance-kinds weights both halves to the same mix)"))
    learners = has_learners(table)
    lines.append("stale>cur: share of changed-fact questions where a superseded value outranks the current one "
                 "(lower is better)" + ("; its contrast is the same difference in stale>cur" if learners else ""))
    if learners:  # a run without learners has no contrast, so no MDE of one
        lines.append(MDE_METHOD + "; the MDE column signs it: +: a gain, -: a loss")
    lines.append(
        f"DiD vs static control: (2nd - 1st) minus that of {control}, which also moves with storage policy"
        if control else
        f"DiD vs static control: not computed, the control {missing_control!r} is not among this run's systems "
        f"(add --system {missing_control})" if missing_control else "no static control in this run"
    )
    return lines


def format_learning(
    table: Mapping[str, Mapping[str, Any]],
    *,
    metric: str,
    control: str | None,
    missing_control: str | None = None,
    balance_kinds: bool = False,
    placebos: Collection[str] = (),
    width: int | None = None,
) -> str:
    """The learning-through-use tables as text: the header line, the contrasts, each arm's halves, the footnotes.

    ``missing_control``: the static control the spec names but the run did not play (its column is empty, and
    the footnote says why). ``placebos``: the placebo labels, for entries written before each names its arm.
    ``width``: the terminal's width (``memsim.core.table.console_width``); tables wider than it fold into
    their compact view (system, contrast or arm, the 2nd half with its p and MDE) and the footnotes shrink to a
    pointer to the docs. None prints every column and every footnote (reports, pipes, ``--wide``).
    """
    header = learning_header(table, metric)
    lines: list[str] = [*(textwrap.wrap(header, width) if width else [header]), ""]
    contrasts = contrast_rows(table)
    head_c, head_a = contrast_headers(metric), arm_headers(metric)
    rows_a = arm_rows(table, placebos)
    folded = width is not None and (
        (bool(contrasts) and table_width(head_c, contrasts) > width) or table_width(head_a, rows_a) > width)
    if contrasts:
        lines += fit_table(head_c, contrasts, compact=(0, 1, 5, 6, 7), wrap=(0, 1), width=width,
                           align="l" * len(head_c), what="contrasts").split("\n")
        lines.append("")
    lines += fit_table(head_a, rows_a, compact=(0, 1, 2, 3), wrap=(0, 1), width=width,
                       align="l" * len(head_a), what="arms").split("\n")
    lines.append("")
    if folded:
        lines += textwrap.wrap("Arms, contrasts, intervals and MDE: docs/concepts/contrasts.md; every column and "
                               "footnote: memsim --wide, or report.md.", width)
    else:
        notes = learning_notes(table, metric=metric, control=control, missing_control=missing_control,
                               balance_kinds=balance_kinds)
        # Wide enough for the tables: each footnote still folds to the terminal (whole into a pipe or a file).
        lines += [w for n in notes for w in (textwrap.wrap(n, width, subsequent_indent="  ") if width else [n])]
    return "\n".join(lines)
