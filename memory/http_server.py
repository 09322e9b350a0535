"""Serve any registered memory system over memsim's HTTP protocol (FastAPI).

``create_app(name, args)`` builds a FastAPI application whose instances are
fresh systems from the registry (``build_memory(name, args)``), one per
``POST /v1/instances``; the wire format is ``memsim.memory.http``'s. The instances
share one embedder (``Resources``), and calls to one instance are serialised
(systems are not thread-safe). ``memsim serve`` runs it under uvicorn.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from memsim.memory.base import MemorySystem
from memsim.memory.http import (
    PROTOCOL,
    Describe,
    ErrorOut,
    FeedbackRequest,
    ForgetRequest,
    Health,
    IngestRequest,
    InstanceOut,
    InstanceRequest,
    MaintainRequest,
    Ok,
    QueryRequest,
    QueryResponse,
    RetrievedOut,
    StatsOut,
)
from memsim.memory.registry import Resources, build_memory, learns_from_feedback, memory_description

__all__ = ["create_app", "openapi_document"]


class _Instances:
    """Live systems by id. One lock serialises every call: systems and their shared
    embedder are not thread-safe, and FastAPI runs handlers on a thread pool."""

    def __init__(self, build: Callable[[int], MemorySystem]) -> None:
        self._build = build
        self.lock = threading.Lock()
        self._systems: dict[str, MemorySystem] = {}

    def open(self, seed: int) -> str:
        with self.lock:
            key = uuid.uuid4().hex
            self._systems[key] = self._build(seed)
        return key

    def close(self, key: str) -> bool:
        with self.lock:
            return self._systems.pop(key, None) is not None

    def get(self, key: str) -> MemorySystem:
        from fastapi import HTTPException

        found = self._systems.get(key)
        if found is None:
            raise HTTPException(status_code=404, detail=f"no instance {key!r} (open one with POST /v1/instances)")
        return found


def create_app(
    name: str,
    args: Mapping[str, Any] | None = None,
    *,
    make_resources: Callable[[int], Resources] | None = None,
) -> Any:
    """A FastAPI app serving registered system ``name`` with ``args``.

    Args:
        name: Registered system name (``memsim list``).
        args: Its constructor arguments.
        make_resources: Resources for an instance from its seed; default: a
            generator from the seed and the shared default embedder.
    """
    from fastapi import FastAPI, HTTPException

    args = dict(args or {})
    learns = learns_from_feedback(name, args)
    description = memory_description(name)
    shared = Resources()

    def default_resources(seed: int) -> Resources:
        # Every instance shares one embedder; each gets its own generator.
        made = shared.fork()
        made.rng = np.random.default_rng(seed)
        return made

    resources_for = make_resources or default_resources

    def build(seed: int) -> MemorySystem:
        return build_memory(name, args, resources=resources_for(seed))

    build(0)  # fail at start-up, not on the first client, when name or args are bad
    instances = _Instances(build)
    app = FastAPI(
        title="memsim memory protocol",
        version=PROTOCOL,
        summary=f"memsim's MemorySystem over HTTP, serving {name!r}",
        description=(
            "Mirrors memory.base.MemorySystem: ingest, retrieve, probe (read-only), feedback, "
            "maintain, forget, stats; plus health and describe. Each instance is a fresh system."
        ),
    )

    errors: dict[int | str, dict[str, Any]] = {
        400: {"model": ErrorOut, "description": "the system refused the request"},
        404: {"model": ErrorOut, "description": "no such instance"},
    }

    def call(key: str, fn: Callable[[MemorySystem], Any]) -> Any:
        with instances.lock:
            system = instances.get(key)
            try:
                return fn(system)
            except (ValueError, KeyError, TypeError) as exc:
                raise HTTPException(status_code=400, detail=f"{type(exc).__name__}: {exc}") from exc

    @app.get("/v1/health", response_model=Health, tags=["service"])
    def health() -> Health:
        """Liveness and protocol version."""
        return Health(status="ok", protocol=PROTOCOL)

    @app.get("/v1/describe", response_model=Describe, tags=["service"])
    def describe() -> Describe:
        """The served system: registered name, args, whether feedback can change it."""
        return Describe(protocol=PROTOCOL, name=name, args=args, description=description, learns=learns)

    @app.post("/v1/instances", response_model=InstanceOut, tags=["instances"])
    def open_instance(body: InstanceRequest) -> InstanceOut:
        """A fresh, empty system whose random source is seeded with ``seed``."""
        return InstanceOut(instance_id=instances.open(body.seed))

    @app.delete("/v1/instances/{instance_id}", response_model=Ok, tags=["instances"])
    def close_instance(instance_id: str) -> Ok:
        """Drop an instance (dropping an unknown one is not an error)."""
        instances.close(instance_id)
        return Ok()

    @app.post("/v1/instances/{instance_id}/ingest", response_model=Ok, tags=["memory"], responses=errors)
    def ingest(instance_id: str, body: IngestRequest) -> Ok:
        """Take in the turns of a session as they arrive."""
        turns = [t.to_turn() for t in body.turns]
        call(instance_id, lambda s: s.ingest(turns, user_id=body.user_id, now=body.now))
        return Ok()

    @app.post("/v1/instances/{instance_id}/retrieve", response_model=QueryResponse, tags=["memory"], responses=errors)
    def retrieve(instance_id: str, body: QueryRequest) -> QueryResponse:
        """At most ``k`` memories for ``query``, best first (may change a learning system)."""
        got = call(instance_id, lambda s: s.retrieve(body.query, user_id=body.user_id, now=body.now, k=body.k))
        return QueryResponse(results=[RetrievedOut.of(r) for r in got])

    @app.post("/v1/instances/{instance_id}/probe", response_model=QueryResponse, tags=["memory"], responses=errors)
    def probe(instance_id: str, body: QueryRequest) -> QueryResponse:
        """What ``retrieve`` would return now; changes nothing."""
        got = call(instance_id, lambda s: s.probe(body.query, user_id=body.user_id, now=body.now, k=body.k))
        return QueryResponse(results=[RetrievedOut.of(r) for r in got])

    @app.post("/v1/instances/{instance_id}/feedback", response_model=Ok, tags=["memory"], responses=errors)
    def feedback(instance_id: str, body: FeedbackRequest) -> Ok:
        """Whether the memories retrieved for a question served it well."""
        call(
            instance_id,
            lambda s: s.feedback(body.question_id, body.retrieved, body.correct, user_id=body.user_id, now=body.now),
        )
        return Ok()

    @app.post("/v1/instances/{instance_id}/maintain", response_model=Ok, tags=["memory"], responses=errors)
    def maintain(instance_id: str, body: MaintainRequest) -> Ok:
        """Periodic housekeeping."""
        call(instance_id, lambda s: s.maintain(now=body.now))
        return Ok()

    @app.post("/v1/instances/{instance_id}/forget", response_model=Ok, tags=["memory"], responses=errors)
    def forget(instance_id: str, body: ForgetRequest) -> Ok:
        """Remove every memory derived from the turns."""
        call(instance_id, lambda s: s.forget(body.turn_ids, user_id=body.user_id, now=body.now))
        return Ok()

    @app.get("/v1/instances/{instance_id}/stats", response_model=StatsOut, tags=["memory"], responses=errors)
    def stats(instance_id: str) -> StatsOut:
        """What is held and what was spent so far."""
        got = call(instance_id, lambda s: s.stats())
        return StatsOut(**StatsOut.attributes_of(got))

    return app


def openapi_document() -> dict[str, Any]:
    """The protocol's OpenAPI document (independent of the served system)."""
    from memsim.memory.embed import HashEmbedder

    def resources(seed: int) -> Resources:
        return Resources(rng=np.random.default_rng(seed), embedder_factory=HashEmbedder)

    app = create_app("naive", make_resources=resources)
    doc = app.openapi()
    doc["info"].pop("summary", None)
    return doc
