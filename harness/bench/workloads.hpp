// Named end-to-end workloads (suites/workloads.json): a synthetic model's shape and format,
// sequences, prompt and generation lengths, repetitions. `cpullm bench --workload NAME` runs
// one, writing its model first when it is not there yet.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/synthetic/synthetic_model.hpp"

namespace cpullm {

struct Workload {
  std::string name;
  std::string description;
  SyntheticShape shape;       // what gen-model writes
  std::string format;         // a registry name: the float formats written directly, the others quantized from f16
  int n_seq = 1;              // concurrent sequences
  int64_t n_prompt = 0;       // prompt tokens per sequence
  int64_t n_gen = 0;          // generated tokens per sequence
  int64_t n_batch = 512;      // prompt tokens per forward call
  std::string kv_type = "f32";  // KV cache element type
  int repetitions = 1;
};

// Every workload in the file; Errors name the file and the workload.
std::vector<Workload> read_workloads(const std::string& path);

// The workload called `name`; an Error lists the names there are.
Workload find_workload(const std::string& path, const std::string& name);

// The workload's model in `dir` ("NAME-FORMAT.gguf"), written when absent: by the synthetic
// generator, then quantized when the format asks. Returns its path.
std::string ensure_workload_model(const Workload& workload, const std::string& dir);

}  // namespace cpullm
