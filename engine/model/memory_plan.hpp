// What a run will need before anything is loaded: the weights (mapped from the file), the KV
// cache for every sequence and position, and the scratch buffers; against what the machine
// has. A run that cannot fit is refused with these numbers instead of swapping or being killed.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace cpullm {

class GgufFile;
struct LlamaConfig;
struct KvCacheShape;

struct MemoryPlan {
  uint64_t weight_bytes = 0;         // every tensor of the file; page cache, shared between processes
  uint64_t weight_cached_bytes = 0;  // of those, already in the page cache now
  uint64_t kv_cache_bytes = 0;       // keys and values of every sequence, layer and position
  std::string_view kv_type;          // what the cache holds (--kv-type)
  uint64_t scratch_bytes = 0;        // activations of one chunk of tokens
  uint64_t available_bytes = 0;      // MemAvailable now
  uint64_t total_bytes = 0;          // MemTotal

  uint64_t private_bytes() const { return kv_cache_bytes + scratch_bytes; }
  // The cache and scratch fit in what is available, and so do the weights not yet cached.
  bool fits() const;
  std::string describe() const;  // one line of GiB figures
};

// How many sequences, each needing the plan's KV cache (a plan made for one sequence), fit in
// `share` of the memory left once the weights not yet cached and the scratch are counted; 0
// when not even one does. `cpullm serve` sizes its sequence slots by it.
int64_t sequences_that_fit(const MemoryPlan& one_sequence, double share);

// Scratch bytes of a chunk of `chunk` tokens with its logits.
uint64_t scratch_bytes(const LlamaConfig& config, int64_t chunk, int64_t context);

MemoryPlan plan_memory(const GgufFile& file, const LlamaConfig& config, const KvCacheShape& cache, int64_t chunk);

}  // namespace cpullm
