// `cpullm serve`'s HTTP side: cpp-httplib's server routes OpenAI's endpoints to the scheduler,
// streams tokens as server-sent events, exposes /health, /v1/models and /metrics, logs one line
// per request, and shuts down on SIGTERM: new requests get 503, those in flight finish within a grace
// period (then are cancelled), exit 0.
#pragma once
#include <cstddef>
#include <string>

#include "engine/run/session.hpp"
#include "serve/openai_api.hpp"
#include "serve/scheduler.hpp"

namespace cpullm {

struct ServerSettings {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port (the line "listening on" names it)
  std::string model_name;                // what /v1/models lists and every response names
  std::size_t max_body_bytes = 4u << 20; // larger bodies: 413
  int read_timeout_s = 10;               // a request whose headers or body stall this long is dropped
  double grace_s = 30;                   // after SIGTERM, in-flight requests finish within this, then are cancelled
};

// Blocks SIGTERM and SIGINT in the calling thread, and so in every thread it starts afterwards
// (the engine's OpenMP team included), and ignores SIGPIPE: serve() waits for the first two
// itself. Call before the Session is made.
void block_shutdown_signals();

// Serves until SIGTERM or SIGINT, running the engine on the calling thread (where the Session's
// threads were placed). Returns after the shutdown. Errors (a port in use) are cpullm::Error.
void serve(Session& session, const Tokenizer& tokenizer, const ApiSettings& api, const SchedulerLimits& limits,
           const ServerSettings& settings);

}  // namespace cpullm
