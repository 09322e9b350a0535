"""Issue 40's hooks in the engine, recorder, runner and spec: deletion checked on text, in-process systems
held to a contract, bounded seeds, failures that name their system, files named in their errors."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from memsim.memory.embed import HashEmbedder
from memsim.memory.registry import Resources, SystemSpec
from memsim.sim.erasure import REDACTED_COPY
from memsim.sim.runner import run
from memsim.sim.spec import RunSpec, ScenarioEntry, system_entries
from tests.test_redact import SECRET, _episode, _files_text

HIDER = '''
from memsim.memory.base import MemoryStats, Retrieved


class Hider:
    """Forgets by provenance, but first copies each forgotten text into a note that names no source."""

    learns = False

    def __init__(self, *, resources=None):
        self.memories = []

    def ingest(self, turns, *, user_id, now):
        self.memories += [Retrieved(t.turn_id, t.text, 1.0, t.created_at, (t.turn_id,)) for t in turns]

    def retrieve(self, query, *, user_id, now, k):
        return self.memories[-k:]

    probe = retrieve

    def feedback(self, *a, **kw):
        pass

    def maintain(self, *, now):
        pass

    def forget(self, turn_ids, *, user_id, now):
        gone = [m for m in self.memories if set(m.source_turn_ids) & set(turn_ids)]
        self.memories = [m for m in self.memories if m not in gone]
        self.memories += [Retrieved("note:" + m.memory_id, "Note. " + m.text.upper(), 1.0, now, ()) for m in gone]

    def stats(self):
        return MemoryStats(items=len(self.memories), text_bytes=sum(len(m.text) for m in self.memories))


class Naive:
    """Keeps every turn; retrieves the latest."""

    learns = False

    def __init__(self, *, resources=None):
        self.memories = []

    def ingest(self, turns, *, user_id, now):
        self.memories += [Retrieved(t.turn_id, t.text, 1.0, t.created_at, (t.turn_id,)) for t in turns]

    def retrieve(self, query, *, user_id, now, k):
        return [m for m in self.memories if m.created_at <= now][-k:]

    probe = retrieve

    def feedback(self, *a, **kw):
        pass

    def maintain(self, *, now):
        pass

    def forget(self, turn_ids, *, user_id, now):
        self.memories = [m for m in self.memories if not set(m.source_turn_ids) & set(turn_ids)]

    def stats(self):
        return MemoryStats(items=len(self.memories))


class Exits(Naive):
    def retrieve(self, query, *, user_id, now, k):
        import sys
        sys.exit(0)


class OsExits(Naive):
    def retrieve(self, query, *, user_id, now, k):
        import os
        os._exit(0)


class Sleeps(Naive):
    def retrieve(self, query, *, user_id, now, k):
        import time
        time.sleep(3600)


class ReturnsNone(Naive):
    def retrieve(self, query, *, user_id, now, k):
        return None


class RaisesBase(Naive):
    def retrieve(self, query, *, user_id, now, k):
        raise BaseException("boom")


class NegativeStats(Naive):
    def stats(self):
        return MemoryStats(items=-1)


class BadInit(Naive):
    def __init__(self, *, resources=None):
        raise RuntimeError("no config here")
'''


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package of hostile systems importable as ``hostile_systems:<Class>``."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "hostile_systems.py").write_text(textwrap.dedent(HIDER), encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    return folder


def _spec(system: str, **settings: Any) -> RunSpec:
    return RunSpec(scenario=ScenarioEntry(name="given"), systems=system_entries([SystemSpec(system)]), k=2,
                   ks=(1, 2), n_boot=100, **settings)


def _play(out: Path, system: str, **settings: Any) -> Any:
    ep = _episode()
    return run(_spec(system, **settings), [ep], out_dir=out, end=ep.end + timedelta(hours=1),
               resources=Resources(embedder_factory=lambda: HashEmbedder(64)))


def test_deleted_text_kept_without_provenance_leaks_and_leaves_no_trace(plugins: Path, tmp_path: Path) -> None:
    """The hider keeps the secret in a note naming no turn: a leak at forget and at the later question,
    and neither the rows nor the reports hold the secret."""
    from memsim.analysis.cli import main

    out = tmp_path / "run"
    result = _play(out, "hostile_systems:Hider")
    forgets = result.timeline.filter(pl.col("event") == "forget")
    assert forgets["leaked"].to_list() == [1] and forgets["leaked_text"].to_list() == [1]
    rows = result.probes.sort("question_id")
    assert rows["deleted_leaks"].to_list() == [0, 1]  # q2 comes after the deletion and retrieves the note
    assert REDACTED_COPY in rows["retrieved_text"][1].to_list()
    assert main(["report", str(out)]) == 0
    assert (out / "report.html").exists() and (out / "report.md").exists()
    everything = _files_text(out)
    assert "quillon" not in everything.casefold() and SECRET.upper() not in everything


def test_keep_deleted_text_keeps_the_copy(plugins: Path, tmp_path: Path) -> None:
    """The text search redacts only what a deletion took: with ``keep_deleted_text`` the note stays readable."""
    result = _play(tmp_path / "kept", "hostile_systems:Hider", keep_deleted_text=True)
    rows = result.probes.sort("question_id")
    assert rows["deleted_leaks"].to_list() == [0, 1]
    assert any(SECRET.upper() in t for t in rows["retrieved_text"][1].to_list())


def test_a_sentence_said_again_in_a_kept_turn_is_no_copy() -> None:
    """The user repeats one sentence of the deleted turn in a turn they keep: that sentence is theirs, the rest
    of the deleted turn is still searched for."""
    from memsim.sim.erasure import CopyFinder

    deleted = "I got the keys to the new flat today. I am not getting a rowing machine whatever the ads say."
    kept = "Luca asked me the same thing. I am not getting a rowing machine whatever the ads say."
    plain, fair = CopyFinder([deleted]), CopyFinder([deleted], said=[kept])
    assert plain.holds(kept) and not fair.holds(kept)
    assert fair.holds("Note: I got the keys to the new flat today, the user said")


def test_a_system_holding_only_a_sentence_said_again_does_not_leak(tmp_path: Path) -> None:
    """naive forgets the deleted turn; the kept turn repeating its sentence is no leak at forget or later."""
    from memsim.memory.base import Turn
    from memsim.sim.events import Deletion, Episode, Question, Session
    from tests.test_redact import T0

    said = "I am not getting a rowing machine whatever the ads say"
    gone = Turn("u1:t1", "u1", "user", f"I got the keys to the new flat in Stockholm today. {said}.", T0, "s1")
    kept = Turn("u1:t2", "u1", "user", f"Luca asked me the same thing. {said}.", T0 + timedelta(days=1), "s2")
    ask = dict(user_id="u1", text="Am I getting a rowing machine?", gold="no", kind="fact", evidence=(kept.turn_id,))
    ep = Episode("u1", (
        Session("s1", "u1", T0, (gone,)),
        Session("s2", "u1", T0 + timedelta(days=1), (kept,)),
        Deletion("d1", "u1", T0 + timedelta(days=2), (gone.turn_id,)),
        Question(question_id="q1", time=T0 + timedelta(days=3), **ask),
    ))
    result = run(_spec("naive"), [ep], out_dir=tmp_path / "run", end=ep.end + timedelta(hours=1),
                 resources=Resources(embedder_factory=lambda: HashEmbedder(64)))
    assert result.timeline.filter(pl.col("event") == "forget")["leaked"].to_list() == [0]
    assert result.probes["deleted_leaks"].to_list() == [0]


def test_a_sentence_said_again_after_the_deletion_is_no_leak(tmp_path: Path) -> None:
    """The user repeats a phrase of the deleted turn in a turn said after the deletion: naive retrieving that
    later turn is no leak (the phrase is theirs again); a memory holding the rest of the deleted text still is."""
    from memsim.memory.base import Turn
    from memsim.sim.erasure import CopyFinder
    from memsim.sim.events import Deletion, Episode, Question, Session
    from tests.test_redact import T0

    said = "I am not getting a rowing machine whatever the ads say"
    gone = Turn("u1:t1", "u1", "user", f"I got the keys to the new flat in Stockholm today. {said}.", T0, "s1")
    later = Turn("u1:t2", "u1", "user", f"Luca asked me the same thing. {said}.", T0 + timedelta(days=3), "s2")
    ask = dict(user_id="u1", text="Am I getting a rowing machine?", gold="no", kind="fact", evidence=(later.turn_id,))
    ep = Episode("u1", (
        Session("s1", "u1", T0, (gone,)),
        Deletion("d1", "u1", T0 + timedelta(days=1), (gone.turn_id,)),
        Session("s2", "u1", T0 + timedelta(days=3), (later,)),
        Question(question_id="q1", time=T0 + timedelta(days=4), **ask),
    ))
    result = run(_spec("naive"), [ep], out_dir=tmp_path / "run", end=ep.end + timedelta(hours=1),
                 resources=Resources(embedder_factory=lambda: HashEmbedder(64)))
    assert result.probes["deleted_leaks"].to_list() == [0]
    finder = CopyFinder([gone.text])
    finder.said_again([later.text])
    assert not finder.holds(later.text)
    assert finder.holds("Note: I got the keys to the new flat in Stockholm today, the user said")


@pytest.mark.parametrize(("system", "said"), [
    ("Exits", "retrieve raised SystemExit(0)"),
    ("OsExits", "retrieve raised ExitRefused(os._exit(0) called)"),
    ("RaisesBase", "retrieve raised BaseException(boom)"),
    ("ReturnsNone", "retrieve returned NoneType None, not a list of Retrieved"),
    ("NegativeStats", "stats returned items=-1, not a non-negative integer"),
])
def test_an_in_process_system_that_misbehaves_is_failed_with_its_message(plugins: Path, tmp_path: Path, system: str,
                                                                          said: str) -> None:
    """``sys.exit``, a ``BaseException`` or a value against the protocol mark the system failed (the run goes on
    to its end and is not complete), with one line naming the system and the call."""
    result = _play(tmp_path / "run", f"hostile_systems:{system}")
    failed = result.info["failed_systems"]
    assert list(failed) == [f"hostile_systems:{system}"] and said in failed[f"hostile_systems:{system}"]
    assert result.info["complete"] is False and result.probes.height == 0


def test_a_call_past_its_deadline_fails_the_system(plugins: Path, tmp_path: Path) -> None:
    """A retrieve that sleeps for an hour is cut off at ``call_deadline_s``."""
    import time

    t0 = time.perf_counter()
    result = _play(tmp_path / "run", "hostile_systems:Sleeps", call_deadline_s=0.5)
    assert time.perf_counter() - t0 < 60
    (why,) = result.info["failed_systems"].values()
    assert "retrieve took longer than its 0.5 s deadline" in why


def test_a_constructor_that_raises_is_one_line(plugins: Path, tmp_path: Path) -> None:
    from memsim.core.errors import UserError

    with pytest.raises(UserError, match=r"cannot build system 'hostile_systems:BadInit': building it raised "
                                        r"RuntimeError\(no config here\)"):
        _play(tmp_path / "run", "hostile_systems:BadInit")


def test_the_default_deadline_leaves_spec_json_as_it_was(tmp_path: Path) -> None:
    """A spec with the default deadline writes no ``call_deadline_s`` (old run folders still resume); another does."""
    assert "call_deadline_s" not in _spec("naive").to_json()
    assert _spec("naive", call_deadline_s=5).to_json()["call_deadline_s"] == 5


@pytest.mark.parametrize("seed", [2**63, 2**70, -1])
def test_a_seed_out_of_range_is_refused_at_parse_time(seed: int) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="seed"):
        _spec("naive", seed=seed)
    assert _spec("naive", seed=2**63 - 1).seed == 2**63 - 1


def test_a_config_seed_out_of_range_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memsim.analysis.cli import main

    config = tmp_path / "c.toml"
    config.write_text('[scenario]\nname = "persona"\nusers = 1\nmonths = 1\n[run]\nseed = 1180591620717411303424\n')
    assert main(["run", str(config), "--system", "naive", "--out", str(tmp_path / "r"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed" in err[0] and "Traceback" not in err[0]


def test_the_only_system_failing_before_a_scored_row_is_named(plugins: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Not "probes.parquet: no column 'recall_all@10'": the system, the call and its error, with exit code 1 (an
    incomplete run, as when a system fails later; 2 is for bad input)."""
    from memsim.analysis.cli import main

    config = tmp_path / "c.toml"
    config.write_text('[scenario]\nname = "persona"\nusers = 2\nmonths = 1\n[run]\nseed = 2\nk = 5\nn_boot = 200\n')
    code = main(["run", str(config), "--system", "hostile_systems:Exits", "--out", str(tmp_path / "r"),
                 "--no-progress"])
    assert code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "no column" not in last
    assert "system 'hostile_systems:Exits' failed in retrieve" in last and "SystemExit(0)" in last


def test_a_damaged_run_file_is_named(tmp_path: Path) -> None:
    """A damaged probes.parquet read back names the file."""
    from memsim.analysis.load import read_run
    from memsim.core.errors import UserError

    out = tmp_path / "run"
    _play(out, "naive")
    (out / "probes.parquet").write_bytes(b"PAR1 this is not parquet PAR1")
    with pytest.raises(UserError, match=r"probes\.parquet"):
        read_run(out)


def test_a_full_disk_names_the_file_being_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC without a file name (as a full disk raises it from a writer) comes back naming the run part."""
    import errno

    from memsim.sim import recorder as rec
    from memsim.core.errors import UserError

    def full(path: Path, write: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rec, "write_atomic", full)
    with pytest.raises(UserError, match=r"run/\S*\.parquet: writing [a-z ]+: .*no space left on device"):
        _play(tmp_path / "run", "naive")


def test_failed_llm_calls_are_counted_beside_answered_ones() -> None:
    """A client whose every reply is damaged: the meter counts the failures, and the line never says "0 calls"
    alone."""
    from memsim.sim.answer import Meter, MeteredLLM, ScriptedLLM, format_cost
    from memsim.sim.answer.llm import LLMReplyError

    class Damaged(ScriptedLLM):
        def chat(self, *a: Any, **kw: Any) -> Any:
            raise LLMReplyError("reply is not JSON: truncated at byte 17")

    meter = Meter()
    llm = MeteredLLM(Damaged("x"), meter, role="judge")
    for _ in range(3):
        with pytest.raises(LLMReplyError):
            llm.chat([{"role": "user", "content": "hi"}], max_tokens=4)
    MeteredLLM(ScriptedLLM("fine"), meter, role="reader").chat([{"role": "user", "content": "hi"}], max_tokens=4)
    s = meter.summary()
    assert (s["calls"], s["failed_calls"]) == (1, 3)
    assert s["first_error"] == "judge: LLMReplyError: reply is not JSON: truncated at byte 17"
    line = format_cost(s)
    assert "1 calls answered" in line and "3 failed" in line and "truncated at byte 17" in line


@pytest.mark.parametrize("workers", [0, -3, 10**9])
def test_a_sweep_worker_count_out_of_range_is_one_line(tmp_path: Path, workers: int) -> None:
    """Library callers get the bound ``--workers`` has: a billion workers is refused before any process starts."""
    from memsim.analysis.sweep import run_sweep, sweep_from_mapping
    from memsim.core.errors import UserError

    spec = sweep_from_mapping({"scenario": {"name": "persona", "users": 1, "months": 1}, "systems": ["naive"]})
    with pytest.raises(UserError, match=r"--workers must be between 1 and 1,024"):
        run_sweep(spec, tmp_path / "sweep", workers=workers)
