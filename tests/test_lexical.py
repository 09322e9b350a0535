"""``BM25Index`` scores exactly as ``bm25s`` does on the same corpus, through adds, removals and replacements."""

from __future__ import annotations

import numpy as np
import pytest

bm25s = pytest.importorskip("bm25s")

from memsim.memory.lexical import BM25Index, _tokenize  # noqa: E402

WORDS = ("river flat keys prague job started sister lisbon moved recipe pasta garden dog cat trip train "
         "doctor fever paint novel chess violin coffee tea rain snow bike loan office boss").split()


def _reference(docs: dict[int, str], query: str, k1: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """bm25s built afresh on the corpus in insertion order, as the index once rebuilt it per search."""
    ids = np.fromiter(docs.keys(), dtype=np.int64)
    corpus = _tokenize([docs[int(i)] for i in ids])
    if not any(corpus):
        return ids, np.zeros(len(ids), dtype=np.float32)
    retriever = bm25s.BM25(k1=k1, b=b)
    retriever.index(corpus, show_progress=False)
    known = [t for t in _tokenize([query])[0] if t in retriever.vocab_dict]
    if not known:
        return ids, np.zeros(len(ids), dtype=np.float32)
    return ids, np.asarray(retriever.get_scores(known), dtype=np.float32)


@pytest.mark.parametrize("k1,b", [(1.5, 0.75), (1.2, 0.3), (2.0, 1.0)])
def test_scores_equal_bm25s_bit_for_bit_as_documents_come_and_go(k1: float, b: float) -> None:
    rng = np.random.default_rng(int(k1 * 10 + b * 100))
    index, docs, next_id = BM25Index(k1=k1, b=b), {}, 0
    checked = 0
    for step in range(60):
        new = {}
        for _ in range(int(rng.integers(1, 6))):
            n = int(rng.integers(0, 12))  # some documents have no word at all, or only stopwords
            words = list(rng.choice(WORDS, size=n)) + (["the", "and"] if n % 3 == 0 else [])
            new[next_id] = " ".join(words)
            next_id += 1
        if docs and step % 7 == 3:  # an id indexed again gets its new text
            old = int(rng.choice(list(docs)))
            new[old] = " ".join(rng.choice(WORDS, size=5))
        index.add("u", list(new), list(new.values()))
        docs.update(new)
        if step % 5 == 4:
            gone = [int(i) for i in rng.choice(list(docs), size=min(3, len(docs)), replace=False)]
            index.remove("u", gone + [10_000])  # an unknown id is ignored
            for i in gone:
                docs.pop(i)
        # A query with a repeated term, one the corpus lacks and a stopword.
        query = " ".join([*rng.choice(WORDS, size=3), str(rng.choice(WORDS)), "zeppelin", "the"])
        query += " " + query.split()[0]
        ids, scores = index.scores("u", query)
        ref_ids, ref = _reference(docs, query, k1, b)
        assert ids.tolist() == ref_ids.tolist()
        assert scores.dtype == np.float32 and np.array_equal(scores, ref), (step, query)
        checked += int(ref.any())
    assert checked > 40  # most queries matched something, so equality was not only of zeros


def test_users_are_apart_and_an_empty_user_scores_nothing() -> None:
    index = BM25Index()
    index.add("a", [1, 2], ["pasta recipe tonight", "train to prague"])
    index.add("b", [3], ["pasta pasta pasta"])
    ids, scores = index.scores("a", "pasta")
    assert ids.tolist() == [1, 2] and scores[0] > 0 and scores[1] == 0
    assert index.scores("c", "pasta")[0].size == 0
    index.remove("a", [1, 2])
    assert index.scores("a", "pasta")[0].size == 0
