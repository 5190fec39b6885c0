"""plumb serve against the `openai` Python client (CTest serve.openai_client; docs/serve.md).

One server on the default model, on a free port, for the whole module: chat and completions streamed and
not, 8 concurrent greedy requests equal to the same prompts run one by one through `plumb generate`, stop
strings and usage, and refusals (malformed JSON, wrong types, a body over the limit, a client that vanishes
mid-stream), each followed by a request that must still be answered. Ctrl-C (SIGINT) must exit 0.
"""

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest

PLUMB = os.environ["PLUMB_BINARY"]
MODEL = os.environ["PLUMB_MODEL"]
MAX_BODY_KIB = 64

PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a",
    "def fibonacci(n):",
    "The three primary colours are",
    "Water boils at a temperature of",
    "The largest planet in the solar system is",
    "To make a cup of tea, first",
    "In 1969, the first humans",
]


@pytest.fixture(scope="module")
def server():
    proc = subprocess.Popen(
        [PLUMB, "serve", "--model", MODEL, "--port", "0", "--threads", "2",
         "--max-body-kib", str(MAX_BODY_KIB)],
        stderr=subprocess.PIPE, text=True)
    lines = []
    port = None
    for line in proc.stderr:
        lines.append(line)
        if " on http://" in line:
            port = int(line.split(" on http://")[1].split("/")[0].rsplit(":", 1)[1])
            break
    assert port, "plumb serve did not start:\n" + "".join(lines)
    # Keep reading stderr so the server never blocks on a full pipe.
    threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
    yield f"http://127.0.0.1:{port}", proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="none", max_retries=0, timeout=120)


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, json.loads(r.read())


def post_raw(url, body, content_type="application/json"):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def assert_serving(client):
    r = client.completions.create(model="m", prompt="Hello", max_tokens=2, temperature=0)
    assert r.usage.completion_tokens == 2


def generate_alone(prompt, max_tokens):
    out = subprocess.run([PLUMB, "generate", "--model", MODEL, "--prompt", prompt, "--max-tokens",
                          str(max_tokens), "--threads", "1"], capture_output=True, text=True, check=True)
    assert out.stdout.endswith("\n")
    return out.stdout[:-1]


def test_health_and_models(server, client):
    status, body = get(server[0] + "/health")
    assert status == 200 and body["status"] == "ok"
    models = client.models.list()
    assert [m.id for m in models.data] == [os.path.basename(MODEL)]


def test_chat_streamed_equals_not_streamed(client):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    r = client.chat.completions.create(model="m", messages=messages, max_tokens=20, temperature=0)
    text = r.choices[0].message.content
    assert r.choices[0].message.role == "assistant"
    assert "Paris" in text
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 10 and 0 < r.usage.completion_tokens <= 20
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens

    chunks = list(client.chat.completions.create(model="m", messages=messages, max_tokens=20, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [r.choices[0].finish_reason]
    assert chunks[-1].usage.total_tokens == r.usage.total_tokens


def test_completions_streamed_equals_not_streamed(client):
    r = client.completions.create(model="m", prompt=PROMPTS[0], max_tokens=12, temperature=0)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 12
    chunks = list(client.completions.create(model="m", prompt=PROMPTS[0], max_tokens=12, temperature=0,
                                            stream=True))
    assert "".join(c.choices[0].text for c in chunks) == r.choices[0].text
    assert chunks[-1].choices[0].finish_reason == "length"


def test_concurrent_greedy_requests_equal_plumb_generate_one_by_one(client):
    max_tokens = 24

    def one(prompt):
        return client.completions.create(model="m", prompt=prompt, max_tokens=max_tokens,
                                         temperature=0).choices[0].text

    with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
        served = list(pool.map(one, PROMPTS))
    alone = [generate_alone(p, max_tokens) for p in PROMPTS]
    assert served == alone


def test_stop_string_cuts_the_text_and_ends_the_request(client):
    full = client.completions.create(model="m", prompt=PROMPTS[1], max_tokens=24, temperature=0)
    text = full.choices[0].text
    word = text.split()[3]
    r = client.completions.create(model="m", prompt=PROMPTS[1], max_tokens=24, temperature=0, stop=[word])
    assert r.choices[0].text == text[:text.index(word)]
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens < 24
    chunks = list(client.completions.create(model="m", prompt=PROMPTS[1], max_tokens=24, temperature=0,
                                            stop=word, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == r.choices[0].text


def test_sampling_with_a_seed_repeats(client):
    kw = dict(model="m", prompt=PROMPTS[6], max_tokens=16, temperature=0.9, top_p=0.95, seed=7)
    assert client.completions.create(**kw).choices[0].text == client.completions.create(**kw).choices[0].text


def test_malformed_json_is_400_and_the_server_keeps_serving(server, client):
    status, body = post_raw(server[0] + "/v1/chat/completions", b'{"messages": [')
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error" and "JSON" in body["error"]["message"]
    status, body = post_raw(server[0] + "/v1/completions", b"[1, 2]")
    assert status == 400
    assert_serving(client)


def test_wrong_types_are_400(client):
    bad = [
        dict(temperature="hot"),
        dict(max_tokens="ten"),
        dict(max_tokens=0),
        dict(stop=5),
        dict(top_p=1.5),
        dict(n=2),
    ]
    for extra in bad:
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model="m", prompt="Hi", **extra)
        assert e.value.status_code == 400, extra
        assert e.value.body["message"], extra
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": 5}])
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=[])
    assert_serving(client)


def test_a_body_over_the_limit_is_413(server, client):
    huge = json.dumps({"prompt": "x" * (MAX_BODY_KIB * 1024 + 1), "max_tokens": 1}).encode()
    status, body = post_raw(server[0] + "/v1/completions", huge)
    assert status == 413
    assert "limit" in body["error"]["message"]
    assert_serving(client)


def test_a_client_that_disconnects_mid_stream_frees_its_request(server, client):
    host, port = server[0][len("http://"):].rsplit(":", 1)
    body = json.dumps({"prompt": PROMPTS[1], "max_tokens": 4000, "temperature": 0.8, "stream": True,
                       "seed": 1}).encode()
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        got = b""
        while got.count(b"data: ") < 3:
            got += s.recv(4096)
        assert b"200 OK" in got
    deadline = time.time() + 20
    while get(server[0] + "/health")[1]["active"] != 0:
        assert time.time() < deadline, "the disconnected stream's request still runs"
        time.sleep(0.1)
    assert_serving(client)


def test_sigint_drains_and_exits_0(server, client):
    # Last in the file: the server stops. A request running when SIGINT comes is still answered.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(client.completions.create, model="m", prompt=PROMPTS[2], max_tokens=32,
                              temperature=0)
        time.sleep(0.3)
        server[1].send_signal(signal.SIGINT)
        assert running.result().usage.completion_tokens > 0
    assert server[1].wait(timeout=60) == 0
