"""--api-key / PLUMB_API_KEY (docs/serve.md, "API key"): every request needs `Authorization: Bearer KEY`, else
401 with OpenAI's error body, which the `openai` client raises as AuthenticationError; the page, /health,
/stats and /metrics alone stay open. A refusal closes its connection (its body is never read), and the next
request on a new one is served.
"""

import http.client
import json
import os
import urllib.error
import urllib.request

import openai
import pytest

from test_openai_client import start_server, stop_server

KEY = "sk-plumb-test-4f1c"


@pytest.fixture(scope="module")
def server():
    url, proc = start_server("--api-key", KEY)
    yield url
    stop_server(proc)


def client(url, key):
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=120)


def status_of(url, headers=None):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_without_the_key_the_openai_client_gets_authentication_error(server):
    for key in ("wrong", KEY[:-1], KEY + "x"):
        with pytest.raises(openai.AuthenticationError) as refused:
            client(server, key).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
        assert refused.value.status_code == 401
        assert refused.value.body["code"] == "invalid_api_key"
        assert refused.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.AuthenticationError):
        client(server, "wrong").models.list()


def test_with_the_key_requests_are_served(server):
    c = client(server, KEY)
    assert [m.id for m in c.models.list()] == ["SmolLM2-135M-Instruct.Q4_1.gguf"]
    reply = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=3,
                                      temperature=0)
    assert reply.usage.completion_tokens >= 1
    pieces = [ch.choices[0].text for ch in c.completions.create(model="m", prompt="Once", max_tokens=3,
                                                                 temperature=0, stream=True)]
    assert "".join(pieces)


def test_a_missing_header_says_how_to_send_the_key_and_the_scheme_is_case_insensitive(server):
    req = urllib.request.Request(server + "/v1/models")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=30)
    assert refused.value.code == 401
    assert refused.value.headers["WWW-Authenticate"] == "Bearer"
    assert "Authorization: Bearer" in json.loads(refused.value.read())["error"]["message"]
    assert status_of(server + "/v1/models", {"Authorization": "bearer " + KEY}) == 200
    assert status_of(server + "/v1/models", {"Authorization": KEY}) == 401


def test_the_page_health_stats_and_metrics_alone_stay_open(server):
    for path in ("/", "/health", "/stats", "/metrics"):
        assert status_of(server + path) == 200, path
    # Any other path, one no route serves included, is closed without the key.
    for path in ("/v1/no-such-endpoint", "/no-such-endpoint", "/index.html", "/metrics/"):
        assert status_of(server + path) == 401, path
    assert status_of(server + "/no-such-endpoint", {"Authorization": "Bearer " + KEY}) == 404


def test_a_refused_request_closes_its_connection_and_is_counted_once(server):
    host, port = server.removeprefix("http://").split(":")
    body = json.dumps({"prompt": "x" * 200_000, "max_tokens": 1}).encode()
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 401 and r.getheader("Connection") == "close"
    r.read()
    conn.close()
    # Its unread body did not turn into a request of its own (the server counts it as nothing).
    with urllib.request.urlopen(server + "/metrics", timeout=30) as m:
        text = m.read().decode()
    counted = [line for line in text.splitlines() if line.startswith("plumb_requests_total{")]
    assert not [line for line in counted if 'status="400"' in line or 'status="414"' in line], counted
    assert 'plumb_requests_total{endpoint="/v1/completions",status="401"} 1' in counted


def test_the_key_can_come_from_the_environment():
    os.environ["PLUMB_API_KEY"] = KEY
    try:
        url, proc = start_server()
    finally:
        del os.environ["PLUMB_API_KEY"]
    try:
        with pytest.raises(openai.AuthenticationError):
            client(url, "wrong").models.list()
        assert [m.id for m in client(url, KEY).models.list()]
    finally:
        stop_server(proc)
