"""HTTP systems: a dead server said once, before anything is written; the protocol's value in the OpenAPI file."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("httpx", reason="the http extra")

from memsim.analysis.cli import main  # noqa: E402
from memsim.memory.http import PROTOCOL  # noqa: E402
from memsim.memory.http_health import check_answering  # noqa: E402
from memsim.core.errors import UserError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OPENAPI = REPO / "memory" / "http_openapi.json"
TINY = '[scenario]\nname = "persona"\nusers = 2\nmonths = 1\n\n[run]\nseed = 0\nk = 5\nn_boot = 100\n'


def _dead_url() -> str:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_check_says_a_dead_server_once(capsys: pytest.CaptureFixture[str]) -> None:
    url = _dead_url()
    assert main(["check", f"http:url={url}"]) == 2
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [f"memsim: error: http:url={url} is not answering: connection refused"]
    assert "FAIL" not in out  # no check ran, so none repeats the error


def test_run_checks_health_before_it_creates_the_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _dead_url()
    config = tmp_path / "tiny.toml"
    config.write_text(TINY, encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", str(config), "--system", "naive", "--system", f"http:url={url}", "--out", str(out)]) == 2
    assert f"http:url={url} is not answering: connection refused" in capsys.readouterr().err
    assert not out.exists()
    import memsim

    with pytest.raises(UserError, match=f"http:url={url} is not answering: connection refused"):
        memsim.run(config, systems=[f"http:url={url}"], out=tmp_path / "api")
    assert not (tmp_path / "api").exists()


class _Other(BaseHTTPRequestHandler):
    """A server that answers /v1/health, in another protocol (or with an error status on /broken)."""

    def do_GET(self) -> None:  # noqa: N802 - the handler's API
        if self.path.startswith("/broken"):
            self.send_response(503)
            self.end_headers()
            return
        body = json.dumps({"status": "ok", "protocol": "memsim-memory/0"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def other_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Other)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_that_answers_otherwise_is_named(other_url: str) -> None:
    with pytest.raises(UserError, match=f"http:url={other_url} answers, but speaks 'memsim-memory/0'; memsim speaks"):
        check_answering(other_url)
    with pytest.raises(UserError, match="answers, but not as a memsim memory server: GET /v1/health gave HTTP 503"):
        check_answering(f"{other_url}/broken")


def test_the_openapi_file_gives_protocol_as_an_enum_and_validates() -> None:
    schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is a dev extra")
    import jsonschema_rs

    doc = json.loads(OPENAPI.read_text(encoding="utf-8"))
    for model in ("Health", "Describe"):
        assert doc["components"]["schemas"][model]["properties"]["protocol"]["enum"] == [PROTOCOL], model
    # The file loads as an OpenAPI document with every operation resolvable.
    schema = schemathesis.openapi.from_path(str(OPENAPI))
    operations = [op.ok() for op in schema.get_all_operations()]
    assert any(op.path == "/v1/health" for op in operations)
    # A health answer is valid with memsim's protocol and invalid with any other value.
    health = jsonschema_rs.validator_for(doc["components"]["schemas"]["Health"])
    assert health.is_valid({"status": "ok", "protocol": PROTOCOL})
    assert not health.is_valid({"status": "ok", "protocol": "memsim-memory/2"})
