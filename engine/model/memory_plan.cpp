#include "engine/model/memory_plan.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/format/gguf.hpp"
#include "engine/model/config.hpp"
#include "engine/model/kv_cache.hpp"

namespace cpullm {
namespace {

constexpr double kGiB = 1073741824.0;

// A /proc/meminfo field in bytes, 0 where it is missing.
uint64_t meminfo_bytes(const std::string& field) {
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> name >> kib) {
    std::getline(meminfo, unit);
    if (name == field + ":") return kib * 1024;
  }
  return 0;
}

// Bytes of [data, data + size) in the page cache now (mincore on the mapping: no page is read),
// asked 1 GiB of mapping at a time so the answer's buffer stays small (256 KiB of flags).
uint64_t cached_bytes(const std::byte* data, std::size_t size) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGE_SIZE));
  const std::size_t window = std::size_t{1} << 30;
  const auto begin = reinterpret_cast<uintptr_t>(data) / page * page;
  const auto end = reinterpret_cast<uintptr_t>(data) + size;
  std::vector<unsigned char> resident(window / page);
  uint64_t pages = 0;
  for (uintptr_t from = begin; from < end; from += window) {
    const std::size_t length = std::min<uintptr_t>(window, end - from);
    if (mincore(reinterpret_cast<void*>(from), length, resident.data()) != 0) return 0;
    for (std::size_t i = 0; i < (length + page - 1) / page; ++i) pages += resident[i] & 1;
  }
  return pages * page;
}

}  // namespace

bool MemoryPlan::fits() const {
  const uint64_t uncached_weights = weight_bytes - std::min(weight_bytes, weight_cached_bytes);
  return private_bytes() + uncached_weights <= available_bytes;
}

std::string MemoryPlan::describe() const {
  return fmt::format(
      "weights {:.2f} GiB ({:.2f} GiB already in the page cache) + KV cache ({}) {:.2f} GiB + scratch {:.2f} GiB = "
      "{:.2f} GiB; available {:.2f} GiB of {:.2f} GiB",
      weight_bytes / kGiB, weight_cached_bytes / kGiB, kv_type, kv_cache_bytes / kGiB, scratch_bytes / kGiB,
      (weight_bytes + private_bytes()) / kGiB, available_bytes / kGiB, total_bytes / kGiB);
}

int64_t sequences_that_fit(const MemoryPlan& p, double share) {
  const uint64_t uncached_weights = p.weight_bytes - std::min(p.weight_bytes, p.weight_cached_bytes);
  const uint64_t taken = uncached_weights + p.scratch_bytes;
  if (taken >= p.available_bytes || p.kv_cache_bytes == 0) return 0;
  return static_cast<int64_t>(static_cast<double>(p.available_bytes - taken) * share / static_cast<double>(p.kv_cache_bytes));
}

uint64_t scratch_bytes(const LlamaConfig& c, int64_t chunk, int64_t context) {
  // Per token: x, xb, xb2, q (dim each), k, v (kv_dim each), hb, hb2 (ffn_dim each), the rotary
  // angles (head_dim), logits (vocab); plus attention scores over the context, counted as
  // (n_heads, context). Each thread keeps its own, (query heads per KV head, longest context) as
  // thread-local buffers: threads x that can exceed n_heads x context where threads outnumber
  // KV heads (TinyLlama at 64 threads: 16x, 8 MiB at 4096 positions), small beside the KV cache.
  const int64_t per_token = 4 * c.dim + 2 * c.kv_dim() + 2 * c.ffn_dim + c.head_dim + c.vocab_size;
  return static_cast<uint64_t>(chunk * per_token + c.n_heads * context) * sizeof(float);
}

MemoryPlan plan_memory(const GgufFile& file, const LlamaConfig& config, const KvCacheShape& cache, int64_t chunk) {
  MemoryPlan plan;
  for (const GgufTensorInfo& tensor : file.tensors()) plan.weight_bytes += tensor.bytes;
  plan.kv_cache_bytes = cache.bytes();
  plan.kv_type = kv_type_name(cache.type);
  plan.scratch_bytes = scratch_bytes(config, chunk, cache.context);
  plan.available_bytes = meminfo_bytes("MemAvailable");
  plan.total_bytes = meminfo_bytes("MemTotal");
  // The sizes first: a plan that would not fit even with all of memory caching the weights is
  // refused without mincore, whose walk over a huge (even sparse) file takes seconds. Its
  // weight_cached_bytes then stays 0: not measured.
  plan.weight_cached_bytes = std::min(plan.weight_bytes, plan.total_bytes);
  const bool can_fit = plan.fits();
  plan.weight_cached_bytes = 0;
  if (!can_fit) return plan;
  const auto mapping = file.bytes();
  plan.weight_cached_bytes = std::min(plan.weight_bytes, cached_bytes(mapping.data(), mapping.size()));
  return plan;
}

}  // namespace cpullm
