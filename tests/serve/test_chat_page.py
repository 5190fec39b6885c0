"""The chat page at / (docs/serve.md, "Chat page") in headless Chromium, driven through the DevTools
protocol: the page loads with nothing from elsewhere, a message typed and sent with Enter streams its answer
in pieces, the answer is the one the API gives to the same conversation, a second turn carries the first
(its prompt holds the history, served from the prefix cache), and each answer gets plumb chat's stats line.
A screenshot goes to PLUMB_TEST_OUTPUT_DIR (default: test-output/ beside the plumb binary). Skipped where
Debian's chromium is not installed (scripts/setup installs it).
"""

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

import openai
import pytest
import websocket

from test_openai_client import start_server, stop_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OUTPUT_DIR = os.environ.get("PLUMB_TEST_OUTPUT_DIR",
                            os.path.join(os.path.dirname(os.path.abspath(os.environ["PLUMB_BINARY"])),
                                         "test-output"))
STATS = re.compile(r"(\d+) prompt tokens \((\d+) cached\) \| first token \d+ ms \| (\d+) generated, "
                   r"[\d.]+ tok/s \| context (\d+)/(\d+) \| (stop|length)")

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup: apt-get "
                                                         "install chromium)")


class DevTools:
    """A page's DevTools protocol session: one command at a time, events skipped."""

    def __init__(self, ws_url):
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0

    def __call__(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message["result"]

    def eval(self, expression):
        result = self("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def wait_for(self, expression, seconds=20):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {expression}")


@pytest.fixture(scope="module")
def server():
    url, proc = start_server()
    yield url
    stop_server(proc)


@pytest.fixture
def page(server):
    profile = tempfile.mkdtemp(prefix="plumb-chromium-")
    browser = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=0",
         "--remote-allow-origins=*", f"--user-data-dir={profile}", "--window-size=900,700", server + "/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + 20
        while not (os.path.exists(port_file) and open(port_file).read().count("\n") >= 1):
            assert time.monotonic() < deadline and browser.poll() is None, "chromium did not start"
            time.sleep(0.05)
        port = int(open(port_file).read().split("\n")[0])
        deadline = time.monotonic() + 20
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                targets = [t for t in json.loads(r.read()) if t["type"] == "page"]
            if targets or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        tools = DevTools(targets[0]["webSocketDebuggerUrl"])
        yield tools
        tools.ws.close()
    finally:
        browser.kill()
        browser.wait()
        shutil.rmtree(profile, ignore_errors=True)


def type_and_send(page, text):
    page.eval("document.getElementById('input').focus()")
    page("Input.insertText", text=text)
    for kind in ("keyDown", "keyUp"):
        page("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter", windowsVirtualKeyCode=13)


def last_answer(page, n):
    """Waits for the n-th answer to finish; its text, stats line and how many times its text changed."""
    page.wait_for(f"document.querySelectorAll('.msg.assistant[data-done]').length >= {n}", seconds=25)
    return page.eval(f"""(() => {{
        const div = document.querySelectorAll('.msg.assistant')[{n - 1}];
        return {{text: div.querySelector('.text').textContent, stats: div.querySelector('.stats').textContent,
                 error: div.classList.contains('error'), updates: window.updates[{n - 1}] || 0}};
    }})()""")


def test_the_page_streams_an_answer_keeps_the_conversation_and_shows_stats(server, page):
    page.wait_for("document.getElementById('model')?.textContent.includes('context')")
    model = json.loads(urllib.request.urlopen(server + "/v1/models", timeout=30).read())["data"][0]
    # Greedy and short, so the answer can be compared with the API's; each answer's text changes counted
    # (more than one change: it was shown as it streamed, not at the end).
    page.eval("""document.getElementById('temperature').value = '0';
                 document.getElementById('max_tokens').value = '24';
                 window.updates = [];
                 new MutationObserver(() => {
                   const answers = document.querySelectorAll('.msg.assistant');
                   const i = answers.length - 1;
                   if (i >= 0 && !answers[i].dataset.done) window.updates[i] = (window.updates[i] || 0) + 1;
                 }).observe(document.getElementById('log'), {subtree: true, childList: true,
                                                              characterData: true});""")
    first_question = "What is the capital of France?"
    type_and_send(page, first_question)
    first = last_answer(page, 1)
    assert not first["error"], first
    assert first["updates"] > 2, first
    stats = STATS.fullmatch(first["stats"])
    assert stats, first["stats"]
    prompt, _, generated, context, total = map(int, stats.groups()[:5])
    assert context == prompt + generated and total == model["max_model_len"]

    client = openai.OpenAI(base_url=server + "/v1", api_key="none", max_retries=0, timeout=120)
    conversation = [{"role": "user", "content": first_question}]
    api = client.chat.completions.create(model="m", messages=conversation, max_tokens=24, temperature=0)
    assert first["text"] == api.choices[0].message.content
    assert prompt == api.usage.prompt_tokens and generated == api.usage.completion_tokens

    type_and_send(page, "And of Italy?")
    second = last_answer(page, 2)
    assert not second["error"], second
    stats = STATS.fullmatch(second["stats"])
    assert stats, second["stats"]
    prompt2, cached2 = int(stats.group(1)), int(stats.group(2))
    assert prompt2 > prompt + generated  # the first turn went with it
    assert cached2 > 0  # and its blocks were found in the prefix cache
    conversation += [{"role": "assistant", "content": first["text"]},
                     {"role": "user", "content": "And of Italy?"}]
    api = client.chat.completions.create(model="m", messages=conversation, max_tokens=24, temperature=0)
    assert second["text"] == api.choices[0].message.content
    assert page.eval("document.querySelectorAll('.msg.user').length") == 2

    os.makedirs(OUTPUT_DIR, exist_ok=True)
    shot = os.path.join(OUTPUT_DIR, "chat_page.png")
    with open(shot, "wb") as f:
        f.write(base64.b64decode(page("Page.captureScreenshot", format="png")["data"]))
    print("screenshot:", shot)
