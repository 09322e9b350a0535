"""World files: a stream written, hashed and replayed offline by the ``world`` scenario.

Checked: the replayed stream is the written one (events, questions, gold,
evidence), ``memsim scenario render`` without ``--llm`` writes the generated
world unchanged, ``memsim run`` plays it and gives the same rows as the
source config, and each kind of damage is one line naming file and line
(exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsim.analysis.cli import main
from memsim.analysis.profile import config_stream
from memsim.scenarios.registry import build_scenario
from memsim.scenarios.world_file import read_world, write_world
from memsim.core.errors import UserError
from memsim.core.streams import streams

TINY = """[scenario]
name = "persona"
users = 3
months = 0.5
sessions_per_week = 2.0
questions_per_week = 3.0
deletion_rate = 1.0

[run]
seed = 4
k = 5
systems = ["naive"]
twins = false
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY, encoding="utf-8")
    return path


@pytest.fixture
def world(tiny: Path, tmp_path: Path) -> Path:
    out = tmp_path / "world.jsonl"
    assert main(["scenario", "render", str(tiny), "--out", str(out)]) == 0
    return out


def test_round_trip_keeps_every_event(tiny: Path, tmp_path: Path) -> None:
    _, stream, seed = config_stream(tiny)
    assert seed == 4
    path = tmp_path / "w.jsonl"
    digest = write_world(path, stream, source={"name": "persona", "seed": seed})
    header, back = read_world(path)
    assert header["sha256"] == digest and header["counts"] == {} and header["source"]["seed"] == 4
    assert back.events == stream.events
    assert (back.start, back.end) == (stream.start, stream.end)
    assert back.totals() == stream.totals() == header["totals"]
    assert back.meta["facts"] == stream.meta["facts"]


def test_render_without_llm_writes_the_generated_world(tiny: Path, world: Path) -> None:
    _, stream, _ = config_stream(tiny)
    scen = build_scenario("world", {"data": str(world)})
    replayed = scen.generate(streams(99)["scenario"])  # the world is fixed: the seed draws nothing
    assert replayed.events == stream.events
    assert scen.meta()["sha256"] == json.loads(world.read_text().splitlines()[0])["sha256"]
    assert scen.spec_args() == {"data": str(world)}


@pytest.mark.slow
def test_memsim_run_replays_a_world_with_the_source_rows(tiny: Path, world: Path, tmp_path: Path) -> None:
    from memsim.analysis.load import read_run

    cfg = tmp_path / "world.toml"
    cfg.write_text(TINY.replace('name = "persona"\nusers = 3\nmonths = 0.5\nsessions_per_week = 2.0\n'
                                'questions_per_week = 3.0\ndeletion_rate = 1.0',
                                f'name = "world"\ndata = "{world}"'), encoding="utf-8")
    rows = {}
    for name, path in (("source", tiny), ("world", cfg)):
        out = tmp_path / name
        assert main(["run", str(path), "--out", str(out), "--no-report"]) == 0
        rows[name] = read_run(out).probes.sort("question_id", "system")
    keep = ["question_id", "system", "user_id", "kind", "recall_all@5", "recall_any@5"]
    assert rows["world"].height == rows["source"].height > 0
    assert rows["world"].select(keep).equals(rows["source"].select(keep))


def _damaged(world: Path, tmp_path: Path, change) -> Path:
    lines = world.read_text(encoding="utf-8").splitlines(keepends=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(change(lines)), encoding="utf-8")
    return bad


def _edit_line(n: int, edit):
    def change(lines: list[str]) -> list[str]:
        lines[n - 1] = edit(lines[n - 1])
        return lines
    return change


@pytest.mark.parametrize("change, message", [
    (_edit_line(3, lambda s: s.replace('"u0', '"x0', 1)), "line 1: the body's sha256"),
    (lambda lines: [*lines[:-1], lines[-1][: len(lines[-1]) // 2]], "truncated line"),
    (_edit_line(2, lambda s: s[: len(s) // 2] + "\n"), "line 2: truncated or damaged line"),
    (_edit_line(2, lambda s: s.replace('"type":"session"', '"type":"meeting"', 1)), "line 2: unknown event type 'meeting'"),
    (_edit_line(2, lambda s: json.dumps({k: v for k, v in json.loads(s).items() if k != "turns"}) + "\n"),
     "line 2: session event is missing field 'turns'"),
    (_edit_line(1, lambda s: s.replace('"memsim-world"', '"other"')), "line 1: not a memsim world file"),
])
def test_bad_world_files_name_file_and_line(world: Path, tmp_path: Path, change, message: str, capsys) -> None:
    bad = _damaged(world, tmp_path, change)
    with pytest.raises(UserError, match=message):
        read_world(bad)
    cfg = tmp_path / "bad.toml"
    cfg.write_text(f'[scenario]\nname = "world"\ndata = "{bad}"\n', encoding="utf-8")
    assert main(["scenario", "stats", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and message.split(":")[0] in err[0]


def test_missing_world_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="world file not found"):
        build_scenario("world", {"data": str(tmp_path / "nope.jsonl")})
    with pytest.raises(UserError, match="data"):
        build_scenario("world", {})
