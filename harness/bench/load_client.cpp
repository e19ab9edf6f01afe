#include "harness/bench/load_client.hpp"

#include <httplib.h>

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "engine/util/error.hpp"

namespace cpullm {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// "http://host:port[/prefix]" -> the client's "http://host:port" and the path prefix ("" or "/prefix").
std::pair<std::string, std::string> split_url(const std::string& url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos || (url.compare(0, scheme, "http") != 0 && url.compare(0, scheme, "https") != 0))
    fail("--url {}: give http://HOST:PORT (or https://)", url);
  const std::size_t path = url.find('/', scheme + 3);
  std::string prefix = path == std::string::npos ? "" : url.substr(path);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (prefix.ends_with("/v1")) prefix.resize(prefix.size() - 3);  // the endpoints add /v1 themselves
  return {url.substr(0, path), prefix};
}

httplib::Client client_for(const std::string& base, double timeout_s) {
  httplib::Client client(base);
  const auto seconds = static_cast<time_t>(timeout_s);
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(seconds, 0);
  client.set_write_timeout(seconds, 0);
  return client;
}

// One streamed completion: its events parsed as they arrive, each token's arrival timed.
void run_request(const std::string& base, const std::string& path, const std::string& body, double timeout_s,
                 Clock::time_point start, UrlRequest& out) {
  auto ms_now = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); };
  httplib::Client client = client_for(base, timeout_s);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = {{"Accept", "text/event-stream"}, {"Content-Type", "application/json"}};
  req.body = body;
  int status = 0;
  bool done = false;
  std::string buffer, stream_error;
  int64_t streamed = 0;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, std::size_t length, uint64_t, uint64_t) {
    const double now = ms_now();
    buffer.append(data, length);
    if (status != 200) return buffer.size() < (1u << 20);  // an error body: kept for its kind
    for (std::size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (!event.starts_with("data: ")) continue;
      const std::string data = event.substr(6);
      if (data == "[DONE]") {
        done = true;
        continue;
      }
      const json chunk = json::parse(data, nullptr, false);
      if (chunk.is_discarded() || !chunk.is_object()) {
        stream_error = "unreadable event";
        return false;
      }
      if (chunk.contains("error")) {
        stream_error = "error event";
        return false;
      }
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        out.prompt_tokens = chunk["usage"].value("prompt_tokens", int64_t{0});
        out.output_tokens = chunk["usage"].value("completion_tokens", int64_t{0});
      }
      // A chunk of a choice is a token; a closing chunk with no text and a finish reason (llama-server's) is not.
      if (chunk.contains("choices") && chunk["choices"].is_array() && !chunk["choices"].empty() &&
          chunk["choices"][0].is_object()) {
        const json& choice = chunk["choices"][0];
        const bool closing = choice.contains("finish_reason") && !choice["finish_reason"].is_null() &&
                             choice.value("text", std::string()).empty();
        if (!closing) {
          if (out.first_token_ms == 0) out.first_token_ms = now;
          out.token_ms.push_back(now);
          ++streamed;
        }
      }
    }
    return true;
  };
  const httplib::Result result = client.send(req);
  out.finish_ms = ms_now();
  if (!result) {
    const httplib::Error e = result.error();
    out.error = !stream_error.empty() ? stream_error
                : e == httplib::Error::Read ? "read (timeout or closed)"
                : e == httplib::Error::Connection ? "connection"
                                                  : "transport: " + httplib::to_string(e);
  } else if (status != 200) {
    out.error = "http " + std::to_string(status);
  } else if (!stream_error.empty()) {
    out.error = stream_error;
  } else if (!done) {
    out.error = "incomplete stream";
  }
  if (out.output_tokens == 0) out.output_tokens = streamed;
}

}  // namespace

ServerIdentity query_server(const std::string& url) {
  const auto [base, prefix] = split_url(url);
  httplib::Client client = client_for(base, 30);
  const httplib::Result result = client.Get(prefix + "/v1/models");
  if (!result) fail("--url {}: no answer from GET /v1/models ({})", url, httplib::to_string(result.error()));
  if (result->status != 200) fail("--url {}: GET /v1/models answered HTTP {}", url, result->status);
  const json doc = json::parse(result->body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("data") || !doc["data"].is_array() || doc["data"].empty() ||
      !doc["data"][0].is_object() || !doc["data"][0].contains("id") || !doc["data"][0]["id"].is_string())
    fail("--url {}: GET /v1/models is not OpenAI's list of models", url);
  const json& model = doc["data"][0];
  ServerIdentity id;
  id.url = url;
  id.model = model["id"].get<std::string>();
  id.owned_by = model.contains("owned_by") && model["owned_by"].is_string() ? model["owned_by"].get<std::string>() : "";
  auto meta = [&](const char* key) {
    const bool known = model.contains("meta") && model["meta"].is_object() && model["meta"].contains(key) &&
                       model["meta"][key].is_number_integer() && model["meta"][key].get<int64_t>() > 0;
    return known ? model["meta"][key].get<int64_t>() : int64_t{0};
  };
  id.vocab = meta("n_vocab");
  id.slots = meta("n_seq");
  return id;
}

UrlLoadRun run_url_load(const ServerIdentity& server, const UrlLoadSettings& s) {
  if (!(s.rate > 0) || s.n_prompt < 1 || s.n_gen < 1 || (s.duration_s <= 0 && s.requests < 1))
    fail("--load --url: needs a rate > 0, prompt and generated tokens >= 1, and requests >= 1 or a duration");
  const auto [base, prefix] = split_url(server.url);
  std::mt19937_64 rng(s.seed);
  // Token ids a server's vocabulary has: below its size where it says, else below 1000 (every LLaMA-family vocabulary's).
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>((server.vocab > 0 ? server.vocab : 1000) - 1));
  std::exponential_distribution<double> gap_seconds(s.rate);

  UrlLoadRun run;
  std::vector<double> arrivals;
  for (double t = gap_seconds(rng) * 1e3;; t += gap_seconds(rng) * 1e3) {
    if (s.duration_s > 0 ? t > s.duration_s * 1e3 : static_cast<int>(arrivals.size()) == s.requests) break;
    arrivals.push_back(t);
  }
  run.requests.resize(arrivals.size());
  std::vector<std::string> bodies;
  for (std::size_t i = 0; i < arrivals.size(); ++i) {
    json body = {{"model", server.model},   {"max_tokens", s.n_gen}, {"temperature", 0},
                 {"stream", true},          {"stream_options", {{"include_usage", true}}},
                 {"ignore_eos", true}};
    if (!s.prompts.empty()) {
      body["prompt"] = s.prompts[i % s.prompts.size()];
    } else {
      std::vector<int32_t> ids(static_cast<std::size_t>(s.n_prompt));
      for (int32_t& id : ids) id = token(rng);
      body["prompt"] = ids;
    }
    bodies.push_back(body.dump());
  }

  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  const std::string path = prefix + "/v1/completions";
  for (std::size_t i = 0; i < arrivals.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration<double, std::milli>(arrivals[i]));
    run.requests[i].arrival_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    threads.emplace_back(run_request, base, path, bodies[i], s.timeout_s, start, std::ref(run.requests[i]));
  }
  for (std::thread& t : threads) t.join();
  run.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return run;
}

UrlLoadLatencies url_load_latencies(const UrlLoadRun& run, double slo_ttft_ms, double slo_tpot_ms) {
  UrlLoadLatencies l;
  for (const UrlRequest& r : run.requests) {
    if (!r.error.empty()) {
      ++l.errors[r.error];
      continue;
    }
    ++l.completed;
    l.output_tokens += r.output_tokens;
    const double ttft = r.first_token_ms - r.arrival_ms;
    l.ttft_ms.push_back(ttft);
    l.e2e_ms.push_back(r.finish_ms - r.arrival_ms);
    double tpot = 0;
    if (r.token_ms.size() > 1) {
      tpot = (r.token_ms.back() - r.token_ms.front()) / static_cast<double>(r.token_ms.size() - 1);
      l.tpot_ms.push_back(tpot);
      for (std::size_t i = 1; i < r.token_ms.size(); ++i) l.itl_ms.push_back(r.token_ms[i] - r.token_ms[i - 1]);
    }
    if ((slo_ttft_ms <= 0 || ttft <= slo_ttft_ms) && (slo_tpot_ms <= 0 || tpot <= slo_tpot_ms)) ++l.meeting_slo;
  }
  return l;
}

}  // namespace cpullm
