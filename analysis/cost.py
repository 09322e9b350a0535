"""Cost per user per simulated month, from a run folder's rows and the price table.

Per system and simulated month (30 days from the run's start), divided by
the users who had spoken by the end of that month:

- **memories** and **bytes** held at the month's end (vectors, text,
  metadata, and the index's own bytes: the flat index's 8-byte id per
  stored vector; ``MemoryStats`` totals over all users, so a per-user figure
  is the mean user's share);
- **LLM calls and tokens at ingest** (the system's own calls: extraction,
  summaries; the growth of ``MemoryStats.llm_calls`` / ``tokens`` in the
  month) and **at question time** (the reader's calls and tokens, one row per
  answered question; judges are the benchmark's cost, not the product's, and
  are left out);
- **embedding calls** (one per ingested turn and one per question, for
  systems that store vectors; their tokens: the growth of text held plus
  the questions' text, at 4 characters a token);
- **estimated cost** in USD: question tokens at the reader model's prices
  (``memsim.sim.answer.meter.PriceTable``; input and output apart), ingest tokens at
  the ingest model's input price (``MemoryStats`` does not split them),
  embedding tokens (4 characters a token, an estimate) at
  ``embed_usd_per_million`` and storage at ``storage_usd_per_gb_month``.

A reply served from memsim's response cache is counted as the call it
would have been in production. The assumptions (prices, model names) are
arguments and are written beside the table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import polars as pl

from memsim.sim.answer.meter import PriceTable
from memsim.core.errors import UserError
from memsim.core.table import text_table

__all__ = ["CostAssumptions", "PriceTable", "cost_table", "format_cost", "cost_figure"]
__all__ = ["CostAssumptions", "cost_table", "format_cost", "cost_figure"]
_MONTH_DAYS = 30.0
_CHARS_PER_TOKEN = 4.0
_ID_BYTES = 8


@dataclass(frozen=True, slots=True)
class CostAssumptions:
    """What the estimate assumes; written beside every cost table."""

    reader_model: str = "gpt-4o-mini"
    """Model whose prices the reader's tokens are charged at (the run's reader when it had one)."""
    ingest_model: str = "gpt-4o-mini"
    """Model whose input price a system's own ingest tokens are charged at."""
    embed_usd_per_million: float = 0.02
    """USD per million embedding tokens (an embedding API's list price; 0 for a local model)."""
    storage_usd_per_gb_month: float = 0.25
    """USD per GB held for a month (a managed database's list price)."""


def _month(t_days: pl.Expr) -> pl.Expr:
    # Month m holds (30m, 30(m+1)] days: what happens at the stroke of day 30 closes month one.
    return ((t_days / _MONTH_DAYS).ceil() - 1).clip(lower_bound=0).cast(pl.Int64)


def cost_table(
    probes: pl.DataFrame,
    timeline: pl.DataFrame,
    *,
    prices: PriceTable | None = None,
    assumptions: CostAssumptions | None = None,
) -> list[dict[str, Any]]:
    """One row per system and simulated month: per-user figures and the estimated cost (see the module docstring)."""
    prices = prices or PriceTable()
    a = assumptions or CostAssumptions()
    reader = prices.price(a.reader_model)
    ingest = prices.price(a.ingest_model)
    if reader is None or ingest is None:
        raise UserError(f"no price for {a.reader_model if reader is None else a.ingest_model!r}; give one with --prices")
    out: list[dict[str, Any]] = []
    if timeline.height == 0:
        return out
    sessions = timeline.filter(pl.col("event") == "session").with_columns(_month(pl.col("t_days")).alias("month"))
    state = timeline.with_columns(_month(pl.col("t_days")).alias("month"))
    questions = probes.with_columns(_month(pl.col("t_days")).alias("month")) if probes.height else probes
    months = max(int(state["month"].max()), int(questions["month"].max()) if questions.height else 0) + 1
    for system in dict.fromkeys(timeline["system"].to_list()):
        tl = state.filter(pl.col("system") == system)
        ss = sessions.filter(pl.col("system") == system)
        qs = questions.filter(pl.col("system") == system) if questions.height else questions
        out.extend(_system_rows(system, tl, ss, qs, months, reader=reader, ingest=ingest, assumptions=a))
    return out


def _system_rows(system: str, tl: pl.DataFrame, ss: pl.DataFrame, qs: pl.DataFrame, months: int, *,
                 reader: tuple[float, float], ingest: tuple[float, float],
                 assumptions: CostAssumptions) -> list[dict[str, Any]]:
    """One system's rows of ``cost_table``, month by month: its timeline ``tl``, sessions ``ss`` and questions ``qs``.

    Each frame holds the system's rows with their ``month``; ``reader`` and ``ingest`` are the models'
    (input, output) USD per million tokens. A month in which the system holds nothing, or no user has
    spoken yet, has no row.
    """
    a = assumptions
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    before_calls = before_tokens = before_text = 0
    for month in range(months):
        seen.update(u for u in ss.filter(pl.col("month") == month)["user_id"].to_list() if u)
        users = len(seen)
        held = tl.filter(pl.col("month") <= month)
        if held.height == 0 or users == 0:
            continue
        last = held.tail(1).row(0, named=True)
        calls, tokens = int(last["llm_calls"] or 0), int(last["tokens"] or 0)
        ingest_calls, ingest_tokens = calls - before_calls, tokens - before_tokens
        before_calls, before_tokens = calls, tokens
        m_sessions = ss.filter(pl.col("month") == month)
        m_questions = qs.filter(pl.col("month") == month) if qs.height else qs
        has_vectors = int(last["vector_bytes"] or 0) > 0
        turns = int(m_sessions["turns"].fill_null(0).sum()) if m_sessions.height else 0
        embed_calls = (turns + m_questions.height) if has_vectors else 0
        text_now = int(last["text_bytes"] or 0)
        # Text embedded at ingest: the growth of text held (a month with deletions counts what stayed).
        embed_chars = max(0, text_now - before_text) if has_vectors else 0
        before_text = text_now
        if has_vectors and m_questions.height:
            embed_chars += int(m_questions["question"].str.len_chars().sum())
        embed_tokens = embed_chars / _CHARS_PER_TOKEN
        q_prompt = _sum(m_questions, "prompt_tokens")
        q_completion = _sum(m_questions, "completion_tokens")
        q_calls = int(m_questions["prompt_tokens"].is_not_null().sum()) if "prompt_tokens" in m_questions.columns else 0
        index_bytes = int(last["items"] or 0) * _ID_BYTES if has_vectors else 0
        total_bytes = int(last["bytes"] or 0) + index_bytes
        usd_question = (q_prompt * reader[0] + q_completion * reader[1]) / 1e6
        usd_ingest = ingest_tokens * ingest[0] / 1e6
        usd_embed = embed_tokens * a.embed_usd_per_million / 1e6
        usd_storage = total_bytes / 1e9 * a.storage_usd_per_gb_month
        usd = usd_question + usd_ingest + usd_embed + usd_storage
        out.append(
            {
                "system": system,
                "month": month + 1,
                "users": users,
                "memories": int(last["items"] or 0) / users,
                "vector_bytes": int(last["vector_bytes"] or 0) / users,
                "text_bytes": int(last["text_bytes"] or 0) / users,
                "metadata_bytes": int(last["metadata_bytes"] or 0) / users,
                "index_bytes": index_bytes / users,
                "bytes": total_bytes / users,
                "ingest_llm_calls": ingest_calls / users,
                "ingest_tokens": ingest_tokens / users,
                "question_llm_calls": q_calls / users,
                "question_prompt_tokens": q_prompt / users,
                "question_completion_tokens": q_completion / users,
                "embedding_calls": embed_calls / users,
                "usd_question": usd_question / users,
                "usd_ingest": usd_ingest / users,
                "usd_embedding": usd_embed / users,
                "usd_storage": usd_storage / users,
                "usd": usd / users,
            }
        )
    return out


def _sum(frame: pl.DataFrame, col: str) -> int:
    if frame.height == 0 or col not in frame.columns:
        return 0
    return int(frame[col].fill_null(0).sum())


def format_cost(rows: list[dict[str, Any]], assumptions: CostAssumptions | None = None) -> str:
    """The cost table as text: per user, per simulated month."""
    a = assumptions or CostAssumptions()
    head = ["system", "month", "users", "memories", "KB", "ingest LLM", "ingest tok", "answer LLM", "answer tok",
            "embeds", "USD"]
    cells = [
        [r["system"], r["month"], r["users"], f"{r['memories']:.1f}", f"{r['bytes'] / 1e3:.1f}",
         f"{r['ingest_llm_calls']:.1f}", f"{r['ingest_tokens']:.0f}", f"{r['question_llm_calls']:.1f}",
         f"{r['question_prompt_tokens'] + r['question_completion_tokens']:.0f}", f"{r['embedding_calls']:.1f}",
         f"{r['usd']:.5f}"]
        for r in rows
    ]
    lines = [text_table(head, cells)]
    lines.append(
        "per user per simulated month (30 days); memories and KB held at the month's end; USD estimated: "
        + ", ".join(f"{k} {v}" for k, v in asdict(a).items())
    )
    return "\n".join(lines)


def cost_figure(rows: list[dict[str, Any]], path: Path) -> None:
    """A timeline per system: estimated USD per user per month, and KB held per user."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    for system in dict.fromkeys(r["system"] for r in rows):
        mine = [r for r in rows if r["system"] == system]
        months = [r["month"] for r in mine]
        left.plot(months, [r["usd"] for r in mine], marker="o", label=system)
        right.plot(months, [r["bytes"] / 1e3 for r in mine], marker="o", label=system)
    left.set(xlabel="simulated month", ylabel="USD per user (estimated)", title="cost per user per month")
    right.set(xlabel="simulated month", ylabel="KB per user", title="storage per user")
    right.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.savefig(path)
    plt.close(fig)
