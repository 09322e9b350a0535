"""What LLM calls cost: a price table, a meter that adds calls up, and the client wrapper that reports to it.

``MeteredLLM`` reports each reply of the client it wraps to a ``Meter``,
which adds up calls, tokens, latency and estimated cost (from a
``PriceTable``) per role (``reader``, ``judge``) and model. Cached replies
are counted apart and cost nothing. A call that raised (an endpoint gone, a
reply that is not a completion) is counted too, in ``failed_calls``, with
its first error, so a run whose every call failed never reads "0 calls".
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from memsim.sim.answer.llm import ClientWrapper, Completion, LLMClient, Messages
from memsim.core.errors import UserError

__all__ = ["DEFAULT_PRICES", "PriceTable", "Meter", "MeteredLLM", "DryRunLLM"]

DEFAULT_PRICES: Mapping[str, tuple[float, float]] = {
    # USD per million tokens (input, output), from OpenAI's price list.
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o4-mini": (1.10, 4.40),
    "o3-mini": (1.10, 4.40),
}
"""Default prices: model -> (USD per million prompt tokens, per million completion tokens)."""


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices per model, in USD per million tokens; local models cost nothing.

    A model is priced by its exact name, else by the longest known prefix
    (``gpt-4o-mini-2024-07-18`` is priced as ``gpt-4o-mini``). A model with
    no price costs NaN: unknown, never silently zero.
    """

    prices: Mapping[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    """model -> (input, output) USD per million tokens."""

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, base: Mapping[str, tuple[float, float]] | None = None) -> PriceTable:
        """Defaults overridden by a JSON or TOML file.

        The file maps model names to ``{"input": USD, "output": USD}`` per
        million tokens (or to a two-number list ``[input, output]``).

        Raises:
            UserError: the file is missing, unreadable or has a bad entry.
        """
        p = Path(path).expanduser()
        try:
            raw_text = p.read_bytes()
        except OSError as exc:
            raise UserError(f"--prices: cannot read {p}: {exc.strerror}") from None
        try:
            if p.suffix.lower() == ".toml":
                import tomllib

                data = tomllib.loads(raw_text.decode("utf-8"))
            else:
                data = json.loads(raw_text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise UserError(f"--prices: {p} is not valid {'TOML' if p.suffix.lower() == '.toml' else 'JSON'}: {exc}") from None
        if not isinstance(data, dict):
            raise UserError(f"--prices: {p} must map model names to prices")
        prices = dict(DEFAULT_PRICES if base is None else base)
        for model, entry in data.items():
            if isinstance(entry, dict) and set(entry) == {"input", "output"}:
                pair = (entry["input"], entry["output"])
            elif isinstance(entry, (list, tuple)) and len(entry) == 2:
                pair = (entry[0], entry[1])
            else:
                raise UserError(
                    f"--prices: {p}, model {model!r}: expected {{\"input\": USD, \"output\": USD}} "
                    "per million tokens"
                )
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in pair):
                raise UserError(f"--prices: {p}, model {model!r}: prices must be numbers >= 0")
            prices[str(model)] = (float(pair[0]), float(pair[1]))
        return cls(prices)

    def price(self, model: str, kind: str = "openai", endpoint: str = "") -> tuple[float, float] | None:
        """(input, output) USD per million tokens, or None when unknown.

        A model named in the table has that price. Otherwise models run in
        this process or served on this machine (a loopback endpoint) cost
        nothing per token, and remote ones are priced by longest prefix.
        """
        if model in self.prices:
            return self.prices[model]
        if kind in ("local", "scripted") or _is_loopback(endpoint):
            return (0.0, 0.0)
        best = max((m for m in self.prices if model.startswith(m)), key=len, default=None)
        return self.prices[best] if best is not None else None

    def cost(
        self, model: str, prompt_tokens: int, completion_tokens: int, kind: str = "openai", endpoint: str = ""
    ) -> float:
        """USD for the given tokens; NaN when the model has no price."""
        p = self.price(model, kind, endpoint)
        if p is None:
            return math.nan
        return (prompt_tokens * p[0] + completion_tokens * p[1]) / 1_000_000


def _is_loopback(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


@dataclass(slots=True)
class _Tally:
    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    cached_cost_usd: float = 0.0
    failed_calls: int = 0


class Meter:
    """Adds up what LLM calls cost, per role (``reader``, ``judge``) and model.

    Cached replies are counted apart: no call was made, so they add nothing
    to ``calls``, ``prompt_tokens`` or ``cost_usd`` (what this run spent);
    their tokens and what they cost when first made are in the ``cached_*``
    keys, so the run's whole use of the model is ``prompt_tokens +
    cached_prompt_tokens``. Thread-safe.
    """

    def __init__(self, prices: PriceTable | None = None) -> None:
        """Args:
        prices: the price table; default ``PriceTable()``.
        """
        self.prices = prices or PriceTable()
        self._tallies: dict[tuple[str, str, str], _Tally] = {}
        self._lock = threading.Lock()
        self.first_error: str | None = None
        """The first failed call's error, one line (None while none failed)."""

    def record(
        self, completion: Completion, *, model: str, kind: str, role: str = "reader", endpoint: str = ""
    ) -> None:
        """Count one reply of ``model`` served by a ``kind`` client at ``endpoint``."""
        with self._lock:
            t = self._tallies.setdefault((role, kind, model), _Tally())
            cost = self.prices.cost(model, completion.prompt_tokens, completion.completion_tokens, kind, endpoint)
            if completion.cached:
                t.cached_calls += 1
                t.cached_prompt_tokens += completion.prompt_tokens
                t.cached_completion_tokens += completion.completion_tokens
                t.cached_cost_usd += cost
                return
            t.calls += 1
            t.prompt_tokens += completion.prompt_tokens
            t.completion_tokens += completion.completion_tokens
            t.latency_s += completion.latency_s
            t.cost_usd += cost

    def record_failure(self, error: BaseException, *, model: str, kind: str, role: str = "reader") -> None:
        """Count one call of ``model`` that raised ``error`` instead of replying."""
        with self._lock:
            self._tallies.setdefault((role, kind, model), _Tally()).failed_calls += 1
            if self.first_error is None:
                text = " ".join(str(error).split())
                self.first_error = f"{role}: {type(error).__name__}: {text[:300]}"

    def summary(self) -> dict[str, Any]:
        """Totals and a breakdown per role and model (plain JSON data).

        Keys: ``calls``, ``cached_calls``, ``prompt_tokens``,
        ``completion_tokens``, ``latency_s``, ``cost_usd`` (NaN when some
        model has no price), ``cached_prompt_tokens``,
        ``cached_completion_tokens``, ``cached_cost_usd`` (the cached
        replies' tokens and what they cost when made), ``failed_calls``
        (calls that raised instead of replying; not in ``calls``) with
        ``first_error`` when there were any, and ``by_role``: a list of the
        same per (role, kind, model).
        """
        with self._lock:
            rows = [
                {"role": role, "kind": kind, "model": model, **{k: getattr(t, k) for k in _Tally.__slots__}}
                for (role, kind, model), t in sorted(self._tallies.items())
            ]
        total: dict[str, Any] = {k: sum(r[k] for r in rows) for k in _Tally.__slots__}
        if not rows:
            total["cost_usd"] = total["cached_cost_usd"] = 0.0
        if total["failed_calls"]:
            total["first_error"] = self.first_error
        total["by_role"] = rows
        return total


class MeteredLLM(ClientWrapper):
    """Wraps a client so that every reply is counted by a ``Meter``."""

    def __init__(self, inner: LLMClient, meter: Meter, role: str = "reader") -> None:
        """Args:
        inner: the client (possibly a ``CachedLLM``).
        meter: where calls are counted.
        role: what the calls are for (``reader``, ``judge``).
        """
        self.inner = inner
        self.meter = meter
        self.role = role

    def chat(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, seed: int = 0, json_mode: bool = False
    ) -> Completion:
        """The inner client's reply, counted; a call that raises is counted as failed and raises on."""
        try:
            out = self.inner.chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed, json_mode=json_mode)
        except Exception as exc:
            self.meter.record_failure(exc, model=self.model, kind=self.name, role=self.role)
            raise
        self.meter.record(out, model=self.model, kind=self.name, role=self.role, endpoint=self.endpoint)
        return out


class DryRunLLM(ClientWrapper):
    """Stands in for a client in a dry run: counts each request's tokens and calls no model.

    The prompt is counted as the client would send it (``count_prompt_tokens``:
    the model's own tokenizer and chat template where known); the reply is a
    placeholder of ``max_tokens`` words, reported as ``max_tokens`` completion
    tokens, so completion tokens and cost are upper bounds.
    """

    def __init__(self, inner: LLMClient) -> None:
        """Args:
        inner: the client whose tokenizer, model name and endpoint are used (it is never called).
        """
        self.inner = inner
        self.exact = True
        """False once a prompt could only be estimated (no tokenizer for the model)."""

    def chat(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, seed: int = 0, json_mode: bool = False
    ) -> Completion:
        """A placeholder reply with the request's prompt tokens and ``max_tokens`` completion tokens."""
        prompt, exact = self.count_prompt_tokens(messages)
        self.exact = self.exact and exact
        return Completion(" ".join(["answer"] * max_tokens), prompt, max_tokens, 0.0)
