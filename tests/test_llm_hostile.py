"""LLM endpoints that misbehave, played by a real server on loopback.

The OpenAI-compatible client must cut off a server that drips its reply
(headers or body, a byte at a time) at the ``--llm-timeout`` deadline,
refuse a body past its size limit while reading it, and turn a reply that is
not a completion (damaged JSON, no choices, null content, plain text) into a
counted error rather than an empty answer. A run whose answers fail on more
than a threshold of questions exits non-zero with the count.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsim.sim.answer.llm import LLMReplyError, LLMUnavailableError, OpenAICompatibleLLM

COMPLETION = {
    "id": "x", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Lisbon"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13},
}


def _body(mode: str) -> bytes:
    if mode == "truncated":
        return json.dumps(COMPLETION).encode()[:40]
    if mode == "text":
        return b"Lisbon, as plain text"
    if mode == "no_choices":
        return json.dumps({**COMPLETION, "choices": []}).encode()
    if mode == "null_content":
        return json.dumps({**COMPLETION, "choices": [{"index": 0, "message": {"role": "assistant", "content": None},
                                                      "finish_reason": "stop"}]}).encode()
    return json.dumps(COMPLETION).encode()


class _Hostile:
    """A loopback HTTP/1.1 server that answers every request in one scripted way (``mode``)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests = 0
        hostile = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock: socket.socket = self.request
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, rest = data.split(b"\r\n\r\n", 1)
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), 0)
                while len(rest) < length:
                    rest += sock.recv(65536)
                hostile.requests += 1
                try:
                    hostile.answer(sock)
                except OSError:
                    pass  # the client hung up, as it should on a hostile server

        socketserver.ThreadingTCPServer.daemon_threads = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, sock: socket.socket) -> None:
        mode = self.mode
        if mode == "huge":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 90000000\r\n"
                         b"Connection: close\r\n\r\n")
            block = b" " * (1 << 20)
            for _ in range(90):
                sock.sendall(block)
            return
        body = _body(mode)
        head = (f"HTTP/1.1 200 OK\r\nContent-Type: {'text/plain' if mode == 'text' else 'application/json'}\r\n"
                # One request per connection: the client never reuses a socket this server is about to close.
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        if mode == "drip_headers":
            for byte in head:
                sock.sendall(bytes([byte]))
                time.sleep(0.25)
        elif mode == "drip_body":
            sock.sendall(head)
            for byte in body:
                sock.sendall(bytes([byte]))
                time.sleep(0.25)
        else:
            sock.sendall(head + body)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hostile() -> Iterator:
    made: list[_Hostile] = []

    def make(mode: str) -> _Hostile:
        made.append(_Hostile(mode))
        return made[-1]

    yield make
    for h in made:
        h.stop()


MESSAGES = [{"role": "user", "content": "Where does Ana live?"}]


@pytest.mark.parametrize("mode", ["drip_headers", "drip_body"])
def test_a_dripping_server_is_cut_off_at_the_deadline(hostile, mode: str) -> None:
    server = hostile(mode)
    client = OpenAICompatibleLLM("m", base_url=server.url, timeout_s=1.5, max_retries=1)
    client._api()  # the SDK's import and set-up are not the call being timed
    t0 = time.monotonic()
    with pytest.raises(LLMUnavailableError, match=r"failed 2 time\(s\) in a row, each attempt with a 1.5 s deadline"):
        client.chat(MESSAGES, max_tokens=8)
    took = time.monotonic() - t0
    # Two attempts of 1.5 s each and the SDK's wait between them (about 1 s), with room for a busy machine;
    # the drip alone lasts 17 s (headers) or a minute (body) per attempt.
    assert server.requests == 2 and took < 8.0, took


def test_a_healthy_server_is_not_cut_off(hostile) -> None:
    client = OpenAICompatibleLLM("m", base_url=hostile("ok").url, timeout_s=1.5, max_retries=0)
    reply = client.chat(MESSAGES, max_tokens=8)
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == ("Lisbon", 11, 2)


@pytest.mark.parametrize("mode, says", [
    ("truncated", "not valid JSON"),
    ("no_choices", "reply has no choices"),
    ("null_content", r"choices\[0\].message.content is null"),
    ("text", "reply is not a JSON completion"),
])
def test_a_reply_that_is_not_a_completion_is_an_error(hostile, mode: str, says: str) -> None:
    client = OpenAICompatibleLLM("m", base_url=hostile(mode).url, timeout_s=5, max_retries=0)
    with pytest.raises(LLMReplyError, match=says):
        client.chat(MESSAGES, max_tokens=8)


def test_a_body_past_the_limit_is_refused_while_read(hostile) -> None:
    import resource

    server = hostile("huge")
    client = OpenAICompatibleLLM("m", base_url=server.url, timeout_s=20, max_retries=0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(LLMUnavailableError, match=r"response body over 8,388,608 bytes"):
        client.chat(MESSAGES, max_tokens=8)
    # Reading stopped at the limit: the 90 MB body never reached memory (ru_maxrss is in KiB on Linux).
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 60 * 1024


def test_retries_and_timeouts_are_bounded_when_parsed(capsys: pytest.CaptureFixture[str]) -> None:
    from memsim.analysis.cli import main

    for flag, value in (("--llm-retries", "1000000000"), ("--llm-timeout", "0"), ("--llm-timeout", "inf")):
        with pytest.raises(SystemExit) as exit_:
            main(["run", "nothing.toml", flag, value])
        assert exit_.value.code == 2
        assert f"argument {flag}: must be" in capsys.readouterr().err


TINY = """[scenario]
name = "persona"
users = 2
months = 0.25
sessions_per_week = 2.0
turns_per_session = 4
questions_per_week = 6.0

[run]
seed = 0
k = 3
systems = ["bm25"]
control = "bm25"
"""


@pytest.mark.slow
def test_a_run_whose_answers_all_fail_exits_non_zero_with_the_count(hostile, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from memsim.analysis.cli import main

    server = hostile("truncated")
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY, encoding="utf-8")
    code = main(["run", str(cfg), "--out", str(tmp_path / "run"), "--no-report", "--no-placebo", "--reader", "short",
                 "--llm", "openai", "--llm-model", "m", "--llm-base-url", server.url, "--llm-retries", "0", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "answers failed: " in err and "not valid JSON" in err
    import re

    failed, asked = map(int, re.search(r"answers failed: (\d+) of (\d+) questions", err).groups())
    assert failed == asked > 0
