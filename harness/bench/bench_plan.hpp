// What `cpullm bench` runs: every combination of the values given to its flags, as
// llama-bench does. A BenchPoint is one combination; expand_points lists them in run order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "engine/kernels/attention.hpp"
#include "engine/model/kv_cache.hpp"

namespace cpullm {

// The flags' values, lists already parsed (harness/bench/value_lists.hpp).
struct BenchParams {
  std::vector<std::string> models;                      // -m
  std::vector<int64_t> n_prompt;                        // -p: prompt-only tests (0 skipped)
  std::vector<int64_t> n_gen;                           // -n: generation-only tests (0 skipped)
  std::vector<std::pair<int64_t, int64_t>> prompt_gen;  // -pg: prompt then generation
  std::vector<int64_t> n_depth{0};                      // -d: positions filled before each test, untimed
  std::vector<int64_t> threads;                         // -t (0: OpenMP's default)
  std::vector<int64_t> n_batch;                         // -b: prompt tokens per forward call
  std::vector<int64_t> n_seq;                           // -np: sequences run concurrently
  std::vector<std::string> isa;                         // --isa ("" : the best this CPU has)
  std::vector<std::string> attn_tile;                   // --attn-tile, QUERIESxKEYS
  std::vector<std::string> binding;                     // --bind
  std::vector<std::string> placement;                   // --placement (--numa maps onto it)
  std::vector<std::string> kv_type;                     // --kv-type
  std::vector<int64_t> prefetch;                        // --prefetch 0,1
  std::string numa;                                     // --numa as given (llama-bench's mode), "" : none
  std::string cpuset;                                   // --cpuset (one set for the whole run)
  int housekeeping = 0;                                 // --housekeeping
  int repetitions = 5;                                  // -r
  bool cold = false;                                    // --cold
  double inject_delay_ms = 0;                           // --inject-delay-ms
};

// One configuration, measured -r times.
struct BenchPoint {
  std::string model;
  int64_t n_prompt = 0;          // prompt tokens per sequence
  int64_t n_gen = 0;             // generated tokens per sequence
  int64_t n_depth = 0;           // positions of each sequence filled before the test, untimed (llama-bench's -d)
  int threads = 0;               // 0: OpenMP's default
  int64_t n_batch = 512;
  int n_seq = 1;
  std::string isa;               // "" : the best this CPU has
  std::string attn_tile = kDefaultAttentionTiles;
  std::string binding = "none";
  std::string placement = "first-touch";
  std::string kv_type{kv_type_name(kDefaultKvType)};
  bool prefetch = false;
  std::string numa;              // llama-bench's --numa mode it came from, "" : none
  std::string cpuset;
  int housekeeping = 0;
  int repetitions = 5;
  bool cold = false;
  double inject_delay_ms = 0;

  // llama-bench's test names: "pp512", "tg128", "pp512+tg128", at depth "tg128 @ d8192".
  std::string test_name() const;
  // The schema's case name, unique within a run and stable across runs for history:
  // "MODEL_STEM/pp512+tg128/t2/b512/np1/...", at depth "MODEL_STEM/tg128@d8192/...".
  std::string case_name() const;
};

// Models outermost, then threads, batch, sequences, ISA, tile, binding, placement, KV type,
// prefetch, depth; tests (-p values, then -n, then -pg) innermost, as llama-bench orders them.
std::vector<BenchPoint> expand_points(const BenchParams& params);

}  // namespace cpullm
