"""The memory protocol's return contract: what ``retrieve``, ``probe`` and ``stats`` must give back.

``check_results`` and ``check_stats`` refuse a return value of the wrong type
or size with one line naming the method; ``memsim check`` reports a system
that raises anything (``sys.exit`` and ``GeneratorExit`` included) as a
failed check and exits 1, never 0.
"""

from __future__ import annotations

import math
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memsim.analysis.cli import main
from memsim.memory.base import MemoryStats, Retrieved
from memsim.memory.checks import ContractError, check_results, check_stats

NOW = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _r(i: int, **change: object) -> Retrieved:
    fields = {"memory_id": f"m{i}", "text": "t", "score": 1.0, "created_at": NOW, "source_turn_ids": ("t1",)}
    return Retrieved(**{**fields, **change})  # type: ignore[arg-type]


@pytest.mark.parametrize("got, says", [
    (None, "retrieve returned NoneType None, not a list of Retrieved"),
    ({"m0": 1}, "retrieve returned dict"),
    ([_r(i) for i in range(11)], "retrieve returned 11 results for k=10"),
    ([{"memory_id": "m0"}], "retrieve result 0 is dict"),
    ([_r(0), _r(0)], "result 1: memory_id 'm0' is not a string or repeats"),
    ([_r(0, score=math.nan)], "result 0: score nan is not a finite number"),
    ([_r(0, text=None)], "result 0: text is NoneType"),
    ([_r(0, created_at=NOW.replace(tzinfo=None))], "is not a timezone-aware datetime"),
    ([_r(0, created_at=NOW + timedelta(days=1))], "is after now"),
    ([_r(0, source_turn_ids=("nope",))], "source turn 'nope' was never ingested"),
    ([_r(0, source_turn_ids="t1")], "source_turn_ids 't1' is not a sequence of turn ids"),
])
def test_results_that_break_the_contract_are_one_line(got: object, says: str) -> None:
    with pytest.raises(ContractError, match=says) as err:
        check_results(got, k=10, now=NOW, known={"t1"})
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


def test_results_that_keep_the_contract_pass() -> None:
    got = [_r(0), _r(1, score=0)]
    assert check_results(got, k=2, now=NOW, known={"t1"}) == got
    assert check_results((), k=1) == []


@pytest.mark.parametrize("stats, says", [
    (None, "stats returned NoneType None, not a MemoryStats"),
    (MemoryStats(items=-1), "stats returned items=-1, not a non-negative integer"),
    (MemoryStats(text_bytes=1.5), "text_bytes=1.5"),  # type: ignore[arg-type]
])
def test_stats_that_break_the_contract_are_one_line(stats: object, says: str) -> None:
    with pytest.raises(ContractError, match=says):
        check_stats(stats)


def test_stats_that_keep_the_contract_pass() -> None:
    assert check_stats(MemoryStats(items=3, text_bytes=10)) == MemoryStats(items=3, text_bytes=10)


PLUGIN = '''
from memsim.memory.base import MemoryStats


class Rude:
    """Stores nothing and answers by {how}."""

    def __init__(self, resources=None):
        pass

    def ingest(self, turns, *, user_id, now):
        pass

    def retrieve(self, query, *, user_id, now, k):
        {body}

    probe = retrieve

    def feedback(self, *a, **kw):
        pass

    def maintain(self, *, now):
        pass

    def forget(self, turn_ids, *, user_id, now):
        pass

    def stats(self):
        return {stats}
'''


@pytest.mark.parametrize("how, body, stats, says", [
    ("exiting", "import sys; sys.exit(0)", "MemoryStats()", "the system raised SystemExit(0)"),
    ("GeneratorExit", "raise GeneratorExit", "MemoryStats()", "the system raised GeneratorExit()"),
    ("returning None", "return None", "MemoryStats()", "retrieve returned NoneType None"),
    ("negative stats", "return []", "MemoryStats(items=-5)", "stats (empty) returned items=-5"),
])
def test_memsim_check_fails_a_rude_plugin_and_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str], how: str, body: str,
                                                      stats: str, says: str) -> None:
    module = f"rude_{abs(hash(how))}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(PLUGIN).format(how=how, body=body, stats=stats), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["check", f"{module}:Rude", "--only", "returns_well_formed"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  returns_well_formed: " in out and says in out, out
