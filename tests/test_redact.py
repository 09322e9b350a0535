"""Deleted text leaves memsim's own outputs: the run folder's rows and the raw cache files."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import polars as pl

from memsim.memory.base import Turn
from memsim.memory.embed import HashEmbedder
from memsim.memory.kvcache import KVCache
from memsim.memory.registry import Resources, SystemSpec
from memsim.sim.events import Deletion, Episode, Question, Session
from memsim.sim.recorder import REDACTED
from memsim.sim.runner import run
from memsim.sim.spec import RunSpec, ScenarioEntry, system_entries

SECRET = "The violet harbour clock chimes thirteen times for Quillon Marbury"
"""A sentence no template writes, so that finding it anywhere means it was kept."""
T0 = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)


def _turn(i: int, text: str, session: str, day: int) -> Turn:
    return Turn(turn_id=f"u1:t{i}", user_id="u1", speaker="user", text=text,
                created_at=T0 + timedelta(days=day, minutes=i), session_id=session)


def _episode() -> Episode:
    """Told the secret on day 0, asked on day 1 (committed before the deletion), forgotten on day 3, asked again."""
    secret = _turn(1, SECRET, "s1", 0)
    filler = [_turn(2, "I had porridge for breakfast", "s1", 0), _turn(3, "The bus was late again", "s2", 2)]
    ask = dict(user_id="u1", text="When does the violet harbour clock chime?", gold="thirteen times for Quillon Marbury",
               kind="fact", evidence=(secret.turn_id,))
    return Episode("u1", (
        Session("s1", "u1", T0, (secret, filler[0])),
        Question(question_id="q1", time=T0 + timedelta(days=1), **ask),
        Session("s2", "u1", T0 + timedelta(days=2), (filler[1],)),
        Deletion("del1", "u1", T0 + timedelta(days=3), (secret.turn_id,)),
        Question(question_id="q2", time=T0 + timedelta(days=4), **ask),
    ))


def _spec(**settings: Any) -> RunSpec:
    return RunSpec(scenario=ScenarioEntry(name="given"), systems=system_entries([SystemSpec("naive")]), k=2,
                   ks=(1, 2), n_boot=100, **settings)


def _files_text(folder: Path) -> str:
    """Everything in a folder as text: parquet files read back (they are compressed), the rest as raw bytes."""
    out = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix == ".parquet":
            out.append(pl.read_parquet(path).write_ndjson())
        else:
            out.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(out)


def _play(out: Path, **settings: Any) -> Any:
    ep = _episode()
    return run(_spec(**settings), [ep], out_dir=out, end=ep.end + timedelta(hours=1),
               resources=Resources(embedder_factory=lambda: HashEmbedder(64)))


def test_a_deleted_sentence_leaves_the_run_folder(tmp_path: Path) -> None:
    """Retrieved text, gold and answer of rows derived from the deleted turn are redacted, on disk and after."""
    from memsim.analysis.cli import main

    out = tmp_path / "run"
    result = _play(out)
    rows = result.probes.sort("question_id")
    assert rows["question_id"].to_list() == ["q1", "q2"]
    # q1 was answered before the deletion (its part was on disk) and retrieved the secret then.
    assert REDACTED in rows["retrieved_text"][0].to_list() and rows["gold"][0] == REDACTED
    assert rows["gold"][1] == REDACTED  # asked after: its gold came from the deleted turn too
    assert rows["evidence_text"].to_list() == [[REDACTED], [REDACTED]]  # the evidence as said goes with its turn
    assert rows["recall_all@2"][0] == 1.0  # scores stay: only text is redacted
    assert result.info["deleted_text"] == "redacted" and result.info["redacted_rows"] == 2
    assert main(["report", str(out)]) == 0
    assert (out / "report.html").exists()
    everything = _files_text(out)
    assert "Quillon" not in everything and "violet harbour clock chimes" not in everything


def test_keep_deleted_text_keeps_it_and_says_so(tmp_path: Path) -> None:
    """The text stays, run.json says so, and every score equals the redacted run's."""
    result = _play(tmp_path / "kept", keep_deleted_text=True)
    redacted = _play(tmp_path / "redacted")
    numbers = [c for c, t in result.probes.schema.items() if t.is_numeric() and not c.endswith("_ms")]
    assert result.probes.sort("question_id")[numbers].equals(redacted.probes.sort("question_id")[numbers])
    assert result.info["deleted_text"] == "kept (keep_deleted_text)" and result.info["redacted_rows"] == 0
    assert any(SECRET in t for t in result.probes.sort("question_id")["retrieved_text"][0].to_list())
    assert result.probes.sort("question_id")["evidence_text"][0].to_list() == [SECRET]
    assert json.loads((tmp_path / "kept" / "spec.json").read_text())["keep_deleted_text"] is True


def test_a_purge_leaves_no_copy_in_the_raw_cache_files(tmp_path: Path) -> None:
    """secure_delete and a truncated write-ahead log: the purged text is in no byte of the files."""
    cache = KVCache(tmp_path / "c.sqlite", label="test cache")
    cache.put_many([(b"k%d" % i, f"reply {i}".encode()) for i in range(50)])
    cache.put(b"secret", b"a reply quoting it", note=f"prompt: {SECRET}")
    cache.put(b"other", SECRET.encode())
    assert cache.purge_containing([SECRET]) == 2
    cache.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert SECRET.encode() not in raw and b"Quillon" not in raw and b"reply 7" in raw
