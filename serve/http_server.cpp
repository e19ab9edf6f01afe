#include "serve/http_server.hpp"

#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <thread>

#include "engine/util/error.hpp"

namespace cpullm {
namespace {

using nlohmann::json;
using Clock = ServeClock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// Everything the handlers share; lives until the listening thread has been joined.
struct ServerState {
  Scheduler& scheduler;
  ServeMetrics& metrics;
  const ApiSettings& api;
  const ServerSettings& settings;
  const Model& model;
  int64_t started = 0;                  // Unix seconds, /v1/models' "created"
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> draining{false};
  std::atomic<int64_t> answering{0};  // completion requests whose answer is not fully written yet
};

// Counts a completion request from its arrival until its answer is written: httplib's stop()
// cuts streams still being written, so the server stops only when none is left.
struct Answering {
  explicit Answering(std::atomic<int64_t>& count) : count_(count) { ++count_; }
  ~Answering() { --count_; }
  Answering(const Answering&) = delete;
  Answering& operator=(const Answering&) = delete;
  std::atomic<int64_t>& count_;
};

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(json_text(body), "application/json");
}

// One line per request: id, endpoint, status, tokens in and out, TTFT, total time, how it ended.
void log_request(const std::string& id, const std::string& path, int status, const RequestRecord* r,
                 Clock::time_point arrival, const std::string& how) {
  const Clock::time_point now = Clock::now();
  std::string line = fmt::format("cpullm: serve: {} POST {} {}", id, path, status);
  if (r) {
    line += fmt::format(" prompt={} completion={}", r->prompt_tokens, r->generated_tokens);
    if (r->first_token != Clock::time_point{}) line += fmt::format(" ttft_ms={:.1f}", ms_between(r->arrival, r->first_token));
  }
  line += fmt::format(" total_ms={:.1f} {}\n", ms_between(arrival, now), how);
  std::fputs(line.c_str(), stderr);
}

// Retry-After for a full queue: the queue's wait at the mean service time, at least a second.
int retry_after_seconds(const Scheduler& scheduler) {
  const ServeGauges g = scheduler.gauges();
  const double wait = scheduler.mean_service_seconds() * static_cast<double>(g.waiting + 1) /
                      static_cast<double>(std::max<int64_t>(1, g.slots));
  return static_cast<int>(std::clamp(std::ceil(wait), 1.0, 3600.0));
}

// A streamed request's state, shared by the content provider and its releaser.
struct StreamState {
  std::shared_ptr<RequestStream> stream;
  ResponseHead head;
  std::string path;
  Clock::time_point arrival;
  bool include_usage = false;
  bool role_sent = false;
  bool ended = false;       // the last event went out
  std::string how = "client gone";
};

bool write_event(httplib::DataSink& sink, const std::string& data) {
  const std::string event = "data: " + data + "\n\n";
  return sink.write(event.data(), event.size());
}

// Sends the events that are ready; false when the client is gone (the request is cancelled).
bool stream_events(const std::shared_ptr<StreamState>& st, httplib::DataSink& sink, ServeMetrics& metrics) {
  std::vector<StreamEvent> events;
  const bool open = st->stream->take(events, std::chrono::milliseconds(200));
  for (const StreamEvent& e : events) {
    if (e.finish == FinishReason::cancelled) {
      const ApiError error(503, "the server is shutting down: the request was cancelled before it finished", "",
                           "server_shutdown", "server_error");
      write_event(sink, json_text(error_body(error)));
      st->how = "cancelled by shutdown";
      break;
    }
    const bool role = st->head.chat && !st->role_sent;
    st->role_sent = true;
    if (!write_event(sink, json_text(chunk_body(st->head, e.text, e.finish, role)))) {
      st->stream->cancel();
      return false;
    }
    if (e.finish != FinishReason::none) st->how = std::string("finish=") + finish_reason_name(e.finish);
  }
  if (open) return true;
  if (st->include_usage && st->how.starts_with("finish="))
    write_event(sink, json_text(usage_chunk_body(st->head, st->stream->record())));
  if (!write_event(sink, "[DONE]")) return false;
  st->ended = true;
  metrics.answered(200);
  sink.done();
  return true;
}

void handle_completion(ServerState& s, const httplib::Request& req, httplib::Response& res, bool chat) {
  const Clock::time_point arrival = Clock::now();
  auto answering = std::make_shared<Answering>(s.answering);  // a stream's lives on in its releaser
  const std::string id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", s.next_id.fetch_add(1));
  auto refuse = [&](const ApiError& e) {
    send_json(res, e.status, error_body(e));
    s.metrics.answered(e.status);
    log_request(id, req.path, e.status, nullptr, arrival, e.what());
  };
  ApiRequest request;
  try {
    request = parse_api_request(req.body, chat, s.api);
  } catch (const ApiError& e) {
    return refuse(e);
  } catch (const Error& e) {  // the tokenizer's refusals
    return refuse(ApiError(400, e.what()));
  }
  std::shared_ptr<RequestStream> stream = s.draining.load() ? nullptr : s.scheduler.submit(request.job, arrival);
  if (!stream) {
    if (s.draining.load())
      return refuse(ApiError(503, "the server is shutting down", "", "server_shutdown", "server_error"));
    res.set_header("Retry-After", std::to_string(retry_after_seconds(s.scheduler)));
    return refuse(ApiError(429, "the server is at capacity: every sequence slot is busy and the queue is full", "",
                           "rate_limit_exceeded", "rate_limit_error"));
  }
  const ResponseHead head{id, static_cast<int64_t>(std::time(nullptr)), s.settings.model_name, chat};
  if (!request.stream) {
    std::string text;
    FinishReason finish = FinishReason::none;
    std::vector<StreamEvent> events;
    for (bool open = true; open;) {
      open = stream->take(events, std::chrono::milliseconds(1000));
      for (const StreamEvent& e : events) {
        text += e.text;
        if (e.finish != FinishReason::none) finish = e.finish;
      }
      events.clear();
    }
    const RequestRecord record = stream->record();
    if (finish == FinishReason::cancelled) {
      send_json(res, 503, error_body(ApiError(503, "the server is shutting down: the request was cancelled", "",
                                              "server_shutdown", "server_error")));
      s.metrics.answered(503);
      return log_request(id, req.path, 503, &record, arrival, "cancelled by shutdown");
    }
    send_json(res, 200, response_body(head, text, finish, record));
    s.metrics.answered(200);
    return log_request(id, req.path, 200, &record, arrival, std::string("finish=") + finish_reason_name(finish));
  }
  auto st = std::make_shared<StreamState>();
  st->stream = stream;
  st->head = head;
  st->path = req.path;
  st->arrival = arrival;
  st->include_usage = request.include_usage;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [st, &s](std::size_t, httplib::DataSink& sink) { return stream_events(st, sink, s.metrics); },
      [st, answering](bool) {
        if (!st->ended) st->stream->cancel();  // the client went away: the slot frees at the next step
        const RequestRecord record = st->stream->record();
        log_request(st->head.id, st->path, 200, &record, st->arrival, st->how);
      });
}

json models_body(const ServerState& s) {
  const LlamaConfig& c = s.model.config();
  return {{"object", "list"},
          {"data", json::array({{{"id", s.settings.model_name},
                                 {"object", "model"},
                                 {"created", s.started},
                                 {"owned_by", "cpullm"},
                                 {"meta",
                                  {{"n_vocab", c.vocab_size},
                                   {"n_ctx", s.model.context()},
                                   {"n_seq", s.model.options().sequences},
                                   {"size", s.model.file().file_size()}}}}})}};
}

void route(httplib::Server& server, ServerState& s) {
  server.Post("/v1/completions", [&s](const httplib::Request& q, httplib::Response& r) { handle_completion(s, q, r, false); });
  server.Post("/v1/chat/completions",
              [&s](const httplib::Request& q, httplib::Response& r) { handle_completion(s, q, r, true); });
  server.Get("/v1/models", [&s](const httplib::Request&, httplib::Response& r) { send_json(r, 200, models_body(s)); });
  server.Get("/health", [&s](const httplib::Request&, httplib::Response& r) {
    if (s.draining.load()) send_json(r, 503, {{"status", "shutting down"}});
    else send_json(r, 200, {{"status", "ok"}});
  });
  server.Get("/metrics", [&s](const httplib::Request&, httplib::Response& r) {
    r.set_content(s.metrics.prometheus(s.scheduler.gauges()), "text/plain; version=0.0.4");
  });
  // httplib's own refusals (404, 413, a request line it cannot read) in OpenAI's shape too.
  server.set_error_handler(httplib::Server::HandlerWithResponse([&s](const httplib::Request& q, httplib::Response& r) {
    if (!r.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = fmt::format("HTTP {}", r.status);
    if (r.status == 404) message = fmt::format("Unknown request URL: {} {}", q.method, q.path);
    if (r.status == 413) message = fmt::format("the request body is larger than {} bytes", s.settings.max_body_bytes);
    if (r.status == 400) message = "the HTTP request is malformed";
    send_json(r, r.status, error_body(ApiError(r.status, message)));
    return httplib::Server::HandlerResponse::Handled;
  }));
  server.set_exception_handler([](const httplib::Request&, httplib::Response& r, std::exception_ptr error) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_json(r, 500, error_body(ApiError(500, "internal error: " + what, "", "", "server_error")));
  });
}

}  // namespace

void block_shutdown_signals() {
  const sigset_t set = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that closes mid-write is an error return, not a kill
}

void serve(Session& session, const Tokenizer& tokenizer, const ApiSettings& api, const SchedulerLimits& limits,
           const ServerSettings& settings) {
  ServeMetrics metrics;
  Scheduler scheduler(session, tokenizer, limits, &metrics);
  ServerState state{scheduler, metrics, api, settings, session.model(), static_cast<int64_t>(std::time(nullptr))};

  httplib::Server server;
  // Every request in the system holds a thread (running, queued, or being refused), plus room
  // for /metrics and /health while it is full.
  const std::size_t threads = static_cast<std::size_t>(scheduler.gauges().slots + limits.queue + 32);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(settings.max_body_bytes);
  server.set_read_timeout(settings.read_timeout_s, 0);
  server.set_write_timeout(settings.read_timeout_s, 0);
  server.set_keep_alive_max_count(1000);
  server.set_keep_alive_timeout(5);
  // SO_REUSEADDR alone: httplib's default adds SO_REUSEPORT, with which a second server binds the
  // same port and the kernel splits the connections between the two.
  server.set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  route(server, state);
  int port = settings.port;
  if (port == 0) port = server.bind_to_any_port(settings.host);
  else if (!server.bind_to_port(settings.host, port)) port = -1;
  if (port <= 0) fail("serve: cannot listen on {}:{} (in use, or not an address of this host)", settings.host, settings.port);

  std::atomic<bool> done{false};
  std::atomic<int64_t> deadline_ms{0};  // steady-clock ms after which in-flight requests are cancelled; 0: none
  std::thread listener([&] { server.listen_after_bind(); });
  std::thread signals([&] {
    const sigset_t set = shutdown_signals();
    const timespec tick{0, 200'000'000};
    int received = 0;
    while (!done.load()) {
      const int sig = sigtimedwait(&set, nullptr, &tick);
      if (sig < 0) continue;
      if (++received == 1) {
        const ServeGauges g = scheduler.gauges();
        std::fprintf(stderr, "cpullm: serve: %s: no new requests; %ld running and %ld queued finish within %.0f s\n",
                     sig == SIGTERM ? "SIGTERM" : "SIGINT", static_cast<long>(g.running), static_cast<long>(g.waiting),
                     settings.grace_s);
        state.draining.store(true);
        scheduler.close();
        const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch());
        deadline_ms.store(now_ms.count() + static_cast<int64_t>(settings.grace_s * 1e3));
        scheduler.wake();
      } else {
        std::fputs("cpullm: serve: second signal: cancelling every request now\n", stderr);
        deadline_ms.store(1);
        scheduler.wake();
      }
    }
  });
  std::fprintf(stderr, "cpullm: serve: listening on http://%s:%d (model %s, %ld sequence slots of %ld positions, queue %ld)\n",
               settings.host.c_str(), port, settings.model_name.c_str(), static_cast<long>(scheduler.gauges().slots),
               static_cast<long>(scheduler.context()), static_cast<long>(limits.queue));

  bool cancelled = false;
  try {
    for (;;) {
      const bool worked = scheduler.step();
      const int64_t deadline = deadline_ms.load();
      if (deadline > 0) {
        const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch());
        if (!cancelled && now_ms.count() >= deadline) {
          scheduler.cancel_all();
          cancelled = true;
        }
        const ServeGauges g = scheduler.gauges();
        if (!worked && g.running == 0 && g.waiting == 0 && state.answering.load() == 0) break;
      }
      if (!worked) scheduler.wait_for_work(Clock::now() + std::chrono::milliseconds(100));
    }
  } catch (...) {
    // The engine failed: refuse everything, let the handlers return, then report the error.
    state.draining.store(true);
    scheduler.cancel_all();
    server.stop();
    while (scheduler.step()) {
    }
    done.store(true);
    listener.join();
    signals.join();
    throw;
  }
  server.stop();  // every answer is written; new requests were refused with 503 meanwhile
  listener.join();
  done.store(true);
  signals.join();
  std::fputs("cpullm: serve: stopped\n", stderr);
}

}  // namespace cpullm
