#include "serve/metrics.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace cpullm {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto bucket = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++counts[static_cast<std::size_t>(bucket)];
  sum += value;
  ++count;
}

ServeMetrics::ServeMetrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      tpot_({0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1}),
      batch_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512}) {}

void ServeMetrics::answered(int status) {
  std::lock_guard lock(mutex_);
  ++answers_[status];
}
void ServeMetrics::prompt_tokens(int64_t count) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += static_cast<uint64_t>(count);
}
void ServeMetrics::generated_tokens(int64_t count) {
  std::lock_guard lock(mutex_);
  generated_tokens_ += static_cast<uint64_t>(count);
}
void ServeMetrics::forward_call(int64_t batch_tokens) {
  std::lock_guard lock(mutex_);
  ++forward_calls_;
  batch_.observe(static_cast<double>(batch_tokens));
}
void ServeMetrics::first_token(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}
void ServeMetrics::per_output_token(double seconds) {
  std::lock_guard lock(mutex_);
  tpot_.observe(seconds);
}

namespace {

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void histogram(std::string& out, const char* name, const char* help, const Histogram& h) {
  header(out, name, "histogram", help);
  uint64_t cumulative = 0;
  for (std::size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, h.bounds[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, h.count, name, h.sum, name, h.count);
}

}  // namespace

std::string ServeMetrics::prometheus(const ServeGauges& g) const {
  std::lock_guard lock(mutex_);
  std::string out;
  header(out, "cpullm_requests_total", "counter", "Completion requests answered, by HTTP status.");
  for (const auto& [status, count] : answers_) out += fmt::format("cpullm_requests_total{{status=\"{}\"}} {}\n", status, count);
  if (answers_.empty()) out += "cpullm_requests_total{status=\"200\"} 0\n";
  header(out, "cpullm_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.");
  out += fmt::format("cpullm_prompt_tokens_total {}\n", prompt_tokens_);
  header(out, "cpullm_generated_tokens_total", "counter", "Tokens generated.");
  out += fmt::format("cpullm_generated_tokens_total {}\n", generated_tokens_);
  header(out, "cpullm_forward_calls_total", "counter", "Forward calls of the model (scheduler steps).");
  out += fmt::format("cpullm_forward_calls_total {}\n", forward_calls_);
  header(out, "cpullm_requests_running", "gauge", "Requests holding a sequence slot.");
  out += fmt::format("cpullm_requests_running {}\n", g.running);
  header(out, "cpullm_queue_length", "gauge", "Requests waiting for a sequence slot.");
  out += fmt::format("cpullm_queue_length {}\n", g.waiting);
  header(out, "cpullm_sequence_slots", "gauge", "Sequence slots (--max-sequences).");
  out += fmt::format("cpullm_sequence_slots {}\n", g.slots);
  header(out, "cpullm_kv_cache_positions_used", "gauge", "KV cache positions filled by running requests.");
  out += fmt::format("cpullm_kv_cache_positions_used {}\n", g.kv_positions_used);
  header(out, "cpullm_kv_cache_positions", "gauge", "KV cache positions: slots x context.");
  out += fmt::format("cpullm_kv_cache_positions {}\n", g.kv_positions);
  header(out, "cpullm_kv_cache_usage_ratio", "gauge", "Share of the KV cache's positions in use.");
  out += fmt::format("cpullm_kv_cache_usage_ratio {}\n",
                     g.kv_positions > 0 ? static_cast<double>(g.kv_positions_used) / static_cast<double>(g.kv_positions) : 0.0);
  histogram(out, "cpullm_time_to_first_token_seconds", "Arrival to the first generated token.", ttft_);
  histogram(out, "cpullm_time_per_output_token_seconds", "Time per generated token after the first, per request.", tpot_);
  histogram(out, "cpullm_batch_tokens", "Tokens per forward call: decode tokens plus prompt chunks.", batch_);
  return out;
}

}  // namespace cpullm
