"""World files that lie: each is refused before anything runs, naming the file, the line and the field.

Every damaged file here carries a correct sha256 of its damaged body (the
hash proves only that a file is as written), so each case is caught by the
dataset checks of ``read_world``, not by the hash.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memsim.analysis.cli import main
from memsim.analysis.profile import config_stream
from memsim.scenarios.world_file import read_world, write_world
from memsim.core.errors import UserError

TINY = """[scenario]
name = "persona"
users = 3
months = 1.0
sessions_per_week = 2.0
questions_per_week = 3.0
deletion_rate = 20.0

[run]
seed = 4
k = 5
systems = ["naive"]
twins = false
"""

Rows = list[dict[str, Any]]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Rows]:
    """The header and event rows of a small valid world (questions with evidence, deletions)."""
    tmp = tmp_path_factory.mktemp("world")
    cfg = tmp / "tiny.toml"
    cfg.write_text(TINY, encoding="utf-8")
    _, stream, seed = config_stream(cfg)
    path = tmp / "w.jsonl"
    write_world(path, stream, source={"name": "persona", "seed": seed})
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[1:]]
    assert {r["type"] for r in rows} >= {"session", "question", "deletion"}
    return json.loads(lines[0]), rows


def _write(path: Path, header: dict[str, Any], rows: Rows) -> Path:
    """A world file of ``rows`` whose header carries the right hash of that body."""
    body = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode("utf-8")
    head = {**header, "sha256": hashlib.sha256(body).hexdigest()}
    path.write_bytes((json.dumps(head, separators=(",", ":")) + "\n").encode() + body)
    return path


def _first(rows: Rows, kind: str, where: Callable[[dict[str, Any]], bool] = lambda r: True) -> int:
    return next(i for i, r in enumerate(rows) if r["type"] == kind and where(r))


def _turn_text(value: Any) -> Callable[[dict[str, Any], Rows], None]:
    def edit(_h: dict[str, Any], rows: Rows) -> None:
        rows[_first(rows, "session")]["turns"][0]["text"] = value
    return edit


def _question_field(field: str, value: Callable[[dict[str, Any], Rows], Any]) -> Callable[[dict[str, Any], Rows], None]:
    def edit(_h: dict[str, Any], rows: Rows) -> None:
        i = _first(rows, "question", lambda r: bool(r["evidence"]))
        rows[i][field] = value(rows[i], rows)
    return edit


def _other_users_turn(q: dict[str, Any], rows: Rows) -> list[str]:
    s = rows[_first(rows, "session", lambda r: r["user_id"] != q["user_id"])]
    return [s["turns"][0]["turn_id"]]


def _later_turn(q: dict[str, Any], rows: Rows) -> list[str]:
    s = rows[max(i for i, r in enumerate(rows) if r["type"] == "session" and r["user_id"] == q["user_id"])]
    return [s["turns"][-1]["turn_id"]]


def _duplicate_turn_id(_h: dict[str, Any], rows: Rows) -> None:
    i = _first(rows, "session")
    j = _first(rows, "session", lambda r: r["session_id"] != rows[i]["session_id"])
    rows[j]["turns"][0]["turn_id"] = rows[i]["turns"][0]["turn_id"]


def _duplicate_turn_id_in_one_session(_h: dict[str, Any], rows: Rows) -> None:
    i = _first(rows, "session", lambda r: len(r["turns"]) > 1)
    rows[i]["turns"][1]["turn_id"] = rows[i]["turns"][0]["turn_id"]


def _turn_before_start(header: dict[str, Any], rows: Rows) -> None:
    i = _first(rows, "session")
    rows[i]["turns"][0]["created_at"] = "2000-01-01T00:00:00+00:00"


def _unsorted(_h: dict[str, Any], rows: Rows) -> None:
    # Two sessions one after the other, of different users at different times: swapped, only their order is wrong.
    i = next(i for i in range(len(rows) - 1) if rows[i]["type"] == rows[i + 1]["type"] == "session"
             and rows[i]["user_id"] != rows[i + 1]["user_id"] and rows[i]["time"] < rows[i + 1]["time"])
    rows[i], rows[i + 1] = rows[i + 1], rows[i]


def _deletion(turn_ids: Callable[[dict[str, Any], Rows], list[str]]) -> Callable[[dict[str, Any], Rows], None]:
    def edit(_h: dict[str, Any], rows: Rows) -> None:
        i = _first(rows, "deletion")
        rows[i]["turn_ids"] = turn_ids(rows[i], rows)
    return edit


def _stranger_asks(_h: dict[str, Any], rows: Rows) -> None:
    i = _first(rows, "question")
    rows[i]["user_id"] = "nobody"


def _header(**change: Any) -> Callable[[dict[str, Any], Rows], None]:
    def edit(header: dict[str, Any], _rows: Rows) -> None:
        header.update(change)
    return edit


def _speaker_null(_h: dict[str, Any], rows: Rows) -> None:
    rows[_first(rows, "session")]["turns"][0]["speaker"] = None


def _unknown_kind(_h: dict[str, Any], rows: Rows) -> None:
    rows[0]["type"] = "meeting"


def _totals_lie(header: dict[str, Any], _rows: Rows) -> None:
    header["totals"] = {**header["totals"], "questions": header["totals"]["questions"] + 1}


CASES: list[tuple[str, Callable[[dict[str, Any], Rows], None], str]] = [
    ("text-int", _turn_text(7), r"turn 0 field 'text' must be a string, got int"),
    ("text-null", _turn_text(None), r"turn 0 field 'text' must be a string, got NoneType"),
    ("text-surrogate", _turn_text("I live in \ud800 Lyon"), r"field 'text' is not valid Unicode \(a lone surrogate"),
    ("speaker-null", _speaker_null, r"turn 0 field 'speaker' must be a string"),
    ("evidence-string", _question_field("evidence", lambda q, _r: q["evidence"][0]), r"field 'evidence' must be a list"),
    ("evidence-missing", _question_field("evidence", lambda _q, _r: ["no-such-turn"]),
     r"field 'evidence' names turn 'no-such-turn', which no earlier session holds"),
    ("evidence-other-user", _question_field("evidence", _other_users_turn), r"field 'evidence' names turn .* of user"),
    ("evidence-later", _question_field("evidence", _later_turn), r"field 'evidence' names turn .*(said after|no earlier)"),
    ("unknown-kind", _unknown_kind, r"unknown event type 'meeting'"),
    ("duplicate-turn", _duplicate_turn_id, r"turn 0 turn_id .* repeats the turn id of line"),
    ("duplicate-turn-in-session", _duplicate_turn_id_in_one_session, r"turn 1 turn_id .* repeats the turn id earlier on this line"),
    ("turn-before-start", _turn_before_start, r"turn 0 field 'created_at' 2000-01-01T00:00:00\+00:00 is before the header's start"),
    ("unsorted", _unsorted, r"events must be in time order"),
    ("delete-unknown", _deletion(lambda _d, _r: ["no-such-turn"]), r"field 'turn_ids' names turn 'no-such-turn'"),
    ("delete-other-user", _deletion(_other_users_turn), r"field 'turn_ids' names turn .* of user"),
    ("stranger-asks", _stranger_asks, r"question for user 'nobody', who has had no session"),
    ("start-after-end", _header(start="2031-01-01T00:00:00+00:00"), r"line 1: header 'start' .* is not before 'end'"),
    ("year-9999", _header(end="9999-01-01T00:00:00+00:00"), r"line 1: header field 'end' .*year 9999"),
    ("no-zone", _header(start="2024-01-01T00:00:00"), r"line 1: header field 'start' .*no time zone"),
    ("totals-lie", _totals_lie, r"line 1: header field 'totals.questions' says"),
]


@pytest.mark.parametrize("name, edit, says", CASES, ids=[c[0] for c in CASES])
def test_a_lying_world_is_refused_naming_file_line_and_field(world: tuple[dict[str, Any], Rows], tmp_path: Path,
                                                             name: str, edit: Callable[..., None], says: str) -> None:
    header, rows = copy.deepcopy(world)
    edit(header, rows)
    path = _write(tmp_path / f"{name}.jsonl", header, rows)
    with pytest.raises(UserError, match=says) as err:
        read_world(path)
    assert f"{path} line " in str(err.value)


def test_the_untouched_world_reads(world: tuple[dict[str, Any], Rows], tmp_path: Path) -> None:
    header, rows = world
    _, stream = read_world(_write(tmp_path / "ok.jsonl", header, rows))
    assert len(stream.events) == len(rows)


def test_every_problem_is_counted_and_the_first_named(world: tuple[dict[str, Any], Rows], tmp_path: Path) -> None:
    header, rows = copy.deepcopy(world)
    for r in rows:
        if r["type"] == "question":
            r["user_id"] = "nobody"
    n = sum(r["type"] == "question" for r in rows)
    with pytest.raises(UserError, match=r"who has had no session \(and (\d+) more problems in the file\)") as err:
        read_world(_write(tmp_path / "many.jsonl", header, rows))
    # At least every other question is named too (and the evidence of each, which is not nobody's).
    assert int(str(err.value).rsplit("(and ", 1)[1].split()[0]) >= n - 1


def test_a_huge_integer_and_a_huge_text_are_refused(world: tuple[dict[str, Any], Rows], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    header, rows = copy.deepcopy(world)
    path = _write(tmp_path / "digits.jsonl", header, rows)
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"turns":[', '"turns":' + "9" * 5000 + ',"x":[', 1)
    path.write_text("".join(lines))
    with pytest.raises(UserError, match=rf"{path} line 2: .*(digits|limit)"):
        read_world(path)
    import memsim.scenarios.world_file as wf

    monkeypatch.setattr(wf, "MAX_TEXT_CHARS", 10)
    monkeypatch.setitem(wf._TEXTS, "text", (10, True))
    header, rows = copy.deepcopy(world)
    with pytest.raises(UserError, match=r"line 2: turn 0 field 'text' is \d+ characters long, over the limit of 10"):
        read_world(_write(tmp_path / "long.jsonl", header, rows))
    monkeypatch.setenv("MEMSIM_NO_SIZE_LIMITS", "1")
    read_world(_write(tmp_path / "long.jsonl", header, rows))


def test_a_world_in_utf16_is_named_as_such(world: tuple[dict[str, Any], Rows], tmp_path: Path) -> None:
    header, rows = world
    good = _write(tmp_path / "ok.jsonl", header, rows)
    bad = tmp_path / "utf16.jsonl"
    bad.write_bytes(good.read_text(encoding="utf-8").encode("utf-16"))
    with pytest.raises(UserError, match=r"encoded in UTF-16"):
        read_world(bad)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "world.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"is a FIFO \(named pipe\), expected a world file"):
        read_world(fifo)
    cfg = tmp_path / "w.toml"
    cfg.write_text(f'[scenario]\nname = "world"\ndata = "{fifo}"\n', encoding="utf-8")
    assert main(["scenario", "stats", str(cfg)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "FIFO" in err[0] and str(fifo) in err[0]


def test_the_command_line_says_one_line_with_file_line_and_field(world: tuple[dict[str, Any], Rows], tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    header, rows = copy.deepcopy(world)
    _turn_text(None)(header, rows)
    path = _write(tmp_path / "bad.jsonl", header, rows)
    cfg = tmp_path / "bad.toml"
    cfg.write_text(TINY.replace('name = "persona"', f'name = "world"\ndata = "{path}"')
                   .replace("users = 3\nmonths = 1.0\nsessions_per_week = 2.0\nquestions_per_week = 3.0\ndeletion_rate = 20.0\n", ""),
                   encoding="utf-8")
    assert main(["run", str(cfg), "--out", str(tmp_path / "run"), "--no-report"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and f"{path} line" in err[0] and "'text'" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "run" / "probes.parquet").exists()
