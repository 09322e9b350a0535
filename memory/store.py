"""FAISS vector store with stable ids, per-user partitions, delete and save/load.

Each user gets an own exact inner-product index (``IndexIDMap2`` over
``IndexFlatIP``), so one user's search can never return another user's
vector, and removing a user's memories touches only that user's index. With
L2-normalised vectors the inner product is the cosine. Flat indexes are exact:
retrieval quality is the embedder's, not an approximation's. A store made
with another ``memsim.memory.index.IndexSpec`` (HNSW, IVF-PQ) keeps a partition
exact until it holds ``switch_at`` vectors, then rebuilds it as that index.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memsim.memory.index import FAISS_THREADS_ENV, FLAT, IndexSpec, load_faiss, make_index, train_index, tune_index
from memsim.core.errors import UserError
from memsim.core.files import write_text_atomic

if TYPE_CHECKING:
    import faiss

__all__ = ["VectorStore", "MANIFEST_NAME", "FAISS_THREADS_ENV"]

MANIFEST_NAME = "manifest.json"
"""File in a saved store's folder that maps user ids to index files."""

# FAISS is imported when the first store is made (``load_faiss``: one OpenMP thread unless
# $MEMSIM_FAISS_THREADS asks for more), so importing this module costs nothing.

_FORMAT = "memsim.vectorstore"
_VERSION = 1
_INDEX_FILE = re.compile(r"^user-\d+\.faiss$")


class VectorStore:
    """Exact cosine search over int64-keyed vectors, one partition per user.

    Args:
        dim: Vector length; every added vector and query must have it.
        index: The index a partition becomes once it holds ``index.switch_at``
            vectors (default: exact flat search throughout).
    """

    def __init__(self, dim: int, index: IndexSpec | None = None) -> None:
        if int(dim) < 1:
            raise ValueError(f"dim must be at least 1, got {dim}")
        load_faiss()  # imported, its threads set, before any index of this store exists
        self.dim: int = int(dim)
        self.index_spec: IndexSpec = index or FLAT
        if not self.index_spec.exact:
            make_index(self.index_spec, self.dim)  # a bad parameter fails here, not at the switch
        self._approx: set[str] = set()
        self._indexes: dict[str, faiss.IndexIDMap2] = {}
        self._total = 0  # vectors held by everyone (a running total; stats read it after every session)
        # Python-side id sets make duplicate checks and membership O(1);
        # FAISS's own id map is the source of order.
        self._ids: dict[str, set[int]] = {}

    def __repr__(self) -> str:
        return f"VectorStore(dim={self.dim}, users={len(self._indexes)}, vectors={self.count()})"

    # ------------------------------------------------------------------ writing

    def add(self, user_id: str, ids: Sequence[int], vectors: np.ndarray) -> None:
        """Add ``vectors`` (``(n, dim)``) under ``ids`` to ``user_id``'s partition.

        Raises:
            ValueError: shape or length mismatch, or an id already present for
                this user (or repeated within ``ids``); nothing is added then.
        """
        faiss = load_faiss()
        arr = np.ascontiguousarray(vectors, dtype=np.float32)
        if arr.ndim == 1 and arr.shape[0] == self.dim and len(ids) == 1:
            arr = arr.reshape(1, self.dim)
        if arr.ndim != 2 or arr.shape[1] != self.dim:
            raise ValueError(f"vectors must have shape (n, {self.dim}), got {arr.shape}")
        id_arr = np.asarray(list(ids), dtype=np.int64)
        if id_arr.ndim != 1 or id_arr.shape[0] != arr.shape[0]:
            raise ValueError(f"{id_arr.shape[0]} ids for {arr.shape[0]} vectors")
        if id_arr.size == 0:
            return
        new = set(id_arr.tolist())
        if len(new) != id_arr.size:
            raise ValueError(f"ids repeat within one add for user {user_id!r}")
        existing = self._ids.get(user_id, set())
        clash = new & existing
        if clash:
            raise ValueError(f"ids already stored for user {user_id!r}: {sorted(clash)[:5]}")
        index = self._indexes.get(user_id)
        if index is None:
            index = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
            self._indexes[user_id] = index
            self._ids[user_id] = existing
        index.add_with_ids(arr, id_arr)
        existing.update(new)
        self._total += int(id_arr.size)
        spec = self.index_spec
        if not spec.exact and user_id not in self._approx and index.ntotal >= spec.switch_at:
            self._indexes[user_id] = self._rebuilt(index, faiss.vector_to_array(index.id_map).astype(np.int64))
            self._approx.add(user_id)

    def _rebuilt(self, index: faiss.IndexIDMap2, keep: np.ndarray) -> faiss.IndexIDMap2:
        """A partition of the store's chosen index holding the vectors of ``keep`` (ids) from ``index``."""
        faiss = load_faiss()
        ids = faiss.vector_to_array(index.id_map).astype(np.int64)
        vectors = faiss.downcast_index(index.index).reconstruct_n(0, index.ntotal)
        rows = np.isin(ids, keep)
        inner = make_index(self.index_spec, self.dim)
        train_index(inner, self.index_spec, vectors[rows])
        out = faiss.IndexIDMap2(inner)
        out.add_with_ids(np.ascontiguousarray(vectors[rows]), ids[rows])
        return out

    def remove(self, user_id: str, ids: Collection[int]) -> int:
        """Remove ``ids`` from ``user_id``'s partition; unknown ids are ignored.

        Returns:
            How many vectors were removed.
        """
        held = self._ids.get(user_id)
        if not held:
            return 0
        doomed = sorted(held.intersection(int(i) for i in ids))
        if not doomed:
            return 0
        index = self._indexes[user_id]
        if user_id in self._approx:
            # HNSW graphs and refined IVF-PQ cannot drop vectors in place: rebuild from the kept ones.
            keep = np.asarray(sorted(held.difference(doomed)), dtype=np.int64)
            removed = len(doomed)
            if keep.size:
                self._indexes[user_id] = self._rebuilt(index, keep)
        else:
            removed = int(index.remove_ids(np.asarray(doomed, dtype=np.int64)))
        held.difference_update(doomed)
        self._total -= removed
        if not held:
            # An emptied partition is dropped so ``users()`` lists only users with vectors.
            del self._indexes[user_id], self._ids[user_id]
            self._approx.discard(user_id)
        return removed

    # ------------------------------------------------------------------ reading

    def search(
        self,
        user_id: str,
        query: np.ndarray,
        k: int,
        *,
        where: Callable[[int], bool] | None = None,
    ) -> list[tuple[int, float]]:
        """The ``k`` best ``(id, score)`` of ``user_id`` for ``query``, best first.

        Ties are broken by the smaller id, so results do not depend on FAISS
        internals.

        Args:
            user_id: Partition to search; an unknown user gives ``[]``.
            query: ``(dim,)`` or ``(1, dim)``.
            k: How many to return at most (larger than the partition is fine).
            where: Keep only ids for which this is true. The search widens
                until ``k`` such ids are found or the partition is exhausted,
                so the answer is exact however many ids it rejects.

        Raises:
            ValueError: ``k`` < 1 or the query has the wrong shape.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        q = self._query(query)
        index = self._indexes.get(user_id)
        if index is None:
            return []
        total = index.ntotal
        width = min(total, k if where is None else 2 * k + 8)
        while True:
            scores, found = index.search(q, width)
            pairs = [
                (int(i), float(s))
                for i, s in zip(found[0].tolist(), scores[0].tolist(), strict=True)
                if i != -1
            ]
            if where is not None:
                pairs = [p for p in pairs if where(p[0])]
            if len(pairs) >= k or width >= total:
                break
            width = min(total, width * 4)
        pairs.sort(key=lambda p: (-p[1], p[0]))
        return pairs[:k]

    def _query(self, query: np.ndarray) -> np.ndarray:
        q = np.ascontiguousarray(query, dtype=np.float32)
        if q.shape == (self.dim,):
            q = q.reshape(1, self.dim)
        if q.shape != (1, self.dim):
            raise ValueError(f"query must have shape ({self.dim},), got {np.shape(query)}")
        return q

    def vector(self, user_id: str, id: int) -> np.ndarray:  # noqa: A002 - name fixed by the interface
        """The stored vector ``(dim,)`` of ``id``.

        Raises:
            KeyError: the user has no such id.
        """
        if int(id) not in self._ids.get(user_id, ()):
            raise KeyError(f"no vector {id} for user {user_id!r}")
        return np.asarray(self._indexes[user_id].reconstruct(int(id)), dtype=np.float32)

    def matrix(self, user_id: str) -> tuple[np.ndarray, np.ndarray]:
        """Ids ``(n,)`` and vectors ``(n, dim)`` of ``user_id``'s partition, rows in storage order.

        The vectors are a read-only view of the index's own storage (no
        copy): valid only until the partition's next ``add`` or ``remove``.
        """
        faiss = load_faiss()
        index = self._indexes.get(user_id)
        if index is None or index.ntotal == 0:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.dim), dtype=np.float32)
        n = int(index.ntotal)
        ids = faiss.vector_to_array(index.id_map).astype(np.int64)
        flat = faiss.downcast_index(index.index)
        if isinstance(flat, faiss.IndexFlat):
            vecs = faiss.rev_swig_ptr(flat.get_xb(), n * self.dim).reshape(n, self.dim)
        else:
            vecs = flat.reconstruct_n(0, n)
        vecs.flags.writeable = False
        return ids, vecs

    def ids(self, user_id: str) -> list[int]:
        """Ids of ``user_id``'s vectors in storage order (``[]`` for an unknown user)."""
        faiss = load_faiss()
        index = self._indexes.get(user_id)
        if index is None:
            return []
        return faiss.vector_to_array(index.id_map).astype(np.int64).tolist()

    def __contains__(self, key: tuple[str, int]) -> bool:
        user_id, id_ = key
        return int(id_) in self._ids.get(user_id, ())

    def count(self, user_id: str | None = None) -> int:
        """Vectors held by ``user_id``, or by everyone when ``None``."""
        if user_id is not None:
            index = self._indexes.get(user_id)
            return 0 if index is None else int(index.ntotal)
        return self._total

    def users(self) -> list[str]:
        """Users holding at least one vector, sorted."""
        return sorted(self._indexes)

    @property
    def nbytes(self) -> int:
        """Bytes of stored vectors (float32), without index overhead or ids."""
        return self.count() * self.dim * 4

    # ------------------------------------------------------------------ persistence

    def save(self, folder: str | os.PathLike[str]) -> None:
        """Write one FAISS file per user and a JSON manifest into ``folder``.

        User ids can contain any character, so files are numbered and the
        manifest maps each user id to its file. Index files of an earlier save
        that the new manifest no longer names are deleted.
        """
        faiss = load_faiss()
        root = Path(folder)
        root.mkdir(parents=True, exist_ok=True)
        entries = []
        for n, user_id in enumerate(self.users()):
            name = f"user-{n:06d}.faiss"
            faiss.write_index(self._indexes[user_id], str(root / name))
            entries.append({"user_id": user_id, "file": name, "count": self.count(user_id)})
        manifest = {"format": _FORMAT, "version": _VERSION, "dim": self.dim, "users": entries}
        # The manifest goes last and atomically: a reader never sees it name a missing file.
        write_text_atomic(root / MANIFEST_NAME, json.dumps(manifest, indent=1, ensure_ascii=False))
        keep = {e["file"] for e in entries}
        for path in root.iterdir():
            if _INDEX_FILE.match(path.name) and path.name not in keep:
                path.unlink()

    @classmethod
    def load(cls, folder: str | os.PathLike[str], index: IndexSpec | None = None) -> VectorStore:
        """Read a store written by ``save`` (``index``: the store's index choice, as when it was made).

        Raises:
            UserError: the manifest or an index file is missing or does not
                match (format, dimension, count), naming the file.
        """
        faiss = load_faiss()
        root = Path(folder)
        manifest_path = root / MANIFEST_NAME
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"{manifest_path}: not found; is {root} a saved vector store?") from None
        except (OSError, ValueError) as exc:
            raise UserError(f"{manifest_path}: unreadable ({exc})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
            raise UserError(f"{manifest_path}: field 'format' must be {_FORMAT!r}")
        if manifest.get("version") != _VERSION:
            raise UserError(
                f"{manifest_path}: field 'version' is {manifest.get('version')!r}; "
                f"this code reads version {_VERSION}"
            )
        dim = manifest.get("dim")
        if not isinstance(dim, int) or dim < 1:
            raise UserError(f"{manifest_path}: field 'dim' must be a positive integer, got {dim!r}")
        store = cls(dim, index)
        for n, entry in enumerate(manifest.get("users", [])):
            try:
                user_id, name, count = str(entry["user_id"]), str(entry["file"]), int(entry["count"])
            except (KeyError, TypeError, ValueError):
                raise UserError(
                    f"{manifest_path}: users[{n}] needs fields 'user_id', 'file', 'count'"
                ) from None
            if not _INDEX_FILE.match(name):
                raise UserError(f"{manifest_path}: users[{n}].file {name!r} is not an index file name")
            path = root / name
            if not path.is_file():
                raise UserError(f"{path}: missing (named in {manifest_path} for user {user_id!r})")
            try:
                index = faiss.read_index(str(path))
            except RuntimeError as exc:
                raise UserError(f"{path}: not a readable FAISS index ({str(exc).splitlines()[0]})") from None
            if not isinstance(index, faiss.IndexIDMap2) or index.d != dim or index.ntotal != count:
                raise UserError(
                    f"{path}: expected an IndexIDMap2 of {count} vectors of dim {dim}, "
                    f"got {type(index).__name__} of {index.ntotal} vectors of dim {index.d}"
                )
            if count == 0:
                continue
            if not isinstance(faiss.downcast_index(index.index), faiss.IndexFlatIP):
                tune_index(index, store.index_spec)
                store._approx.add(user_id)
            store._indexes[user_id] = index
            store._total += int(index.ntotal)
            store._ids[user_id] = set(faiss.vector_to_array(index.id_map).astype(np.int64).tolist())
        return store
