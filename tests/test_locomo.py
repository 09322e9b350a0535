"""LoCoMo loader: quirks on small fixtures, counts on the real file, command-line errors."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from memsim.analysis import cli
from memsim.analysis.cli import static as static_cli
from memsim.analysis.bench import bench_locomo
from memsim.analysis.pipeline import execute, make_spec
from memsim.analysis.summary import summarise_folder
from memsim.memory.base import render_turn
from memsim.memory.embed import Embedder, HashEmbedder
from memsim.memory.registry import Resources, SystemSpec
from memsim.core.errors import UserError
from memsim.sim.events import Question, Session
from memsim.static_benchmarks.locomo import (
    CATEGORY_LABELS,
    QUESTION_DELAY,
    clean_evidence,
    load_locomo,
    locomo_episodes,
    parse_locomo_date,
)

FIXTURES = Path(__file__).parent / "fixtures"
QUIRKS = FIXTURES / "locomo_quirks.json"
REPO = Path(__file__).resolve().parents[1]


# --- evidence cleaning -------------------------------------------------------------------------

KNOWN = {"D8:6", "D9:17", "D11:26", "D9:1", "D4:4", "D4:6", "D30:5", "D1:1"}


@pytest.mark.parametrize(
    ("raw", "ids", "counts"),
    [
        (["D8:6; D9:17"], ["D8:6", "D9:17"], {"evidence_entries_split": 1}),
        (["D:11:26"], ["D11:26"], {"evidence_ids_reformatted": 1}),
        (["D9:1 D4:4 D4:6"], ["D9:1", "D4:4", "D4:6"], {"evidence_entries_split": 1}),
        (["D"], [], {"evidence_ids_unusable": 1}),
        (["D30:05"], ["D30:5"], {"evidence_ids_reformatted": 1}),
        (["D1:1", "D77:3"], ["D1:1"], {"evidence_ids_missing_turn": 1}),
        (["D1:1", "D1:1"], ["D1:1"], {"evidence_ids_duplicate": 1}),
        ([], [], {}),
    ],
)
def test_clean_evidence_repairs_each_quirk(raw: list[str], ids: list[str], counts: dict[str, int]) -> None:
    got, got_counts = clean_evidence(raw, KNOWN)
    assert got == ids
    expected = {"evidence_entries": len(raw), **counts}
    assert {k: v for k, v in got_counts.items() if v} == {k: v for k, v in expected.items() if v}


def test_parse_locomo_date_is_utc_and_handles_am_pm() -> None:
    assert parse_locomo_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert parse_locomo_date("12:19 am on 4 January, 2024") == datetime(2024, 1, 4, 0, 19, tzinfo=timezone.utc)
    with pytest.raises(ValueError):
        parse_locomo_date("yesterday")


# --- the quirks fixture ------------------------------------------------------------------------


def test_quirks_fixture_summary_counts_every_quirk() -> None:
    ds = load_locomo(QUIRKS)
    s = ds.summary
    assert (s.conversations, s.sessions, s.turns, s.questions) == (2, 3, 9, 9)
    assert dict(s.questions_per_category) == {1: 1, 2: 1, 3: 2, 4: 3, 5: 2}
    assert s.turns_with_image == 2
    assert s.answers_int == 1
    assert s.answers_from_adversarial == 1
    assert s.evidence_entries == 10
    assert s.evidence_entries_split == 2
    assert s.evidence_ids_reformatted == 2
    assert s.evidence_ids_unusable == 1
    assert s.evidence_ids_missing_turn == 1
    assert s.evidence_ids_duplicate == 1
    assert s.questions_empty_evidence == 1
    assert s.questions_without_usable_evidence == 2
    assert s.orphan_session_dates == 1
    assert json.loads(json.dumps(s.to_json()))["questions_per_category"] == {"1": 1, "2": 1, "3": 2, "4": 3, "5": 2}


def test_quirks_fixture_records() -> None:
    ds = load_locomo(QUIRKS)
    conv = ds.conversations[0]
    # Sessions come in number order although the file lists session_2 first.
    assert [s.number for s in conv.sessions] == [1, 2]
    assert conv.sessions[0].started_at == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert conv.sessions[0].date_text == "1:56 pm on 8 May, 2023"
    t = conv.sessions[0].turns[1]
    assert (t.turn_id, t.speaker) == ("conv-a:D1:2", "Bob")
    assert t.img_urls == ("https://example.invalid/rex.jpg",)
    assert t.blip_caption == "a photo of a brown dog on grass"
    assert conv.sessions[1].turns[3].img_urls == ()

    qs = {q.question_id: q for q in ds.questions}
    assert qs["conv-a:q0"].evidence == ("conv-a:D1:3",)
    assert qs["conv-a:q1"].answer == "2023" and qs["conv-a:q1"].answer_field == "answer"
    assert qs["conv-a:q1"].evidence == ("conv-a:D2:1", "conv-a:D2:3")
    assert qs["conv-a:q2"].evidence == ("conv-a:D1:3", "conv-a:D2:4")
    assert qs["conv-a:q2"].raw_evidence == ("D:1:3", "D2:04")
    adv = qs["conv-a:q3"]
    assert (adv.answer, adv.answer_field, adv.adversarial_answer, adv.category) == (
        "Rex",
        "adversarial_answer",
        "Rex",
        5,
    )
    assert qs["conv-a:q4"].evidence == () and qs["conv-a:q5"].evidence == ()
    assert qs["conv-a:q6"].evidence == ("conv-a:D2:3",)
    both = qs["conv-b:q1"]
    assert (both.answer, both.answer_field, both.adversarial_answer) == ("No", "answer", "Yes")
    assert len(ds.sha256) == 64


def _parts(episode):
    return (
        [e for e in episode.events if isinstance(e, Session)],
        [e for e in episode.events if isinstance(e, Question)],
    )


def test_episodes_turns_questions_and_exclusions() -> None:
    ds = load_locomo(QUIRKS)
    convs = locomo_episodes(ds)
    assert [c.episode_id for c in convs] == ["conv-a", "conv-b"]
    sessions, questions = _parts(convs[0])
    first = sessions[0].turns[0]
    assert render_turn(first) == "1:56 pm on 8 May, 2023 | Ann: I adopted a puppy named Rex today."
    assert first.user_id == "conv-a" and first.created_at == sessions[0].time
    # Captions are off by default and appended on request.
    assert "[image:" not in sessions[0].turns[1].text
    captioned = _parts(locomo_episodes(ds, captions=True)[0])[0][0].turns[1]
    assert captioned.text == "Congrats! What breed is Rex? [image: a photo of a brown dog on grass]"
    excluded = {q.question_id: q.excluded for q in questions}
    assert excluded == {
        "conv-a:q0": None,
        "conv-a:q1": None,
        "conv-a:q2": None,
        "conv-a:q3": "adversarial",
        "conv-a:q4": "no_usable_evidence",
        "conv-a:q5": "no_usable_evidence",
        "conv-a:q6": None,
    }
    last = datetime(2023, 6, 19, 10, 4, tzinfo=timezone.utc)
    assert all(q.time == last + QUESTION_DELAY for q in questions)
    assert QUESTION_DELAY > timedelta(0)
    # Adversarial questions are judged against an empty gold answer; the file's answer is kept aside.
    adv = next(q for q in questions if q.question_id == "conv-a:q3")
    assert adv.gold == "" and adv.kind == "adversarial" and adv.extra["category"] == "5"
    assert len(locomo_episodes(ds, limit_conversations=1)) == 1


def test_category_label_sets() -> None:
    assert CATEGORY_LABELS["locomo"][1] == "multi-hop" and CATEGORY_LABELS["locomo"][4] == "single-hop"
    assert CATEGORY_LABELS["mem0"] == {
        1: "single-hop",
        2: "temporal",
        3: "multi-hop",
        4: "open-domain",
        5: "adversarial",
    }


# --- malformed files ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("locomo_bad_toplevel.json", ["JSON list", "dict"]),
        ("locomo_bad_missing_qa.json", ["record 1 (conv-x)", "'qa'"]),
        ("locomo_bad_category.json", ["record 0 (conv-x) qa[0]", "'category' = 7", "valid: 1, 2, 3, 4, 5"]),
        ("locomo_bad_date.json", ["'session_1_date_time'", "'yesterday'", "1:56 pm on 8 May, 2023"]),
        ("locomo_bad_turn.json", ["record 0 (conv-x) session_1[0]", "missing field 'text'"]),
        ("locomo_bad_evidence.json", ["qa[0]", "'evidence' must be list"]),
        ("locomo_bad_syntax.json", ["not valid JSON"]),
    ],
)
def test_malformed_file_names_record_and_field(name: str, fragments: list[str]) -> None:
    with pytest.raises(UserError) as info:
        load_locomo(FIXTURES / name)
    message = str(info.value)
    assert "\n" not in message
    assert name in message
    for fragment in fragments:
        assert fragment in message


def test_missing_and_directory_paths(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such LoCoMo data file"):
        load_locomo(tmp_path / "nope.json")
    with pytest.raises(UserError, match="is a directory"):
        load_locomo(tmp_path)


# --- command-line errors -----------------------------------------------------------------------


def _cli_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("k", ["0", "-3"])
def test_cli_rejects_nonpositive_k(k: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Checked against its range when the arguments are parsed (argparse exits 2 with its usage line).
    with pytest.raises(SystemExit) as exc:
        cli.main(["static", "locomo", "--data", str(QUIRKS), "-k", k])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument -k: must be 1..10,000" in err and repr(k) in err and "Traceback" not in err


def test_cli_unknown_system_lists_known(capsys: pytest.CaptureFixture[str]) -> None:
    line = _cli_error(["static", "locomo", "--data", str(QUIRKS), "--system", "nosuch"], capsys)
    assert "'nosuch'" in line and "naive" in line


def test_cli_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _cli_error(["static", "locomo", "--data", str(tmp_path / "missing.json")], capsys)
    assert "missing.json" in line and "no such" in line


def test_cli_not_json_and_bad_shape(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "run"
    line = _cli_error(
        ["static", "locomo", "--data", str(FIXTURES / "locomo_bad_syntax.json"), "--out", str(out)], capsys
    )
    assert "not valid JSON" in line
    line = _cli_error(
        ["static", "locomo", "--data", str(FIXTURES / "locomo_bad_category.json"), "--out", str(out)], capsys
    )
    assert "conv-x" in line and "category" in line
    assert not out.exists()


# --- the real file -----------------------------------------------------------------------------


def test_real_file_counts(locomo_path: Path) -> None:
    ds = load_locomo(locomo_path)
    s = ds.summary
    assert (s.conversations, s.sessions, s.turns, s.questions) == (10, 272, 5882, 1986)
    assert dict(s.questions_per_category) == {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}
    assert len(ds.questions) == 1986
    assert sum(len(x.turns) for c in ds.conversations for x in c.sessions) == 5882
    # The known quirks of locomo10.json, each met and counted.
    assert s.answers_int == 6
    assert s.answers_from_adversarial == 444
    assert s.evidence_entries_split == 4
    assert s.evidence_ids_reformatted == 2  # "D:11:26" and "D30:05"
    assert s.evidence_ids_unusable == 1  # "D"
    assert s.evidence_ids_missing_turn == 2
    assert s.questions_empty_evidence == 4
    assert s.orphan_session_dates == 16
    q = next(q for q in ds.questions if q.raw_evidence == ("D30:05",))
    assert q.evidence == ("conv-50:D30:5",)


# --- full command with the naive system ---------------------------------------------------------


def _hash_resources(args) -> Resources:
    return Resources(rng=np.random.default_rng(0), embedder_factory=lambda: HashEmbedder(64))


def test_cli_run_writes_recomputable_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(static_cli, "_resources", _hash_resources)
    out = tmp_path / "run"
    argv = ["static", "locomo", "--data", str(QUIRKS), "--system", "naive", "-k", "3", "--out", str(out), "--no-progress"]
    code = cli.main([*argv, "--labels", "mem0"])
    stdout = capsys.readouterr().out
    assert code == 0
    assert "orphan" not in stdout and "session dates without a session (ignored): 1" in stdout
    assert "1 single-hop" in stdout and "4 open-domain" in stdout and "overall" in stdout
    spec = json.loads((out / "spec.json").read_text())
    assert spec["kind"] == "static" and spec["systems"][0]["name"] == "naive"
    # A true k retrieval (#27): the systems are asked for k, and only the cut-offs within k are scored.
    assert spec["k"] == 3 and spec["retrieve_k"] == 3 and spec["ks"] == [1, 3]
    assert spec["scenario"]["args"]["protocol"] == "mem0" and spec["scenario"]["args"]["answer_excluded"] == ["adversarial"]
    assert "protocol mem0" in stdout
    assert spec["scenario_meta"]["sha256"] == load_locomo(QUIRKS).sha256
    assert json.loads((out / "run.json").read_text())["embedder"] == "hash-bow-64"
    frame = pl.read_parquet(out / "probes.parquet")
    assert frame.height == 9
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics == json.loads(json.dumps(summarise_folder(out).metrics))
    overall = metrics["systems"]["naive"]["overall"]
    assert overall["excluded"] == {"adversarial": 2, "no_usable_evidence": 2}
    assert spec["scenario_meta"]["load_summary"]["evidence_ids_unusable"] == 1
    row = frame.filter(pl.col("question_id") == "conv-a:q1").row(0, named=True)
    assert row["evidence_ids"] == ["conv-a:D2:1", "conv-a:D2:3"]
    assert row["kind"] == "temporal" and len(row["retrieved_ids"]) == 3
    # Naive stores every turn: with 7 and 2 turns, a top-50 retrieval holds every gold turn and all 7 turns.
    out50 = tmp_path / "run50"
    assert cli.main(["static", "locomo", "--data", str(QUIRKS), "-k", "50", "--out", str(out50), "--no-progress"]) == 0
    capsys.readouterr()
    assert json.loads((out50 / "spec.json").read_text())["retrieve_k"] == 50
    overall50 = json.loads((out50 / "metrics.json").read_text())["systems"]["naive"]["overall"]
    assert overall50["scores"]["recall_all@50"]["mean"] == 1.0
    row50 = pl.read_parquet(out50 / "probes.parquet").filter(pl.col("question_id") == "conv-a:q1").row(0, named=True)
    assert len(row50["retrieved_ids"]) == 7
    assert all(src[0].startswith("conv-a:") for src in row["retrieved_sources"])
    # The same command again resumes a finished run: nothing is played, the figures stand.
    before = (out / "metrics.json").read_bytes()
    assert cli.main(argv) == 0
    assert (out / "metrics.json").read_bytes() == before
    capsys.readouterr()
    # Another spec in the same folder is refused before any work.
    line = _cli_error(["static", "locomo", "--data", str(QUIRKS), "-k", "5", "--out", str(out)], capsys)
    assert "another spec" in line and "k" in line


def test_bench_cold_then_warm_counts(tmp_path: Path) -> None:
    ds = load_locomo(QUIRKS)
    f = bench_locomo(QUIRKS, SystemSpec("naive"), k=5, make_embedder=lambda _: HashEmbedder(32))
    cold, warm = f["cold"], f["warm"]
    # Every turn and scored question is asked for up front, by the shared pre-step and by the system
    # (the hash embedder keeps no cache, so it computes each request); both phases ask alike. The four
    # excluded questions (2 adversarial, 2 without usable evidence) are not: nothing retrieves for them.
    assert cold["texts_requested"] >= 3 * (ds.summary.turns + ds.summary.questions - 4) - 2
    assert cold["texts_requested"] == warm["texts_requested"]
    assert cold["questions"] == warm["questions"] == 9
    assert cold["embedded_per_s"] is not None
    assert 0 <= cold["retrieve_p50_ms"] <= cold["retrieve_p95_ms"]


@pytest.mark.slow
def test_bench_real_embedder_warm_run_is_all_cache_hits(tmp_path: Path) -> None:
    f = bench_locomo(QUIRKS, SystemSpec("naive"), k=5, out_dir=tmp_path / "warm")
    cold, warm = f["cold"], f["warm"]
    assert cold["texts_embedded"] > 0
    # The warm run makes the same calls; each text the cold run computed or found is now a hit.
    assert warm["texts_embedded"] == 0
    assert warm["cache_hits"] == cold["cache_hits"] + cold["texts_embedded"]
    assert warm["texts_requested"] == cold["texts_requested"]
    assert f["score"] == json.loads((tmp_path / "warm" / "metrics.json").read_text())["systems"]["naive"]["mean"]


@pytest.mark.slow
def test_real_file_one_conversation_with_real_embedder(minilm: Embedder, locomo_path: Path) -> None:
    ds = load_locomo(locomo_path)
    spec = make_spec(
        "static", "locomo", {"data": str(locomo_path), "limit_conversations": 1}, [SystemSpec("naive")],
        k=10, retrieve_k=50, scorers=("evidence",), control=None, n_boot=200,
    )
    run = execute(spec, out_dir=None, resources=Resources(rng=np.random.default_rng(0), embedder_factory=lambda: minilm))
    first = ds.conversations[0].sample_id
    n_questions = sum(1 for q in ds.questions if q.sample_id == first)
    assert run.result.probes.height == n_questions
    overall = run.summary.metrics["systems"]["naive"]["overall"]
    assert overall["excluded"]["adversarial"] == sum(
        1 for q in ds.questions if q.sample_id == first and q.category == 5
    )
    scores = {k: v["mean"] for k, v in overall["scores"].items()}
    # More memories can only find more evidence; dense retrieval over one
    # conversation finds most single turns by 50.
    assert scores["recall_any@1"] <= scores["recall_any@10"] <= scores["recall_any@50"]
    assert scores["recall_all@50"] >= scores["recall_all@10"]
    assert scores["recall_any@50"] > 0.7
    assert run.result.info["embedder"] == "all-MiniLM-L6-v2+onnx"  # the default backend

