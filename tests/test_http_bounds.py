"""``memsim serve`` bounds what one client can ask: long texts get 413 before a system sees them, requests past
the in-flight limit get 429, and a client's URL must be a valid one."""

from __future__ import annotations

import socket
import time

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")

from http_helpers import serving  # noqa: E402

from memsim.memory.embed import HashEmbedder  # noqa: E402
from memsim.memory.http import HttpMemory  # noqa: E402
from memsim.memory.http_server import create_app  # noqa: E402
from memsim.memory.resources import Resources  # noqa: E402
from memsim.core.errors import UserError  # noqa: E402

NOW = "2024-01-01T00:00:00+00:00"


def _resources(seed: int) -> Resources:
    return Resources(rng=np.random.default_rng(seed), embedder_factory=HashEmbedder)


def _turn(text: str) -> dict[str, str]:
    return {"turn_id": "t1", "user_id": "u", "speaker": "user", "text": text, "created_at": NOW, "session_id": "s"}


def test_long_texts_get_413_before_the_system_sees_them() -> None:
    app = create_app("naive", make_resources=_resources, max_text=1_000)
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        inst = client.post("/v1/instances", json={"seed": 0}).json()["instance_id"]
        base = f"/v1/instances/{inst}"
        ok = client.post(f"{base}/ingest", json={"user_id": "u", "now": NOW, "turns": [_turn("I live in Lyon")]})
        assert ok.status_code == 200
        long = "word " * 400  # 2,000 characters
        for op in ("retrieve", "probe"):
            got = client.post(f"{base}/{op}", json={"query": long, "user_id": "u", "now": NOW, "k": 3})
            assert got.status_code == 413 and "query of 2,000 characters" in got.json()["detail"]
        got = client.post(f"{base}/ingest", json={"user_id": "u", "now": NOW, "turns": [_turn(long)]})
        assert got.status_code == 413 and "turns[0].text" in got.json()["detail"]
        got = client.post(f"{base}/retrieve", json={"query": "Lyon", "user_id": "u", "now": NOW, "k": 10**9})
        assert got.status_code == 422
        # Nothing refused reached the system: it holds the one turn it was given.
        assert client.get(f"{base}/stats").json()["items"] == 1
        found = client.post(f"{base}/retrieve", json={"query": "Lyon", "user_id": "u", "now": NOW, "k": 3}).json()
        assert [r["source_turn_ids"] for r in found["results"]] == [["t1"]]


def test_requests_past_the_in_flight_limit_get_429() -> None:
    app = create_app("naive", make_resources=_resources, max_in_flight=2)
    with serving(app) as url:
        host, port = url.removeprefix("http://").split(":")
        held = []
        for _ in range(2):
            # A request whose body never comes: it stays in progress and holds its place.
            s = socket.create_connection((host, int(port)))
            s.sendall(b"POST /v1/instances HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100\r\n\r\n{")
            held.append(s)
        time.sleep(0.3)
        try:
            busy = httpx.get(f"{url}/v1/health", timeout=10)
            assert busy.status_code == 429 and busy.headers["retry-after"] == "1"
        finally:
            for s in held:
                s.close()
        deadline = time.monotonic() + 10
        while httpx.get(f"{url}/v1/health", timeout=10).status_code != 200:
            assert time.monotonic() < deadline, "the server never freed its places"
            time.sleep(0.1)


@pytest.mark.parametrize("url, says", [
    ("http://127.0.0.1:abc", "is not a valid URL"),
    ("http://127.0.0.1:70000", "is not a valid URL"),
    ("http://[::1", "is not a valid URL"),
    ("http://", "names no host"),
    ("ftp://x", "must start with http"),
])
def test_a_bad_url_is_one_line(url: str, says: str) -> None:
    with pytest.raises(UserError, match=says):
        HttpMemory(url=url, timeout=1, retries=0)


def test_three_concurrent_15_mb_queries_get_413_at_default_limits() -> None:
    from concurrent.futures import ThreadPoolExecutor

    app = create_app("naive", make_resources=_resources)
    with serving(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        inst = client.post("/v1/instances", json={"seed": 0}).json()["instance_id"]
        query = "lyon " * (3 * 1024 * 1024)  # 15 MiB, under the 16 MiB body cap
        t0 = time.monotonic()
        with ThreadPoolExecutor(3) as pool:
            codes = list(pool.map(lambda _: client.post(f"/v1/instances/{inst}/retrieve", json={
                "query": query, "user_id": "u", "now": NOW, "k": 3}).status_code, range(3)))
        assert codes == [413, 413, 413]
        assert time.monotonic() - t0 < 30  # refused on length, not after tokenising 15 MB
        assert client.get("/v1/health").status_code == 200
