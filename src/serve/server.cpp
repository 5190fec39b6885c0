// plumb serve (plumb/serve/server.h): the process around the server: signals, the engine and listener
// threads, and the drain on Ctrl-C. The parts have their own files: engine (the Scheduler's thread),
// request (reading OpenAI bodies), api (routes, responses, streams), reply_text, client_watch, http_error,
// metrics (GET /metrics), auth (--api-key), chat_page (GET /).
#include "plumb/serve/server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "api.h"
#include "auth.h"
#include "chat_page.h"
#include "engine.h"
#include "metrics.h"
#include "plumb/core/error.h"

namespace plumb::serve {

int Serve(TextModel& model, const ServerOptions& options, std::ostream& log) {
  // SIGINT and SIGTERM are taken by sigwait below, so every thread started from here must block them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  PagedKvCache cache(options.kv);
  Engine engine(model.model, cache, options.scheduler, options.max_queue);
  Api api(model, options, engine);
  httplib::Server http;
  http.set_payload_max_length(options.max_body_bytes);
  const int threads = options.http_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  api.Register(http);
  Metrics metrics(engine, options.kv.block_size);
  metrics.Register(http);
  RegisterChatPage(http);
  RequireApiKey(http, options.api_key);

  const int port = options.port == 0 ? http.bind_to_any_port(options.host)
                                     : (http.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port < 0) {
    throw MakeError("plumb serve: cannot listen on ", options.host, ":", options.port,
                    " (in use, or not an address of this host)");
  }
  std::thread engine_thread([&] { engine.Run(); });
  std::thread listener([&] { http.listen_after_bind(); });
  log << "plumb serve: " << options.model_name << " on http://" << options.host << ":" << port
      << "/v1 (Ctrl-C to stop)" << std::endl;
  log << "plumb serve: chat page on http://" << options.host << ":" << port << "/"
      << (options.api_key.empty() ? "" : "; the API requires the key (--api-key)") << std::endl;

  int signal = 0;
  sigwait(&signals, &signal);
  log << "plumb serve: " << (signal == SIGINT ? "SIGINT" : "SIGTERM") << ": draining " << engine.Active()
      << " request(s)" << std::endl;
  engine.StopAccepting();
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(options.drain_seconds));
  while (engine.Active() > 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (engine.Active() > 0) log << "plumb serve: aborting " << engine.Active() << " request(s)" << std::endl;
  engine.Shutdown();
  engine_thread.join();
  http.stop();
  listener.join();
  log << "plumb serve: stopped" << std::endl;
  return 0;
}

}  // namespace plumb::serve
