"""memsim's HTTP protocol: the served system, the client adapter, its errors, OpenAPI, and a run through the wire."""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the http extra is not installed: pip install 'memsim[http]'")

from http_helpers import free_port, serving  # noqa: E402

from memsim.analysis.cli import main  # noqa: E402
from memsim.memory.checks import CheckSkipped, CheckSubject, iter_checks  # noqa: E402
from memsim.memory.embed import HashEmbedder  # noqa: E402
from memsim.memory.http import PROTOCOL, HttpMemory  # noqa: E402
from memsim.memory.http_server import create_app, openapi_document  # noqa: E402
from memsim.memory.registry import Resources, build_memory, learns_from_feedback  # noqa: E402
from memsim.core.errors import UserError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OPENAPI = REPO / "memory" / "http_openapi.json"
NOW = datetime(2024, 3, 1, tzinfo=timezone.utc)


def _hash_resources(seed: int) -> Resources:
    return Resources(rng=np.random.default_rng(seed), embedder_factory=HashEmbedder)


@pytest.fixture(scope="module")
def naive_url() -> Iterator[str]:
    """``naive`` (hash embedder) served on loopback."""
    with serving(create_app("naive", make_resources=_hash_resources)) as url:
        yield url


@pytest.fixture(scope="module")
def learner_url() -> Iterator[str]:
    """``control-learner`` (learns from feedback) served on loopback."""
    with serving(create_app("control-learner", make_resources=_hash_resources)) as url:
        yield url


def _client(url: str, **args: Any) -> HttpMemory:
    return build_memory("http", {"url": url, **args}, resources=Resources(rng=np.random.default_rng(7)))


# --- the document ---------------------------------------------------------------------------------


def test_committed_openapi_document_is_the_servers(tmp_path: Path) -> None:
    """memory/http_openapi.json is what the server generates (regenerate: memsim serve --openapi PATH)."""
    assert json.loads(OPENAPI.read_text(encoding="utf-8")) == json.loads(json.dumps(openapi_document()))
    out = tmp_path / "openapi.json"
    assert main(["serve", "--openapi", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == OPENAPI.read_text(encoding="utf-8")


def test_document_covers_every_protocol_method() -> None:
    paths = openapi_document()["paths"]
    ops = {p.rsplit("/", 1)[-1] for p in paths if p.startswith("/v1/instances/{instance_id}/")}
    assert ops == {"ingest", "retrieve", "probe", "feedback", "maintain", "forget", "stats"}
    assert {"/v1/health", "/v1/describe", "/v1/instances"} <= set(paths)


# --- the adapter against a served system ------------------------------------------------------------


def test_the_adapter_gives_what_the_system_gives(naive_url: str, make_turn: Any) -> None:
    remote = _client(naive_url)
    local = build_memory("naive", resources=_hash_resources(0))
    turns = [make_turn(t, i=i) for i, t in enumerate(["I adopted a beagle", "My sister lives in Oslo", "Tea, no sugar"])]
    for system in (remote, local):
        system.ingest(turns, user_id="u1", now=NOW)
    for query in ("dog", "Oslo sister"):
        assert remote.retrieve(query, user_id="u1", now=NOW, k=2) == local.retrieve(query, user_id="u1", now=NOW, k=2)
        assert remote.probe(query, user_id="u1", now=NOW, k=3) == local.probe(query, user_id="u1", now=NOW, k=3)
    assert remote.stats() == local.stats()
    remote.forget(["u1:t0"], user_id="u1", now=NOW)
    remote.forget(["u1:t0"], user_id="u1", now=NOW)  # idempotent
    assert all("beagle" not in r.text for r in remote.retrieve("beagle", user_id="u1", now=NOW, k=5))
    assert remote.stats().items == 2


def test_each_adapter_has_its_own_instance(naive_url: str, make_turn: Any) -> None:
    a, b = _client(naive_url), _client(naive_url)
    a.ingest([make_turn("only in a")], user_id="u1", now=NOW)
    assert b.stats().items == 0 and a.stats().items == 1
    a.close()
    with pytest.raises(UserError, match=rf"memory server {naive_url}: stats failed: HTTP 404"):
        a._client = __import__("httpx").Client(base_url=naive_url)
        a.stats()


def test_learns_comes_from_the_server(naive_url: str, learner_url: str) -> None:
    assert learns_from_feedback("http", {"url": naive_url}) is False
    assert learns_from_feedback("http", {"url": learner_url}) is True
    assert learns_from_feedback("http", {"url": naive_url, "learns": True}) is True
    with pytest.raises(UserError, match="does not learn from feedback; give learns=false"):
        _client(naive_url, learns=True)


def test_bad_requests_come_back_as_user_errors_naming_url_and_operation(naive_url: str) -> None:
    from memsim.memory.http import QueryRequest

    remote = _client(naive_url)
    bad = QueryRequest.model_construct(query="q", user_id="u1", now=NOW, k=-1)  # what the client itself refuses
    with pytest.raises(UserError, match=rf"memory server {naive_url}: retrieve failed: HTTP 422: .*greater"):
        remote._instance_call("POST", "retrieve", bad)


# --- transport errors -------------------------------------------------------------------------------


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers /v1/health from a script: a list of (status, delay s, body)."""

    script: list[tuple[int, float, dict[str, Any]]] = []
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        type(self).seen.append(self.path)
        status, delay, body = self.script.pop(0) if self.script else (200, 0.0, {"status": "ok", "protocol": "x"})
        time.sleep(delay)
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def scripted() -> Iterator[tuple[str, type[_Scripted]]]:
    handler = type("Handler", (_Scripted,), {"script": [], "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_nothing_listening_is_a_clear_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(UserError, match=rf"memory server {url}: health failed after 2 attempts: cannot connect"):
        HttpMemory(url=url, retries=1)


def test_idempotent_calls_are_retried_on_503(scripted: tuple[str, type[_Scripted]]) -> None:
    url, handler = scripted
    handler.script += [(503, 0.0, {"detail": "busy"}), (503, 0.0, {"detail": "busy"})]
    with pytest.raises(UserError, match="speaks 'x'"):  # the third answer is a health of another protocol
        HttpMemory(url=url, retries=2)
    assert handler.seen == ["/v1/health"] * 3


def test_a_slow_server_times_out(scripted: tuple[str, type[_Scripted]]) -> None:
    url, handler = scripted
    handler.script += [(200, 1.0, {"status": "ok", "protocol": PROTOCOL})]
    with pytest.raises(UserError, match=r"health failed: no complete answer within the 0.2 s deadline"):
        HttpMemory(url=url, timeout=0.2, retries=0)


def test_url_must_be_http() -> None:
    with pytest.raises(UserError, match="must start with http"):
        HttpMemory(url="127.0.0.1:8765")


# --- conformance through the wire ---------------------------------------------------------------------


@pytest.mark.parametrize("check", [cid for cid, _ in iter_checks()])
def test_learning_system_conforms_through_the_adapter(check: str, learner_url: str) -> None:
    """A system that learns (control-learner), served, passes every check through the adapter.

    (``naive`` through the adapter is in test_conformance as ``http:<check>``.)
    """
    fn = dict(iter_checks())[check]
    subject = CheckSubject(name="http", args={"url": learner_url}, make_resources=lambda: Resources(rng=np.random.default_rng(7)))
    try:
        fn(subject)
    except CheckSkipped as exc:
        pytest.skip(str(exc))


# --- property-based check of the server against its OpenAPI document ----------------------------------


def test_server_conforms_to_its_openapi_document() -> None:
    """schemathesis generates requests from the document; every answer must match it (no 5xx)."""
    schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is a dev extra")
    from hypothesis import HealthCheck, given, settings
    from schemathesis.specs.openapi.checks import positive_data_acceptance
    from starlette.testclient import TestClient

    app = create_app("naive", make_resources=_hash_resources)
    real = TestClient(app).post("/v1/instances", json={"seed": 0}).json()["instance_id"]
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures: list[str] = []
    for op in schema.get_all_operations():
        operation = op.ok()

        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(case=operation.as_strategy())
        def exercise(case: Any) -> None:
            if case.method != "DELETE" and "instance_id" in (case.path_parameters or {}):
                case.path_parameters["instance_id"] = real
            # A 400 for schema-valid input is right here: the schema cannot say that a turn's
            # user_id must be the one it is ingested for, so positive-data acceptance is off.
            case.call_and_validate(excluded_checks=[positive_data_acceptance])

        try:
            exercise()
        except Exception as exc:  # noqa: BLE001 - collected and reported together
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)


# --- a run through the wire -------------------------------------------------------------------------


TINY = """
[scenario]
name = "persona"
users = 3
months = 1
sessions_per_week = 2.0
turns_per_session = 4
questions_per_week = 3.0
deletion_rate = 2.0

[run]
seed = 0
k = 5
feedback_delay_hours = 1.0
maintenance_every_hours = 24.0
"""

@pytest.mark.slow
def test_a_run_through_the_wire_gives_the_same_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--system http:url=...`` (memsim serve naive) scores exactly as ``--system naive`` in the same run."""
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY, encoding="utf-8")
    with serving(create_app("naive")) as url:
        out = tmp_path / "run"
        argv = ["run", str(cfg), "--system", "naive", "--system", f"http:url={url}", "--out", str(out), "--no-report"]
        assert main(argv) == 0
    import polars as pl

    metrics = json.loads((out / "metrics.json").read_text())
    wire = next(k for k in metrics["systems"] if k.startswith("http"))
    direct, remote = dict(metrics["systems"]["naive"]), dict(metrics["systems"][wire])
    assert direct["overall"]["questions"] > 0 and direct["final_items"] > 0
    # Against the static control (naive itself) the DiD is undefined for naive and exactly zero through the wire.
    assert remote["did_control"] == 0.0 and direct.get("did_control") is None
    strip = lambda m: {k: v for k, v in m.items() if not k.startswith("did_control")}  # noqa: E731
    assert strip(remote) == strip(direct)
    rows = pl.read_parquet(out / "probes.parquet").sort("question_id")
    cols = ["question_id", "retrieved_ids", "retrieved_scores", "retrieved_text", "deleted_leaks", "recall_all@5"]
    assert rows.filter(pl.col("system") == wire)[cols].equals(rows.filter(pl.col("system") == "naive")[cols])
    # forget went through the wire too: the world asked for deletions, and both stores answered alike after them
    deletions = re.search(r"deletions (\d+)", capsys.readouterr().out)
    assert deletions is not None and int(deletions.group(1)) > 0
