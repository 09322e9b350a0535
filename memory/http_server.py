"""Serve any registered memory system over memsim's HTTP protocol (FastAPI).

``create_app(name, args)`` builds a FastAPI application whose instances are
fresh systems from the registry (``build_memory(name, args)``), one per
``POST /v1/instances``; the wire format is ``memsim.memory.http``'s. The instances
share one embedder (``Resources``, whose embedder locks itself). Calls to one
instance are serialised (a system is not thread-safe); calls to different
instances run side by side. ``memsim serve`` runs it under uvicorn.

What one client can take from the others is bounded: a request body past
``max_body`` bytes is refused with 413 before it is read whole, a query or
turn text past ``max_text`` characters gets 413 before any system (or its
tokenizer) sees it, at most ``max_in_flight`` requests are served at once
(429 with ``Retry-After`` past that), at most ``max_instances`` instances
live at once (503 past that), and an instance unused for ``idle_expiry_s``
seconds is dropped (its calls then get 404).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any


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
from memsim.core.streams import seeded

__all__ = ["create_app", "openapi_document"]


MAX_BODY = 16 * 1024 * 1024
"""Largest request body served by default (bytes): a session of turns is kilobytes."""
MAX_TEXT = 100_000
"""Longest query or turn text served by default (characters): a tokenizer given megabytes can abort the process."""
MAX_IN_FLIGHT = 64
"""Most requests served at once by default; more get 429 (each holds a worker thread and its memory)."""
MAX_INSTANCES = 256
"""Most live instances by default (a run opens one per system and twin)."""
IDLE_EXPIRY_S = 3600.0
"""Seconds an instance may stay unused before it is dropped, by default."""


class _Instances:
    """Live systems by id, each with its own lock: a system is not thread-safe, and
    FastAPI runs handlers on a thread pool, but two instances share no state."""

    def __init__(self, build: Callable[[int], MemorySystem], *, cap: int, idle_s: float) -> None:
        self._build = build
        self.cap = cap
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._systems: dict[str, tuple[MemorySystem, threading.Lock]] = {}
        self._used: dict[str, float] = {}

    def open(self, seed: int) -> str:
        from fastapi import HTTPException

        with self._lock:
            self._expire()
            if len(self._systems) >= self.cap:
                raise HTTPException(
                    status_code=503,
                    detail=f"{len(self._systems)} instances are open, the most this server keeps; "
                    "close one (DELETE /v1/instances/{id}) or wait for idle ones to expire",
                )
            key = uuid.uuid4().hex
            # Reserve the slot first, so that concurrent opens cannot pass the cap while one builds.
            self._systems[key] = (None, threading.Lock())  # type: ignore[assignment]
            self._used[key] = time.monotonic()
        try:
            system = self._build(seed)
        except BaseException:
            with self._lock:
                self._systems.pop(key, None)
                self._used.pop(key, None)
            raise
        with self._lock:
            self._systems[key] = (system, self._systems[key][1])
        return key

    def close(self, key: str) -> bool:
        with self._lock:
            self._used.pop(key, None)
            return self._systems.pop(key, None) is not None

    def _expire(self) -> None:
        """Drop instances unused for ``idle_s`` (called with ``_lock`` held)."""
        cutoff = time.monotonic() - self.idle_s
        for key in [k for k, t in self._used.items() if t < cutoff]:
            self._systems.pop(key, None)
            self._used.pop(key, None)

    def call(self, key: str, fn: Callable[[MemorySystem], Any]) -> Any:
        """``fn(system)`` under that instance's own lock."""
        from fastapi import HTTPException

        with self._lock:
            self._expire()
            found = self._systems.get(key)
            if found is not None and found[0] is not None:
                self._used[key] = time.monotonic()
        if found is None or found[0] is None:
            raise HTTPException(status_code=404, detail=f"no instance {key!r} (open one with POST /v1/instances)")
        system, lock = found
        with lock:
            return fn(system)


class _BodyLimit:
    """ASGI middleware: a request body past ``limit`` bytes gets 413, whether or not it declares its length."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Any], send: Callable[..., Any]) -> None:
        from fastapi import HTTPException
        from starlette.responses import JSONResponse

        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        too_big = f"request body over {self.limit} bytes, the most this server takes"
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await JSONResponse({"detail": too_big}, status_code=413)(scope, receive, send)
            return
        seen = 0

        async def limited() -> Any:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                # An HTTPException passes FastAPI's body reading unchanged and is answered as 413.
                raise HTTPException(status_code=413, detail=too_big)
            return message

        await self.app(scope, limited, send)


class _InFlightLimit:
    """ASGI middleware: past ``limit`` requests in progress, a new one gets 429 with ``Retry-After``.

    The count lives on the event loop's thread (ASGI calls start and end there), so a plain integer is safe.
    """

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.now = 0

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Any], send: Callable[..., Any]) -> None:
        from starlette.responses import JSONResponse

        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.now >= self.limit:
            busy = JSONResponse({"detail": f"{self.now} requests in progress, the most this server serves at once; retry"},
                                status_code=429, headers={"Retry-After": "1"})
            await busy(scope, receive, send)
            return
        self.now += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.now -= 1


def create_app(
    name: str,
    args: Mapping[str, Any] | None = None,
    *,
    make_resources: Callable[[int], Resources] | None = None,
    max_body: int = MAX_BODY,
    max_instances: int = MAX_INSTANCES,
    idle_expiry_s: float = IDLE_EXPIRY_S,
    max_text: int = MAX_TEXT,
    max_in_flight: int = MAX_IN_FLIGHT,
) -> Any:
    """A FastAPI app serving registered system ``name`` with ``args``.

    Args:
        name: Registered system name (``memsim list``).
        args: Its constructor arguments.
        make_resources: Resources for an instance from its seed; default: a
            generator from the seed and the shared default embedder.
        max_body: Largest request body in bytes (larger: 413).
        max_instances: Most live instances (more: 503).
        idle_expiry_s: Seconds after its last call an instance is dropped.
        max_text: Longest query or turn text in characters (longer: 413).
        max_in_flight: Most requests served at once (more: 429).
    """
    from fastapi import FastAPI

    args = dict(args or {})
    learns = learns_from_feedback(name, args)
    description = memory_description(name)
    shared = Resources()

    def default_resources(seed: int) -> Resources:
        # Every instance shares one embedder; each gets its own generator.
        made = shared.fork()
        made.rng = seeded(seed)
        return made

    resources_for = make_resources or default_resources

    def build(seed: int) -> MemorySystem:
        return build_memory(name, args, resources=resources_for(seed))

    build(0)  # fail at start-up, not on the first client, when name or args are bad
    instances = _Instances(build, cap=max_instances, idle_s=idle_expiry_s)
    app = FastAPI(
        title="memsim memory protocol",
        version=PROTOCOL,
        summary=f"memsim's MemorySystem over HTTP, serving {name!r}",
        description=(
            "Mirrors memory.base.MemorySystem: ingest, retrieve, probe (read-only), feedback, "
            "maintain, forget, stats; plus health and describe. Each instance is a fresh system."
        ),
    )

    app.add_middleware(_BodyLimit, limit=max_body)
    # Added last, so it runs first: a request past the limit is answered before its body is read.
    app.add_middleware(_InFlightLimit, limit=max_in_flight)
    _service_routes(app, instances, {"name": name, "args": args, "description": description, "learns": learns})
    _memory_routes(app, instances, max_text)
    return app


def _service_routes(app: Any, instances: _Instances, about: Mapping[str, Any]) -> None:
    """Health, describe (``about``: the served system's name, args, description, learns), opening and closing instances."""

    @app.get("/v1/health", response_model=Health, tags=["service"])
    def health() -> Health:
        """Liveness and protocol version."""
        return Health(status="ok", protocol=PROTOCOL)

    @app.get("/v1/describe", response_model=Describe, tags=["service"])
    def describe() -> Describe:
        """The served system: registered name, args, whether feedback can change it."""
        return Describe(protocol=PROTOCOL, **about)

    @app.post(
        "/v1/instances", response_model=InstanceOut, tags=["instances"],
        responses={503: {"model": ErrorOut, "description": "the most instances this server keeps are open"}},
    )
    def open_instance(body: InstanceRequest) -> InstanceOut:
        """A fresh, empty system whose random source is seeded with ``seed``."""
        return InstanceOut(instance_id=instances.open(body.seed))

    @app.delete("/v1/instances/{instance_id}", response_model=Ok, tags=["instances"])
    def close_instance(instance_id: str) -> Ok:
        """Drop an instance (dropping an unknown one is not an error)."""
        instances.close(instance_id)
        return Ok()


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "the system refused the request"},
    404: {"model": ErrorOut, "description": "no such instance (never opened, closed or expired)"},
    413: {"model": ErrorOut, "description": "request body, query or turn text too large"},
    429: {"model": ErrorOut, "description": "too many requests in progress; retry after Retry-After seconds"},
}
"""The error answers of the memory routes, as the OpenAPI document lists them."""


def _memory_routes(app: Any, instances: _Instances, max_text: int) -> None:
    """The protocol's calls on one instance: ingest, retrieve, probe, feedback, maintain, forget, stats."""
    from fastapi import HTTPException

    errors = _ERRORS

    def text_bound(text: str, what: str) -> None:
        # Checked before the system sees the text: its tokenizer is the part that dies on megabytes.
        if len(text) > max_text:
            raise HTTPException(status_code=413, detail=f"{what} of {len(text):,} characters; the most this server takes "
                                f"is {max_text:,}")

    def call(key: str, fn: Callable[[MemorySystem], Any]) -> Any:
        def guarded(system: MemorySystem) -> Any:
            try:
                return fn(system)
            except (ValueError, KeyError, TypeError) as exc:
                raise HTTPException(status_code=400, detail=f"{type(exc).__name__}: {exc}") from exc

        return instances.call(key, guarded)

    @app.post("/v1/instances/{instance_id}/ingest", response_model=Ok, tags=["memory"], responses=errors)
    def ingest(instance_id: str, body: IngestRequest) -> Ok:
        """Take in the turns of a session as they arrive."""
        for i, t in enumerate(body.turns):
            text_bound(t.text, f"turns[{i}].text")
        turns = [t.to_turn() for t in body.turns]
        call(instance_id, lambda s: s.ingest(turns, user_id=body.user_id, now=body.now))
        return Ok()

    @app.post("/v1/instances/{instance_id}/retrieve", response_model=QueryResponse, tags=["memory"], responses=errors)
    def retrieve(instance_id: str, body: QueryRequest) -> QueryResponse:
        """At most ``k`` memories for ``query``, best first (may change a learning system)."""
        text_bound(body.query, "query")
        got = call(instance_id, lambda s: s.retrieve(body.query, user_id=body.user_id, now=body.now, k=body.k))
        return QueryResponse(results=[RetrievedOut.of(r) for r in got])

    @app.post("/v1/instances/{instance_id}/probe", response_model=QueryResponse, tags=["memory"], responses=errors)
    def probe(instance_id: str, body: QueryRequest) -> QueryResponse:
        """What ``retrieve`` would return now; changes nothing."""
        text_bound(body.query, "query")
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


def openapi_document() -> dict[str, Any]:
    """The protocol's OpenAPI document (independent of the served system)."""
    from memsim.memory.embed import HashEmbedder

    def resources(seed: int) -> Resources:
        return Resources(rng=seeded(seed), embedder_factory=HashEmbedder)

    app = create_app("naive", make_resources=resources)
    doc = app.openapi()
    doc["info"].pop("summary", None)
    return doc
