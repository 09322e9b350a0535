"""``memsim scenario stats``: the difficulty profile of a stream, checked against a recount.

The figures are recomputed here the plain way from the events (store size
at question time, evidence, changed facts, distinct texts) and from a
direct cosine ranking, so the profile is not checked against itself. Every
shipped scenario config is profiled (the fast ones always, the big ones
under ``slow``; the LoCoMo stream needs the real file).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memsim.analysis.cli import main
from memsim.analysis.profile import config_stream, content_words, format_profile, profile
from memsim.memory.base import render_turn
from memsim.memory.naive import NaiveMemory
from memsim.memory.resources import Resources
from memsim.scenarios.config import CONFIG_DIR
from memsim.sim.events import Deletion, Question, Session

TINY = """[scenario]
name = "persona"
users = 4
months = 1
sessions_per_week = 2.0
questions_per_week = 4.0
deletion_rate = 2.0

[run]
seed = 3
"""


def _naive(embedder):
    return lambda: NaiveMemory(resources=Resources(), embedder=embedder)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY, encoding="utf-8")
    return path


def test_content_words() -> None:
    assert content_words("What's the name of my sister's cat?") == {"name", "sister", "cat"}
    assert content_words("I don't know") == {"know"}


def test_profile_matches_a_recount(tiny: Path, hash_embedder) -> None:
    _, stream, _ = config_stream(tiny)
    p = profile(stream, k=3, system=_naive(hash_embedder))
    sessions = [e for e in stream.events if isinstance(e, Session)]
    questions = [e for e in stream.events if isinstance(e, Question)]
    deletions = [e for e in stream.events if isinstance(e, Deletion)]
    assert deletions and any(q.superseded for q in questions)  # the tiny world exercises both
    texts = [t.text for s in sessions for t in s.turns]
    assert (p["users"], p["turns"], p["questions"]) == (4, len(texts), len(questions))
    assert p["distinct_text_ratio"] == round(len(set(texts)) / len(texts), 4)
    # Store at question time, counted the plain way: the user's turns before the question, minus deleted ones.
    held = []
    for q in questions:
        mine = {t.turn_id for s in sessions if s.user_id == q.user_id and s.time <= q.time for t in s.turns}
        gone = {t for d in deletions if d.user_id == q.user_id and d.time <= q.time for t in d.turn_ids}
        held.append(len(mine - gone))
    assert p["store_at_question"]["median"] == float(np.median(held))
    assert p["store_at_question"]["p90"] == round(float(np.percentile(held, 90)), 4)
    n2 = sum(len(q.evidence) >= 2 for q in questions)
    assert p["share_evidence_2plus"] == round(n2 / len(questions), 4)
    assert p["share_changed_fact"] == round(sum(bool(q.superseded) for q in questions) / len(questions), 4)
    assert sum(p["evidence_per_question"].values()) == p["scored_questions"] == len(questions)
    # Ranks and recall against a direct cosine ranking of the same rendered turns.
    recall = []
    turns = {t.turn_id: t for s in sessions for t in s.turns}
    for q in questions:
        gone = {t for d in deletions if d.user_id == q.user_id and d.time <= q.time for t in d.turn_ids}
        ids = [t.turn_id for s in sessions if s.user_id == q.user_id and s.time <= q.time for t in s.turns
               if t.turn_id not in gone]
        scores = hash_embedder.encode([render_turn(turns[i]) for i in ids]) @ hash_embedder.encode_one(q.text)
        order = [ids[i] for i in np.argsort(-scores, kind="stable")]
        ranks = [order.index(e) + 1 for e in q.evidence]
        recall.append(float(max(ranks) <= 3))
    assert p["naive_recall_all@3"]["all"] == pytest.approx(np.mean(recall), abs=0.02)  # ties may order differently
    kinds = p["naive_recall_all@3"]["by_kind"]
    assert sum(v["n"] for v in kinds.values()) == len(questions)
    assert p["naive_first_evidence_rank"]["not_found"] == 0 and p["naive_all_evidence_rank"]["n"] == len(questions)
    lines = format_profile(p).splitlines()
    assert lines[0].startswith("users 4 ") and any(line.startswith("naive recall_all@3") for line in lines)


def _configs() -> list:
    out = []
    for path in sorted(CONFIG_DIR.glob("*.toml")):
        if path.stem.startswith("sweep_"):
            continue  # sweep specs, not run configs
        marks = [] if path.stem in ("persona3", "longmemeval_stream", "longmemeval_users_quick") else [pytest.mark.slow]
        out.append(pytest.param(path, marks=marks, id=path.stem))
    return out


@pytest.mark.parametrize("config", _configs())
def test_every_shipped_config_profiles(config: Path, hash_embedder, request, monkeypatch) -> None:
    if config.stem == "locomo_stream":
        monkeypatch.setenv("MEMSIM_LOCOMO", str(request.getfixturevalue("locomo_path")))
    if config.stem.startswith("longmemeval_users"):
        from lme_data import require_oracle

        # Made for the S file; the oracle file holds the same questions and is small.
        oracle = require_oracle()
        monkeypatch.setenv("MEMSIM_LONGMEMEVAL", str(oracle))
        monkeypatch.setenv("MEMSIM_LONGMEMEVAL_ORACLE", str(oracle))
    monkeypatch.chdir(CONFIG_DIR.parent.parent)  # the shipped longmemeval config reads the fixture from the repository root
    _, stream, _ = config_stream(config)
    p = profile(stream, system=_naive(hash_embedder))
    assert p["users"] >= 1 and p["scored_questions"] > 0 and 0 < p["distinct_text_ratio"] <= 1
    assert p["naive_first_evidence_rank"]["n"] + p["naive_first_evidence_rank"]["not_found"] == p["scored_questions"]
    assert 0 <= p["naive_recall_all@10"]["all"] <= 1
    json.dumps(p)


def test_locomo_stream_is_real_text(locomo_path: Path, hash_embedder, monkeypatch) -> None:
    monkeypatch.setenv("MEMSIM_LOCOMO", str(locomo_path))
    _, stream, _ = config_stream(CONFIG_DIR / "locomo_stream.toml")
    p = profile(stream, system=_naive(hash_embedder))
    assert p["users"] == 10 and p["distinct_text_ratio"] > 0.99 and p["share_evidence_2plus"] > 0.2


@pytest.mark.slow
def test_stats_cli_prints_and_writes_json(tiny: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "profile.json"
    assert main(["scenario", "stats", str(tiny), "--json", str(out), "--k", "5", "--seed", "7"]) == 0
    printed = capsys.readouterr().out
    figures = json.loads(out.read_text())
    assert figures["seed"] == 7 and figures["scenario"] == "persona" and figures["k"] == 5
    assert "naive recall_all@5" in printed and f"users {figures['users']}" in printed
    assert 0 < figures["question_evidence_cosine"]["median"] < 1


def test_stats_cli_bad_input(tiny: Path, tmp_path: Path, capsys) -> None:
    assert main(["scenario", "stats", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml" in capsys.readouterr().err
    # --k is checked against its range when the arguments are parsed (argparse exits 2 with one message).
    with pytest.raises(SystemExit) as exc:
        main(["scenario", "stats", str(tiny), "--k", "0"])
    assert exc.value.code == 2
    assert "--k" in capsys.readouterr().err
    with pytest.raises(ValueError, match="k must be"):
        profile(config_stream(tiny)[1], k=0)
