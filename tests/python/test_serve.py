"""`cpullm serve` on loopback: every endpoint, streaming (server-sent events read by http.client),
32 concurrent clients whose tokens equal `generate`'s at temperature 0, stop strings, a client
that disconnects mid-stream, a table of malformed requests (each a 4xx with OpenAI's error body,
the server still up), a body over the limit, headers that never finish, the 429 path with
Retry-After, and SIGTERM (in-flight requests finish, or are cancelled after the grace period;
exit 0). Then `bench --load --url` against it. Every server listens on a free port (--port 0)."""
import http.client
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import threading
import time

import pytest

from cli_checks import expect_error, run

PROMPTS = [f"{start} {thing}" for start in ["Once upon a time", "One day", "Lily and Tom", "The little dog"]
           for thing in ["there was", "a girl", "the sun", "in the park", "found a ball", "was sad", "ran", "said"]]


@pytest.fixture(scope="module")
def model(ctx):
    path = os.path.join(ctx.shared, "stories260K.gguf")
    if not os.path.exists(path):
        pytest.skip(f"{path} is not there (CPULLM_SHARED_MODELS): the serve tests use the real tiny story model")
    return path


class Server:
    """A `cpullm serve` process; its stderr lines are collected as they come."""

    def __init__(self, cpullm, model, *args):
        self.proc = subprocess.Popen([cpullm, "serve", "-m", model, "--port", "0", "-t", "1", "--temp", "0", *args],
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.lines = []
        self.port = None
        ready = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.lines.append(line)
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()
        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        assert ready.wait(60) and self.port, f"serve did not start: {''.join(self.lines)}"

    def connection(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        conn = self.connection()
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        conn.request(method, path, body=data, headers=headers or {"Content-Type": "application/json"})
        response = conn.getresponse()
        text = response.read().decode()
        conn.close()
        return response, text

    def post(self, path, body):
        response, text = self.request("POST", path, body)
        return response.status, json.loads(text), response

    def stream(self, path, body):
        """The events of a streamed request, as parsed JSON (the final [DONE] as the string)."""
        conn = self.connection()
        conn.request("POST", path, body=json.dumps({**body, "stream": True}), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("Content-Type").startswith("text/event-stream")
        events = []
        for raw in response.read().decode().split("\n\n"):
            if raw.startswith("data: "):
                data = raw[len("data: "):]
                events.append(data if data == "[DONE]" else json.loads(data))
        conn.close()
        return events

    def stop(self, sig=signal.SIGTERM, timeout=60):
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self.reader.join(5)
        return code


@pytest.fixture(scope="module")
def server(ctx, model):
    s = Server(ctx.cpullm, model, "--max-sequences", "4", "--queue", "64", "--chat-template", "chatml",
               "--max-body-bytes", "65536", "--read-timeout", "1")
    yield s
    if s.proc.poll() is None:
        assert s.stop() == 0


def generated(ctx, model, prompt, n):
    """`generate`'s continuation of prompt at temperature 0 (the prompt echoed first is cut)."""
    out = run([ctx.cpullm, "generate", "-m", model, "-p", prompt, "-n", str(n), "--temp", "0", "-t", "1"]).stdout
    assert out.startswith(prompt)
    return out[len(prompt):].rstrip("\n")


def test_health_models_metrics_and_unknown_urls(server):
    response, text = server.request("GET", "/health")
    assert response.status == 200 and json.loads(text) == {"status": "ok"}
    response, text = server.request("GET", "/v1/models")
    models = json.loads(text)
    assert models["object"] == "list" and models["data"][0]["id"] == "stories260K.gguf"
    assert models["data"][0]["meta"]["n_vocab"] == 512 and models["data"][0]["meta"]["n_seq"] == 4
    server.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 3})
    response, text = server.request("GET", "/metrics")
    assert response.status == 200 and response.getheader("Content-Type").startswith("text/plain")
    for name in ["cpullm_requests_total", "cpullm_queue_length", "cpullm_kv_cache_usage_ratio",
                 "cpullm_time_to_first_token_seconds_bucket", "cpullm_time_per_output_token_seconds_count",
                 "cpullm_batch_tokens_bucket", "cpullm_generated_tokens_total", "cpullm_sequence_slots 4"]:
        assert name in text, name
    assert re.search(r'^cpullm_requests_total\{status="200"\} [1-9]', text, re.M)
    response, text = server.request("GET", "/nowhere")
    assert response.status == 404 and json.loads(text)["error"]["message"] == "Unknown request URL: GET /nowhere"


def test_a_completion_is_generates_text_with_usage(ctx, model, server):
    status, body, _ = server.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0})
    assert status == 200 and body["object"] == "text_completion" and body["id"].startswith("cmpl-")
    [choice] = body["choices"]
    assert choice["text"] == generated(ctx, model, "Once upon a time", 24)
    assert choice["finish_reason"] == "length"
    prompt_ids = run([ctx.cpullm, "tokenize", "-m", model, "-p", "Once upon a time"]).stdout.split()
    assert body["usage"] == {"prompt_tokens": len(prompt_ids), "completion_tokens": 24, "total_tokens": len(prompt_ids) + 24}
    # Token ids are a prompt too: the same ids, the same answer.
    status, same, _ = server.post("/v1/completions", {"prompt": [int(t) for t in prompt_ids], "max_tokens": 24})
    assert status == 200 and same["choices"][0]["text"] == choice["text"]


def test_streams_are_the_same_text_chunk_by_chunk(server):
    request = {"prompt": "One day", "max_tokens": 16}
    _, whole, _ = server.post("/v1/completions", request)
    events = server.stream("/v1/completions", {**request, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    usage, chunks = events[-2], events[:-2]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 16
    assert len(chunks) == 16  # one chunk per token
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * 15 + ["length"]
    # Chat: the assistant's role in the first delta, the content in order, the same as unstreamed.
    chat = {"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 12}
    status, answer, _ = server.post("/v1/chat/completions", chat)
    assert status == 200 and answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["role"] == "assistant"
    events = server.stream("/v1/chat/completions", chat)
    assert events[-1] == "[DONE]" and events[0]["object"] == "chat.completion.chunk"
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1]) == answer["choices"][0]["message"]["content"]


def test_32_concurrent_clients_get_generates_tokens(ctx, model, server):
    """Half stream, half do not; the batch they share changes nothing at temperature 0 (stories260K's
    top logits are far apart next to the 1e-4 a batch can move a logit)."""
    results = [None] * len(PROMPTS)

    def client(i):
        request = {"prompt": PROMPTS[i], "max_tokens": 12}
        if i % 2:
            events = server.stream("/v1/completions", request)
            results[i] = "".join(e["choices"][0]["text"] for e in events if e != "[DONE]")
        else:
            status, body, _ = server.post("/v1/completions", request)
            assert status == 200
            results[i] = body["choices"][0]["text"]
    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(PROMPTS) == 32
    for prompt, text in zip(PROMPTS, results):
        assert text == generated(ctx, model, prompt, 12), prompt


def test_stop_strings_end_the_text_before_them(server):
    _, whole, _ = server.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 40})
    text = whole["choices"][0]["text"]
    stop = text[12:16]  # a piece from the middle, wherever tokens split it
    cut = text[:text.find(stop)]
    _, body, _ = server.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 40, "stop": [stop, "zzz"]})
    assert body["choices"][0]["text"] == cut and body["choices"][0]["finish_reason"] == "stop"
    events = server.stream("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 40, "stop": stop})
    assert "".join(e["choices"][0]["text"] for e in events if e != "[DONE]") == cut  # no piece of the stop string leaks


def test_a_client_that_disconnects_frees_its_sequence(server):
    conn = server.connection()
    conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "Once", "max_tokens": 2000, "stream": True,
                                                             "ignore_eos": True}))
    response = conn.getresponse()
    assert response.status == 200
    response.fp.readline()  # the first event has come
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    deadline = time.time() + 30
    while time.time() < deadline and not any("client gone" in line for line in server.lines):
        time.sleep(0.05)
    [line] = [line for line in server.lines if "client gone" in line]
    assert int(re.search(r"completion=(\d+)", line).group(1)) < 2000, line
    _, text = server.request("GET", "/metrics")
    assert "cpullm_requests_running 0" in text


MALFORMED = [  # body, status, what the error message or param says
    ("{not json", 400, "could not parse the JSON body"),
    ('["a list"]', 400, "must be a JSON object"),
    ({"prompt": "x", "bogus": 1}, 400, "Unrecognized request argument supplied: bogus"),
    ({"prompt": "x", "temperature": "hot"}, 400, "'temperature' must be a number"),
    ({"prompt": "x", "temperature": 5}, 400, "'temperature' must be between 0 and 2"),
    ({"prompt": "x", "max_tokens": 0}, 400, "'max_tokens' must be between 1"),
    ({"prompt": "x", "max_tokens": "10"}, 400, "'max_tokens' must be an integer"),
    ({"prompt": "x", "max_tokens": 18446744073709551615}, 400, "must be between"),
    ({"prompt": 123}, 400, "'prompt' must be a string"),
    ({"max_tokens": 3}, 400, "'prompt' is required"),
    ({"prompt": "x", "max_tokens": 5000}, 400, "maximum context length is 2048 tokens"),
    ({"prompt": "a " * 30000}, 400, "the 60000 bytes of text given cannot fit"),
    ({"prompt": [1, 2, 600]}, 400, "token ids needs integers from 0 to 511"),
    ({"prompt": ["a", "b"]}, 400, "one prompt per request"),
    ({"prompt": "x", "n": 2}, 400, "n = 1"),
    ({"prompt": "x", "logprobs": 3}, 400, "'logprobs' is not supported"),
    ({"prompt": "x", "presence_penalty": 0.5}, 400, "'presence_penalty' is not supported"),
    ({"prompt": "x", "stream": "yes"}, 400, "'stream' must be a boolean"),
    ({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, 400, "up to 4 strings"),
    ({"prompt": "x", "seed": 1.5}, 400, "'seed' must be an integer"),
    ({"prompt": "x", "stream_options": {"include_usage": True, "x": 1}}, 400, "Unrecognized stream option: x"),
]
MALFORMED_CHAT = [
    ({"messages": "hi"}, 400, "'messages' must be a non-empty array"),
    ({"messages": [{"content": "hi"}]}, 400, "a string 'role'"),
    ({"messages": [{"role": "user", "content": 5}]}, 400, "'content' must be a string"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, 400, "wizard"),
    ({"messages": [{"role": "user", "content": "hi", "mood": "x"}]}, 400, "Unrecognized message field: mood"),
    ({"messages": [{"role": "user", "content": "hi"}], "prompt": "x"}, 400, "Unrecognized request argument supplied: prompt"),
]


@pytest.mark.parametrize("path,case", [("/v1/completions", c) for c in MALFORMED] +
                         [("/v1/chat/completions", c) for c in MALFORMED_CHAT])
def test_malformed_requests_get_openai_errors(server, path, case):
    body, status, fragment = case
    response, text = server.request("POST", path, body)
    assert response.status == status, text
    error = json.loads(text)["error"]
    assert fragment in error["message"] and error["type"] == "invalid_request_error", error
    assert server.proc.poll() is None


def test_oversized_bodies_and_stalled_headers_are_cut_off(server):
    response, text = server.request("POST", "/v1/completions", {"prompt": "x" * 100000})
    assert response.status == 413 and "larger than 65536 bytes" in json.loads(text)["error"]["message"]
    # Headers that never finish: the read timeout (1 s here) closes the connection.
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le")
    start = time.time()
    while sock.recv(1024):  # whatever comes, then the server's close: an empty read
        pass
    assert 0.5 < time.time() - start < 20
    sock.close()
    response, _ = server.request("GET", "/health")
    assert response.status == 200


def test_beyond_slots_and_queue_requests_get_429_with_retry_after(ctx, model):
    s = Server(ctx.cpullm, model, "--max-sequences", "1", "--queue", "1")
    try:
        statuses, headers = [], []

        def client():
            status, body, response = s.post("/v1/completions", {"prompt": "Once", "max_tokens": 1500, "ignore_eos": True})
            statuses.append(status)
            if status == 429:
                headers.append(response.getheader("Retry-After"))
                assert body["error"]["code"] == "rate_limit_exceeded"
        threads = [threading.Thread(target=client) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert statuses.count(200) >= 2 and statuses.count(429) >= 1, statuses
        assert all(h and int(h) >= 1 for h in headers), headers
    finally:
        assert s.stop() == 0


def wait_running(s):
    """Until the server's one request holds its slot."""
    deadline = time.time() + 30
    while "cpullm_requests_running 1" not in s.request("GET", "/metrics")[1]:
        assert time.time() < deadline, "the request never started"
        time.sleep(0.005)


def stream_then_sigterm(ctx, model, grace, max_tokens):
    """A server with --grace GRACE, one streamed request of max_tokens running, then SIGTERM: the
    request's events and the server (stopped, exit status checked)."""
    s = Server(ctx.cpullm, model, "--grace", str(grace))
    result = {}

    def client():
        result["events"] = s.stream("/v1/completions", {"prompt": "Once", "max_tokens": max_tokens, "ignore_eos": True})
    t = threading.Thread(target=client)
    t.start()
    wait_running(s)
    assert s.stop() == 0
    t.join(60)
    return result["events"], s


def test_sigterm_finishes_requests_in_flight_then_exits_0(ctx, model):
    events, s = stream_then_sigterm(ctx, model, 60, 1800)
    assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] == "length"
    assert sum(1 for e in events if e != "[DONE]") == 1800
    assert any("SIGTERM: no new requests" in line for line in s.lines)


def test_after_the_grace_period_requests_are_cancelled(ctx, model):
    events, _ = stream_then_sigterm(ctx, model, 0, 2000)
    *tokens, error, done = events
    assert done == "[DONE]" and error["error"]["code"] == "server_shutdown", events[-2:]
    assert len(tokens) < 2000


def test_bench_load_url_measures_the_server(ctx, server):
    db = os.path.join(ctx.workdir, "load.db")
    out = run([ctx.cpullm, "bench", "--load", "--url", f"http://127.0.0.1:{server.port}", "-pg", "16,8", "--rate", "50",
               "--requests", "12", "--slo-ttft", "10000", "--slo-tpot", "10000", "-o", "json", "--db", db]).stdout
    [r] = json.loads(out)
    assert r["engine"] == "cpullm" and r["model_type"] == "stories260K.gguf" and r["server_url"].endswith(str(server.port))
    assert r["n_seq"] == 4
    assert r["requests"] == 12 and r["completed"] == 12 and r["errors"] == {}
    assert r["ttft_p50_ms"] > 0 and r["tpot_p50_ms"] > 0 and r["itl_p99_ms"] >= r["itl_p50_ms"]
    assert r["goodput_rps"] == pytest.approx(r["achieved_rps"])
    assert r["avg_ts"] == pytest.approx(12 * 8 / (r["wall_ms"] / 1e3))
    with sqlite3.connect(db) as con:
        [(engine, case_name, metrics)] = con.execute("SELECT engine, case_name, metrics_json FROM results").fetchall()
    assert engine == "cpullm" and case_name.startswith("load-url/rate50/cpullm/")
    assert json.loads(metrics)["goodput_rps"] == pytest.approx(r["goodput_rps"])


def test_the_report_sets_servers_side_by_side_at_equal_load(ctx, model, server):
    """An in-process load run and a --url run against cpullm serve of one model, lengths and rate:
    the report's load section has both, and Peers groups them at equal offered load."""
    db = os.path.join(ctx.workdir, "report.db")
    common = ["-pg", "16,8", "--rate", "40", "--requests", "8", "--db", db, "-o", "json"]
    run([ctx.cpullm, "bench", "--load", "--url", f"http://127.0.0.1:{server.port}", *common])
    run([ctx.cpullm, "bench", "-m", model, "--load", "-np", "4", "-t", "1", *common])
    html, data = os.path.join(ctx.workdir, "report.html"), os.path.join(ctx.workdir, "report.json")
    run([ctx.cpullm, "report", "--db", db, "-o", html, "--json", data])
    page = open(html).read()
    load_section = page[page.index('id="load"'):page.index('id="throughput"')]
    assert f"cpullm at http://127.0.0.1:{server.port}" in load_section and "cpullm in process" in load_section
    assert load_section.count("stories260K.gguf") >= 2 and "p99 latency against offered load" in load_section
    peers_section = page[page.index('id="peers"'):]
    equal = peers_section[peers_section.index("Served at equal offered load"):]
    assert f"cpullm at http://127.0.0.1:{server.port}" in equal and "cpullm in process" in equal


def test_bad_invocations_and_a_config_file(ctx, model, server):
    expect_error([ctx.cpullm, "serve"], "-m/--model is required")
    expect_error([ctx.cpullm, "serve", "-m", model, "--port", "70000"], "--port")
    expect_error([ctx.cpullm, "serve", "-m", model, "--port", str(server.port)], f"cannot listen on 127.0.0.1:{server.port}")
    expect_error([ctx.cpullm, "serve", "-m", model, "--chat-template", "nonsense", "--port", "0"], "nonsense")
    expect_error([ctx.cpullm, "serve", "-m", model, "--kv-type", "f64"], "f64")
    # What tune writes (top-level keys) with a [serve] section: the server runs as configured.
    config = os.path.join(ctx.workdir, "best.toml")
    with open(config, "w") as f:
        f.write(f'model = "{model}"\nthreads = 1\nnp = 2\n\n[serve]\nqueue = 3\nalias = "tuned"\n')
    s = Server(ctx.cpullm, model, "--config", config)
    try:
        _, text = s.request("GET", "/v1/models")
        [m] = json.loads(text)["data"]
        assert m["id"] == "tuned" and m["meta"]["n_seq"] == 2
        assert any("2 sequence slots of 2048 positions, queue 3" in line for line in s.lines), s.lines
    finally:
        assert s.stop() == 0


def test_url_load_refusals(ctx, server):
    expect_error([ctx.cpullm, "bench", "--url", f"http://127.0.0.1:{server.port}", "-pg", "4,4"], "give --load")
    expect_error([ctx.cpullm, "bench", "--load", "--url", "http://127.0.0.1:1", "-pg", "4,4"], "no answer from GET /v1/models")
    expect_error([ctx.cpullm, "bench", "--load", "--url", "ftp://x", "-pg", "4,4"], "give http://HOST:PORT")
