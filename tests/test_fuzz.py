"""Generated bad input for the loaders, the config reader and the command line: a one-line error, never a traceback.

Every mutation below makes its input invalid on purpose (so that no case
starts a real run); each must end as a ``UserError`` (exit 2 at the command
line, one line on stderr). Bounded: a few dozen cases per property.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import io
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsim.analysis.cli import main
from memsim.core.errors import UserError, expected_failure
from memsim.static_benchmarks.locomo import load_locomo
from memsim.static_benchmarks.longmemeval import load_instances

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)

LOCOMO = [{
    "sample_id": "c1",
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I moved to Lyon"},
                      {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice"}],
    },
    "qa": [{"question": "Where did Ann move?", "answer": "Lyon", "evidence": ["D1:1"], "category": 1}],
}]
LME = [{
    "question_id": "q1", "question_type": "single-session-user", "question": "Where did I move?", "answer": "Lyon",
    "question_date": "2023/05/30 (Tue) 23:40", "haystack_session_ids": ["s1"],
    "haystack_dates": ["2023/05/29 (Mon) 10:00"],
    "haystack_sessions": [[{"role": "user", "content": "I moved to Lyon", "has_answer": True}]],
    "answer_session_ids": ["s1"],
}]
_NOT_STRING = st.one_of(st.none(), st.booleans(), st.integers(), st.lists(st.integers(), max_size=2),
                        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def _paths(data: Any) -> list[tuple[Any, ...]]:
    """Paths (keys and indices) to every string leaf of ``data``."""
    if isinstance(data, dict):
        return [(k, *p) for k, v in data.items() for p in _paths(v)]
    if isinstance(data, list):
        return [(i, *p) for i, v in enumerate(data) for p in _paths(v)]
    return [()] if isinstance(data, str) else []


def _set(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(data)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


@st.composite
def bad_json(draw: st.DrawFn, base: list[dict[str, Any]], date_paths: tuple[tuple[Any, ...], ...], id_key: str) -> bytes:
    """``base`` made invalid by one drawn mutation, as the bytes of a file."""
    kind = draw(st.sampled_from(["year", "nest", "truncate", "type", "missing", "duplicate", "nan"]))
    data = copy.deepcopy(base)
    if kind == "year":
        path = draw(st.sampled_from(date_paths))
        year = draw(st.one_of(st.integers(3000, 9999), st.integers(1000, 1899)))
        text = {"locomo": f"1:56 pm on 8 May, {year}", "longmemeval": f"{year}/05/30 (Tue) 23:40"}
        data = _set(data, path, text["locomo" if "date_time" in str(path) else "longmemeval"])
    elif kind == "nest":
        path = draw(st.sampled_from(_paths(data)))
        depth = draw(st.integers(10, 3000))
        return json.dumps(_set(data, path, "@NEST@")).replace('"@NEST@"', "[" * depth + "]" * depth).encode()
    elif kind == "truncate":
        raw = json.dumps(data).encode()
        cut = draw(st.integers(0, len(raw) - 1))
        return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + raw[:cut]
    elif kind == "type":
        path = draw(st.sampled_from([p for p in _paths(data) if p[-1] in _REQUIRED]))
        data = _set(data, path, draw(_NOT_STRING))
    elif kind == "missing":
        path = draw(st.sampled_from([p for p in _paths(data) if p[-1] in _REQUIRED]))
        node = data
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    elif kind == "duplicate":
        data = data + copy.deepcopy(data)
    else:  # NaN or Infinity where the gold answer is
        return json.dumps(_set(data, (0, "qa", 0, "answer") if id_key == "sample_id" else (0, "answer"),
                               draw(st.sampled_from([math.nan, math.inf, -math.inf])))).encode()
    return json.dumps(data).encode()


_REQUIRED = {"sample_id", "speaker_a", "speaker_b", "dia_id", "speaker", "text", "question", "question_id",
             "question_type", "question_date", "content", "role", "session_1_date_time"}


def _one_line_error(argv: list[str]) -> str:
    err = io.StringIO()
    usage = False
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors: its usage text, then its one error line
            code, usage = exc.code, True
    text = err.getvalue()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert code == 2, (argv, text)
    assert "Traceback" not in text and (usage or len(lines) == 1), text
    assert lines[-1].startswith(("memsim: error: ", "memsim ")) and "error: " in lines[-1], text
    return lines[-1]


_LOADERS: dict[str, tuple[Any, ...]] = {
    "locomo": (LOCOMO, ((0, "conversation", "session_1_date_time"),), "sample_id", load_locomo),
    "longmemeval": (LME, ((0, "question_date"), (0, "haystack_dates", 0)), "question_id", load_instances),
}
"""Per loader: a valid file, where its dates are, its id field, the loader."""


@settings(FUZZ, max_examples=80)
@given(st.sampled_from(sorted(_LOADERS)).flatmap(lambda kind: st.tuples(st.just(kind), bad_json(*_LOADERS[kind][:3]))))
def test_loaders_refuse_bad_files_with_one_line(case: tuple[str, bytes]) -> None:
    kind, data = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.json"
        path.write_bytes(data)
        with pytest.raises(UserError) as err:
            _LOADERS[kind][3](path)
        assert str(path) in str(err.value)
        assert "error" in _one_line_error(["static", kind, "--data", str(path), "--out", f"{tmp}/out"])


@FUZZ
@given(st.sampled_from(["locomo", "longmemeval"]), st.text(min_size=1, max_size=8))
def test_lone_surrogates_never_crash_a_loader(kind: str, around: str) -> None:
    """``\\ud800`` in a turn: refused by the LoCoMo loader; LongMemEval's parser reads a replacement character or refuses."""
    text = around + "\ud800" + around
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.json"
        if kind == "locomo":
            path.write_text(json.dumps(_set(LOCOMO, (0, "conversation", "session_1", 0, "text"), text)))
            with pytest.raises(UserError, match="not valid Unicode"):
                load_locomo(path)
        else:
            path.write_text(json.dumps(_set(LME, (0, "haystack_sessions", 0, 0, "content"), text)))
            try:
                (inst,) = load_instances(path)
            except UserError as exc:  # some surrogates reach the parser as bytes that are not UTF-8
                assert str(path) in str(exc)
            else:
                inst.sessions[0].turns[0].content.encode("utf-8")  # whatever it reads is writable text


def test_small_loader_items(tmp_path: Path) -> None:
    """A BOM is taken; duplicate question ids refused; a folder or a device as --data says what it is."""
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(LME).encode())
    assert [i.question_id for i in load_instances(bom)] == ["q1"]
    dup = tmp_path / "dup.json"
    dup.write_text(json.dumps(LME + LME))
    with pytest.raises(UserError, match="duplicate question_id 'q1'"):
        load_instances(dup)
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps(_set(LOCOMO, (0, "qa", 0, "answer"), math.nan)))
    with pytest.raises(UserError, match="NaN is not a JSON value"):
        load_locomo(nan)
    assert "is a directory" in _one_line_error(["static", "longmemeval", "--data", str(tmp_path)])
    assert "not a regular file" in _one_line_error(["static", "longmemeval", "--data", "/dev/null"])
    assert "is a directory" in _one_line_error(["static", "locomo", "--data", str(tmp_path)])


CONFIG = """
[scenario]
name = "persona"
users = 2
months = 0.5

[run]
seed = 0
systems = ["bm25"]
"""
_BAD_NUMBER = st.one_of(st.integers(max_value=-1), st.integers(min_value=10**7, max_value=10**12),
                        st.sampled_from([math.inf, -math.inf, math.nan]), st.text(alphabet="abcxyz", min_size=1, max_size=5),
                        st.lists(st.integers(0, 3), min_size=1, max_size=2))
_NUMERIC = ["users", "months", "sessions_per_week", "turns_per_session", "questions_per_week", "facts_per_session",
            "deletion_rate"]


def _toml(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return json.dumps(value)


@FUZZ
@given(st.one_of(
    st.tuples(st.just("scenario"), st.sampled_from(_NUMERIC), _BAD_NUMBER),
    st.tuples(st.just("run"), st.sampled_from(["seed", "k", "maintenance_every_hours", "feedback_delay_hours"]),
              _BAD_NUMBER),
    st.tuples(st.just("run"), st.just("systems"),
              st.sampled_from([["naive:nosuch=1"], ["nosuch"], ["bm25:k1=maybe"], [3], "bm25"])),
    st.tuples(st.just("run"), st.just("control"), st.sampled_from(["nosuch", "naive+nothing", ""])),
    st.tuples(st.just("top"), st.sampled_from(["run", "load", "scenario"]), st.sampled_from(['"fast"', "3", "[1]"])),
))
def test_config_reader_and_run_refuse_bad_values_with_one_line(case: tuple[str, str, Any]) -> None:
    table, key, value = case
    if table == "top":
        text = f"{key} = {value}\n" + CONFIG.replace(f"[{key}]", f"[ignored_{key}]") if key != "scenario" else (
            f"scenario = {value}\n")
    elif table == "scenario":
        text = CONFIG.replace("[run]", f"{key} = {_toml(value)}\n\n[run]") if key not in ("users", "months") else (
            CONFIG.replace(f"{key} = ", f"{key} = {_toml(value)}\n# ", 1))
    else:
        text = CONFIG.replace("systems = ", "# systems = ") + f"{key} = {_toml(value)}\n" if key == "systems" else (
            CONFIG + f"{key} = {_toml(value)}\n")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "c.toml"
        cfg.write_text(text, encoding="utf-8")
        line = _one_line_error(["run", str(cfg), "--out", f"{tmp}/out"])
        assert str(cfg) in line or "argument" in line, line


@FUZZ
@given(st.one_of(
    st.tuples(st.just("--seed"), st.integers(max_value=-1).map(str)),
    st.tuples(st.just("-k"), st.integers(max_value=0).map(str)),
    st.tuples(st.just("--seed"), st.text(alphabet="xyz.", min_size=1, max_size=4)),
))
def test_bad_flags_are_one_line(flag: tuple[str, str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "c.toml"
        cfg.write_text(CONFIG, encoding="utf-8")
        _one_line_error(["run", str(cfg), "--out", f"{tmp}/out", flag[0] + "=" + flag[1]])


@FUZZ
@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=65536)))
def test_serve_port_out_of_range_is_one_line(port: int) -> None:
    assert "port must be 0..65535" in _one_line_error(["serve", "naive", "--port", str(port)])


def test_missing_prices_and_run_folders_are_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG, encoding="utf-8")
    assert "--prices" in _one_line_error(["run", str(cfg), "--prices", str(tmp_path / "nope.json")])
    for command in ("erasure", "cost"):
        assert "no such run folder" in _one_line_error([command, str(tmp_path / "nope")])
        (tmp_path / "broken").mkdir(exist_ok=True)
        (tmp_path / "broken" / "spec.json").write_text("[1]")
        assert "broken" in _one_line_error([command, str(tmp_path / "broken")])


@pytest.mark.parametrize(
    ("exc", "says"),
    [
        (OSError(errno.ENOSPC, "No space left on device", "/out/probes.parquet"), "/out/probes.parquet: no space left"),
        (PermissionError(errno.EACCES, "Permission denied", "/ro"), "/ro: Permission denied"),
        (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
        (MemoryError(), "out of memory"),
        (OverflowError("date value out of range"), "out of range: date value out of range"),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), "not valid Unicode"),
        (json.JSONDecodeError("Expecting value", "x", 0), "not valid JSON"),
    ],
)
def test_expected_failures_become_one_line(exc: BaseException, says: str) -> None:
    message = expected_failure(exc)
    assert message is not None and says in message and "\n" not in message


def test_a_pydantic_error_is_one_line_without_links() -> None:
    from pydantic import BaseModel, ValidationError

    class M(BaseModel):
        seed: int

    with pytest.raises(ValidationError) as err:
        M(seed="x")  # type: ignore[arg-type]
    message = expected_failure(err.value)
    assert message is not None and message.startswith("invalid M.seed:") and "http" not in message
    assert expected_failure(ZeroDivisionError()) is None and expected_failure(KeyError("x")) is None


# --- world files and whole configs, generated -----------------------------------------------------------


_WORLD_CONFIG = """[scenario]
name = "persona"
users = 2
months = 1.0
sessions_per_week = 2.0
questions_per_week = 3.0
deletion_rate = 20.0

[run]
seed = 4
systems = ["bm25"]
"""
_WORLD: list[Any] = []


def _world() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and event rows of a small valid world, made once per session."""
    if not _WORLD:
        from memsim.analysis.profile import config_stream
        from memsim.scenarios.world_file import write_world

        with tempfile.TemporaryDirectory() as tmp:
            cfg = Path(tmp) / "c.toml"
            cfg.write_text(_WORLD_CONFIG, encoding="utf-8")
            _, stream, seed = config_stream(cfg)
            path = Path(tmp) / "w.jsonl"
            write_world(path, stream, source={"name": "persona", "seed": seed})
            lines = path.read_text(encoding="utf-8").splitlines()
        _WORLD.append((json.loads(lines[0]), [json.loads(line) for line in lines[1:]]))
    return copy.deepcopy(_WORLD[0])


_JSON_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=False),
                        st.text(max_size=12), st.lists(st.integers(), max_size=2),
                        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
_ANY_TEXT = st.text(alphabet=st.characters(codec=None, categories=["L", "N", "Zs", "P", "Cs"]), max_size=40)


def _leaves(row: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Paths to every field of an event row and of its turns (the ``type`` aside)."""
    out: list[tuple[Any, ...]] = [(k,) for k in row if k != "type"]
    for i, turn in enumerate(row.get("turns") or ()):
        out += [("turns", i, k) for k in turn]
    return out


@st.composite
def lying_world(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A world changed by one or two drawn edits (most make it lie; some leave it valid)."""
    header, rows = _world()
    for _ in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(["value", "missing", "text", "id", "swap", "duplicate", "time", "header"]))
        i = draw(st.integers(0, len(rows) - 1))
        path = draw(st.sampled_from(_leaves(rows[i])))
        node = rows[i]
        for key in path[:-1]:
            node = node[key]
        ids = [t["turn_id"] for r in rows for t in r.get("turns") or ()] + ["nope", ""]
        if kind == "value":
            node[path[-1]] = draw(_JSON_VALUE)
        elif kind == "missing":
            del node[path[-1]]
        elif kind == "text":
            node[path[-1]] = draw(_ANY_TEXT)
        elif kind == "id":
            key = draw(st.sampled_from([k for k in ("evidence", "superseded", "turn_ids", "user_id", "reask_of")
                                        if k in rows[i]] or ["user_id"]))
            rows[i][key] = [draw(st.sampled_from(ids))] if key in ("evidence", "superseded", "turn_ids") else (
                draw(st.sampled_from(["u00", "u01", "nobody", ids[0]])))
        elif kind == "swap":
            j = draw(st.integers(0, len(rows) - 1))
            rows[i], rows[j] = rows[j], rows[i]
        elif kind == "duplicate":
            rows.insert(i, copy.deepcopy(rows[i]))
        elif kind == "time":
            year = draw(st.integers(1, 9999))
            zone = draw(st.sampled_from(["+00:00", "", "Z"]))
            rows[i]["time"] = f"{year:04d}-01-0{draw(st.integers(1, 9))}T00:00:00{zone}"
        else:
            key = draw(st.sampled_from(["start", "end", "totals", "source", "sha256", "format"]))
            header[key] = draw(_JSON_VALUE)
    return header, rows


@settings(FUZZ, max_examples=60)
@given(lying_world())
def test_world_files_are_refused_with_one_line_or_read_true(world: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    """A generated world (with a correct hash of its body) reads only when it tells the truth."""
    import hashlib

    from memsim.scenarios.world_file import read_world
    from memsim.sim.events import Deletion, Question, Session

    header, rows = world
    body = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode()
    if isinstance(header, dict) and header.get("sha256") is not None and isinstance(header.get("sha256"), str):
        header = {**header, "sha256": hashlib.sha256(body).hexdigest()}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.jsonl"
        path.write_bytes((json.dumps(header) + "\n").encode() + body)
        try:
            _, stream = read_world(path)
        except UserError as exc:
            message = str(exc)
            assert "\n" not in message and str(path) in message and len(message) < 2_000, message
            cfg = Path(tmp) / "c.toml"
            cfg.write_text(f'[scenario]\nname = "world"\ndata = "{path}"\n', encoding="utf-8")
            assert str(path) in _one_line_error(["scenario", "stats", str(cfg)])
            return
    # Read: then it is true to itself (ordered; each reference to a turn said earlier by the same user).
    said: dict[str, tuple[str, Any]] = {}
    last = None
    for e in stream.events:
        assert last is None or e.time >= last
        last = e.time
        if isinstance(e, Session):
            said.update({t.turn_id: (e.user_id, t.created_at) for t in e.turns})
        refs = (e.evidence + e.superseded) if isinstance(e, Question) else e.turn_ids if isinstance(e, Deletion) else ()
        for tid in refs:
            assert said[tid][0] == e.user_id and said[tid][1] <= e.time


_CONFIG_VALUE = st.one_of(st.integers(-5, 5), st.integers(-2**70, 2**70), st.floats(-1e6, 1e6),
                          st.sampled_from([0, 0.5, 1, 2, 1000, 10**9, math.inf, math.nan, "", "x", True]))
_SCENARIO_KEYS = _NUMERIC + ["change_rate", "reask_rate", "topic_skew"]
_RUN_KEYS = ["seed", "k", "feedback_delay_hours", "maintenance_every_hours", "n_boot"]


@settings(FUZZ, max_examples=40)
@given(st.dictionaries(st.sampled_from(_SCENARIO_KEYS), _CONFIG_VALUE, max_size=3),
       st.dictionaries(st.sampled_from(_RUN_KEYS), _CONFIG_VALUE, max_size=2))
def test_generated_configs_are_refused_with_one_line_or_within_bounds(scenario: dict[str, Any], run: dict[str, Any]) -> None:
    """A whole config of drawn values: a one-line error naming the file and key, or a spec within the bounds."""
    from memsim.analysis.pipeline import spec_from_config
    from memsim.scenarios.config import load_config

    text = '[scenario]\nname = "persona"\n' + "".join(f"{k} = {_toml(v)}\n" for k, v in scenario.items())
    text += '\n[run]\nsystems = ["bm25"]\n' + "".join(f"{k} = {_toml(v)}\n" for k, v in run.items())
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "c.toml"
        cfg.write_text(text, encoding="utf-8")
        try:
            spec = spec_from_config(load_config(cfg))
        except UserError as exc:
            message = str(exc)
            assert "\n" not in message and str(cfg) in message and len(message) < 2_000, message
            assert any(k in message for k in [*scenario, *run]), message
            return
    args = spec.scenario.args
    assert 0 <= float(args.get("users", 1)) <= 100_000 and 0 <= float(args.get("months", 1)) <= 240
    assert all(math.isfinite(float(v)) for v in args.values() if isinstance(v, (int, float)))
    assert 1 <= spec.k <= 10_000 and spec.seed >= 0
