// A run's NUMA options, applied: --placement (weight copies per NUMA node, engine/runtime/
// weight_placement) and --numa mpi (tensor parallelism over MPI ranks, tensor_parallel). Each
// step says what it did and what it cost; see docs/topology.md.
#pragma once
#include <memory>
#include <string>

#include "engine/model/model.hpp"
#include "engine/run/machine_settings.hpp"
#include "engine/run/run_config.hpp"
#include "engine/runtime/tensor_parallel.hpp"
#include "engine/runtime/weight_placement.hpp"

namespace cpullm {

// --numa mpi: starts MPI (null without it). On ranks other
// than 0, stdout and stderr go to /dev/null from here on: every rank samples the same tokens,
// rank 0 prints them.
std::shared_ptr<TensorParallel> start_tensor_parallel(const RunConfig& config);

// The strategy of --placement, planned on `topology` for the run's threads (one NUMA node
// reduces it to first-touch, and says so in report.notes); report.placement gets what is in
// effect. Null when that is first-touch: the threads read the file mapping.
std::shared_ptr<WeightPlacement> plan_weight_placement(const RunConfig& config, const Topology& topology,
                                                       RunReport& report);

// Copies the model's matrices where the placement says; returns a line with the memory it
// took, the time, and where the kernel put the pages.
std::string place_weights(WeightPlacement& placement, const Model& model);

// For rank 0's output: how much of the model file each rank has resident (it reads only its rows).
std::string rank_memory(const TensorParallel& parallel, const Model& model);

}  // namespace cpullm
