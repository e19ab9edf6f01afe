// The part of a run that is applied to this process before any model is loaded: OpenMP's
// threads and where each may run; and what the run's kernels are told, resolved once: the
// instruction set and the cache sizes the GEMM's blocking is sized for.
// What was applied comes back as a RunReport, reductions included, for the run's output.
#pragma once
#include <string>
#include <vector>

#include "engine/kernels/matmul.hpp"
#include "engine/run/run_config.hpp"
#include "engine/runtime/thread_plan.hpp"
#include "engine/runtime/topology.hpp"

namespace cpullm {

// What a run applied, after the machine reduced what it cannot do.
struct RunReport {
  int threads = 0;                 // OpenMP threads that run
  KernelConfig kernels{};          // the kernel level and cache sizes every kernel call of the run uses
  std::string binding;             // the binding policy applied (reduced where the machine offers less)
  std::string thread_cpus;         // "thread 0 on CPU 0, thread 1 on CPU 1": each thread's CPUs as the OS reports them
  std::string cache_blocking;      // the GEMM's cache blocking, in words
  std::string placement;           // the NUMA strategy in effect (placement.hpp reduces it on one node)
  int ranks = 0;                   // MPI ranks under --numa mpi; 0: one process
  std::vector<std::string> notes;  // reductions and what could not be done as asked, in sentences
};

// Whether the run asks for anything but OpenMP's own placement of its threads.
bool binding_given(const RunConfig& config);

// The thread request of the run's -t, --bind, --cpuset and --housekeeping.
ThreadRequest thread_request(const RunConfig& config);

// Threads (planned over `topology` and pinned), applied; the kernel level (config.isa, else
// $CPULLM_ISA, else the best: an Error where this CPU cannot run it) and the cache sizes
// (config.cache_topology's, else `topology`'s), resolved into the report.
RunReport apply_machine_settings(const RunConfig& config, const Topology& topology);

// The per-core L1d and L2 of `topology` (sysconf's where it reports none), and in `described` a
// line saying what they are and where they come from (RunReport::cache_blocking).
CacheSizes topology_cache_sizes(const Topology& topology, std::string& described);

}  // namespace cpullm
