// GET /metrics: plumb serve's counters, gauges and latency histograms in Prometheus' text exposition format
// (version 0.0.4), named plumb_* after vLLM's and llama.cpp's sets (docs/serve.md, "Metrics").
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "engine.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace plumb::serve {

class Metrics {
 public:
  // kv_block_size: positions per KV block (--block-size), to turn blocks into positions.
  Metrics(Engine& engine, int kv_block_size);

  // Adds GET /metrics and counts every response the server writes, by endpoint and status, through
  // cpp-httplib's logger, which runs after a response's last byte (a stream's too): the one place that sees
  // the statuses the library makes itself (404, 413) as well as the handlers'. Takes the server's logger.
  void Register(httplib::Server& http);

  // The exposition: the response counts, then the engine's snapshot (Engine::Stats).
  std::string Render();

 private:
  void CountResponse(const httplib::Request& req, const httplib::Response& res);

  Engine& engine_;
  const int kv_block_size_;
  std::mutex mu_;
  std::map<std::pair<std::string, int>, long long> responses_;  // (endpoint, status) -> count
};

}  // namespace plumb::serve
