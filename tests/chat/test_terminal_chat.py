"""plumb chat in a real terminal: tmux runs it in a pane, send-keys types as a person would, capture-pane reads
the screen. Line editing (Left/Right), history (Up, across sessions), Ctrl-C that stops a reply and leaves the
conversation going, the slash commands, /save then /load reproducing the context token for token, and the
pipe mode scripts rely on.

Needs tmux and a plumb built with libedit (CMakeLists.txt registers this as CTest chat.terminal only then,
and a skip saying why otherwise), PLUMB_BINARY and PLUMB_MODEL (the default SmolLM2 model). Greedy decoding
(--temp 0) throughout, so every reply is reproducible.
"""
import json
import os
import re
import shlex
import subprocess
import time
import uuid

import pytest

BINARY = os.environ.get("PLUMB_BINARY", "build/plumb")
MODEL = os.environ.get("PLUMB_MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf")
# Generous: CTest runs other tests beside this one on a two-core host.
TIMEOUT = 120
STATS_LINE = re.compile(r"^\[(\d+) new prompt tokens.*\| (\d+) generated.*\| context (\d+)/", re.M)
STATS_LINE_TEXT = re.compile(r"^\[\d+ new prompt tokens.*$", re.M)
TOKEN_LINE = re.compile(r"^\s*(\d+)\s+(\d+)\s\s(.*)$")


class Terminal:
    """One plumb chat in a tmux pane of its own server (its own socket: nothing shared with a user's tmux)."""

    def __init__(self, tmp_path, *args, state=None):
        self.socket = f"plumb-test-{uuid.uuid4().hex[:12]}"
        conf = tmp_path / f"{self.socket}.conf"
        conf.write_text("set -g history-limit 50000\n")  # the whole chat stays readable
        env = {"XDG_STATE_HOME": str(state or tmp_path / "state"), "HOME": str(tmp_path)}
        command = ["env", *(f"{k}={v}" for k, v in env.items()), BINARY, "chat", "--model", MODEL,
                   "--temp", "0", *args]
        # After plumb ends the pane stays, showing its exit status.
        shell = f"{shlex.join(command)}; echo plumb-exit=$?; sleep 3600"
        self._tmux("-f", str(conf), "new-session", "-d", "-s", "chat", "-x", "160", "-y", "50", shell)
        self.wait_for(lambda s: re.search(r"^>$", s, re.M), "the first prompt")

    def _tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True, capture_output=True,
                              text=True).stdout

    def keys(self, *keys):
        """tmux key names: Enter, Up, Left, C-c, C-d, ..."""
        self._tmux("send-keys", "-t", "chat", *keys)

    def type(self, text):
        self._tmux("send-keys", "-t", "chat", "-l", text)

    def screen(self):
        # -J: lines the terminal wrapped come back whole; -S -: from the start of the history.
        # Trailing blanks (what a line editor leaves when it redraws a line) are not text.
        text = self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "chat")
        return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"

    def wait_for(self, condition, what, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            found = condition(screen)
            if found:
                return found
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}; the screen:\n{screen}")
            time.sleep(0.1)

    def replies(self):
        return STATS_LINE.findall(self.screen())

    def send(self, message):
        """Types a message, presses Enter and waits for the reply's numbers."""
        before = len(self.replies())
        self.type(message)
        self.keys("Enter")
        return self.wait_for_reply(before)

    def wait_for_reply(self, before):
        self.wait_for(lambda s: len(STATS_LINE.findall(s)) > before, "a reply")
        prompt, generated, context = self.replies()[-1]
        return int(prompt), int(generated), int(context)

    def command(self, line, until):
        self.type(line)
        self.keys("Enter")
        return self.wait_for(lambda s: re.search(until, s, re.M), f"the answer to {line}")

    def prompt_line(self):
        return [line for line in self.screen().splitlines() if line.strip()][-1]

    def exit_status(self):
        match = self.wait_for(lambda s: re.search(r"^plumb-exit=(\d+)$", s, re.M), "plumb to exit")
        return int(match.group(1))

    def tokens(self):
        """/tokens: the context, one (position, id, text) per line."""
        marks = len(re.findall(r"tokens in the KV cache", self.screen()))
        self.type("/tokens")
        self.keys("Enter")
        self.wait_for(lambda s: len(re.findall(r"tokens in the KV cache", s)) > marks, "/tokens")
        listing = self.screen().split("> /tokens\n")[-1]
        return [TOKEN_LINE.match(line).groups() for line in listing.splitlines() if TOKEN_LINE.match(line)]

    def close(self):
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def terminals(tmp_path):
    opened = []

    def open_terminal(*args, state=None):
        terminal = Terminal(tmp_path, *args, state=state)
        opened.append(terminal)
        return terminal

    yield open_terminal
    for terminal in opened:
        terminal.close()


def saved(path):
    return json.loads(path.read_text())["messages"]


def test_left_right_edit_the_line_and_up_recalls_it_in_this_and_the_next_session(terminals, tmp_path):
    chat = terminals("--max-tokens", "8")
    chat.type("Say hi to wrld")
    chat.keys("Left", "Left", "Left")
    chat.type("o")
    chat.keys("End")
    chat.type("!")
    before = len(chat.replies())
    chat.keys("Enter")
    chat.wait_for_reply(before)

    chat.keys("Up")
    chat.wait_for(lambda s: s.rstrip().endswith("> Say hi to world!"), "Up to bring the line back")
    before = len(chat.replies())
    chat.keys("Enter")
    chat.wait_for_reply(before)
    chat.command(f"/save {tmp_path / 'edited.json'}", r"^\(saved 4 messages")
    users = [m["content"] for m in saved(tmp_path / "edited.json") if m["role"] == "user"]
    assert users == ["Say hi to world!", "Say hi to world!"]  # as edited, not with ^[[D in it
    chat.keys("C-d")  # at an empty prompt: the end
    assert chat.exit_status() == 0

    history = tmp_path / "state" / "plumb" / "chat_history"
    assert history.exists(), "the history goes to $XDG_STATE_HOME/plumb/chat_history"
    later = terminals("--max-tokens", "8")
    later.keys("Up")
    later.wait_for(lambda s: s.rstrip().endswith(f"> /save {tmp_path / 'edited.json'}"), "the last line")
    later.keys("Up")
    later.wait_for(lambda s: s.rstrip().endswith("> Say hi to world!"), "the line before it")
    later.keys("C-c")  # drops the recalled line: a fresh prompt
    later.wait_for(lambda s: s.rstrip().endswith("> Say hi to world!^C\n>"), "a fresh prompt")
    later.keys("C-c")  # at an empty prompt: the end
    assert later.exit_status() == 0


def test_ctrl_c_stops_the_reply_and_the_conversation_goes_on(terminals, tmp_path):
    chat = terminals("--max-tokens", "3000")
    before = len(chat.replies())
    chat.type("Write a very long story about a dragon who lives in a library.")
    chat.keys("Enter")
    # Some of the reply on the screen, then Ctrl-C.
    chat.wait_for(lambda s: len(s.split("library.\n", 1)[-1].strip()) > 80, "the reply to start")
    chat.keys("C-c")
    first_prompt, first_generated, first_context = chat.wait_for_reply(before)
    assert "| reply cut by Ctrl-C" in STATS_LINE_TEXT.findall(chat.screen())[-1]
    assert first_generated < 3000, "Ctrl-C stopped the reply long before --max-tokens"
    # The prompt is back, and the process with it: the conversation goes on.
    prompt, generated, context = chat.send("What is the dragon's name? Answer in one sentence.")
    assert prompt < 40, f"the follow-up prefilled {prompt} tokens: only its own, the cut reply stays cached"
    assert context == first_context + prompt + generated - 1

    chat.command("/stats", r"^session: 2 replies \(1 cut by Ctrl-C\)")
    chat.command(f"/save {tmp_path / 'cut.json'}", r"^\(saved 4 messages")
    messages = saved(tmp_path / "cut.json")
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    cut = messages[1]["content"]
    assert len(cut) > 80 and cut[:40] in chat.screen(), "the cut reply, as far as it got, is the message"
    chat.keys("C-c")
    assert chat.exit_status() == 0


def test_save_then_load_reproduces_the_context_token_for_token(terminals, tmp_path):
    conversation = tmp_path / "france.json"
    first = terminals("--max-tokens", "24")
    first.send("What is the capital of France?")
    first.send("Name a famous museum there.")
    first.command(f"/save {conversation}", r"^\(saved 4 messages")
    first.send("And a famous tower?")
    original = first.tokens()
    first.command("/exit", r"^plumb-exit=0$")

    second = terminals("--max-tokens", "24")
    second.command(f"/load {conversation}", r"^\(loaded 4 messages")
    second.send("And a famous tower?")
    reloaded = second.tokens()
    assert len(original) > 60
    assert [(i, t) for i, t, _ in reloaded] == [(i, t) for i, t, _ in original]
    assert reloaded == original


def test_commands_and_multi_line_messages(terminals, tmp_path):
    chat = terminals("--max-tokens", "6", "--system", "You are terse.")
    chat.command("/help", r"^  /load FILE")
    chat.command("/frobnicate", r"no command /frobnicate; /help lists them")
    chat.command("/system", r"^You are terse\.$")
    chat.command("/set temp 0.5", r"^\(temp = 0\.5\)")
    chat.command("/set top_p 1.5", r"/set top_p: 1\.5 is outside \[0, 1\]")
    chat.command("/set max_tokens 5", r"^\(max_tokens = 5\)")
    chat.command("/stats", r"^settings: temp 0\.50, top_k 40, top_p 0\.95, min_p 0\.05, seed 0, max_tokens 5$")
    chat.command("/set temp 0", r"^\(temp = 0\)")

    before = len(chat.replies())
    chat.type('"""')
    chat.keys("Enter")
    chat.wait_for(lambda s: s.rstrip().endswith("..."), "the continuation prompt")
    for line in ["first line", "second line"]:
        chat.type(line)
        chat.keys("Enter")
    chat.type('"""')
    chat.keys("Enter")
    _, generated, _ = chat.wait_for_reply(before)
    assert generated <= 5
    before = len(chat.replies())
    chat.type("one \\")
    chat.keys("Enter")
    chat.type("two")
    chat.keys("Enter")
    chat.wait_for_reply(before)
    chat.send("//slash is a message")
    chat.command(f"/save {tmp_path / 'lines.json'}", r"^\(saved 7 messages")
    messages = saved(tmp_path / "lines.json")
    assert messages[0] == {"role": "system", "content": "You are terse."}
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        "first line\nsecond line", "one \ntwo", "/slash is a message"]

    chat.command("/system Answer in French.", r"^\(system prompt set")
    prompt, _, _ = chat.send("Hello")
    assert prompt > 40, "a new system prompt: the conversation is prefilled again from the start"
    chat.command("/clear", r"^\(a new conversation, the same system prompt\)")
    chat.command("/stats", r"^context: 0 of 4096 positions \(KV cache f16\), 1 message$")
    chat.command(f"/load {tmp_path / 'missing.json'}", r"missing\.json: cannot read the conversation")
    chat.command("/exit", r"^plumb-exit=0$")


def test_a_pipe_reads_one_message_a_line_without_prompts():
    result = subprocess.run([BINARY, "chat", "--model", MODEL, "--temp", "0", "--max-tokens", "12"],
                            input="What is the capital of France? Answer in one sentence.\n\n/stats\nAnd of Italy?\n",
                            text=True,
                            capture_output=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert "reading stdin" in result.stderr
    assert "> " not in result.stdout, "no prompts into a pipe"
    # The bare question is a 0.08-nat coin flip for SmolLM2 (tests/serve/test_openai_client.py says which).
    assert "Paris" in result.stdout
    assert len(STATS_LINE.findall(result.stderr)) == 2
    assert "context: " in result.stdout and " 2 messages" in result.stdout  # /stats between the two
