"""plumb serve against the `openai` Python client (CTest serve.openai_client; docs/serve.md).

One server on the default model, on a free port, for the whole module: chat and completions streamed and
not, 8 concurrent greedy requests equal to the same prompts run one by one through `plumb generate`, stop
strings, finish reasons and usage, a shared system prompt served from the prefix cache, and refusals
(malformed JSON, wrong types, a body over the limit, clients that vanish mid-answer), each followed by a
request that must still be answered. A second, small server (--max-batch 1 --max-queue 1 --ctx 128) takes a
burst (429s) and the context limit; a third runs Gemma 3 270M where it was fetched. Ctrl-C (SIGINT) drains
(503 to new requests) and exits 0.
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
# Gemma 3 270M sits beside the default model where `scripts/fetch-model gemma3` put it.
GEMMA = os.path.join(os.path.dirname(MODEL), "gemma-3-270m-q4_k_m.gguf")
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


# The question the content checks ask. Bare, "What is the capital of France?" is a coin flip for SmolLM2-135M:
# its first token is "The" (... Paris) by 0.08 nats in the exact family and "L" (L'Étoile, ...) by 0.21 in
# the fast one, whose int8 activations llama.cpp shares (llama-completion on the same prompt answers
# "L'Étoile" too). With "Answer in one sentence." the first tokens lead by 1.5 nats in both families, so the
# check holds for every valid engine, not for one rounding.
CAPITAL_QUESTION = "What is the capital of France? Answer in one sentence."


def start_server(*args, model=MODEL):
    # One thread, as generate_alone runs: the tests compare served answers with plumb generate's, and a
    # prompt's prefill is not yet bitwise the same at 1 and 2 threads (nor always between two runs at 2
    # under load), which made these comparisons flaky.
    proc = subprocess.Popen([PLUMB, "serve", "--model", model, "--port", "0", "--threads", "1", *args],
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
    return f"http://127.0.0.1:{port}", proc


def stop_server(proc):
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def server():
    url, proc = start_server("--max-body-kib", str(MAX_BODY_KIB))
    yield url, proc
    stop_server(proc)


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


def generate_chat_alone(user, max_tokens, system=None, model=MODEL):
    """The answer `plumb generate --prompt` gives alone to the chat prompt `plumb tokenize --chat` renders."""
    render = [PLUMB, "tokenize", "--model", model, "--chat", "--prompt", user]
    if system:
        render += ["--system", system]
    run = lambda args: subprocess.run(args, capture_output=True, text=True, check=True).stdout
    # The rendered text starts with Gemma's "<bos>", to which generate --prompt adds no second BOS
    # (docs/tokenizers.md); the ids must be the served ones.
    text = run(render + ["--show", "text"])
    assert run([PLUMB, "tokenize", "--model", model, "--prompt", text, "--show", "ids"]) == \
        run(render + ["--show", "ids"])
    out = run([PLUMB, "generate", "--model", model, "--prompt", text, "--max-tokens", str(max_tokens),
               "--threads", "1"])
    assert out.endswith("\n")
    return out[:-1]


def stats(server):
    return get(server[0] + "/stats")[1]


def wait_until_idle(server, what, seconds=10):
    """Until no request runs and no KV block is held by a sequence: every block freed or in the prefix cache."""
    deadline = time.time() + seconds
    while True:
        s = stats(server)
        if s["active"] == 0 and s["kv_blocks"]["used"] == 0:
            return s
        assert time.time() < deadline, f"{what}: still held after {seconds} s: {s}"
        time.sleep(0.05)


def send_raw_post(server, path, body):
    """A POST over a bare socket, so the test decides when the client goes away."""
    host, port = server[0][len("http://"):].rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return s


def test_health_and_models(server, client):
    status, body = get(server[0] + "/health")
    assert status == 200 and body["status"] == "ok"
    s = stats(server)
    assert s["kv_blocks"]["total"] > 0 and s["kv_blocks"]["used"] == 0
    models = client.models.list()
    assert [m.id for m in models.data] == [os.path.basename(MODEL)]


def test_chat_streamed_equals_not_streamed(client):
    messages = [{"role": "user", "content": CAPITAL_QUESTION}]
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
    cancelled = stats(server)["requests"]["cancelled"]
    body = json.dumps({"prompt": PROMPTS[1], "max_tokens": 4000, "temperature": 0.8, "stream": True,
                       "seed": 1}).encode()
    with send_raw_post(server, "/v1/completions", body) as s:
        got = b""
        while got.count(b"data: ") < 3:
            got += s.recv(4096)
        assert b"200 OK" in got
    # 4000 tokens would take minutes; the request is aborted instead and its blocks come back.
    after = wait_until_idle(server, "the disconnected stream's request", seconds=5)
    assert after["requests"]["cancelled"] == cancelled + 1
    assert_serving(client)


def test_a_client_that_disconnects_before_a_whole_answer_frees_its_request(server, client):
    cancelled = stats(server)["requests"]["cancelled"]
    body = json.dumps({"prompt": PROMPTS[1], "max_tokens": 4000, "temperature": 0.8, "seed": 2}).encode()
    with send_raw_post(server, "/v1/completions", body):
        deadline = time.time() + 10
        while stats(server)["kv_blocks"]["used"] == 0:  # until it runs
            assert time.time() < deadline, "the request never ran"
            time.sleep(0.02)
    # The handler looks at its socket while it waits (every 100 ms): the request is aborted long before
    # its 4000 tokens.
    after = wait_until_idle(server, "the disconnected client's request", seconds=5)
    assert after["requests"]["cancelled"] == cancelled + 1
    assert_serving(client)


def test_finish_reasons(client):
    # "stop": the model's end-of-turn token (a short answer well under max_tokens) or a stop string
    # (test_stop_string_cuts_the_text_and_ends_the_request); "length": max_tokens, or the context
    # (test_the_context_caps_max_tokens_with_finish_reason_length).
    messages = [{"role": "user", "content": CAPITAL_QUESTION}]
    r = client.chat.completions.create(model="m", messages=messages, max_tokens=100, temperature=0)
    assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens < 100
    chunks = list(client.chat.completions.create(model="m", messages=messages, max_tokens=100, temperature=0,
                                                 stream=True))
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == ["stop"]
    r = client.chat.completions.create(model="m", messages=messages, max_tokens=3, temperature=0)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3


SYSTEM = ("You are a patient assistant for a small museum of clocks in a mountain town. Visitors ask about the "
          "opening hours (ten to five, closed on Mondays), the price of a ticket (eight francs, children free), "
          "the oldest clock (a tower clock from 1532 with a single hand), the cuckoo clock workshop on "
          "Saturdays, and the way to the station (ten minutes down the hill). Answer in one short sentence, "
          "politely, and never invent facts that are not in this message.")


def test_a_shared_system_prompt_is_served_from_the_prefix_cache(server, client):
    before = stats(server)
    questions = ["When is the museum open?", "How much is a ticket?"]
    replies = [client.chat.completions.create(
        model="m", messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}],
        max_tokens=24, temperature=0) for q in questions]
    first, second = (r.usage.prompt_tokens_details.cached_tokens for r in replies)
    # The second finds the system prompt's blocks the first left in the prefix cache: all its whole blocks
    # (16 positions each), so at least 100 of the system prompt's ~110 tokens.
    assert second >= 100 and second > first
    assert second < replies[1].usage.prompt_tokens
    after = stats(server)
    assert after["cached_prompt_tokens"] - before["cached_prompt_tokens"] == first + second
    assert [r.choices[0].message.content for r in replies] == [
        generate_chat_alone(q, 24, system=SYSTEM) for q in questions]


@pytest.fixture(scope="module")
def small_server():
    url, proc = start_server("--max-batch", "1", "--max-queue", "1", "--ctx", "128")
    yield url, proc
    stop_server(proc)


def test_a_burst_over_the_queue_gets_429_and_the_server_keeps_serving(small_server):
    # One running and one queued at most: of 8 requests at once, some are refused (how many depends on
    # how fast they arrive); each other one is answered whole.
    body = json.dumps({"prompt": PROMPTS[0], "max_tokens": 32, "temperature": 0}).encode()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: post_raw(small_server[0] + "/v1/completions", body), range(8)))
    refused = [b for status, b in answers if status == 429]
    served = [b for status, b in answers if status == 200]
    assert refused and len(served) >= 2 and len(refused) + len(served) == 8, answers
    assert all(b["choices"][0]["finish_reason"] in ("stop", "length") for b in served)
    for b in refused:
        assert b["error"]["type"] == "rate_limit_error" and b["error"]["code"] == "queue_full"
        assert "--max-queue" in b["error"]["message"]
    assert stats(small_server)["requests"]["refused"] == len(refused)
    client = openai.OpenAI(base_url=small_server[0] + "/v1", api_key="none", max_retries=0, timeout=60)
    with pytest.raises(openai.RateLimitError):  # the client's own class for 429, from the body
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for f in [pool.submit(client.completions.create, model="m", prompt=PROMPTS[0], max_tokens=32,
                                  temperature=0) for _ in range(8)]:
                f.result()
    wait_until_idle(small_server, "the burst")
    assert_serving(client)


def test_the_context_caps_max_tokens_with_finish_reason_length(small_server):
    client = openai.OpenAI(base_url=small_server[0] + "/v1", api_key="none", max_retries=0, timeout=60)
    prompt = " ".join(["one two three four five six seven eight nine ten"] * 11)
    r = client.completions.create(model="m", prompt=prompt, max_tokens=50, temperature=0)
    assert r.usage.prompt_tokens >= 100
    assert r.choices[0].finish_reason == "length" and r.usage.total_tokens == 128
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="m", prompt=prompt + " " + prompt, max_tokens=1)
    assert e.value.body["code"] == "context_length_exceeded"


def test_gemma3_answers_a_chat_as_plumb_generate_does():
    if not os.path.exists(GEMMA):
        pytest.skip(f"{GEMMA} not fetched (scripts/fetch-model gemma3)")
    url, proc = start_server(model=GEMMA)
    try:
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=60)
        question = "What is the capital of France?"
        r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": question}],
                                           max_tokens=12, temperature=0)
        assert r.choices[0].message.content == generate_chat_alone(question, 12, model=GEMMA)
        assert r.choices[0].finish_reason in ("stop", "length")
    finally:
        stop_server(proc)


def test_sigint_drains_and_exits_0(server, client):
    # Last in the file: the server stops. A request running when SIGINT comes is still answered, whole;
    # one arriving while the server drains gets 503 shutting_down.
    chunks = client.completions.create(model="m", prompt=PROMPTS[1], max_tokens=100, temperature=0.8, seed=1,
                                       stream=True)
    text = next(chunks).choices[0].text
    server[1].send_signal(signal.SIGINT)
    time.sleep(0.2)
    status, body = post_raw(server[0] + "/v1/completions",
                            json.dumps({"prompt": "Hi", "max_tokens": 1}).encode())
    assert status == 503 and body["error"]["code"] == "shutting_down"
    rest = list(chunks)
    assert rest[-1].choices[0].finish_reason in ("stop", "length")
    assert text + "".join(c.choices[0].text for c in rest)
    assert server[1].wait(timeout=60) == 0
