"""Index choice: a partition leaves exact search at ``switch_at``, keeps finding neighbours, removes, saves."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest
from pydantic import ValidationError

from memsim.analysis.scale_bench import bench_index, format_scale, realistic_vectors
from memsim.memory.index import IndexSpec, make_index
from memsim.memory.store import VectorStore

DIM = 32


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    return realistic_vectors(n, DIM, np.random.default_rng(seed))


SPECS = {
    "hnsw": IndexSpec(kind="hnsw", switch_at=300, hnsw_m=16, ef_search=64),
    "ivfpq": IndexSpec(kind="ivfpq", switch_at=300, nlist=16, nprobe=8, pq_m=8, refine=8),
    "ivfpq-raw": IndexSpec(kind="ivfpq", switch_at=300, nlist=16, nprobe=16, pq_m=8, refine=0),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_partition_switches_index_and_finds_neighbours(name: str, tmp_path: Path):
    spec = SPECS[name]
    both = _vectors(1240)  # the last 40 are queries from the same topics
    x, queries = both[:1200], both[1200:]
    store, exact = VectorStore(DIM, spec), VectorStore(DIM)
    store.add("u", list(range(250)), x[:250])
    assert isinstance(faiss.downcast_index(store._indexes["u"].index), faiss.IndexFlatIP)  # below switch_at: exact
    store.add("u", list(range(250, 1200)), x[250:])
    exact.add("u", list(range(1200)), x)
    inner = faiss.downcast_index(store._indexes["u"].index)
    assert not isinstance(inner, faiss.IndexFlatIP)
    assert store.count("u") == 1200 and sorted(store.ids("u")) == list(range(1200))
    hits = [
        len({i for i, _ in store.search("u", q, 10)} & {i for i, _ in exact.search("u", q, 10)}) / 10
        for q in queries
    ]
    assert np.mean(hits) >= (0.7 if name == "ivfpq-raw" else 0.9)
    # Removal works on every kind (a rebuild where FAISS cannot remove in place).
    doomed = list(range(0, 1200, 3))
    assert store.remove("u", doomed) == len(doomed)
    assert store.count("u") == 800
    for q in queries[:10]:
        assert not {i for i, _ in store.search("u", q, 30)} & set(doomed)
    store.save(tmp_path / "s")
    again = VectorStore.load(tmp_path / "s", spec)
    assert [i for i, _ in again.search("u", queries[0], 10)] == [i for i, _ in store.search("u", queries[0], 10)]


def test_flat_store_is_unchanged_by_default():
    x = _vectors(100)
    store = VectorStore(DIM)
    store.add("u", list(range(100)), x)
    assert store.index_spec.exact and isinstance(faiss.downcast_index(store._indexes["u"].index), faiss.IndexFlatIP)


def test_bad_index_parameters_are_clear_errors():
    with pytest.raises(ValidationError, match="switch_at"):
        IndexSpec(kind="ivfpq", nlist=4096, switch_at=100)
    with pytest.raises(ValueError, match="pq_m"):
        make_index(IndexSpec(kind="ivfpq", pq_m=7), 32)
    with pytest.raises(ValueError, match="pq_m"):
        VectorStore(32, IndexSpec(kind="ivfpq", pq_m=5, nlist=8, switch_at=100))


def test_scale_bench_reports_recall_against_exact():
    out = bench_index(
        n=3000, dim=DIM, queries=50, seed=0,
        specs={"flat": IndexSpec(), "hnsw": SPECS["hnsw"], "ivfpq": SPECS["ivfpq"]},
    )
    rows = {r["index"]: r for r in out}
    assert rows["flat"]["recall@10"] == 1.0 and rows["flat"]["recall@30"] == 1.0
    for name in ("hnsw", "ivfpq"):
        assert 0.8 <= rows[name]["recall@10"] <= 1.0
        assert rows[name]["build_s"] > 0 and rows[name]["bytes"] > 0
        assert rows[name]["p95_ms"] >= rows[name]["p50_ms"] > 0
    assert "recall@10" in format_scale(out)


def test_realistic_vectors_are_unit_and_clustered():
    x = _vectors(2000)
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    sims = x[:200] @ x.T
    np.fill_diagonal(sims[:, :200], -1)
    # Each vector has close neighbours (as sentence embeddings do), unlike uniform random directions.
    assert np.median(sims.max(axis=1)) > 0.6
