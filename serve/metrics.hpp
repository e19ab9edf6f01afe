// What `cpullm serve` exposes at GET /metrics, in Prometheus' text format: counters of requests
// and tokens, gauges of the queue, the running batch and the KV cache, and histograms of time to
// first token, time per output token and tokens per forward call. Thread-safe: the engine thread
// observes steps and tokens, the HTTP threads count answers and read the text.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace cpullm {

// A Prometheus histogram: cumulative counts at upper bounds, plus +Inf, sum and count.
struct Histogram {
  std::vector<double> bounds;    // (buckets) upper bounds, ascending
  std::vector<uint64_t> counts;  // (buckets + 1) observations per bucket, the last one +Inf
  double sum = 0;
  uint64_t count = 0;
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
};

// The scheduler's state at one moment.
struct ServeGauges {
  int64_t running = 0;            // requests holding a sequence slot
  int64_t waiting = 0;            // requests queued for one
  int64_t slots = 0;              // sequence slots (--max-sequences)
  int64_t kv_positions_used = 0;  // cache positions the running requests have filled
  int64_t kv_positions = 0;       // slots x context
};

class ServeMetrics {
 public:
  ServeMetrics();
  void answered(int status);  // one HTTP answer to a completion request, by status code
  void prompt_tokens(int64_t count);
  void generated_tokens(int64_t count);
  void forward_call(int64_t batch_tokens);
  void first_token(double seconds);       // arrival to the first generated token
  void per_output_token(double seconds);  // (finish - first token) / (tokens - 1), per request
  std::string prometheus(const ServeGauges& gauges) const;

 private:
  mutable std::mutex mutex_;
  std::map<int, uint64_t> answers_;  // status code -> count
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0, forward_calls_ = 0;
  Histogram ttft_, tpot_, batch_;
};

}  // namespace cpullm
