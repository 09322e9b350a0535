"""LongMemEval's real oracle file for the tests (``$MEMSIM_LONGMEMEVAL_ORACLE``, the data folder, ``../shared``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memsim.static_benchmarks.data import locate_oracle

# Looked up at import, before the test session points the data folder elsewhere.
_ORACLE = locate_oracle()
_FETCH = "memsim data fetch longmemeval-oracle"


def require_oracle() -> Path:
    """The oracle file, or skip naming the fetch command; under ``CI=true`` its absence fails."""
    if _ORACLE is None or not _ORACLE.is_file():
        where = f" at {_ORACLE}" if _ORACLE is not None else ""
        msg = f"LongMemEval oracle file not found{where}: run `{_FETCH}` (or set MEMSIM_LONGMEMEVAL_ORACLE)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return _ORACLE


@pytest.fixture(scope="session")
def longmemeval_oracle_path() -> Path:
    """The real oracle file (all 500 questions), or skip (fail under ``CI=true``)."""
    return require_oracle()
