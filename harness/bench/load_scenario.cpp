#include "harness/bench/load_scenario.hpp"

#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"
#include "serve/scheduler.hpp"

namespace cpullm {
namespace {

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
  const std::vector<double> arrivals = poisson_arrivals(s, rng);
  std::vector<CompletionJob> jobs(static_cast<std::size_t>(s.requests));
  for (CompletionJob& job : jobs) {
    for (int64_t i = 0; i < s.n_prompt; ++i) job.prompt.push_back(random_token(rng));
    job.max_tokens = s.n_gen;
    job.sampling.temperature = 0;
    job.ignore_eos = true;  // every request generates n_gen tokens
  }

  const Tokenizer tokenizer = Tokenizer::from_gguf(model.file());
  Scheduler scheduler(session, tokenizer, {.chunk = s.n_batch, .queue = s.requests});
  using Clock = ServeClock;
  const Clock::time_point start = Clock::now();
  auto at = [&](double ms) { return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms)); };
  std::vector<std::shared_ptr<RequestStream>> streams;
  while (true) {
    while (streams.size() < jobs.size() && at(arrivals[streams.size()]) <= Clock::now())
      streams.push_back(scheduler.submit(std::move(jobs[streams.size()]), at(arrivals[streams.size()])));
    if (scheduler.step()) continue;
    if (streams.size() == jobs.size()) break;         // every request arrived, none left to run
    std::this_thread::sleep_until(at(arrivals[streams.size()]));  // idle until the next arrival
  }

  LoadRun run;
  auto ms_of = [&](Clock::time_point t) { return std::chrono::duration<double, std::milli>(t - start).count(); };
  for (const auto& stream : streams) {
    const RequestRecord r = stream->record();
    run.requests.push_back({ms_of(r.arrival), ms_of(r.first_token), ms_of(r.finish)});
    run.generated_tokens += r.generated_tokens;
    run.wall_ms = std::max(run.wall_ms, ms_of(r.finish));
  }
  run.forward_calls = scheduler.steps();
  run.max_batch_tokens = scheduler.largest_batch();
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
