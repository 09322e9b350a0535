"""How the ONNX backends cut texts into batches, and what keys their cache entries."""

from __future__ import annotations

from pathlib import Path

from memsim.memory.embed import DEFAULT_MODEL_ID, Embedder, _text_key, _token_batches


def test_token_batches_are_longest_first_within_the_budget() -> None:
    lengths = [3, 10, 7, 7, 2, 30, 5]
    batches = _token_batches(lengths, 20)
    flat = [int(i) for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    # Longest first; ties keep their order.
    assert flat == [5, 1, 2, 3, 6, 0, 4]
    # The 30-token text is alone although it is over the budget; every other batch fits.
    assert [len(b) for b in batches] == [1, 2, 2, 2]
    assert all(len(b) * max(lengths[i] for i in b) <= 20 for b in batches[1:])


def test_int8_cache_entries_are_keyed_by_the_export_recipe(tmp_path: Path) -> None:
    int8 = Embedder(backend="onnx-int8", cache_dir=tmp_path)
    assert int8.model_id == DEFAULT_MODEL_ID + "+onnx-int8"
    assert int8.cache is not None and int8.cache.model_id == int8.model_id + "/export-v2"
    assert int8.cache.key("a text") != _text_key(int8.model_id, "a text")
    # The float vectors do not change with the recipe (to 1e-6): their keys stay.
    onnx = Embedder(backend="onnx", cache_dir=tmp_path)
    assert onnx.cache is not None and onnx.cache.model_id == onnx.model_id == DEFAULT_MODEL_ID + "+onnx"
