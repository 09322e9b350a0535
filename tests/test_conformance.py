"""Every registered memory system against every conformance check (memory/checks.py).

Ids read ``<system>:<check>``. Systems run on the deterministic
``HashEmbedder`` here; ``test_real_embedder`` repeats a few checks with the
real all-MiniLM-L6-v2 for some systems.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memsim.memory.checks import QUERIES, CheckSkipped, CheckSubject, conversation, iter_checks
from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources, memory_names
from tiny_cross_encoder import build_tiny_cross_encoder

CHECKS = dict(iter_checks())
CASES = [(name, cid) for name in memory_names() for cid in CHECKS]
# Mem0 embeds one text per call with the real model (~5 min for its ten checks on a busy 2-core machine).
PARAMS = [pytest.param(n, c, id=f"{n}:{c}", marks=[pytest.mark.slow] if n == "mem0" else []) for n, c in CASES]


def _needs_model(name: str) -> bool:
    return name == "rerank" or name.endswith("+rerank")


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Any:
    """Run the tiny cross-encoder on one thread: its matrices are too small to gain from
    more, and on a busy machine thread hand-offs cost ~20x the arithmetic."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny cross-encoder on disk whose vocabulary covers the checks' conversation."""
    texts = [t.text for sessions in conversation().values() for s in sessions for t in s] + list(QUERIES)
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"), texts)


@pytest.fixture(scope="module")
def served_naive() -> Any:
    """``naive`` (hash embedder) served over memsim's HTTP protocol on loopback, for the ``http`` adapter."""
    pytest.importorskip("fastapi", reason="the http extra is not installed: pip install 'memsim[http]'")
    from http_helpers import serving

    from memsim.memory.http_server import create_app

    def resources(seed: int) -> Resources:
        return Resources(rng=np.random.default_rng(seed), embedder_factory=HashEmbedder)

    with serving(create_app("naive", make_resources=resources)) as url:
        yield url


def _subject(name: str, cross_encoder_dir: Path, embedder_factory: Any, request: Any = None) -> CheckSubject:
    args: dict[str, Any] = {"model": str(cross_encoder_dir)} if _needs_model(name) else {}
    if name == "http":
        args = {"url": request.getfixturevalue("served_naive")}
    if name == "mem0" and importlib.util.find_spec("mem0") is None:  # not importorskip: mem0 must be imported by memsim
        pytest.skip("the mem0 extra is not installed: pip install 'memsim[mem0]'")
    return CheckSubject(
        name=name,
        args=args,
        make_resources=lambda: Resources(rng=np.random.default_rng(7), embedder_factory=embedder_factory),
    )


def _run(fn: Any, subject: CheckSubject) -> None:
    try:
        fn(subject)
    except CheckSkipped as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize(("name", "check"), PARAMS)
def test_conformance(name: str, check: str, cross_encoder_dir: Path, request: pytest.FixtureRequest) -> None:
    """``name`` passes ``check`` (HashEmbedder for speed; ``http`` is naive served on loopback)."""
    _run(CHECKS[check], _subject(name, cross_encoder_dir, lambda: HashEmbedder(), request))


def test_every_builtin_is_checked() -> None:
    """The systems this suite must cover are registered (a missing one would silently escape it)."""
    expected = {"naive", "surprise", "multisignal", "neuroplastic", "fullcontext", "bm25", "hybrid"}
    expected |= {f"neuroplastic-no-{m}" for m in ("ltp", "associations", "inhibition", "consolidation")}
    expected |= {"neuroplastic-decay-only", "neuroplastic-daily-decay"}
    assert expected <= set(memory_names())


REAL_CASES = [
    (name, cid)
    for name in ("neuroplastic", "multisignal")
    for cid in ("forget_removes_derived", "no_future_memories", "deterministic")
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "check"), REAL_CASES, ids=[f"{n}:{c}:minilm" for n, c in REAL_CASES])
def test_real_embedder(name: str, check: str, minilm: Any, cross_encoder_dir: Path) -> None:
    """The same checks with the real embedder, whose cosines trigger merges and inhibition for real."""
    _run(CHECKS[check], _subject(name, cross_encoder_dir, lambda: minilm))


LEAKY_PROBES = [("neuroplastic", {}), ("neuroplastic-daily-decay", {}), ("control-learner", {}), ("control-inject", {"p_end": 1.0})]


@pytest.mark.parametrize(("name", "args"), LEAKY_PROBES, ids=[n for n, _ in LEAKY_PROBES])
def test_probe_check_catches_a_probe_that_retrieves(
    name: str, args: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A system whose ``probe`` is its ``retrieve`` (hit counts, served sets, the oracle) fails the check."""
    from memsim.memory.registry import build_memory

    system_type = type(build_memory(name, dict(args), resources=Resources(embedder_factory=HashEmbedder)))
    monkeypatch.setattr(system_type, "probe", system_type.retrieve)
    subject = CheckSubject(
        name=name,
        args=args,
        make_resources=lambda: Resources(rng=np.random.default_rng(7), embedder_factory=HashEmbedder),
    )
    with pytest.raises(
        AssertionError, match="differs from the unprobed twin|otherwise than its twin|probes changed what the system reports"
    ):
        CHECKS["probe_changes_nothing"](subject)
