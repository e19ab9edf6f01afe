#include "harness/bench/load_scenario.hpp"

#include <chrono>
#include <cmath>
#include <deque>
#include <random>
#include <thread>

#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// A sequence slot of the model and the request it serves.
struct Slot {
  int request = -1;         // index into the run's requests; -1: free
  int64_t prompt_done = 0;  // prompt tokens already run
  int64_t generated = 0;    // tokens generated (the first comes from the prompt's last logits)
};

// Arrival times (ms) of a Poisson process: exponential gaps with mean 1000 / rate.
std::vector<double> poisson_arrivals(const LoadSettings& s, std::mt19937_64& rng) {
  std::exponential_distribution<double> gap_seconds(s.rate);
  std::vector<double> arrivals;
  double t = 0;
  for (int i = 0; i < s.requests; ++i) arrivals.push_back(t += gap_seconds(rng) * 1e3);
  return arrivals;
}

}  // namespace

LoadRun run_load(Session& session, const LoadSettings& s) {
  const Model& model = session.model();
  if (s.rate <= 0 || s.requests < 1 || s.n_prompt < 1 || s.n_gen < 1 || s.n_batch < 1)
    fail("load: needs a rate > 0, requests >= 1, prompt and generated tokens >= 1 and n_batch >= 1");
  if (model.context() < s.n_prompt + s.n_gen)
    fail("load: the model's context ({}) is shorter than prompt + generation ({})", model.context(), s.n_prompt + s.n_gen);
  std::mt19937_64 rng(s.seed);
  std::uniform_int_distribution<int32_t> random_token(0, static_cast<int32_t>(model.config().vocab_size) - 1);
  LoadRun run;
  run.requests.resize(static_cast<std::size_t>(s.requests));
  const std::vector<double> arrivals = poisson_arrivals(s, rng);
  for (int i = 0; i < s.requests; ++i) run.requests[i].arrival_ms = arrivals[i];

  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto elapsed_ms = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); };
  std::vector<Slot> slots(static_cast<std::size_t>(model.options().sequences));
  std::deque<int> waiting;
  int next_arrival = 0, finished = 0;
  std::vector<BatchToken> batch;

  while (finished < s.requests) {
    while (next_arrival < s.requests && arrivals[next_arrival] <= elapsed_ms()) waiting.push_back(next_arrival++);
    for (Slot& slot : slots)
      if (slot.request < 0 && !waiting.empty()) {
        slot = {waiting.front(), 0, 0};
        waiting.pop_front();
      }
    bool busy = false;
    for (const Slot& slot : slots) busy = busy || slot.request >= 0;
    if (!busy) {  // nothing to run until the next request arrives
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(arrivals[next_arrival] - elapsed_ms()));
      continue;
    }

    // Decode tokens first (every running request advances each call), then prompt tokens.
    batch.clear();
    for (std::size_t i = 0; i < slots.size(); ++i)
      if (slots[i].request >= 0 && slots[i].generated > 0)
        batch.push_back({random_token(rng), static_cast<int32_t>(i), s.n_prompt + slots[i].generated - 1, true});
    std::vector<int64_t> prompt_taken(slots.size(), 0);
    int64_t room = s.n_batch - static_cast<int64_t>(batch.size());
    for (std::size_t i = 0; i < slots.size() && room > 0; ++i) {
      Slot& slot = slots[i];
      if (slot.request < 0 || slot.generated > 0) continue;
      prompt_taken[i] = std::min(room, s.n_prompt - slot.prompt_done);
      for (int64_t k = 0; k < prompt_taken[i]; ++k) {
        const int64_t pos = slot.prompt_done + k;
        batch.push_back({random_token(rng), static_cast<int32_t>(i), pos, pos == s.n_prompt - 1});
      }
      room -= prompt_taken[i];
    }
    if (batch.empty()) fail("load: n_batch {} leaves no room for a prompt token", s.n_batch);
    session.forward(batch);
    const double now = elapsed_ms();
    ++run.forward_calls;
    run.max_batch_tokens = std::max<int64_t>(run.max_batch_tokens, static_cast<int64_t>(batch.size()));

    for (std::size_t i = 0; i < slots.size(); ++i) {
      Slot& slot = slots[i];
      if (slot.request < 0) continue;
      LoadRequest& request = run.requests[slot.request];
      if (slot.generated > 0) {
        ++slot.generated;  // a decode token went through: the next token exists
      } else if (prompt_taken[i] > 0) {
        slot.prompt_done += prompt_taken[i];
        if (slot.prompt_done < s.n_prompt) continue;
        slot.generated = 1;  // the prompt's last logits: the first token
        request.first_token_ms = now;
      } else {
        continue;  // admitted, but no room in this call
      }
      if (slot.generated == s.n_gen) {
        request.finish_ms = now;
        run.generated_tokens += s.n_gen;
        ++finished;
        slot = Slot{};
      }
    }
  }
  run.wall_ms = elapsed_ms();
  return run;
}

double find_max_rate(const std::function<bool(double)>& meets_bounds, double start_rate, int refinements) {
  double passing = 0, failing = 0;  // 0: none found yet
  double rate = start_rate;
  for (int i = 0; i < 10 && failing == 0; ++i) {  // upwards until a rate fails
    if (!meets_bounds(rate)) failing = rate;
    else passing = rate, rate *= 2;
  }
  if (failing == 0) return passing;  // 2^10 times the start still met the bounds
  for (int i = 0; i < 10 && passing == 0; ++i) {  // the start failed: downwards until one passes
    rate = failing / 2;
    if (meets_bounds(rate)) passing = rate;
    else failing = rate;
  }
  if (passing == 0) return 0;
  for (int i = 0; i < refinements; ++i) {  // geometric bisection: rates span orders of magnitude
    rate = std::sqrt(passing * failing);
    if (meets_bounds(rate)) passing = rate;
    else failing = rate;
  }
  return passing;
}

LoadLatencies load_latencies(const LoadRun& run, int64_t n_gen) {
  LoadLatencies l;
  for (const LoadRequest& r : run.requests) {
    l.ttft_ms.push_back(r.first_token_ms - r.arrival_ms);
    l.e2e_ms.push_back(r.finish_ms - r.arrival_ms);
    if (n_gen > 1) l.tpot_ms.push_back((r.finish_ms - r.first_token_ms) / (n_gen - 1));
  }
  return l;
}

}  // namespace cpullm
