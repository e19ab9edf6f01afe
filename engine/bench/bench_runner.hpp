// Measures one BenchPoint the way llama-bench does: a warm-up run, then -r repetitions, each
// from an empty sequence with random tokens (seeded): the prompt in forward calls of -b
// tokens, then one forward per generated token. Adds what llama-bench lacks: time to first
// token, inter-token latencies, peak resident memory, and cold starts.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/bench/bench_plan.hpp"
#include "engine/bench/model_facts.hpp"
#include "engine/model/model.hpp"

namespace cpullm {

// What a point ran on, after the machine reduced what it cannot do.
struct MachineState {
  std::string isa;                 // the kernel level that ran
  int threads = 0;                 // OpenMP threads that ran
  std::string binding;             // the binding policy applied (reduced where the machine offers less)
  std::string placement;           // the NUMA strategy in effect
  std::vector<std::string> notes;  // reductions and what could not be done as asked, in sentences
};

// Threads, kernel level, binding and placement of the point, applied to this process.
MachineState apply_machine_settings(const BenchPoint& point);

// The point's model with its sequences, context n_prompt + n_gen, KV type, prefetch and tile.
std::unique_ptr<Model> load_model(const BenchPoint& point);

// Linux resets VmHWM to the current RSS when "5" is written to clear_refs (since 4.0); false
// where it cannot, and peak memory is then the process's since it started.
bool reset_peak_resident();

struct PointMeasurement {
  ModelFacts model;
  std::string test_time;           // ISO 8601 UTC when the point started
  MachineState machine;            // its notes gain what the measurement could not do as asked
  std::vector<double> samples_ns;  // (repetitions) wall time of each repetition
  std::vector<double> samples_ts;  // (repetitions) tokens (all sequences, prompt + generated) per second
  std::vector<double> ttft_ms;     // (repetitions) start to the first generated token's logits
                                   //   (under --cold: model load included, page cache dropped first)
  std::vector<double> itl_ms;      // (repetitions x later tokens) each decode step after the first token
  uint64_t peak_rss_bytes = 0;     // VmHWM over the point (process-wide where it cannot be reset)
};

PointMeasurement run_point(const BenchPoint& point);

}  // namespace cpullm
