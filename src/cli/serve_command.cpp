// plumb serve: the flags of the OpenAI-compatible HTTP server (plumb/serve/server.h, docs/serve.md).
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "plumb/cli/batch_flags.h"
#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/serve/server.h"

namespace plumb::cli {
namespace {

Flags ServeFlags() {
  Flags f;
  AddModelFlag(f);
  f.AddValue("host", "ADDR", "the address to listen on (0.0.0.0 to serve other machines too)", "127.0.0.1");
  f.AddValue("port", "N", "the port; 0 = any free one (printed on stderr)", "8080");
  f.AddValue("model-name", "NAME", "the model's id in /v1/models and responses (default: the file's name)");
  f.AddValue("chat-template", "NAME",
             "chatml, llama3, llama2, gemma, gemma3, mistral, phi3, phi4-mini, olmo2 or qwen3 instead of the "
             "model's own");
  f.AddValue("max-body-kib", "KiB", "the largest request body accepted (413 above)", "1024");
  f.AddValue("max-queue", "N", "requests waiting for admission beyond --max-batch running ones (429 above)",
             "64");
  f.AddValue("http-threads", "N",
             "HTTP handler threads: requests (and idle keep-alive connections) served at once", "64");
  f.AddValue("drain-seconds", "S", "on Ctrl-C / SIGTERM: how long running requests may still take", "30");
  f.AddValue("api-key", "KEY",
             "require 'Authorization: Bearer KEY' on every request but /, /health, /stats and /metrics "
             "(401 without); default: the environment's PLUMB_API_KEY (kept out of the process list)");
  AddRuntimeFlags(f, "positions per request (prompt + max_tokens); 0 = the model's context length", "0");
  AddPagedKvFlags(f);
  AddSchedulerFlags(f);
  return f;
}

constexpr const char* kServeUsage =
    "usage: plumb serve --model PATH [--host 127.0.0.1 --port 8080] [flags]\n"
    "Serves the model over HTTP with OpenAI's API: POST /v1/chat/completions and /v1/completions (streamed\n"
    "as server-sent events with \"stream\": true), GET /v1/models, GET /health and GET /stats, Prometheus'\n"
    "GET /metrics, and a chat page at /. Requests run together by continuous batching over a paged KV cache\n"
    "(--max-batch, --kv-budget-mib, ...). Ctrl-C drains and exits. See docs/serve.md.\n\nflags:\n";

}  // namespace

int RunServe(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags flags = ServeFlags();
  if (!flags.ParseUnlessHelp(args, kServeUsage, out)) return 0;
  serve::ServerOptions options;
  const std::string model_path = flags.String("model");
  options.host = flags.String("host");
  options.port = flags.Int("port", 0, 65535);
  options.model_name = flags.IsSet("model-name") ? flags.String("model-name")
                                                 : std::filesystem::path(model_path).filename().string();
  options.chat_template = flags.IsSet("chat-template") ? flags.String("chat-template") : "";
  options.max_body_bytes = static_cast<std::size_t>(flags.Int("max-body-kib", 1, 1 << 20)) * 1024;
  options.max_queue = flags.Int("max-queue", 0, 1 << 20);
  options.http_threads = flags.Int("http-threads", 1, 4096);
  options.drain_seconds = flags.Float("drain-seconds", 0, 3600);
  const char* env_key = std::getenv("PLUMB_API_KEY");
  options.api_key = flags.IsSet("api-key") ? flags.String("api-key") : env_key ? env_key : "";
  options.scheduler = ReadSchedulerFlags(flags);
  ApplyThreadsFlag(flags);

  TextModel loaded = TextModel::Load(model_path);
  options.context = ReadContextFlag(flags, loaded.model.config(), 0);
  options.kv = ReadPagedKvFlags(flags, loaded.model.config(), options.context, options.scheduler.max_running);
  return serve::Serve(loaded, options, err);
}

}  // namespace plumb::cli
