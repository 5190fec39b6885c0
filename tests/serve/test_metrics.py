"""GET /metrics (docs/serve.md, "Metrics"): read with prometheus_client's own text parser, so the exposition
is what a Prometheus server accepts, and checked to move as the requests sent between two scrapes make it
move: responses by endpoint and status, prompt and generated tokens against the responses' usage, one time
to first token per answer and one inter-token gap per further token, and the running request and its KV
blocks seen while it streams.
"""

import json
import time
import urllib.error
import urllib.request

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from test_openai_client import start_server, stop_server


@pytest.fixture(scope="module")
def server():
    url, proc = start_server()
    yield url
    stop_server(proc)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server + "/v1", api_key="none", max_retries=0, timeout=120)


def scrape(url):
    """{(sample name, sorted labels): value} and {family name: type}."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    samples, types = {}, {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, types


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0)


def requests(samples, endpoint, status):
    return value(samples, "plumb_requests_total", endpoint=endpoint, status=str(status))


def wait_idle(url):
    for _ in range(300):
        with urllib.request.urlopen(url + "/health", timeout=30) as r:
            if json.loads(r.read())["active"] == 0:
                return
        time.sleep(0.02)
    raise AssertionError("requests still active")


def test_the_families_have_plumb_names_and_prometheus_types(server):
    _, types = scrape(server)
    assert types["plumb_requests"] == "counter"
    assert types["plumb_prompt_tokens"] == "counter"
    assert types["plumb_generation_tokens"] == "counter"
    assert types["plumb_requests_running"] == "gauge"
    assert types["plumb_requests_waiting"] == "gauge"
    assert types["plumb_kv_cache_blocks"] == "gauge"
    assert types["plumb_kv_cache_usage_ratio"] == "gauge"
    assert types["plumb_time_to_first_token_seconds"] == "histogram"
    assert types["plumb_inter_token_latency_seconds"] == "histogram"


def test_counts_move_as_the_requests_between_two_scrapes_make_them(server, client):
    before, _ = scrape(server)
    chat = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi!"}],
                                          max_tokens=5, temperature=0)
    stream = list(client.completions.create(model="m", prompt="Once upon a time", max_tokens=7,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    usage = stream[-1].usage
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}], temperature=5)
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(server + "/no/such/path/" + "x" * 40, timeout=30)
    assert missing.value.code == 404
    wait_idle(server)
    after, _ = scrape(server)

    moved = lambda endpoint, status: requests(after, endpoint, status) - requests(before, endpoint, status)
    assert moved("/v1/chat/completions", 200) == 1
    assert moved("/v1/completions", 200) == 1  # a stream, counted once its last byte is written
    assert moved("/v1/chat/completions", 400) == 1
    assert moved("other", 404) == 1  # any unknown path: no series per made-up path
    assert moved("/metrics", 200) == 1  # the first scrape
    endpoints = {dict(labels)["endpoint"] for name, labels in after if name == "plumb_requests_total"}
    assert not [e for e in endpoints if e.startswith("/no")]

    delta = lambda name: value(after, name) - value(before, name)
    assert delta("plumb_prompt_tokens_total") == chat.usage.prompt_tokens + usage.prompt_tokens
    generated = chat.usage.completion_tokens + usage.completion_tokens
    assert delta("plumb_generation_tokens_total") == generated
    # One first token per answer, one gap per token after it.
    assert delta("plumb_time_to_first_token_seconds_count") == 2
    assert delta("plumb_inter_token_latency_seconds_count") == generated - 2
    assert delta("plumb_time_to_first_token_seconds_sum") > 0

    for name in ("plumb_time_to_first_token_seconds", "plumb_inter_token_latency_seconds"):
        buckets = sorted((float(dict(labels)["le"]), v) for (n, labels), v in after.items()
                         if n == name + "_bucket")
        assert buckets[-1][0] == float("inf") and buckets[-1][1] == value(after, name + "_count")
        assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), "buckets are cumulative"

    assert value(after, "plumb_requests_running") == 0
    assert value(after, "plumb_requests_waiting") == 0
    assert value(after, "plumb_kv_cache_blocks", state="used") == 0
    assert value(after, "plumb_kv_cache_usage_ratio") == 0


def test_a_streaming_request_shows_as_running_with_its_kv_blocks(server, client):
    messages = [{"role": "user", "content": "Tell a story."}]
    stream = client.chat.completions.create(model="m", messages=messages, max_tokens=400, temperature=0,
                                            stream=True)
    next(iter(stream))  # the role chunk: the request is in the engine
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    during, _ = scrape(server)
    stream.close()  # the client goes: the request is aborted and its blocks freed
    assert value(during, "plumb_requests_running") == 1
    used = value(during, "plumb_kv_cache_blocks", state="used")
    assert used >= 1
    assert value(during, "plumb_kv_cache_positions") > 0
    total = sum(value(during, "plumb_kv_cache_blocks", state=s) for s in ("used", "cached", "free"))
    assert value(during, "plumb_kv_cache_usage_ratio") == pytest.approx(used / total)
    assert value(during, "plumb_kv_cache_positions") <= used * value(during, "plumb_kv_cache_block_positions")
    wait_idle(server)
    after, _ = scrape(server)
    assert value(after, "plumb_requests_running") == 0
    assert value(after, "plumb_kv_cache_blocks", state="used") == 0
