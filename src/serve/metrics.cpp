#include "metrics.h"

#include <httplib.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <string_view>

namespace plumb::serve {
namespace {

// The paths counted by name. Any other path counts as "other": a label per path a client makes up would
// grow the series without bound (Prometheus keeps every one).
// clang-format off
constexpr std::array<std::string_view, 10> kEndpoints = {
    "/", "/health", "/stats", "/metrics", "/v1/models", "/v1/chat/completions", "/v1/completions",
    "/tokenize", "/detokenize", "/tokenizer_info"};
// clang-format on

std::string EndpointLabel(const std::string& path) {
  const bool known = std::find(kEndpoints.begin(), kEndpoints.end(), path) != kEndpoints.end();
  return known ? path : "other";
}

// Shortest round-trip form ("0.025", "1e-05"), which Prometheus parses as Go's ParseFloat does.
std::string Number(double v) {
  std::array<char, 32> buffer;
  const auto end = std::to_chars(buffer.data(), buffer.data() + buffer.size(), v).ptr;
  return std::string(buffer.data(), end);
}

class Exposition {
 public:
  // The HELP and TYPE lines that open a family; `name` as its samples are named (counters end in _total).
  void Family(const std::string& name, const char* type, const char* help) {
    text_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void Sample(const std::string& name, const std::string& labels, const std::string& value) {
    text_ += name + (labels.empty() ? "" : "{" + labels + "}") + " " + value + "\n";
  }
  void Sample(const std::string& name, long long value) { Sample(name, "", std::to_string(value)); }
  void One(const std::string& name, const char* type, const char* help, long long value) {
    Family(name, type, help);
    Sample(name, value);
  }
  void Histogram(const std::string& name, const char* help, const serve::Histogram& h) {
    Family(name, "histogram", help);
    long long cumulative = 0;
    for (std::size_t i = 0; i <= h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      const std::string le = i < h.bounds.size() ? Number(h.bounds[i]) : "+Inf";
      Sample(name + "_bucket", "le=\"" + le + "\"", std::to_string(cumulative));
    }
    Sample(name + "_sum", "", Number(h.sum));
    Sample(name + "_count", h.count);
  }
  std::string& text() { return text_; }

 private:
  std::string text_;
};

}  // namespace

Metrics::Metrics(Engine& engine, int kv_block_size) : engine_(engine), kv_block_size_(kv_block_size) {}

void Metrics::Register(httplib::Server& http) {
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  http.set_logger(
      [this](const httplib::Request& req, const httplib::Response& res) { CountResponse(req, res); });
}

void Metrics::CountResponse(const httplib::Request& req, const httplib::Response& res) {
  // Bytes that never formed an HTTP request (no version: the unread body of a request refused before
  // routing, which the refusal's Connection: close ends) are no request.
  if (req.version.rfind("HTTP/", 0) != 0) return;
  std::lock_guard lock(mu_);
  ++responses_[{EndpointLabel(req.path), res.status}];
}

std::string Metrics::Render() {
  Exposition out;
  out.Family("plumb_requests_total", "counter",
             "HTTP requests answered, by endpoint and status (a stream when its last byte is written).");
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, count] : responses_) {
      out.Sample("plumb_requests_total",
                 "endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"",
                 std::to_string(count));
    }
  }

  const EngineStats s = engine_.Stats();
  out.One("plumb_prompt_tokens_total", "counter", "Prompt tokens of the requests admitted.", s.prompt_tokens);
  out.One("plumb_prompt_tokens_cached_total", "counter",
          "Of those, tokens whose KV blocks were found in the prefix cache.", s.cached_prompt_tokens);
  out.One("plumb_generation_tokens_total", "counter", "Tokens generated.", s.generated_tokens);
  out.One("plumb_requests_running", "gauge", "Requests admitted by the scheduler: prefilling or decoding.",
          s.running);
  // `active` counts every request submitted and not finished, those not yet taken by the engine thread too;
  // the snapshot of `running` may lag it by one turn of the engine's loop.
  out.One("plumb_requests_waiting", "gauge", "Requests submitted and not yet running.",
          std::max(0, s.active - s.running));
  out.One("plumb_preemptions_total", "counter", "Requests preempted for KV blocks (to be recomputed).",
          s.preemptions);

  out.Family("plumb_kv_cache_blocks", "gauge",
             "KV cache blocks: used by sequences, cached (kept by the prefix cache alone), free.");
  out.Sample("plumb_kv_cache_blocks", "state=\"used\"", std::to_string(s.kv.used_blocks));
  out.Sample("plumb_kv_cache_blocks", "state=\"cached\"", std::to_string(s.kv.cached_blocks));
  out.Sample("plumb_kv_cache_blocks", "state=\"free\"", std::to_string(s.kv.free_blocks));
  out.One("plumb_kv_cache_block_positions", "gauge", "Positions (tokens) per KV block.", kv_block_size_);
  out.One("plumb_kv_cache_positions", "gauge", "Positions stored in used KV blocks.", s.kv.stored_positions);
  out.Family("plumb_kv_cache_usage_ratio", "gauge", "Used KV blocks over all blocks (0 to 1).");
  const double usage = s.kv.total_blocks > 0 ? static_cast<double>(s.kv.used_blocks) / s.kv.total_blocks : 0;
  out.Sample("plumb_kv_cache_usage_ratio", "", Number(usage));

  out.Histogram("plumb_time_to_first_token_seconds",
                "From a request's hand-over to the engine (parsed, tokenized) to its first token.",
                s.latency.time_to_first_token);
  out.Histogram("plumb_inter_token_latency_seconds", "Between two consecutive tokens of a request.",
                s.latency.inter_token_latency);
  return std::move(out.text());
}

}  // namespace plumb::serve
