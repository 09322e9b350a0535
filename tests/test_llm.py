"""LLM clients, response cache, meter and prices, with fakes (fast).

The OpenAI-compatible client is exercised against a small scripted HTTP
server on loopback, so retries, backoff and errors go through the real
``openai`` package and a real socket.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memsim.memory.base import Retrieved
from memsim.sim.answer import (
    DEFAULT_PRICES,
    AnswerSetup,
    CachedLLM,
    Completion,
    LLMClient,
    LLMRequestError,
    LLMUnavailableError,
    Meter,
    MeteredLLM,
    OpenAICompatibleLLM,
    PriceTable,
    Reader,
    ScriptedLLM,
    AnswerOptions,
    answer_setup,
    format_cost,
    make_judge,
    make_llm,
)
from memsim.analysis.cli.options import add_answer_arguments
from memsim.core.errors import UserError

MESSAGES = [{"role": "user", "content": "Where does Ana live?"}]


def _setup_of(args, default_judges):
    """The answer setup of parsed answer flags (each flag is the AnswerOptions field of its name)."""
    return answer_setup(AnswerOptions(**vars(args)), default_judges=default_judges)


# ---------------------------------------------------------------- scripted HTTP endpoint


class _Endpoint:
    """A loopback server answering chat requests from a script of HTTP statuses."""

    def __init__(self, statuses: list[int], *, reply: str = "Lisbon", headers: dict[str, str] | None = None):
        self.statuses = list(statuses)  # consumed one per request; 200 once empty
        self.reply = reply
        self.headers = headers or {}
        self.requests: list[dict] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append(body)
                status = endpoint.statuses.pop(0) if endpoint.statuses else 200
                if status == 200:
                    payload = {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": endpoint.reply},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13},
                    }
                else:
                    payload = {"error": {"message": f"scripted {status}", "type": "test"}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in endpoint.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                data = json.dumps(
                    {"object": "list", "data": [{"id": "served-model", "object": "model", "created": 0, "owned_by": "me"}]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint_factory() -> Iterator:
    made: list[_Endpoint] = []

    def make(statuses: list[int], **kw) -> _Endpoint:
        ep = _Endpoint(statuses, **kw)
        made.append(ep)
        return ep

    yield make
    for ep in made:
        ep.stop()


def _client(url: str, **kw) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM("test-model", base_url=url, timeout_s=5, **kw)


def _retry_waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The waits the openai SDK logged before each of its retries (it retries; memsim does not)."""
    return [float(r.args[0]) for r in caplog.records if r.name.startswith("openai") and r.msg.startswith("Retrying")]


# ---------------------------------------------------------------- OpenAI-compatible client


def test_openai_client_returns_text_and_usage(endpoint_factory, monkeypatch, caplog) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    caplog.set_level("INFO", logger="openai")
    ep = endpoint_factory([])
    llm = _client(ep.url)
    assert isinstance(llm, LLMClient)
    out = llm.chat(MESSAGES, max_tokens=7, temperature=0.0, seed=3)
    assert (out.text, out.prompt_tokens, out.completion_tokens, out.cached) == ("Lisbon", 11, 2, False)
    sent = ep.requests[0]
    assert sent["model"] == "test-model" and sent["max_tokens"] == 7 and sent["seed"] == 3
    assert sent["messages"] == MESSAGES and sent["temperature"] == 0.0
    assert _retry_waits(caplog) == []


def test_openai_client_retries_with_backoff_then_succeeds(endpoint_factory, caplog) -> None:
    caplog.set_level("INFO", logger="openai")
    ep = endpoint_factory([503, 429, 500])
    out = _client(ep.url).chat(MESSAGES, max_tokens=4)
    assert out.text == "Lisbon"
    assert len(ep.requests) == 4
    # The SDK's backoff: 0.5 s doubling, less up to 25% jitter (it was memsim's own 0.25, 0.5, 1.0).
    waits = _retry_waits(caplog)
    assert len(waits) == 3 and all(0.75 * b <= w <= b for w, b in zip(waits, [0.5, 1.0, 2.0]))


def test_openai_client_honours_retry_after(endpoint_factory, caplog) -> None:
    caplog.set_level("INFO", logger="openai")
    ep = endpoint_factory([429], headers={"Retry-After": "1.5"})
    _client(ep.url).chat(MESSAGES, max_tokens=4)
    assert _retry_waits(caplog) == [1.5]  # longer than the SDK's first backoff: the server's wait wins


def test_openai_client_gives_up_with_clear_error(endpoint_factory, caplog) -> None:
    caplog.set_level("INFO", logger="openai")
    ep = endpoint_factory([500] * 10)
    with pytest.raises(LLMUnavailableError, match=r"127\.0\.0\.1.*failed 3 time") as info:
        _client(ep.url, max_retries=2).chat(MESSAGES, max_tokens=4)
    assert isinstance(info.value, UserError)
    assert len(ep.requests) == 3 and len(_retry_waits(caplog)) == 2


def test_openai_client_does_not_retry_a_refused_request(endpoint_factory) -> None:
    ep = endpoint_factory([401])
    with pytest.raises(LLMRequestError, match="HTTP 401"):
        _client(ep.url).chat(MESSAGES, max_tokens=4)
    assert len(ep.requests) == 1


def test_openai_client_unreachable_endpoint(endpoint_factory, caplog) -> None:
    caplog.set_level("INFO", logger="openai")
    ep = endpoint_factory([])
    url = ep.url
    ep.stop()
    with pytest.raises(LLMUnavailableError, match="failed 2 time.*APIConnectionError"):
        _client(url, max_retries=1).chat(MESSAGES, max_tokens=4)
    waits = _retry_waits(caplog)
    assert len(waits) == 1 and 0.375 <= waits[0] <= 0.5


def test_openai_key_rules(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        OpenAICompatibleLLM("gpt-4o-mini")
    # a custom endpoint needs no key
    OpenAICompatibleLLM("m", base_url="http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1")
    assert OpenAICompatibleLLM("m").endpoint == "http://localhost:8000/v1"
    with pytest.raises(UserError, match="not an http"):
        OpenAICompatibleLLM("m", base_url="localhost:8000")


def test_openai_context_window_and_token_estimate() -> None:
    assert OpenAICompatibleLLM("gpt-4o-mini-2024-07-18", api_key="k").context_window == 128_000
    assert OpenAICompatibleLLM("gpt-4.1-mini", api_key="k").context_window == 1_047_576
    assert OpenAICompatibleLLM("my-model", base_url="http://127.0.0.1:9/v1").context_window == 8192
    llm = OpenAICompatibleLLM("m", base_url="http://127.0.0.1:9/v1", context_window=2048)
    assert llm.context_window == 2048
    assert llm.count_tokens("abcdefg") == 3  # 7 bytes / 3, rounded up
    secret = OpenAICompatibleLLM("m", base_url="http://127.0.0.1:9/v1", api_key="sk-secret-123")
    assert "sk-secret-123" not in json.dumps(secret.describe())


def test_make_llm_unknown_kind_lists_choices() -> None:
    with pytest.raises(UserError, match="choose one of: local, openai"):
        make_llm("anthropic")
    with pytest.raises(UserError, match="bad options"):
        make_llm("openai", model="m", base_url="http://127.0.0.1:9/v1", colour="red")


# ---------------------------------------------------------------- cache


def test_cache_second_run_makes_no_calls(tmp_path: Path) -> None:
    inner = ScriptedLLM(lambda m: f"echo {m[-1]['content']}", latency_s=0.25)
    first = CachedLLM(inner, tmp_path)
    a = first.chat(MESSAGES, max_tokens=16)
    assert not a.cached and len(inner.calls) == 1
    b = first.chat(MESSAGES, max_tokens=16)
    assert b.cached and b.text == a.text and b.latency_s == 0.25
    first.close()

    # a new process (new object, same folder) still has it
    again = CachedLLM(inner, tmp_path)
    c = again.chat(MESSAGES, max_tokens=16)
    assert c.cached and c.text == a.text and len(inner.calls) == 1
    assert (again.hits, again.misses) == (1, 0)

    # any parameter change is a different request
    again.chat(MESSAGES, max_tokens=17)
    again.chat(MESSAGES, max_tokens=16, temperature=0.5)
    again.chat(MESSAGES, max_tokens=16, seed=1)
    again.chat([{"role": "user", "content": "Where does Bo live?"}], max_tokens=16)
    assert len(inner.calls) == 5


def test_cache_key_includes_endpoint_and_model(tmp_path: Path) -> None:
    a = CachedLLM(ScriptedLLM("x", model="m1"), tmp_path)
    b = CachedLLM(ScriptedLLM("x", model="m2"), tmp_path)
    k = dict(max_tokens=4, temperature=0.0, seed=0)
    assert a.key(MESSAGES, **k) != b.key(MESSAGES, **k)
    assert a.key(MESSAGES, **k) == a.key([dict(m) for m in MESSAGES], **k)


def test_cache_key_includes_client_settings(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/v1"
    plain = CachedLLM(OpenAICompatibleLLM("m", base_url=url), tmp_path)
    extra = CachedLLM(OpenAICompatibleLLM("m", base_url=url, extra_body={"top_k": 1}), tmp_path)
    k = dict(max_tokens=4, temperature=0.0, seed=0)
    assert plain.key(MESSAGES, **k) != extra.key(MESSAGES, **k)


def test_cache_does_not_store_failures(tmp_path: Path) -> None:
    calls = []

    def flaky(_m):
        calls.append(1)
        if len(calls) == 1:
            raise LLMUnavailableError("down")
        return "ok"

    cached = CachedLLM(ScriptedLLM(flaky), tmp_path)
    with pytest.raises(LLMUnavailableError):
        cached.chat(MESSAGES, max_tokens=4)
    assert cached.chat(MESSAGES, max_tokens=4).text == "ok"


def test_cache_dir_defaults_to_memsim_cache_dir(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MEMSIM_CACHE_DIR", str(tmp_path / "c"))
    cached = CachedLLM(ScriptedLLM("x"))
    assert cached.path == tmp_path / "c" / "llm_responses.sqlite"


# ---------------------------------------------------------------- prices and meter


def test_price_table_lookup_and_cost() -> None:
    prices = PriceTable()
    assert prices.price("gpt-4o-mini-2024-07-18") == DEFAULT_PRICES["gpt-4o-mini"]  # longest prefix
    assert prices.price("gpt-4o") == DEFAULT_PRICES["gpt-4o"]
    assert prices.price("smollm2.gguf", kind="local") == (0.0, 0.0)
    assert prices.price("mystery") is None
    # served on this machine: no per-token bill, unless the table names the model
    assert prices.price("mystery", endpoint="http://127.0.0.1:8000/v1") == (0.0, 0.0)
    assert prices.price("gpt-4o", endpoint="http://localhost:8000/v1") == DEFAULT_PRICES["gpt-4o"]
    assert prices.price("mystery", endpoint="http://10.0.0.7:8000/v1") is None
    assert prices.cost("gpt-4o-mini", 1_000_000, 2_000_000) == pytest.approx(0.15 + 1.20)
    assert math.isnan(prices.cost("mystery", 10, 10))


def test_price_table_from_json_and_toml(tmp_path: Path) -> None:
    j = tmp_path / "p.json"
    j.write_text(json.dumps({"my-model": {"input": 1.0, "output": 2.0}, "gpt-4o-mini": [9, 9]}))
    t = PriceTable.load(j)
    assert t.price("my-model") == (1.0, 2.0) and t.price("gpt-4o-mini") == (9.0, 9.0)
    assert t.price("gpt-4o") == DEFAULT_PRICES["gpt-4o"]  # defaults kept
    toml = tmp_path / "p.toml"
    toml.write_text('["my-model"]\ninput = 0.5\noutput = 1.5\n')
    assert PriceTable.load(toml).price("my-model") == (0.5, 1.5)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ('{"m": {"input": 1}}', r"p\.json, model 'm'"),
        ('{"m": [1, -2]}', "numbers >= 0"),
        ("[1, 2]", "must map model names"),
        ("{nope", "not valid JSON"),
    ],
)
def test_price_table_bad_files(tmp_path: Path, content: str, match: str) -> None:
    p = tmp_path / "p.json"
    p.write_text(content)
    with pytest.raises(UserError, match=match):
        PriceTable.load(p)
    with pytest.raises(UserError, match="cannot read"):
        PriceTable.load(tmp_path / "missing.json")


def test_meter_counts_calls_tokens_cost_and_skips_cached() -> None:
    meter = Meter()
    meter.record(Completion("a", 1000, 100, 0.5), model="gpt-4o-mini", kind="openai")
    meter.record(Completion("a", 1000, 100, 0.5, cached=True), model="gpt-4o-mini", kind="openai")
    meter.record(Completion("b", 10, 1, 0.1), model="smol.gguf", kind="local", role="judge")
    s = meter.summary()
    assert (s["calls"], s["cached_calls"], s["prompt_tokens"], s["completion_tokens"]) == (2, 1, 1010, 101)
    assert s["latency_s"] == pytest.approx(0.6)
    assert s["cost_usd"] == pytest.approx((1000 * 0.15 + 100 * 0.60) / 1e6)
    assert {r["role"] for r in s["by_role"]} == {"reader", "judge"}
    assert "2 calls (1 cached)" in format_cost(s)
    meter.record(Completion("c", 1, 1, 0.1), model="mystery", kind="openai")
    assert math.isnan(meter.summary()["cost_usd"])
    assert "unknown" in format_cost(meter.summary())


def test_metered_llm_reports_each_call() -> None:
    meter = Meter()
    llm = MeteredLLM(ScriptedLLM("four words right here"), meter, role="reader")
    llm.chat(MESSAGES, max_tokens=10)
    llm.chat(MESSAGES, max_tokens=2)
    s = meter.summary()
    assert s["calls"] == 2 and s["completion_tokens"] == 4 + 2 and s["cost_usd"] == 0.0


# ---------------------------------------------------------------- answer setup


T = datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)


def _mem(i: int, text: str) -> Retrieved:
    return Retrieved(f"m{i}", text, 1.0 / (i + 1), T, (f"t{i}",))


def test_answer_and_judge_row_fragment() -> None:
    meter = Meter()
    llm = MeteredLLM(ScriptedLLM("Lisbon", latency_s=0.02), meter)
    setup = AnswerSetup(Reader(llm, "short"), [make_judge("contains"), make_judge("f1_locomo")], meter)
    row = setup.answer_and_judge("Where does Ana live?", T, [_mem(0, "Ana moved to Lisbon")], "Lisbon", 4, "q1")
    assert row["answer"] == "Lisbon" and row["answer_contains"] == 1.0 and row["answer_f1_locomo"] == 1.0
    assert row["llm_latency_ms"] == pytest.approx(20.0)
    assert row["truncated"] is False and row["n_memories_used"] == 1 and row["llm_cached"] is False
    assert row["prompt_id"].startswith("reader_short@")
    assert setup.score_columns == ["answer_contains", "answer_f1_locomo"]
    desc = setup.describe()
    assert desc["reader"]["variant"] == "short" and [j["name"] for j in desc["judges"]] == ["contains", "f1_locomo"]
    assert setup.cost()["calls"] == 1


def test_endpoint_dying_mid_run_keeps_earlier_rows(endpoint_factory) -> None:
    ep = endpoint_factory([200, 200] + [503] * 10)
    meter = Meter()
    llm = MeteredLLM(_client(ep.url, max_retries=2), meter)
    setup = AnswerSetup(Reader(llm, "short"), [make_judge("contains")], meter)
    rows = []
    with pytest.raises(LLMUnavailableError, match="failed 3 time"):
        for i in range(4):
            rows.append(setup.answer_and_judge(f"question {i}?", T, [_mem(0, "Ana lives in Lisbon")], "Lisbon"))
    assert len(rows) == 2 and all(r["answer_contains"] == 1.0 for r in rows)
    assert meter.summary()["calls"] == 2


def _parse(argv: list[str]):
    import argparse

    p = argparse.ArgumentParser()
    add_answer_arguments(p)
    return p.parse_args(argv)


def test_answer_arguments() -> None:
    args = _parse([])
    assert args.reader == "none" and args.llm == "local" and args.judge is None
    assert _setup_of(args, ["contains"]) is None
    args = _parse(["--reader", "cot", "--judge", "contains", "--judge", "bleu1", "--no-cache"])
    assert args.judge == ["contains", "bleu1"] and args.no_cache
    with pytest.raises(SystemExit):
        _parse(["--judge", "nonsense"])


def test_answer_setup_from_args_openai(endpoint_factory, tmp_path: Path) -> None:
    ep = endpoint_factory([])
    prices = tmp_path / "prices.json"
    prices.write_text('{"test-model": [1.0, 2.0]}')
    args = _parse(
        ["--reader", "short", "--llm", "openai", "--llm-model", "test-model", "--llm-base-url", ep.url,
         "--prices", str(prices), "--judge", "contains", "--judge", "llm_locomo", "--allow-self-judging"]
    )
    setup = _setup_of(args, ["f1_locomo"])
    assert setup is not None
    row = setup.answer_and_judge("Where?", T, [_mem(0, "Ana lives in Lisbon")], "Lisbon")
    # the scripted endpoint says "Lisbon" to the judge too: no verdict -> scored wrong, flagged
    assert row["answer_contains"] == 1.0 and row["answer_llm_locomo"] == 0.0 and row["unreadable_llm_locomo"] is True
    assert "unreadable_contains" not in row
    cost = setup.cost()
    assert cost["calls"] == 2 and cost["cost_usd"] == pytest.approx(2 * (11 * 1.0 + 2 * 2.0) / 1e6)
    desc = setup.describe()
    assert desc["llm"]["endpoint"] == ep.url and desc["judges"][1]["model"] == "test-model"
    # run again: everything from the cache, no request reaches the endpoint
    n = len(ep.requests)
    setup2 = _setup_of(args, ["f1_locomo"])
    row2 = setup2.answer_and_judge("Where?", T, [_mem(0, "Ana lives in Lisbon")], "Lisbon")
    assert len(ep.requests) == n and row2["answer"] == row["answer"] and row2["llm_cached"] is True
    assert setup2.cost()["calls"] == 0 and setup2.cost()["cached_calls"] == 2
    setup.close()
    setup2.close()


def test_bench_llm_with_a_scripted_client() -> None:
    from memsim.sim.answer import bench_llm, bench_questions, format_bench

    qs = bench_questions(3, 12)
    assert len(qs) == 3 and all(len(m) == 12 for _, _, m in qs)
    llm = ScriptedLLM("FINAL ANSWER: Bristol")
    results = bench_llm(["short", "cot"], llm=llm, n_questions=3, n_memories=12)
    assert [r.variant for r in results] == ["short", "cot"]
    assert all(r.answers_per_s > 0 and r.mean_prompt_tokens > 0 for r in results)
    assert len(llm.calls) == 2 * (3 + 1)  # a warm-up call per variant
    assert "answers/s" in format_bench(results)


def test_model_defaults_to_what_the_endpoint_serves(endpoint_factory) -> None:
    ep = endpoint_factory([])
    assert OpenAICompatibleLLM.served_models(ep.url) == ["served-model"]
    setup = _setup_of(
        _parse(["--reader", "short", "--llm", "openai", "--llm-base-url", ep.url, "--no-cache"]), ["contains"]
    )
    assert setup.describe()["llm"]["model"] == "served-model"
    setup.answer_and_judge("Where?", T, [], "Lisbon")
    assert ep.requests[-1]["model"] == "served-model"
    assert setup.cost()["cost_usd"] == 0.0  # loopback endpoint
    gone = ep.url
    ep.stop()
    with pytest.raises(LLMUnavailableError, match="--llm-model"):
        OpenAICompatibleLLM.served_models(gone, timeout_s=2)
