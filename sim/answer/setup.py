"""Glue between a benchmark run and the reader, judges and meter.

A run's ``AnswerOptions`` (its spec's ``answer``) become an ``AnswerSetup``
with ``answer_setup``. For each
question, ``AnswerSetup.answer_and_judge`` returns a flat row fragment (the
answer, its tokens and latency, one score per judge) to merge into the
question's row next to its evidence scores. ``AnswerSetup.describe`` goes into
the run's spec and ``AnswerSetup.cost`` into its metrics.

When the model's endpoint fails for good in the middle of a run,
``answer_and_judge`` raises ``LLMUnavailableError`` (a ``UserError``): the
caller catches it, writes the rows it already has, and reports the error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memsim.sim.answer.cache import CachedLLM
from memsim.sim.answer.dryrun import DryRunFinished
from memsim.sim.answer.judges import JUDGE_NAMES, LLM_JUDGES, Judge, judge_verdict, make_judge
from memsim.sim.answer.llm import (
    OPENAI_URL,
    LLMClient,
    LLMUnavailableError,
    OpenAICompatibleLLM,
    endpoint_of,
    make_llm,
    openai_base_url,
)
from memsim.sim.answer.meter import DryRunLLM, Meter, MeteredLLM, PriceTable
from memsim.sim.answer.options import DEFAULT_LOCAL_CONTEXT, AnswerOptions
from memsim.sim.answer.official import (
    OfficialPrompts,
    PromptFile,
    ReaderPrompt,
    load_official_prompts,
    load_prompt_file,
)
from memsim.sim.answer.readers import Reader
from memsim.core.errors import UserError

if TYPE_CHECKING:
    from memsim.memory.base import Retrieved

__all__ = [
    "AnswerSetup",
    "DryRunFinished",
    "format_dry_run",
    "judge_client",
    "official_templates",
    "same_model",
    "LLMUnavailableError",
    "answer_setup",
    "build_llm",
    "format_cost",
]

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
"""Model asked for at OpenAI's endpoint when ``--llm-model`` is not given."""



def build_llm(
    kind: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    model_path: str | None = None,
    context_window: int | None = None,
    threads: int | None = None,
    timeout_s: float = 60.0,
    max_retries: int = 4,
    concurrency: int = 4,
    api_key: str | None = None,
) -> LLMClient:
    """A raw client (no cache, no meter) from command-line style settings.

    ``api_key`` overrides ``$OPENAI_API_KEY`` (a dry run passes a placeholder: it sends nothing).
    """
    if context_window is not None and context_window < 64:
        raise UserError(f"--llm-context-window: need at least 64 tokens, got {context_window}")
    if kind == "local":
        return make_llm(
            "local",
            model_path=model_path,
            n_ctx=context_window or DEFAULT_LOCAL_CONTEXT,
            n_threads=threads,
        )
    if kind == "openai":
        if context_window is None and model_path:
            # The server runs this GGUF; llama.cpp servers default to the same window as local.
            context_window = DEFAULT_LOCAL_CONTEXT
        if not model:
            url = openai_base_url(base_url)
            # OpenAI's default; another server is asked which model it serves.
            model = DEFAULT_OPENAI_MODEL if url == OPENAI_URL else _served_model(url)
        return make_llm(
            "openai",
            model=model,
            base_url=base_url,
            timeout_s=timeout_s,
            max_retries=max_retries,
            concurrency=concurrency,
            context_window=context_window,
            tokenizer_path=model_path,
            **({"api_key": api_key} if api_key else {}),
        )
    return make_llm(kind)  # raises the UserError listing the kinds


def _served_model(url: str) -> str:
    models = OpenAICompatibleLLM.served_models(url)
    if not models:
        raise UserError(f"--llm-model: the endpoint {url} lists no models; name one")
    return models[0]


class AnswerSetup:
    """A reader, its judges and the meter that counts what they spend."""

    def __init__(
        self,
        reader: Reader,
        judges: Sequence[Judge],
        meter: Meter,
        *,
        caches: Sequence[CachedLLM] = (),
        self_judging: bool = False,
        dry_run: bool = False,
    ) -> None:
        """Args:
        reader: writes the answers.
        judges: score them (names must be distinct).
        meter: counts the calls of reader and LLM judges.
        caches: response caches in use (closed by ``close``).
        self_judging: an LLM judge runs on the reader's own model.
        dry_run: the clients count calls and tokens and call no model.
        """
        names = [j.name for j in judges]
        if len(set(names)) != len(names):
            raise UserError(f"--judge: a judge is named twice in {names}")
        self.reader = reader
        self.judges = tuple(judges)
        self.meter = meter
        self.self_judging = bool(self_judging)
        self.dry_run = bool(dry_run)
        self._caches = tuple(caches)

    def describe(self) -> dict[str, Any]:
        """Reader, LLM and judges, as the run's spec records them."""
        llm = self.reader.llm
        llm_desc = llm.describe() if hasattr(llm, "describe") else {"kind": llm.name, "model": llm.model}
        judges = []
        for j in self.judges:
            judges.append(j.describe() if hasattr(j, "describe") else {"name": j.name})
        return {
            "reader": self.reader.describe(),
            "llm": llm_desc,
            "judges": judges,
            "cache": bool(self._caches),
            "self_judging": self.self_judging,
        }

    def answer_and_judge(
        self,
        question: str,
        question_date: datetime | str,
        memories: Sequence[Retrieved],
        gold: Any,
        category: str | int | None = None,
        question_id: str | None = None,
    ) -> dict[str, Any]:
        """Answer one question and score the answer with every judge.

        Returns:
            ``answer``, ``answer_raw``, ``prompt_id``, ``prompt_tokens``,
            ``completion_tokens``, ``llm_latency_ms``, ``llm_cached``,
            ``truncated``, ``n_memories_used``, ``answer_<judge>`` per judge and, per LLM judge,
            ``unreadable_<judge>`` (its reply had no readable verdict; the score is then 0.0).

        Raises:
            LLMUnavailableError: the endpoint failed for good; rows recorded so far stand.
        """
        ans = self.reader.answer(question, question_date, memories)
        row: dict[str, Any] = {
            "answer": ans.text,
            "answer_raw": ans.raw,
            "prompt_id": ans.prompt_id,
            "prompt_tokens": ans.prompt_tokens,
            "completion_tokens": ans.completion_tokens,
            "llm_latency_ms": ans.latency_s * 1000.0,
            "llm_cached": ans.cached,
            "truncated": ans.truncated,
            "n_memories_used": ans.n_memories_used,
        }
        gold_text = "" if gold is None else str(gold)
        for judge in self.judges:
            verdict = judge_verdict(judge, question=question, gold=gold_text, answer=ans.text,
                                    category=category, question_id=question_id)
            row[f"answer_{judge.name}"] = float(verdict.score)
            if hasattr(judge, "verdict"):
                # A reply without a readable verdict is scored wrong; the flag lets every table count it.
                row[f"unreadable_{judge.name}"] = not verdict.readable
        return row

    def dry_run_report(self) -> str:
        """What a dry run counted (``format_dry_run`` of the meter)."""
        inner = getattr(self.reader.llm, "inner", None)
        return format_dry_run(self.meter.summary(), exact=bool(getattr(inner, "exact", False)))

    @property
    def score_columns(self) -> list[str]:
        """The ``answer_<judge>`` columns ``answer_and_judge`` fills."""
        return [f"answer_{j.name}" for j in self.judges]

    def cost(self) -> dict[str, Any]:
        """What the reader and LLM judges spent so far (``Meter.summary``)."""
        return self.meter.summary()

    def close(self) -> None:
        """Close the response caches."""
        for c in self._caches:
            c.close()


def answer_setup(options: AnswerOptions | None, *, default_judges: Sequence[str]) -> AnswerSetup | None:
    """The setup the options ask for; None without options or for reader ``none``.

    Args:
        options: the run's answer options.
        default_judges: judges used when the options name none (a static protocol declares its own).

    Raises:
        UserError: bad options (unknown judge, missing key, unreadable price file, ...).
    """
    if options is None or not options.enabled:
        return None
    judge_names = _judge_names(options, default_judges)
    prices = PriceTable.load(options.prices) if options.prices else PriceTable()
    meter = Meter(prices)
    common = dict(
        base_url=options.llm_base_url,
        context_window=options.llm_context_window,
        threads=options.llm_threads,
        timeout_s=options.llm_timeout,
        max_retries=options.llm_retries,
    )
    dry_run = options.dry_run
    if dry_run:
        common["api_key"] = "dry-run-sends-nothing"
    base = build_llm(options.llm, model=options.llm_model, model_path=options.llm_model_path, **common)
    caches: list[CachedLLM] = []

    def wrap(client: LLMClient, role: str) -> LLMClient:
        if dry_run:
            return MeteredLLM(DryRunLLM(client), meter, role=role)
        if not options.no_cache:
            client = CachedLLM(client)
            caches.append(client)
        return MeteredLLM(client, meter, role=role)

    files = [load_prompt_file(path) for path in options.prompts or ()]
    mine = _reader_prompt(options, files)
    reader = Reader(wrap(base, "reader"), options.reader, options.max_answer_tokens,
                    template=mine.template if mine else None, layout=mine.layout if mine else "lines",
                    prompt_source=mine.source if mine else "")
    official = official_templates(options.judge_prompts)
    for f in files:
        if f.judges is not None:
            official.setdefault(f.judges.judge, f.judges)
    llm_judges = [n for n in judge_names if n in LLM_JUDGES]
    self_judging = False
    judge_llm: LLMClient | None = None
    if llm_judges:
        raw = judge_client(options, base, **common)
        self_judging = raw is base or same_model(raw, base)
        _check_self_judging(options, llm_judges, base, self_judging)
        judge_llm = wrap(raw, "judge")
    judges = _judges(judge_names, judge_llm, official)
    return AnswerSetup(reader, judges, meter, caches=caches, self_judging=self_judging, dry_run=dry_run)


def _judge_names(options: AnswerOptions, default_judges: Sequence[str]) -> list[str]:
    """The judges a run uses, in order: those named (else the defaults), with the deterministic ones beside an LLM's.

    Raises:
        UserError: an unknown judge.
    """
    judge_names = list(dict.fromkeys(options.judge or default_judges))
    if any(n in LLM_JUDGES for n in judge_names):
        # An LLM judge is never alone: the deterministic judges run beside it.
        judge_names += [n for n in default_judges if n not in LLM_JUDGES and n not in judge_names]
    for name in judge_names:
        if name not in JUDGE_NAMES:
            raise UserError(f"--judge: unknown judge {name!r}; choose from: {', '.join(JUDGE_NAMES)}")
    return judge_names


def _reader_prompt(options: AnswerOptions, files: Sequence[PromptFile]) -> ReaderPrompt | None:
    """The reader template the ``--prompts`` files hold for the options' reader; None when they hold none.

    Raises:
        UserError: the files hold reader templates, but none for this reader.
    """
    mine = next((f.readers[options.reader] for f in files if options.reader in f.readers), None)
    if any(f.readers for f in files) and mine is None:
        raise UserError(f"--prompts: no {options.reader} reader template in {', '.join(f.source for f in files)}; "
                        f"found: {', '.join(sorted({v for f in files for v in f.readers})) or 'none'}")
    return mine


def _check_self_judging(options: AnswerOptions, llm_judges: Sequence[str], base: LLMClient, self_judging: bool) -> None:
    """Refuse LLM judges on the reader's own model unless the options allow it."""
    if self_judging and not options.allow_self_judging:
        raise UserError(
            f"--judge {', '.join(llm_judges)}: the judge would use the reader's own model ({base.model}); "
            "name another with --judge-model, or pass --allow-self-judging (its figures are then marked "
            "self-judging)"
        )


def _judges(judge_names: Sequence[str], judge_llm: LLMClient | None, official: dict[str, OfficialPrompts]) -> list[Judge]:
    """Build the judges named: LLM judges on ``judge_llm`` with their official templates where given."""
    judges: list[Judge] = []
    for name in judge_names:
        if name in LLM_JUDGES:
            found = official.get(name)
            judges.append(
                make_judge(
                    name,
                    judge_llm,
                    templates=found.templates if found else None,
                    prompt_source=found.source if found else "",
                )
            )
        else:
            judges.append(make_judge(name))
    return judges


def judge_client(options: AnswerOptions, reader_llm: LLMClient, **common: Any) -> LLMClient:
    """The raw client LLM judges use: ``judge_model`` on the reader's endpoint, else the reader's own."""
    if not options.judge_model:
        return reader_llm
    if options.llm == "local":
        return build_llm("local", model_path=options.judge_model, **common)
    return build_llm("openai", model=options.judge_model, **common)


def same_model(a: LLMClient, b: LLMClient) -> bool:
    """Whether two clients run the same model (same name at the same endpoint, or the same GGUF file)."""
    path_a, path_b = getattr(a, "model_path", None), getattr(b, "model_path", None)
    if path_a is not None and path_b is not None:
        try:
            return Path(path_a).resolve() == Path(path_b).resolve()
        except OSError:
            return False
    return (a.model, endpoint_of(a)) == (b.model, endpoint_of(b))


def official_templates(paths: Sequence[str] | None) -> dict[str, OfficialPrompts]:
    """Judge name -> official templates parsed from the user's files (``--judge-prompts``).

    Raises:
        UserError: a file cannot be parsed, or two files are for the same judge.
    """
    out: dict[str, OfficialPrompts] = {}
    for path in paths or ():
        found = load_official_prompts(path)
        if found.judge in out:
            raise UserError(f"--judge-prompts: {path} and {out[found.judge].source} are both for {found.judge}")
        out[found.judge] = found
    return out


def format_dry_run(summary: dict[str, Any], *, exact: bool) -> str:
    """What a dry run found: calls, tokens and cost per role and model, as text."""
    lines = ["dry run: no model was called; the run would make (without the response cache):"]
    for row in summary.get("by_role", []):
        cost = row.get("cost_usd", 0.0)
        cost_text = "unknown (no price)" if isinstance(cost, float) and math.isnan(cost) else f"${cost:.4f}"
        lines.append(
            f"  {row['role']:<6} {row['model']}: {row['calls']} calls, {row['prompt_tokens']:,} prompt tokens, "
            f"at most {row['completion_tokens']:,} completion tokens, at most {cost_text}"
        )
    total = summary.get("cost_usd", 0.0)
    total_text = "unknown (a model has no price)" if isinstance(total, float) and math.isnan(total) else f"${total:.4f}"
    lines.append(
        f"  total: {summary.get('calls', 0)} calls, {summary.get('prompt_tokens', 0):,} prompt tokens, "
        f"at most {summary.get('completion_tokens', 0):,} completion tokens, estimated cost at most {total_text}"
    )
    lines.append(
        "  prompt tokens: "
        + ("exact (the model's own tokenizer and chat template)" if exact else "estimated (no tokenizer for the model)")
        + " for the reader; judge prompts are counted with answers of the reader's full reply budget"
    )
    return "\n".join(lines)


def format_cost(summary: dict[str, Any]) -> str:
    """One line for a summary table: calls, tokens (cached replies included), model time and cost.

    The tokens are every reply's, a cached one's too; the cost is what this run spent, with what
    the cached replies cost when they were made beside it.
    """

    def usd(v: Any) -> str:
        return "unknown (no price for a model)" if isinstance(v, float) and math.isnan(v) else f"${v:.4f}"

    sent, got = summary.get("prompt_tokens", 0), summary.get("completion_tokens", 0)
    cached = summary.get("cached_calls", 0)
    tokens = f"{sent:,} prompt + {got:,} completion tokens"
    if cached:  # the run's whole use of the model, and what of it was sent now
        tokens = (f"{sent + summary.get('cached_prompt_tokens', 0):,} prompt + "
                  f"{got + summary.get('cached_completion_tokens', 0):,} completion tokens with the cached replies' "
                  f"({sent:,} + {got:,} sent now)")
    failed = summary.get("failed_calls", 0)
    # Failed calls are said beside the answered ones: a run whose every call failed never reads "0 calls".
    calls = (f"{summary.get('calls', 0)} calls ({cached} cached)" if not failed else
             f"{summary.get('calls', 0)} calls answered ({cached} cached), {failed} failed "
             f"(first: {str(summary.get('first_error') or '')[:200]})")
    line = (f"LLM: {calls}, {tokens}, {summary.get('latency_s', 0.0):.1f} s, "
            f"cost {usd(summary.get('cost_usd', 0.0))}")
    if cached:
        line += f" (the cached replies cost {usd(summary.get('cached_cost_usd', 0.0))} when made)"
    return line
