"""Fixtures shared across the test suite."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memsim.memory.base import Turn
from memsim.memory.embed import Embedder, HashEmbedder
from memsim.static_benchmarks.data import locate

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist's workers are given COLUMNS=80 and LINES=24; a test that wants a width sets its own,
    # and the rest print as to a pipe, as in a single process.
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

T0 = datetime(2024, 1, 1, 9, 0, tzinfo=timezone.utc)
"""Start of the test calendar."""


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Keep tests off the user's real cache unless ``MEMSIM_CACHE_DIR`` is set on purpose.

    Setting it before running pytest shares computed embeddings across test
    sessions (useful on a slow machine); otherwise each session starts empty.
    """
    preset = os.environ.get("MEMSIM_CACHE_DIR")
    if preset:
        yield Path(preset)
        return
    path = tmp_path_factory.mktemp("memsim-cache")
    os.environ["MEMSIM_CACHE_DIR"] = str(path)
    try:
        yield path
    finally:
        os.environ.pop("MEMSIM_CACHE_DIR", None)


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    """A fresh deterministic bag-of-words embedder (dim 64)."""
    return HashEmbedder(64)


@pytest.fixture(scope="session")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    """The real packaged all-MiniLM-L6-v2, loaded once per session, on a session-private cache."""
    return Embedder(cache_dir=tmp_path_factory.mktemp("minilm-cache"))


@pytest.fixture
def make_turn() -> Callable[..., Turn]:
    """Factory of turns: ``make_turn("text", i=3, user="u1", speaker="alice", at=datetime)``.

    ``i`` sets the turn id (``"<user>:t<i>"``) and, unless ``at`` is given,
    the time (``T0 + i hours``).
    """

    def make(
        text: str,
        *,
        i: int = 0,
        user: str = "u1",
        speaker: str = "alice",
        at: datetime | None = None,
        session: str = "s1",
    ) -> Turn:
        return Turn(
            turn_id=f"{user}:t{i}",
            user_id=user,
            speaker=speaker,
            text=text,
            created_at=at if at is not None else T0 + timedelta(hours=i),
            session_id=session,
        )

    return make


# Looked up before ``_isolated_cache_dir`` points the cache elsewhere, so a copy fetched
# with ``memsim data fetch locomo`` into the user's data folder is found.
_LOCOMO = locate("locomo")
_FETCH_LOCOMO = "memsim data fetch locomo"


def require_locomo() -> Path:
    """The real locomo10.json (``$MEMSIM_LOCOMO``, the data folder, ``../shared/...``), or skip.

    The skip reason names the fetch command; under ``CI=true`` absence fails.
    """
    if _LOCOMO is None or not _LOCOMO.is_file():
        where = f" at {_LOCOMO}" if _LOCOMO is not None else ""
        msg = f"real LoCoMo file not found{where}: run `{_FETCH_LOCOMO}` (or set MEMSIM_LOCOMO)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return _LOCOMO


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    """The real locomo10.json, or skip with the fetch command (fail under ``CI=true``)."""
    return require_locomo()


import memsim.scenarios.registry  # noqa: E402,F401  (registers every static benchmark's data kinds: MADial-Bench's)

_MADIAL = (locate("madial"), locate("madial-memory"))


def require_madial() -> tuple[Path, Path]:
    """The real MADial-Bench English dialogue and memory files (their environment variables, the data folder), or skip.

    The skip reason names the fetch command; under ``CI=true`` absence fails.
    """
    dialogue, memory = _MADIAL
    if dialogue is None or memory is None or not dialogue.is_file() or not memory.is_file():
        msg = ("real MADial-Bench files not found: run `memsim data fetch madial-en madial-en-memory` "
               "(or set MEMSIM_MADIAL and MEMSIM_MADIAL_MEMORY)")
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return dialogue, memory
