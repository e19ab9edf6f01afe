// Everything one run is configured with, as every command that runs the model takes it: the
// threads and where they run, the kernels, NUMA placement, the model's run options and
// sampling. A Session (session.hpp) applies it, once, the same way for every command; the CLI
// registers the flags that fill it in one place (cli/run_options.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/kernels/attention.hpp"
#include "engine/model/kv_cache.hpp"
#include "engine/runtime/topology.hpp"
#include "engine/sampling/sampler.hpp"

namespace cpullm {

struct RunConfig {
  std::string model;                   // GGUF file

  // Threads.
  int threads = 0;                     // 0: one per usable core
  std::string bind = "none";           // none, compact, scatter, numa
  std::string cpuset;                  // isolcpus-style CPU list threads may use; empty: every CPU
  int housekeeping = 0;                // cores per NUMA node left to the OS (the lowest-numbered)

  // Kernels.
  std::string isa;                     // scalar, avx2, avx512; empty: $CPULLM_ISA, else the best this CPU has
  std::optional<Topology> cache_topology;  // whose caches size the GEMM blocking; none: this machine's
                                           //   (profile --hardware passes a profile's box)

  // NUMA.
  std::string placement = "first-touch";  // first-touch, interleave, replicate, shard (reduced on one node)
  std::string numa;                    // "mpi": one rank per process (mpirun), each its share of every projection; "": one process

  // The model's run.
  std::string attn_tile = kDefaultAttentionTiles;  // prompt attention tile, QUERIESxKEYS
  std::string kv_type{kv_type_name(kDefaultKvType)};  // KV cache element type (kv_types())
  int64_t context = 0;                 // positions per sequence; 0: min(trained context, 4096)
  int sequences = 1;                   // sequences in flight at once
  bool prefetch = false;               // map layer l + 1 while layer l computes, then the embedding table
  bool mlock = false;                  // lock the weights in memory

  // Sampling (sequence s draws with seed + s).
  SamplingParams sampling;
};

}  // namespace cpullm
