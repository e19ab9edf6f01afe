// The load scenario, in the spirit of MLPerf's Server scenario: requests arrive at random
// (Poisson, seeded) at a target rate and `cpullm serve`'s continuous-batching scheduler
// (serve/scheduler.hpp) serves them in process: every forward call carries one decode token per
// running request plus, in the room left of n_batch tokens, prompt tokens of admitted ones; a
// request's sequence slot frees when it finishes and the next waiting request takes it. Tokens
// are chosen greedily from the real logits. Times are the wall clock of real forward passes
// (idle gaps between arrivals are slept).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/run/session.hpp"

namespace cpullm {

struct LoadSettings {
  double rate = 1;          // requests per second, the mean of the Poisson arrivals
  int requests = 16;        // requests in the run
  int64_t n_prompt = 64;    // prompt tokens per request (>= 1)
  int64_t n_gen = 16;       // generated tokens per request (>= 1)
  int64_t n_batch = 512;    // tokens per forward call at most (decode tokens always go)
  uint64_t seed = 42;       // arrivals and token ids
};

struct LoadRequest {        // times in ms from the start of the run
  double arrival_ms = 0;
  double first_token_ms = 0;  // its prompt's last logits: the first generated token exists
  double finish_ms = 0;       // its last generated token
};

struct LoadRun {
  std::vector<LoadRequest> requests;  // (requests) in arrival order, all finished
  double wall_ms = 0;                 // start to the last request's finish
  int64_t forward_calls = 0;
  int64_t generated_tokens = 0;       // requests x n_gen
  int64_t max_batch_tokens = 0;       // the largest forward call
};

// Runs the scenario on the session's model, whose sequences are the slots: every forward call
// goes through the session. The model's context must hold n_prompt + n_gen positions.
LoadRun run_load(Session& session, const LoadSettings& settings);

// Per-request latencies of a run (ms): time to first token, time per output token after the
// first ((finish - first token) / (n_gen - 1); none when n_gen is 1), end to end.
struct LoadLatencies {
  std::vector<double> ttft_ms, tpot_ms, e2e_ms;
};
LoadLatencies load_latencies(const LoadRun& run, int64_t n_gen);

// The highest rate for which meets_bounds(rate) holds, searched as MLPerf's Server scenario
// does by hand: doubling from start_rate until a rate fails (halving when start_rate fails),
// then `refinements` geometric bisections between the last passing and the first failing rate.
// 0 when no rate down to start_rate / 1024 passes. Assumes higher rates are no easier.
double find_max_rate(const std::function<bool(double)>& meets_bounds, double start_rate, int refinements);

}  // namespace cpullm
