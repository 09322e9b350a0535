"""The LLM response cache: the same request is answered once, then from disk.

``CachedLLM`` wraps a client and keeps every successful reply in
``llm_responses.sqlite`` under memsim's cache folder (a ``memsim.memory.kvcache``
store, like the embedding cache), keyed by a hash of endpoint, model,
messages and parameters. A re-run of a benchmark therefore makes no model
calls and gives the same answers.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from memsim.memory.kvcache import KVCache, default_cache_dir
from memsim.sim.answer.llm import ClientWrapper, Completion, LLMClient, Messages

__all__ = ["CachedLLM"]


class CachedLLM(ClientWrapper):
    """Wraps a client with a persistent response cache.

    The key is a hash of (endpoint, model, messages, max_tokens, temperature,
    seed, and the client's settings that shape replies): the same request is
    answered from the cache with the reply first received. Only successful
    replies are stored; a damaged entry reads as a miss and is overwritten.
    Safe across threads and processes.

    Attributes:
        path: the cache file.
        store: the key-value store underneath (``store.purge(keys)`` drops entries).
        hits: replies served from the cache by this object.
        misses: requests passed on to the inner client by this object.
    """

    def __init__(self, inner: LLMClient, cache_dir: str | os.PathLike[str] | None = None) -> None:
        """Args:
        inner: the client that answers cache misses.
        cache_dir: folder of the ``llm_responses.sqlite`` file; default
            ``memory.kvcache.default_cache_dir()``.

        Raises:
            UserError: the cache file cannot be opened or created.
        """
        self.inner = inner
        folder = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        self.path = folder / "llm_responses.sqlite"
        # Opened now so that an unwritable folder stops the run before its first question.
        self.store = KVCache(self.path, label="LLM response cache").open()
        self.hits = 0
        self.misses = 0

    def key(self, messages: Messages, *, max_tokens: int, temperature: float, seed: int, json_mode: bool = False) -> bytes:
        """The cache key of a request (32 bytes)."""
        payload = {
            "endpoint": self.endpoint,
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": max_tokens,
            "temperature": float(temperature),
            "seed": seed,
        }
        if json_mode:  # only then, so that every key made before JSON mode existed still reads
            payload["json_mode"] = True
        # Settings outside the request (sampling, server extras, the model file)
        # change replies too, so they are part of the key.
        settings = getattr(self.inner, "request_settings", None)
        if callable(settings):
            payload["settings"] = dict(settings())
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).digest()

    def chat(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, seed: int = 0, json_mode: bool = False
    ) -> Completion:
        """The cached reply, or the inner client's (then stored)."""
        key = self.key(messages, max_tokens=max_tokens, temperature=temperature, seed=seed, json_mode=json_mode)
        value = self.store.get(key)
        if value is not None:
            row = json.loads(value)
            self.hits += 1
            return Completion(
                row["text"], row["prompt_tokens"], row["completion_tokens"], row["latency_s"], cached=True
            )
        out = self.inner.chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed, json_mode=json_mode)
        self.misses += 1
        row = {
            "text": out.text,
            "prompt_tokens": out.prompt_tokens,
            "completion_tokens": out.completion_tokens,
            "latency_s": out.latency_s,
            # Not read back; they say where an entry came from to whoever inspects the file.
            "endpoint": self.endpoint,
            "model": self.model,
            "created": time.time(),
        }
        # The prompt goes beside the reply as a note, so that a deletion can find and purge every
        # cached answer whose prompt quoted a forgotten memory (``KVCache.purge_containing``).
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        self.store.put(key, json.dumps(row, ensure_ascii=False).encode("utf-8"), note=prompt)
        return out

    def close(self) -> None:
        """Close the database."""
        self.store.close()

    def describe(self) -> dict[str, Any]:
        """The inner client's description, plus the cache file."""
        return {**super().describe(), "cache": str(self.path)}
