"""Outside systems that fail: a server that breaks mid-run, one that drips its answers, one that answers nonsense."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the http extra is not installed: pip install 'memsim[http]'")

from http_helpers import serving  # noqa: E402
from test_http import NOW, TINY, _hash_resources  # noqa: E402

from memsim.analysis.cli import main  # noqa: E402
from memsim.memory.http import HttpMemory  # noqa: E402
from memsim.memory.http_server import create_app  # noqa: E402
from memsim.core.errors import UserError  # noqa: E402


class _Breaks:
    """An ASGI app that passes calls to ``app`` and answers 500 to every ingest after the first ``healthy`` ones."""

    def __init__(self, app: Any, healthy: int) -> None:
        self.app = app
        self.healthy = healthy
        self.ingests = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/ingest"):
            self.ingests += 1
            if self.ingests > self.healthy:
                body = json.dumps({"detail": "disk full"}).encode()
                await send({"type": "http.response.start", "status": 500,
                            "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def test_a_system_failing_mid_run_is_marked_failed_and_resumed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Failed mid-run: exit 1, "failed" in run.json and the tables; rerun against a healthy server completes it.

    The resumed run's rows equal those of a run against a server that never
    failed, and every row committed before the failure is kept.
    """
    import polars as pl

    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY, encoding="utf-8")
    breaks = _Breaks(create_app("naive", make_resources=_hash_resources), healthy=6)
    out, clean = tmp_path / "run", tmp_path / "clean"
    with serving(breaks) as url:
        argv = ["run", str(cfg), "--system", f"http:url={url}", "--no-report"]
        assert main([*argv, "--out", str(out)]) == 1
        said = capsys.readouterr()
        info = json.loads((out / "run.json").read_text())
        metrics = json.loads((out / "metrics.json").read_text())
        (wire,) = info["failed_systems"]
        assert info["complete"] is False and "ingest" in info["failed_systems"][wire]
        assert metrics["systems"][wire]["failed"] and "mean" not in metrics["systems"][wire]
        assert wire not in metrics.get("twins", {}) and "FAILED" in said.out and "rerun the same command" in said.err
        before = pl.read_parquet(out / "probes.parquet").filter(pl.col("system") == wire)

        breaks.healthy = 10**9  # the server recovers
        assert main([*argv, "--out", str(out)]) == 0
        assert main([*argv, "--out", str(clean)]) == 0
    info = json.loads((out / "run.json").read_text())
    assert info["complete"] is True and info["failed_systems"] == {}
    cols = ["question_id", "retrieved_ids", "retrieved_scores", "deleted_leaks", "recall_all@5"]
    resumed = pl.read_parquet(out / "probes.parquet").filter(pl.col("system") == wire).sort("question_id")
    whole = pl.read_parquet(clean / "probes.parquet").filter(pl.col("system") == wire).sort("question_id")
    assert 0 < before.height < whole.height  # it really stopped halfway
    assert resumed[cols].equals(whole[cols])
    kept = resumed.join(before.select("question_id"), on="question_id")
    assert kept.sort("question_id")[cols].equals(before.sort("question_id")[cols])
    assert json.loads((out / "metrics.json").read_text())["systems"][wire] == json.loads(
        (clean / "metrics.json").read_text()
    )["systems"][wire]


@pytest.fixture
def drip() -> Iterator[str]:
    """A server that sends its headers at once and then one byte of its body every 0.2 s, for a minute."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=_drip, args=(conn, stop), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        srv.close()


def _drip(conn: socket.socket, stop: threading.Event) -> None:
    body = b'{"status": "ok", "protocol": "memsim-memory/1"}' + b" " * 300
    with conn:
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         + f"content-length: {len(body)}\r\n\r\n".encode())
            for i in range(len(body)):
                if stop.is_set():
                    return
                conn.sendall(body[i:i + 1])
                time.sleep(0.2)
        except OSError:
            pass


def test_a_drip_server_cannot_hold_a_call_past_its_deadline(drip: str) -> None:
    """Each read comes well within the timeout, yet the whole answer must come by the deadline."""
    t0 = time.monotonic()
    with pytest.raises(UserError, match=rf"memory server {drip}: health failed after 2 attempts: "
                                        r"no complete answer within the 1 s deadline \(after \d+\.\d s\)"):
        HttpMemory(url=drip, timeout=1.0, retries=1)
    assert time.monotonic() - t0 < 4.0  # two attempts of 1 s, the backoff, at most one read past each


def test_wrong_shape_and_nonsense_answers_name_url_and_operation(make_turn: Any) -> None:
    """A reply of another shape, a NaN score or a repeated memory id: one line naming URL and operation."""
    from memsim.memory.http import QueryResponse

    with serving(create_app("naive", make_resources=_hash_resources)) as url:
        remote = HttpMemory(url=url)
        remote.ingest([make_turn("a"), make_turn("b")], user_id="u1", now=NOW)
        good = remote._call("POST", f"/v1/instances/{remote.instance}/retrieve", "retrieve",
                            body=_query(), idempotent=False)
        row = good["results"][0]
        for reply, says in (
            ({"results": [{"text": "no id"}]}, "wrong-shape reply: results.0.memory_id"),
            ({"results": [{**row, "score": float("nan")}]}, "wrong-shape reply: results.0.score"),
            ({"results": [row, row]}, f"memory id {row['memory_id']!r} more than once"),
            ([1, 2], "wrong-shape reply"),
        ):
            with pytest.raises(UserError, match=rf"^memory server {url}: retrieve answered .*{_escape(says)}") as err:
                remote._results(reply, "retrieve")
            assert "\n" not in str(err.value)
        assert QueryResponse.model_validate(good).results  # the real answer passes the same checks


def _query() -> Any:
    from memsim.memory.http import QueryRequest

    return QueryRequest(query="a", user_id="u1", now=NOW, k=2)


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def test_serve_refuses_big_bodies_caps_instances_and_expires_idle_ones() -> None:
    """413 past the body limit (declared or not), 503 past the instance cap, 404 after idle expiry."""
    import httpx

    app = create_app("naive", make_resources=_hash_resources, max_body=1000, max_instances=2, idle_expiry_s=3.0)
    with serving(app) as url:
        big = {"user_id": "u", "now": NOW.isoformat(), "turns": [], "pad": "x" * 5000}
        first = httpx.post(f"{url}/v1/instances", json={"seed": 0}).json()["instance_id"]
        assert httpx.post(f"{url}/v1/instances/{first}/ingest", json=big).status_code == 413

        def chunked() -> Iterator[bytes]:  # no content-length: the limit counts what arrives
            yield json.dumps(big).encode()

        assert httpx.post(f"{url}/v1/instances/{first}/ingest", content=chunked()).status_code == 413
        httpx.post(f"{url}/v1/instances", json={"seed": 1}).raise_for_status()
        full = httpx.post(f"{url}/v1/instances", json={"seed": 2})
        assert full.status_code == 503 and "instances are open" in full.json()["detail"]
        time.sleep(3.2)  # both idle past the expiry: dropped, room again
        assert httpx.get(f"{url}/v1/instances/{first}/stats").status_code == 404
        assert httpx.post(f"{url}/v1/instances", json={"seed": 3}).status_code == 200


def test_serve_runs_calls_to_different_instances_side_by_side() -> None:
    """A slow call to one instance does not hold a call to another (one lock per instance)."""
    from memsim.memory.http_server import _Instances

    gate = threading.Event()
    instances = _Instances(lambda seed: object(), cap=4, idle_s=60)  # type: ignore[arg-type, return-value]
    a, b = instances.open(0), instances.open(1)
    slow = threading.Thread(target=instances.call, args=(a, lambda s: gate.wait(5)))
    slow.start()
    t0 = time.monotonic()
    assert instances.call(b, lambda s: "done") == "done"
    assert time.monotonic() - t0 < 1.0
    gate.set()
    slow.join()


def test_the_openapi_document_asks_for_k_of_at_least_one() -> None:
    """The server refuses k = 0, and its document says so."""
    from memsim.memory.http_server import openapi_document

    k = openapi_document()["components"]["schemas"]["QueryRequest"]["properties"]["k"]
    assert k["minimum"] == 1
