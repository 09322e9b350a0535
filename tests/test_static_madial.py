"""MADial-Bench's memory recall: the loader, the published figures, and runs on the real files.

Small files written here check the loader's reading and its refusals; the
published figures are checked on rankings worked by hand; the real files
(``memsim data fetch madial-en madial-en-memory``) are played with the real
embedder and compared with the published pipeline recomputed here from the
same vectors (cosine over the dialogue's user's memories, top 20).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from memsim.analysis import cli
from memsim.analysis.cli import static as static_cli
from memsim.core.errors import UserError
from memsim.memory.base import Retrieved, render_turn
from memsim.memory.embed import Embedder, HashEmbedder
from memsim.memory.registry import Resources
from memsim.scenarios.static_madial import (
    MADIAL_KS,
    MadialScorer,
    load_madial,
    madial_episodes,
    memory_text,
    published_figures,
    ranked_sources,
)
from memsim.sim.events import Question, Session

AT = datetime(2024, 1, 1, tzinfo=timezone.utc)
from tests.conftest import require_madial

MEMORIES = [
    {"1": {"time": "2023-12-25", "scene": "Activity", "emotion": "Happy", "event": "Bart danced at the party."}},
    {"2": {"time": "2023-03-07", "scene": "Preferences", "emotion": "Happy", "event": "Bart tried mango ice cream."}},
    {"3": {"time": "2023-05-01", "scene": "Activity", "emotion": "Sad", "event": "Lisa lost her kite at the beach."}},
    {"4": {"time": "2024-01-02", "scene": "Others", "emotion": "Anxious", "event": "Lisa had a science exam."}},
]
DIALOGUES = [
    {"dialogue": ["<BOD>\n", '<Bart>: "I will dance again!"\n', '<Assistant>: "Like at the party?"\n', "<EOD>\n"],
     "test-turn": [2], "relevant-id": [1], "user-id": 1},
    {"dialogue": ["<BOD>\n", '<Lisa>: "Exams again."\n', '<Assistant>: "How is it going?"\n',
                  '<Lisa>: "I am nervous."\n', '<Assistant>: "You passed the science one."\n', "<EOD>\n"],
     "test-turn": [4, 2], "relevant-id": [4, 3], "user-id": 2},
]


def _write(tmp_path: Path, dialogues: list[Any] = DIALOGUES, memories: list[Any] = MEMORIES) -> tuple[Path, Path]:
    d, m = tmp_path / "dialogue.json", tmp_path / "memory.json"
    d.write_text("".join(json.dumps(r) + "\n" for r in dialogues), encoding="utf-8")
    m.write_text("".join(json.dumps(r) + "\n" for r in memories), encoding="utf-8")
    return d, m


def test_each_dialogue_is_an_episode_over_its_own_users_memories(tmp_path: Path) -> None:
    data = load_madial(*_write(tmp_path))
    assert data.names == {1: "Bart", 2: "Lisa"}  # the English file has no user-id: the event's name says whose
    assert {i: m.user_id for i, m in data.memories.items()} == {1: 1, 2: 1, 3: 2, 4: 2}
    first, second = madial_episodes(data)
    sessions = [e for e in second.events if isinstance(e, Session)]
    (question,) = [e for e in second.events if isinstance(e, Question)]
    # Lisa's pool alone, in date order, one memory per session on its date; the question after the last
    assert [s.turns[0].text for s in sessions] == [
        "{'scene': 'Activity', 'emotion': 'Sad', 'event': 'Lisa lost her kite at the beach.'}",
        "{'scene': 'Others', 'emotion': 'Anxious', 'event': 'Lisa had a science exam.'}",
    ]
    assert [s.time.date().isoformat() for s in sessions] == ["2023-05-01", "2024-01-02"]
    assert question.time.date().isoformat() == "2024-01-03" and sessions[0].turns[0].speaker == "Lisa"
    # the query is every line before the first test turn, as published; the gold is that turn
    assert question.text == '<BOD>\n<Lisa>: "Exams again."\n<Assistant>: "How is it going?"\n<Lisa>: "I am nervous."\n'
    assert question.gold == '<Assistant>: "You passed the science one."'
    assert question.evidence == ("madial-d2:m4", "madial-d2:m3") and question.kind == "Others"
    assert len(first.events) == 3 and first.episode_id == "madial-d1"
    assert sessions[0].turns[0].metadata["verbatim"] is True  # stored as the published script indexes it
    dated = next(madial_episodes(data, memory_format="dated"))
    assert render_turn(dated.events[0].turns[0]) == "2023-03-07 12:00 | Bart: Bart tried mango ice cream."


@pytest.mark.parametrize(
    ("dialogues", "memories", "message"),
    [
        ([DIALOGUES[0], "oops"], MEMORIES, "dialogue.json: line 2: expected a JSON object, got str"),
        ([{**DIALOGUES[0], "test-turn": [9]}], MEMORIES, "line 1: field 'test-turn': [9] is not a line of its 4-line"),
        ([{**DIALOGUES[0], "relevant-id": [3]}, DIALOGUES[1]], MEMORIES,
         "dialogue.json: line 1: relevant-id 3 is a memory of user 2, not of the dialogue's user 1"),
        ([{**DIALOGUES[0], "relevant-id": [99]}, DIALOGUES[1]], MEMORIES, "line 1: relevant-id 99 is not in memory.json"),
        ([{k: v for k, v in DIALOGUES[0].items() if k != "user-id"}], MEMORIES, "line 1: missing field(s) user-id"),
        (DIALOGUES, [*MEMORIES, {"5": {"time": "2023-01-01", "scene": "x", "emotion": "x", "event": "Nobody."}}],
         "memory.json: line 5: memory 5: its event names no user of ['Bart', 'Lisa']"),
        (DIALOGUES, [*MEMORIES, {"1": MEMORIES[0]["1"]}], "memory.json: line 5: memory id 1 appears twice"),
        (DIALOGUES, [{"1": {**MEMORIES[0]["1"], "time": "Christmas"}}], "memory 1: field 'time': 'Christmas' is not a date"),
    ],
)
def test_a_file_that_lies_is_refused_naming_file_line_and_field(
    tmp_path: Path, dialogues: list[Any], memories: list[Any], message: str
) -> None:
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        load_madial(*_write(tmp_path, dialogues, memories))


def test_a_line_that_is_not_json_and_a_file_that_is_not_utf8_name_themselves(tmp_path: Path) -> None:
    d, m = _write(tmp_path)
    d.write_text(d.read_text() + "{not json\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"dialogue.json: line 3: not valid JSON"):
        load_madial(d, m)
    d.write_bytes(json.dumps(DIALOGUES[0]).encode("utf-16"))
    with pytest.raises(UserError, match="UTF-16"):
        load_madial(d, m)


def test_the_published_figures_on_rankings_worked_by_hand() -> None:
    gold = {"a", "b", "c"}
    got = published_figures(gold, ["x", "a", "y", "b"], ks=(1, 3, 10))
    assert got["madial_map@1"] == 0.0 and got["madial_mrr@1"] == 0.0 and got["madial_precision@1"] == 0.0
    assert got["madial_map@3"] == pytest.approx((1 / 2) / 3)  # one hit at rank 2, over min(|gold|, 3)
    assert got["madial_mrr@3"] == 0.5 and got["madial_recall@3"] == pytest.approx(1 / 3)
    assert got["madial_precision@3"] == pytest.approx(1 / 3)
    assert got["madial_map@10"] == pytest.approx((1 / 2 + 2 / 4) / 3)
    assert got["madial_precision@10"] == pytest.approx(2 / 10)  # over k, though four were ranked
    # nDCG as published: the ideal is the retrieved hits sorted to the front, not the gold set's
    assert got["madial_ndcg@3"] == pytest.approx((1 / math.log2(3)) / 1.0)
    assert published_figures(gold, ["a", "x"], ks=(3,))["madial_ndcg@3"] == 1.0  # one of three found, yet 1
    assert published_figures(gold, [], ks=(1,)) == {f"madial_{f}@1": 0.0 for f in ("map", "mrr", "ndcg", "recall", "precision")}


def test_the_scorer_reads_the_memory_ids_from_provenance_in_rank_order() -> None:
    def r(*ids: str) -> Retrieved:
        return Retrieved("m", "text", 1.0, AT, tuple(ids))

    # a merged memory contributes its sources at its rank; an id seen above is not counted again
    assert ranked_sources([r("x"), r("a", "x"), r("b")]) == ["x", "a", "b"]
    q = Question("q", "u", AT, "query", "", "Activity", ("a", "b"))
    scores = MadialScorer().score(q, [r("x"), r("a", "x"), r("b")], ks=MADIAL_KS)
    assert scores["madial_recall@3"] == 1.0 and scores["madial_mrr@1"] == 0.0 and scores["madial_mrr@3"] == 0.5
    assert set(scores) == set(MadialScorer().columns(MADIAL_KS))
    assert all(math.isnan(v) for v in MadialScorer().score(
        Question("q", "u", AT, "query", "", "Activity", ()), [r("a")], ks=(1,)).values())


def _static(args: list[str], out: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
            *, hashed: bool = True) -> str:
    if hashed:
        monkeypatch.setattr(static_cli, "_resources", lambda a: Resources(embedder_factory=lambda: HashEmbedder(64)))
    assert cli.main(["static", "madial", *args, "--out", str(out), "--no-progress"]) == 0
    return capsys.readouterr().out


def test_a_small_file_plays_and_a_reader_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    d, m = _write(tmp_path)
    text = _static(["--data", str(d), "--memory", str(m), "--memory-format", "dated"], tmp_path / "run", monkeypatch, capsys)
    assert "2 dialogues, 4 memories (Bart: 2, Lisa: 2)" in text and "madial_recall" in text
    spec = json.loads((tmp_path / "run" / "spec.json").read_text())
    assert spec["scenario"]["args"]["memory"] == str(m.resolve()) and spec["scenario"]["args"]["memory_format"] == "dated"
    assert spec["metric"] == "madial_recall@10" and spec["ks"] == [1, 3, 5, 10] and spec["retrieve_k"] == 20
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    # a pool of two memories: both are always in the top 10, so every gold memory is found
    assert metrics["systems"]["naive"]["overall"]["scores"]["madial_recall@10"]["mean"] == 1.0
    assert cli.main(["static", "madial", "--data", str(d), "--memory", str(m), "--reader", "short",
                     "--out", str(tmp_path / "r2"), "--no-progress"]) == 2
    assert "memsim runs its memory recall stage only" in capsys.readouterr().err


def _published(dialogue: Path, memory: Path) -> list[dict[str, float]]:
    """The published pipeline recomputed: cosine of each dialogue's query with its user's memories, top 20, figures."""
    data = load_madial(dialogue, memory)
    embedder = Embedder()
    rows = []
    for d in data.dialogues:
        pool = sorted(i for i, m in data.memories.items() if m.user_id == d.user_id)
        vectors = embedder.encode([memory_text(data.memories[i], "official") for i in pool])
        query = embedder.encode(["".join(d.lines[:d.test_turns[0]])])[0]
        order = np.argsort(-(vectors @ query), kind="stable")[:20]
        rows.append(published_figures(set(d.relevant), [pool[i] for i in order]))
    return rows


def test_the_real_files_play_and_match_the_published_pipeline_recomputed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dialogue, memory = require_madial()
    data = load_madial(dialogue, memory)
    assert (len(data.dialogues), len(data.memories)) == (160, 160) and data.names == {1: "Bart", 2: "Lisa"}
    assert sum(len(d.relevant) for d in data.dialogues) == 405
    text = _static(["--data", str(dialogue), "--memory", str(memory)], tmp_path / "run", monkeypatch, capsys, hashed=False)
    assert "160 dialogues, 160 memories (Bart: 76, Lisa: 84)" in text and "160 episodes resampled" in text
    # the 160 memories are every episode's pool, embedded once and counted once (with the 160 queries)
    assert ": 320 distinct texts, " in text
    overall = json.loads((tmp_path / "run" / "metrics.json").read_text())["systems"]["naive"]["overall"]["scores"]
    expected = _published(dialogue, memory)
    for column in expected[0]:
        assert overall[column]["mean"] == pytest.approx(float(np.mean([r[column] for r in expected])), abs=1e-9), column
    probes = pl.read_parquet(tmp_path / "run" / "probes.parquet")
    assert probes.height == 160 and probes["madial_recall@10"].is_not_null().all()
