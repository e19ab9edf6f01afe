// generate's NUMA flags, applied: --placement (weight copies per NUMA node, engine/runtime/
// weight_placement) and --numa mpi (tensor parallelism over MPI ranks, tensor_parallel). Each
// step prints what it did and what it costs; see docs/topology.md.
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "engine/model/model.hpp"
#include "engine/runtime/tensor_parallel.hpp"
#include "engine/runtime/weight_placement.hpp"

namespace cpullm::cli {

struct NumaOptions {
  std::string placement = "first-touch";  // first-touch, interleave, replicate, shard
  std::string numa;                       // "mpi", or empty: one process
};
void add_numa_options(CLI::App& command, NumaOptions& numa);

// --numa mpi: starts MPI (null without the flag). On ranks other than 0, stdout and stderr go to
// /dev/null from here on: every rank samples the same tokens, rank 0 prints them.
std::shared_ptr<TensorParallel> start_tensor_parallel(const NumaOptions& numa);

// --placement planned on this machine for the threads of --bind/--cpuset/--housekeeping/-t (one
// NUMA node reduces it to first-touch, and says so); null when the result is first-touch. Notes
// go to stderr.
std::shared_ptr<WeightPlacement> plan_weight_placement(const NumaOptions& numa, const BindingOptions& binding,
                                                       int threads, const std::string& model_path);

// Copies the model's matrices where the placement says; prints the memory it took, the time,
// and where the kernel put the pages.
void place_weights(WeightPlacement& placement, const Model& model);

// On rank 0: how much of the model file each rank has resident (it reads only its rows).
void print_rank_memory(const TensorParallel& parallel, const Model& model);

}  // namespace cpullm::cli
