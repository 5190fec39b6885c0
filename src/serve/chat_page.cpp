#include "chat_page.h"

#include <httplib.h>

namespace plumb::serve {
namespace {

// Stats per answer, as `plumb chat` prints them: prompt tokens (those found in the prefix cache: the earlier
// turns, whose KV blocks the server kept), time to first token, generated tokens and the decode rate, and
// the context the conversation now fills. Token counts come from the usage chunk
// (stream_options.include_usage), the context length from /v1/models' max_model_len, times from the
// browser's clock (so they include the network, none on localhost).
constexpr std::string_view kPage = R"plumb(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>plumb chat</title>
<style>
  :root { color-scheme: light dark; --muted: #777; --line: #8884; --user: #2f6feb22; }
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0; display: flex; flex-direction: column;
         height: 100vh; }
  header, footer { padding: 8px 12px; border-bottom: 1px solid var(--line); display: flex; gap: 8px;
                   align-items: center; flex-wrap: wrap; }
  footer { border-top: 1px solid var(--line); border-bottom: 0; }
  header b { margin-right: auto; }
  #model, .stats, #status { color: var(--muted); font-size: 13px; }
  #log { flex: 1; overflow-y: auto; padding: 12px; }
  .msg { max-width: 52em; margin: 0 auto 12px; }
  .msg .text { white-space: pre-wrap; padding: 8px 10px; border-radius: 8px; }
  .msg.user .text { background: var(--user); }
  .msg.assistant .text { border: 1px solid var(--line); }
  .msg.error .text { border-color: #d33; }
  .stats { font-family: ui-monospace, monospace; margin-top: 3px; }
  textarea { flex: 1; min-width: 12em; font: inherit; resize: vertical; }
  input { font: inherit; }
  input[type=number] { width: 5em; }
  details { width: 100%; }
</style>
</head>
<body>
<header>
  <b>plumb</b> <span id="model">…</span>
  <input id="key" type="password" placeholder="API key (--api-key)" autocomplete="off">
  <button id="new" type="button">New chat</button>
</header>
<div id="log"></div>
<footer>
  <details><summary>Settings</summary>
    <label>System prompt <textarea id="system" rows="2"></textarea></label>
    <label>temperature <input id="temperature" type="number" min="0" max="2" step="0.1" value="0.7"></label>
    <label>max_tokens <input id="max_tokens" type="number" min="1" value="512"></label>
  </details>
  <textarea id="input" rows="2" placeholder="Message (Enter sends, Shift+Enter a new line)"></textarea>
  <button id="send" type="button">Send</button>
  <span id="status"></span>
</footer>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const state = { messages: [], model: "plumb", context: 0, controller: null };

$("key").value = localStorage.getItem("plumb-api-key") || "";

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

async function errorText(response) {
  const body = await response.json().catch(() => null);
  const message = body && body.error ? body.error.message : response.statusText;
  return response.status + ": " + message;
}

async function loadModel() {
  try {
    const r = await fetch("/v1/models", { headers: headers() });
    if (!r.ok) { $("model").textContent = await errorText(r); return; }
    const m = (await r.json()).data[0];
    state.model = m.id;
    state.context = m.max_model_len || 0;
    $("model").textContent = m.id + (state.context ? " · context " + state.context + " tokens" : "");
  } catch (e) {
    $("model").textContent = "cannot reach the server: " + e.message;
  }
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  const body = document.createElement("div");
  body.className = "text";
  body.textContent = text;  // text, never markup: an answer cannot inject anything into the page
  div.appendChild(body);
  const stats = document.createElement("div");
  stats.className = "stats";
  div.appendChild(stats);
  $("log").appendChild(div);
  $("log").scrollTop = $("log").scrollHeight;
  return div;
}

function statsLine(usage, ms, finish) {
  const parts = [];
  if (usage) {
    const cached = (usage.prompt_tokens_details || {}).cached_tokens || 0;
    parts.push(usage.prompt_tokens + " prompt tokens (" + cached + " cached)");
  }
  if (ms.first !== null) parts.push("first token " + Math.round(ms.first - ms.start) + " ms");
  if (usage) {
    const n = usage.completion_tokens;
    const decode = (ms.end - ms.first) / 1000;
    const rate = n > 1 && decode > 0 ? ((n - 1) / decode).toFixed(1) + " tok/s" : "";
    parts.push(n + " generated" + (rate ? ", " + rate : ""));
    const used = usage.prompt_tokens + n;
    parts.push("context " + used + "/" + (state.context || "?"));
  }
  if (finish) parts.push(finish);
  return parts.join(" | ");
}

// Server-sent events: "data: {chunk}" lines separated by blank lines, "data: [DONE]" last.
async function readStream(response, onChunk) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of event.split("\n")) {
        if (line.startsWith("data: ") && line !== "data: [DONE]") onChunk(JSON.parse(line.slice(6)));
      }
    }
  }
}

function setBusy(busy) {
  $("send").textContent = busy ? "Stop" : "Send";
  $("status").textContent = busy ? "generating…" : "";
}

async function send() {
  const text = $("input").value.trim();
  if (!text || state.controller) return;
  $("input").value = "";
  addMessage("user", text);
  state.messages.push({ role: "user", content: text });
  const div = addMessage("assistant", "");
  const out = div.querySelector(".text");
  const system = $("system").value.trim();
  const body = {
    model: state.model,
    messages: (system ? [{ role: "system", content: system }] : []).concat(state.messages),
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number($("temperature").value),
    max_tokens: Number($("max_tokens").value),
  };
  state.controller = new AbortController();
  setBusy(true);
  const ms = { start: performance.now(), first: null, end: null };
  let answer = "", usage = null, finish = null;
  try {
    const r = await fetch("/v1/chat/completions", { method: "POST", headers: headers(),
                                                    body: JSON.stringify(body),
                                                    signal: state.controller.signal });
    if (!r.ok) throw new Error(await errorText(r));
    await readStream(r, (chunk) => {
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      const choice = (chunk.choices || [])[0];
      if (!choice) return;
      if (choice.delta && choice.delta.content) {
        if (ms.first === null) ms.first = performance.now();
        answer += choice.delta.content;
        out.textContent = answer;
        $("log").scrollTop = $("log").scrollHeight;
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    });
    ms.end = performance.now();
    state.messages.push({ role: "assistant", content: answer });
    div.querySelector(".stats").textContent = statsLine(usage, ms, finish);
  } catch (e) {
    if (e.name === "AbortError") {  // Stop: the server sees the connection go and frees the request
      state.messages.push({ role: "assistant", content: answer });
      div.querySelector(".stats").textContent = "stopped";
    } else {
      state.messages.pop();  // the question was not answered: it may be sent again
      div.classList.add("error");
      out.textContent = answer + (answer ? "\n" : "") + e.message;
    }
  } finally {
    state.controller = null;
    setBusy(false);
    div.dataset.done = "true";
  }
}

$("send").addEventListener("click", () => (state.controller ? state.controller.abort() : send()));
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); }
});
$("new").addEventListener("click", () => {
  if (state.controller) state.controller.abort();
  state.messages = [];
  $("log").textContent = "";
});
$("key").addEventListener("change", () => {
  localStorage.setItem("plumb-api-key", $("key").value.trim());
  loadModel();
});
loadModel();
$("input").focus();
</script>
</body>
</html>
)plumb";

}  // namespace

std::string_view ChatPageHtml() {
  return kPage;
}

void RegisterChatPage(httplib::Server& http) {
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    // The browser itself then refuses anything from elsewhere: the page works offline or not at all.
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                   "connect-src 'self'; img-src data:");
    res.set_content(kPage.data(), kPage.size(), "text/html; charset=utf-8");
  });
}

}  // namespace plumb::serve
