"""What a run computes once before its clock starts: every text's vector and every turn's entities.

Embedding in large batches into the shared embedder's cache, and recognising
entities in a process of their own, so that the arms (here or on workers)
find them cached instead of computing a session at a time. Also the texts of
the deleted turns, which the run purges from memsim's caches after the play.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any


from memsim.memory.base import render_turn
from memsim.memory.registry import Resources
from memsim.sim.engine import Harness, SystemUnderTest
from memsim.sim.erasure import cache_texts, purge_caches
from memsim.sim.events import Deletion, Episode, Question, Session

__all__ = ["upfront_texts", "doomed_texts", "embed_up_front", "entity_recognisers", "turn_texts", "recognise_up_front", "deletions_of"]


def upfront_texts(episodes: Iterable[Episode], *, unasked: Callable[[Question], bool] | None = None) -> list[str]:
    """The distinct texts a run embeds up front (turns as rendered, questions), in first-seen order.

    Args:
        episodes: the run's episodes.
        unasked: questions for which it is true are left out (``Harness.unasked``: nothing retrieves for them).
    """
    texts: dict[str, None] = {}
    for ep in episodes:
        for e in ep.events:
            if isinstance(e, Session):
                texts.update((render_turn(t), None) for t in e.turns)
            elif isinstance(e, Question) and not (unasked is not None and unasked(e)):
                texts[e.text] = None
    return list(texts)


def doomed_texts(episodes: Iterable[Episode]) -> list[str]:
    """The texts of the turns the episodes delete, as memsim's caches may hold them (``cache_texts``)."""
    return list(dict.fromkeys(t for d in deletions_of(list(episodes), ()) for t in d["texts"]))


def embed_up_front(resources: Resources, episodes: Sequence[Episode], info: dict[str, Any], harness: Harness,
                   *, seen: set[bytes] | None = None) -> None:
    """Embed every text the episodes will need, in large batches, into the cache before the clock starts.

    The systems then find each vector in the shared embedder's cache instead of
    embedding a session or a question at a time. ``info["embedding"]`` adds up
    the distinct texts, how many the model computed and how many were found
    cached, and the seconds spent. ``seen``: digests of the texts earlier calls
    of the same run handled (a static run calls once per episode, and its
    episodes may share texts: a MADial-Bench user's memories, a LongMemEval
    haystack's sessions); those are neither looked up again nor counted again.
    """
    embedder = resources.made_embedder
    if embedder is None:
        return
    texts = upfront_texts(episodes, unasked=harness.unasked)
    # A deleted turn's vector is purged from the cache once the run has played, so a rerun computes it again.
    # A vector can differ in its last bit with the batch it was computed in: these texts are purged now and
    # computed in batches of their own, so that they come out the same on a first run and on a rerun.
    doomed = set(doomed_texts(episodes))
    if seen is not None:
        texts = [t for t in texts if t in doomed or _digest(t) not in seen]
        seen.update(_digest(t) for t in texts)
    if not texts:
        return
    if doomed and harness.caches is not None:
        # Entities do not depend on their batch, and the recogniser may be filling its cache now.
        purge_caches(sorted(doomed), **{k: v for k, v in harness.caches.items() if k != "entity_caches"})
    before = embedder.stats
    t0 = time.perf_counter()
    embedder.encode([t for t in texts if t not in doomed])
    embedder.encode([t for t in texts if t in doomed])
    after = embedder.stats
    tally = info.setdefault("embedding", {"texts": 0, "embedded": 0, "cached": 0, "repaired": 0, "seconds": 0.0})
    tally["texts"] += len(texts)
    tally["embedded"] += after.misses - before.misses
    tally["cached"] += after.hits - before.hits
    tally["repaired"] = tally.get("repaired", 0) + after.repaired - before.repaired
    tally["seconds"] = round(tally["seconds"] + time.perf_counter() - t0, 3)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).digest()


def entity_recognisers(suts: Sequence[SystemUnderTest]) -> list[Any]:
    """One entity recogniser per entity cache the arms' gates read (``entity_recognizer``), in arm order."""
    out: dict[str, Any] = {}
    for s in suts:
        rec = getattr(s.system, "entity_recognizer", None)
        if rec is not None and rec.cache_dir is not None:
            out.setdefault(str(rec.cache_dir), rec)
    return list(out.values())


def turn_texts(episodes: Sequence[Episode]) -> list[str]:
    return list(dict.fromkeys(t.text for ep in episodes for e in ep.events if isinstance(e, Session) for t in e.turns))


def recognise_up_front(suts: Sequence[SystemUnderTest], episodes: Sequence[Episode]) -> Callable[[], dict[str, Any]] | None:
    """Start recognising the entities of every turn the gated arms will see into their entity cache, or None.

    Arms whose gates recognise entities (``entity_recognizer``) otherwise each look up, and on a cold
    cache each compute, the entities of every session as it comes: twice at once for two gated arms on
    two workers. Here they are computed once, in large batches, in a process of its own while the run's
    process embeds, and every worker finds them cached. Returns the function that waits for it and says
    what was done (``run.json``'s ``entities``); a failure there is recorded and the arms compute what
    is missing themselves.
    """
    recognisers = {str(rec.cache_dir): rec for rec in entity_recognisers(suts)}
    if not recognisers:
        return None
    texts = turn_texts(episodes)
    t0 = time.perf_counter()
    jobs = [(folder, rec.missing(texts)) for folder, rec in recognisers.items()]
    jobs = [(folder, todo) for folder, todo in jobs if todo]
    tally: dict[str, Any] = {"texts": len(texts), "recognised": 0}
    if not jobs:
        tally["seconds"] = round(time.perf_counter() - t0, 3)
        return lambda: tally
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from memsim.memory.gated import recognise_into_cache

    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    futures = [pool.submit(recognise_into_cache, folder, todo) for folder, todo in jobs]

    def wait() -> dict[str, Any]:
        try:
            for f in futures:
                tally["recognised"] += f.result()["texts"]
        except Exception as exc:  # noqa: BLE001 - the arms recognise what is missing themselves
            tally["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        tally["seconds"] = round(time.perf_counter() - t0, 3)
        return tally

    return wait


def deletions_of(episodes: Sequence[Episode], played: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every deletion of the run with the texts memsim's caches may hold for it, in time order.

    The deleted turns' texts come from the episodes; restatements of them (the correction channel)
    from the units played by this process (``played``: ``Harness.purges``).
    """
    turns: dict[str, Any] = {}
    out: dict[str, dict[str, Any]] = {}
    for ep in episodes:
        for e in ep.events:
            if isinstance(e, Session):
                turns.update((t.turn_id, t) for t in e.turns)
            elif isinstance(e, Deletion):
                out[e.deletion_id] = {"deletion_id": e.deletion_id, "user_id": e.user_id, "time": str(e.time),
                                      "texts": cache_texts(turns[t] for t in e.turn_ids if t in turns)}
    for entry in played:
        slot = out.get(entry["deletion_id"])
        if slot is not None:
            slot["texts"] = list(dict.fromkeys([*slot["texts"], *entry["texts"]]))
    return sorted(out.values(), key=lambda d: (d["time"], d["deletion_id"]))
