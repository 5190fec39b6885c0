// plumb serve: an OpenAI-compatible HTTP server over the Scheduler (docs/serve.md).
//
// One engine thread owns the Scheduler (and through it the Model and the PagedKvCache) and loops Step()
// while any request runs; HTTP handler threads (cpp-httplib's pool) turn a request's JSON into token ids,
// hand it to the engine through a mutex-protected queue, and wait on the request's own channel for its
// tokens. The engine thread only appends to channels and never waits on a client, so a slow or vanished
// client costs its own request alone; a request whose client has gone, streamed or not, is aborted
// (Scheduler::Abort) and its KV blocks freed.
#pragma once

#include <string>

#include "plumb/engine/scheduler.h"
#include "plumb/engine/text_model.h"
#include "plumb/kv/paged_kv_cache.h"

namespace plumb::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;            // 0: any free port (the chosen one is printed)
  std::string model_name;     // what /v1/models lists and responses carry
  std::string chat_template;  // a ChatTemplate name to force, or "" for the model's own
  std::size_t max_body_bytes = 1 << 20;
  int max_queue = 64;         // requests waiting for admission beyond those running
  int context = 0;            // positions per request (prompt + max_tokens), the cap of max_tokens
  int http_threads = 16;      // cpp-httplib's handler threads: the most requests served at once
  double drain_seconds = 30;  // on SIGINT/SIGTERM: how long running requests may still take
  std::string api_key;        // non-empty: requests (but /, /health, /stats, /metrics) need `Bearer api_key`
  SchedulerOptions scheduler;
  PagedKvConfig kv;
};

// Serves until SIGINT or SIGTERM, then stops accepting, lets running requests finish (aborting those still
// running after drain_seconds) and returns 0. `log` gets the listening address and one line per signal.
// Throws plumb::Error when the address cannot be bound. Blocks SIGINT and SIGTERM in the calling thread.
int Serve(TextModel& model, const ServerOptions& options, std::ostream& log);

}  // namespace plumb::serve
