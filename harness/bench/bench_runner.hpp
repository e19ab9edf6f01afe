// Measures one BenchPoint the way llama-bench does: a warm-up run, then -r repetitions, each
// from an empty sequence with random tokens (seeded): the prompt in forward calls of -b
// tokens, then one forward per generated token. Adds what llama-bench lacks: time to first
// token, inter-token latencies, peak resident memory, cold starts, RAPL energy per repetition,
// and (asked for with --db) a per-region profile from one extra instrumented repetition after
// the timed ones, so that the timings are those of an uninstrumented engine.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/bench/bench_plan.hpp"
#include "harness/bench/model_facts.hpp"
#include "engine/instrument/counters.hpp"
#include "engine/instrument/regions.hpp"
#include "engine/instrument/roofs.hpp"
#include "engine/run/session.hpp"

namespace cpullm {

// The point as a run: its model, threads, binding, kernels, placement, sequences, context
// n_prompt + n_gen, KV type, prefetch and tile, which a Session applies as generate's would.
RunConfig run_config(const BenchPoint& point);

// Linux resets VmHWM to the current RSS when "5" is written to clear_refs (since 4.0); false
// where it cannot, and peak memory is then the process's since it started.
bool reset_peak_resident();

// The instrumented repetition of a point: every region's calls, time, analytic FLOPs and bytes,
// and the counters the kernel offered, against this machine's roofs at the point's threads.
struct PointProfile {
  RegionProfile regions;                        // totals over the one repetition (prompt and decode)
  std::vector<UnavailableCounter> unavailable;  // counters the kernel refused, each with why
  double seconds = 0;                           // its wall time (instrumented: not a sample)
  Roofs roofs;                                  // memory read and FMA peak, measured at the point's threads and ISA
};

// The decode steps of one more repetition, each followed by a read of memory on the same
// threads (--roof-pairs): each step's weight bandwidth against the roof read right after it,
// so that a host whose bandwidth moves within seconds moves both sides of every pair alike.
struct RoofPairs {
  uint64_t step_bytes = 0;       // weights each step reads (ModelFacts::decode_step_bytes, a row more per further sequence)
  int64_t read_bytes = 0;        // each read: the step's bytes, within 512 MiB .. 1 GiB (ReadBuffer)
  std::vector<double> step_ms;   // (steps) the decode steps itl_ms counts, in order
  std::vector<double> read_ms;   // (steps) the read that followed each
};

// What run_point is asked for beyond the timed repetitions.
struct PointRequest {
  bool profile = false;     // run the instrumented repetition (cpullm bench --db stores its regions)
  bool roof_pairs = false;  // run the paired repetition (--roof-pairs)
  // Roofs measured so far in this bench run, by "THREADS/ISA": measured once (about a second)
  // per combination, not once per point.
  std::map<std::string, Roofs> roofs;
};

struct PointMeasurement {
  ModelFacts model;
  std::string test_time;           // ISO 8601 UTC when the point started
  RunReport machine;               // what the session applied; its notes gain what the measurement could not do as asked
  std::vector<double> samples_ns;  // (repetitions) wall time of each repetition
  std::vector<double> samples_ts;  // (repetitions) tokens (all sequences, prompt + generated) per second
  std::vector<double> ttft_ms;     // (repetitions) start to the first generated token's logits
                                   //   (under --cold: model load included, page cache dropped first)
  std::vector<double> itl_ms;      // (repetitions x later tokens) each decode step after the first token
  uint64_t peak_rss_bytes = 0;     // VmHWM over the timed repetitions (process-wide where it cannot be reset)
  std::optional<uint64_t> huge_page_bytes;  // of the model's file mapping, in 2 MiB pages after the last
                                            //   repetition (none where /proc/self/smaps cannot be read)
  std::vector<double> energy_j;    // (repetitions) package + DRAM joules of each (RAPL); empty without it
  std::string energy_unavailable;  // why energy_j is empty: "unavailable here: ..."; empty when measured
  std::optional<PointProfile> profile;  // when requested
  std::optional<RoofPairs> roof_pairs;  // when requested and the test has decode steps after the first token
};

PointMeasurement run_point(const BenchPoint& point, PointRequest& request);

}  // namespace cpullm
