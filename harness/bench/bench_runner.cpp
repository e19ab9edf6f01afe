#include "harness/bench/bench_runner.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <thread>

#include "harness/bench/page_cache.hpp"
#include "engine/instrument/energy.hpp"
#include "engine/instrument/op_costs.hpp"
#include "engine/kernels/isa.hpp"
#include "engine/model/model.hpp"
#include "harness/results/results_db.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/util/error.hpp"
#include "engine/util/process_memory.hpp"

namespace cpullm {
namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

}  // namespace

bool reset_peak_resident() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

RunConfig run_config(const BenchPoint& point) {
  RunConfig run;
  run.model = point.model;
  run.threads = point.threads;
  run.bind = point.binding;
  run.cpuset = point.cpuset;
  run.housekeeping = point.housekeeping;
  run.isa = point.isa;
  run.placement = point.placement;
  run.attn_tile = point.attn_tile;
  run.kv_type = point.kv_type;
  run.context = std::max<int64_t>(1, point.n_depth + point.n_prompt + point.n_gen);
  run.sequences = point.n_seq;
  run.prefetch = point.prefetch;
  return run;
}

namespace {

struct RepetitionTimes {
  double total_ms = 0;          // the whole repetition (under --cold: from the start of the load)
  double ttft_ms = 0;           // to the first generated token's logits (pp only: the prompt's end)
  std::vector<double> itl_ms;   // each later decode step
};

// One repetition, every sequence from position n_depth (the positions before it filled once per
// point, fill_depth) with random tokens: the prompts (sequence by sequence) in forward calls of
// n_batch tokens, then n_gen decode steps of one token per sequence, each followed by the
// injected delay. `greedy` (the instrumented repetition) picks
// each sequence's next token as a generator would, argmax of its logits in the sampling region,
// and feeds it to the next step; the timed repetitions feed random tokens, as llama-bench does.
// `between_steps`, where given, runs after each decode step, outside every step's time.
RepetitionTimes run_repetition(Session& session, const BenchPoint& point, std::mt19937& rng, Clock::time_point start,
                               bool greedy = false, const std::function<void()>& between_steps = {}) {
  const int64_t vocab = session.model().config().vocab_size;
  std::uniform_int_distribution<int32_t> random_token(0, static_cast<int32_t>(vocab) - 1);
  std::vector<BatchToken> prompt;
  for (int32_t s = 0; s < point.n_seq; ++s)
    for (int64_t pos = 0; pos < point.n_prompt; ++pos)
      prompt.push_back({random_token(rng), s, point.n_depth + pos, pos == point.n_prompt - 1});
  session.prefill(prompt, point.n_batch);

  RepetitionTimes times;
  Clock::time_point last = Clock::now();
  if (point.n_prompt > 0) times.ttft_ms = ms_between(start, last);
  DecodeLoop loop;
  loop.steps = point.n_gen;
  loop.first_position = point.n_depth + point.n_prompt;
  loop.choose = [&](int64_t, int32_t, std::span<const float> logits) {
    if (!greedy || logits.empty()) return random_token(rng);
    ScopedRegion region(Region::sampling, sampling_cost(vocab, true));
    return argmax(logits);
  };
  loop.ran = [&](int64_t step) {
    if (point.inject_delay_ms > 0)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(point.inject_delay_ms));
    const Clock::time_point now = Clock::now();
    if (step == 0 && point.n_prompt == 0) times.ttft_ms = ms_between(start, now);
    else times.itl_ms.push_back(ms_between(last, now));
    last = now;
    if (between_steps) {
      between_steps();
      last = Clock::now();
    }
  };
  session.decode(loop);
  times.total_ms = ms_between(start, last);
  return times;
}

// Positions [0, n_depth) of every sequence filled with random tokens, untimed, as llama-bench's
// -d fills the context before each test. Once per point: every repetition, the warm-up and the
// extra repetitions write only positions from n_depth on, so the filled ones stay as they are.
void fill_depth(Session& session, const BenchPoint& point) {
  if (point.n_depth == 0) return;
  std::mt19937 rng(static_cast<uint32_t>(point.n_depth));
  std::uniform_int_distribution<int32_t> random_token(0, static_cast<int32_t>(session.model().config().vocab_size) - 1);
  std::vector<BatchToken> tokens;
  for (int32_t s = 0; s < point.n_seq; ++s)
    for (int64_t pos = 0; pos < point.n_depth; ++pos) tokens.push_back({random_token(rng), s, pos, false});
  session.prefill(tokens, point.n_batch);
}

// The point's roofs at its threads and kernel level, measured the first time they are asked for.
const Roofs& roofs_for(PointRequest& request, Isa isa) {
  const int threads = omp_get_max_threads();
  const std::string key = fmt::format("{}/{}", threads, isa_name(isa));
  if (auto found = request.roofs.find(key); found != request.roofs.end()) return found->second;
  Roofs roofs;
  roofs.bytes_per_s = measure_read_bandwidth();
  roofs.memory_source = fmt::format("measured by cpullm bench: read of 256 MiB, {} threads, best of 5", threads);
  roofs.flops_per_s = measure_fma_peak(isa);
  roofs.compute_source = fmt::format("measured by cpullm bench: {} FMA chains, {} threads, best of 3", isa_name(isa), threads);
  return request.roofs[key] = roofs;
}

// One more repetition with the regions on and the counters the kernel offers attached; its
// time is kept apart from the samples.
PointProfile profile_repetition(Session& session, const BenchPoint& point, PointRequest& request) {
  PointProfile profile;
  profile.roofs = roofs_for(request, session.report().kernels.isa);
  PerfCounters counters;  // opened on the point's threads, which the session fixed
  profile.unavailable = counters.unavailable();
  attach_region_counters(&counters);  // also resets the totals: the table is this repetition's alone
  enable_regions(true);
  std::mt19937 rng(static_cast<uint32_t>(point.repetitions + 1));
  BenchPoint plain = point;
  plain.inject_delay_ms = 0;  // a sleep between steps is in no region; it only lengthens the run
  profile.seconds = run_repetition(session, plain, rng, Clock::now(), true).total_ms / 1e3;
  enable_regions(false);
  profile.regions = region_snapshot();
  attach_region_counters(nullptr);
  return profile;
}

// One more repetition whose every decode step is followed by a read of a ReadBuffer on the
// point's threads. The buffer is as large as a step's weights, so each pair reads about the
// same bytes, but at least 512 MiB and at most 1 GiB: on a shared host a few hundred MiB of
// cache outside the guest can serve a vCPU above memory speed (docs/tuning.md, "The decode rate").
RoofPairs paired_repetition(Session& session, const BenchPoint& point, const ModelFacts& facts) {
  RoofPairs pairs;
  pairs.step_bytes = facts.decode_step_bytes + static_cast<uint64_t>(point.n_seq - 1) * facts.embedding_row_bytes;
  const ReadBuffer buffer(std::clamp<int64_t>(static_cast<int64_t>(pairs.step_bytes), int64_t{512} << 20, int64_t{1} << 30));
  pairs.read_bytes = buffer.bytes();
  std::vector<double> read_ms;  // after every step, the first token's too
  BenchPoint plain = point;
  plain.inject_delay_ms = 0;  // the pairs compare the engine's steps, not a sleep
  std::mt19937 rng(static_cast<uint32_t>(point.repetitions + 2));
  pairs.step_ms = run_repetition(session, plain, rng, Clock::now(), false,
                                 [&] { read_ms.push_back(buffer.read_seconds() * 1e3); }).itl_ms;
  // The steps itl_ms counts (in a tg test not the first token's), each with the read after it.
  pairs.read_ms.assign(read_ms.end() - static_cast<std::ptrdiff_t>(pairs.step_ms.size()), read_ms.end());
  return pairs;
}

}  // namespace

PointMeasurement run_point(const BenchPoint& point, PointRequest& request) {
  PointMeasurement m;
  m.test_time = utc_timestamp();
  // The session applies the point as generate would apply the same flags: threads, binding,
  // kernels, cache blocking, placement (weights copied where it is not first-touch), the model.
  Session session(run_config(point));
  m.machine = session.report();
  if (!reset_peak_resident()) m.machine.notes.push_back("cannot reset VmHWM (/proc/self/clear_refs): peak memory is process-wide");
  const EnergyMeter energy;
  m.energy_unavailable = energy.reason();

  fill_depth(session, point);  // --cold is refused with a depth (cmd_bench.cpp): nothing unloads the cache
  if (!point.cold) {  // warm: one untimed run faults every weight in
    BenchPoint warmup = point;
    warmup.n_gen = std::min<int64_t>(point.n_gen, 1);
    warmup.inject_delay_ms = 0;
    std::mt19937 rng(0);
    run_repetition(session, warmup, rng, Clock::now());
  }
  const double tokens = static_cast<double>(point.n_seq) * (point.n_prompt + point.n_gen);
  for (int r = 0; r < point.repetitions; ++r) {
    std::mt19937 rng(static_cast<uint32_t>(r + 1));
    const std::vector<uint64_t> energy_before = energy.read();
    Clock::time_point start = Clock::now();
    if (point.cold) {
      session.unload();  // unmapped: the kernel drops no page a process still maps
      const double left = drop_from_page_cache(point.model);
      if (left > 0.05)
        m.machine.notes.push_back(fmt::format("--cold: {:.0f}% of {} stayed in the page cache after posix_fadvise(DONTNEED) "
                                      "(another process maps it?): this repetition is not fully cold",
                                      left * 100, point.model));
      start = Clock::now();
      session.load();
    }
    const RepetitionTimes times = run_repetition(session, point, rng, start);
    if (energy.available()) {
      const EnergyUse use = energy.between(energy_before, energy.read());
      m.energy_j.push_back(use.package_j + use.dram_j);
    }
    m.samples_ns.push_back(times.total_ms * 1e6);
    m.samples_ts.push_back(tokens / (times.total_ms / 1e3));
    m.ttft_ms.push_back(times.ttft_ms);
    m.itl_ms.insert(m.itl_ms.end(), times.itl_ms.begin(), times.itl_ms.end());
  }
  m.model = describe_model(session.model().file());
  m.peak_rss_bytes = peak_resident_bytes();
  m.huge_page_bytes = session.model().file().mapping().huge_page_bytes();
  if (request.profile) m.profile = profile_repetition(session, point, request);
  const bool has_later_steps = point.n_gen >= (point.n_prompt > 0 ? 1 : 2);  // what itl_ms counts
  if (request.roof_pairs && has_later_steps) m.roof_pairs = paired_repetition(session, point, m.model);
  else if (request.roof_pairs)
    m.machine.notes.push_back("--roof-pairs: a test with no decode step after the first token's has nothing to pair");
  return m;
}

}  // namespace cpullm
