"""``memsim scenario render --llm``: turns rewritten through an endpoint, facts verified, the truth kept.

Fast tests use a scripted client and a scripted OpenAI-compatible endpoint
on loopback (a stdlib HTTP server in a thread); the slow one renders through
a real llama.cpp server with the embedded SmolLM2 model, whose rewrites
mostly fail verification, and checks that the counts say so.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memsim.analysis.cli import main
from memsim.analysis.profile import config_stream
from memsim.analysis.render import RENDER_COUNTS, render_stream, verify_fact
from memsim.scenarios.world_file import read_world
from memsim.sim.answer.llm import ScriptedLLM
from memsim.core.errors import UserError
from memsim.sim.events import Question, Session
from tests.test_llm_server import gguf, server  # noqa: F401 - the llama.cpp server on loopback (fixtures)

TINY = """[scenario]
name = "persona"
users = 2
months = 0.5
sessions_per_week = 2.0
questions_per_week = 3.0

[run]
seed = 1
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY, encoding="utf-8")
    return path


def _line(messages) -> str:
    return messages[-1]["content"].split("Line to rewrite: ", 1)[1]


def _script(messages, temperature: float) -> str:
    """Keeps the line (so facts verify) when it is of even length or on a retry; else drops it."""
    line = _line(messages)
    return f"Well, {line.lower()}" if len(line) % 2 == 0 or temperature > 0 else "Let us talk about something else."


def test_verify_fact_is_case_insensitive_and_takes_aliases() -> None:
    assert verify_fact("we moved to KRAKOW last week", ["Krakow"])
    assert verify_fact("my cat, the grey one", ["Pixel", "the grey one"])
    assert not verify_fact("we moved somewhere", ["Krakow"])


def test_persona_facts_are_in_their_generated_turns(tiny: Path) -> None:
    _, stream, _ = config_stream(tiny)
    turns = {t.turn_id: t for e in stream.events if isinstance(e, Session) for t in e.turns}
    facts = stream.meta["facts"]
    assert facts and set(facts) <= set(turns)
    assert all(verify_fact(turns[tid].text, values) for tid, values in facts.items())
    # Every question's evidence is a fact-bearing turn: what a render must keep is what the questions ask.
    assert {t for e in stream.events if isinstance(e, Question) for t in e.evidence} <= set(facts)


def test_render_keeps_truth_and_counts(tiny: Path) -> None:
    _, stream, _ = config_stream(tiny)
    facts = stream.meta["facts"]
    calls: list[float] = []

    class Client(ScriptedLLM):
        def chat(self, messages, *, max_tokens, temperature=0.0, seed=0):
            calls.append(temperature)
            self._reply = lambda m: _script(m, temperature)
            return super().chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed)

    out, counts = render_stream(stream, Client(""), retries=2)
    before = {t.turn_id: t for e in stream.events if isinstance(e, Session) for t in e.turns}
    after = {t.turn_id: t for e in out.events if isinstance(e, Session) for t in e.turns}
    assert list(after) == list(before)
    fact_turns = [t for t in before.values() if t.turn_id in facts]
    odd = [t for t in fact_turns if len(t.text) % 2]
    assert counts == {
        "turns": len(before), "fact_turns": len(fact_turns), "rewritten": len(before), "verified": len(fact_turns),
        "retried": len(odd), "retries": len(odd), "kept_as_generated": 0,
    }
    assert len(calls) == len(before) + len(odd)
    for tid, t in after.items():
        # A turn without a fact is not verified: its first rewrite stands, whatever it says.
        said = before[tid].text
        kept = tid in facts or len(said) % 2 == 0
        assert t.text == (f"Well, {said.lower()}" if kept else "Let us talk about something else.")
        assert (t.speaker, t.created_at, t.session_id) == (before[tid].speaker, before[tid].created_at, before[tid].session_id)
    # Questions, gold and evidence are untouched; every fact turn still carries its value.
    assert [e for e in out.events if isinstance(e, Question)] == [e for e in stream.events if isinstance(e, Question)]
    assert all(verify_fact(after[tid].text, vals) for tid, vals in facts.items() if tid in after)
    assert out.meta["render"] == counts


def test_failed_rewrites_are_kept_as_generated(tiny: Path) -> None:
    _, stream, _ = config_stream(tiny)
    out, counts = render_stream(stream, ScriptedLLM("Let us talk about something else."), retries=1)
    n_fact = counts["fact_turns"]
    assert n_fact > 0 and counts["verified"] == 0 and counts["retried"] == n_fact == counts["retries"]
    assert counts["kept_as_generated"] == n_fact and counts["rewritten"] == counts["turns"] - n_fact
    facts = stream.meta["facts"]
    kept = {t.turn_id: t.text for e in out.events if isinstance(e, Session) for t in e.turns if t.turn_id in facts}
    original = {t.turn_id: t.text for e in stream.events if isinstance(e, Session) for t in e.turns if t.turn_id in facts}
    assert kept == original


def test_a_named_judge_must_accept_too(tiny: Path) -> None:
    _, stream, _ = config_stream(tiny)
    # The f1_mem0 judge scores the whole rewritten line against the value alone: long lines fall under 0.5.
    _, loose = render_stream(stream, ScriptedLLM(lambda m: _line(m) + " and many other words besides"), retries=0)
    _, strict = render_stream(stream, ScriptedLLM(lambda m: _line(m) + " and many other words besides"),
                              judges=("f1_mem0",), retries=0)
    assert loose["verified"] == loose["fact_turns"] > strict["verified"]


def test_a_stream_without_facts_cannot_be_rendered(tiny: Path) -> None:
    from dataclasses import replace

    _, stream, _ = config_stream(tiny)
    with pytest.raises(UserError, match="meta\\['facts'\\]"):
        render_stream(replace(stream, meta={}), ScriptedLLM("x"))


class _Endpoint(BaseHTTPRequestHandler):
    """A scripted OpenAI-compatible endpoint: ``/models`` and ``/chat/completions``."""

    requests: list[dict] = []

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "scripted", "object": "model", "created": 0, "owned_by": "test"}]})

    def do_POST(self) -> None:
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(req)
        text = _script(req["messages"], req.get("temperature", 0.0))
        self._send({"id": "x", "object": "chat.completion", "created": 0, "model": req["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


@pytest.fixture
def endpoint() -> Iterator[str]:
    _Endpoint.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_render_cli_through_an_endpoint_writes_counts_and_reruns_from_cache(tiny: Path, endpoint: str, tmp_path: Path,
                                                                            capsys) -> None:
    out = tmp_path / "world.jsonl"
    argv = ["scenario", "render", str(tiny), "--llm", "openai", "--llm-base-url", endpoint, "--out", str(out),
            "--cache-dir", str(tmp_path / "cache")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    header, stream = read_world(out)
    counts = header["counts"]
    assert set(counts) == set(RENDER_COUNTS) and counts["turns"] == stream.totals()["turns"]
    assert f"verified {counts['verified']:,}" in printed and counts["verified"] == counts["fact_turns"] > 0
    assert header["source"]["render"]["llm"]["model"] == "scripted"
    sent = len(_Endpoint.requests)
    # Identical requests (the same line after the same line) are sent once, then served from the cache.
    assert 0 < sent <= counts["turns"] + counts["retries"]
    assert len({json.dumps(r, sort_keys=True) for r in _Endpoint.requests}) == sent
    assert main([*argv[:-4], "--out", str(tmp_path / "again.jsonl"), *argv[-2:]]) == 0
    assert len(_Endpoint.requests) == sent  # the rerun was served from the response cache
    assert (tmp_path / "again.jsonl").read_bytes() == out.read_bytes()


def test_render_flags_need_llm(tiny: Path, tmp_path: Path, capsys) -> None:
    assert main(["scenario", "render", str(tiny), "--out", str(tmp_path / "w.jsonl"), "--judge", "contains"]) == 2
    assert "need --llm" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.llm
def test_render_through_a_real_llama_cpp_server(server, tmp_path: Path) -> None:
    # One user for a week: a few dozen rewrites, each a call to the small model on one thread.
    tiny = tmp_path / "one.toml"
    tiny.write_text(TINY.replace("users = 2", "users = 1").replace("months = 0.5", "months = 0.25"), encoding="utf-8")
    out = tmp_path / "world.jsonl"
    assert main(["scenario", "render", str(tiny), "--llm", "openai", "--llm-base-url", server.url,
                 "--llm-model", "smollm2", "--retries", "1", "--out", str(out)]) == 0
    header, stream = read_world(out)
    counts = header["counts"]
    print(json.dumps(counts))
    assert counts["turns"] == stream.totals()["turns"] and counts["fact_turns"] > 0
    assert counts["verified"] + counts["kept_as_generated"] >= counts["fact_turns"]
    # Kept or verified, every fact-bearing turn still carries its value: the truth survived the rewrite.
    facts = stream.meta["facts"]
    assert all(verify_fact(t.text, facts[t.turn_id]) for e in stream.events if isinstance(e, Session)
               for t in e.turns if t.turn_id in facts)
    _, source, _ = config_stream(tiny)
    assert [e for e in stream.events if isinstance(e, Question)] == [e for e in source.events if isinstance(e, Question)]
