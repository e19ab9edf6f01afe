// The run options' flags, registered in one place: every command that runs the model (generate,
// logits, profile, eval-quant, bench) and those that plan threads (topo, quantize) take the same
// names, help and checks, and fill the same RunConfig (engine/run/run_config.hpp), which a
// Session then applies. bench takes each as a LIST (every value is a point) under the same name.
#pragma once
#include <initializer_list>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/run/run_config.hpp"

namespace cpullm::cli {

enum class RunFlag {
  threads,       // -t, --threads
  bind,          // --bind
  cpuset,        // --cpuset
  housekeeping,  // --housekeeping
  isa,           // --isa
  placement,     // --placement
  numa,          // --numa mpi
  attn_tile,     // --attn-tile
  kv_type,       // --kv-type
  context,       // -c, --ctx-size
  sequences,     // --np, --parallel
  prefetch,      // --prefetch
  mlock,         // --mlock
  sampling,      // --temp, --top-k, --top-p, -s/--seed
};

// Every flag a command that runs the model on one configuration takes (generate's set).
inline constexpr std::initializer_list<RunFlag> kAllRunFlags = {
    RunFlag::threads,   RunFlag::bind,    RunFlag::cpuset,  RunFlag::housekeeping, RunFlag::isa,
    RunFlag::placement, RunFlag::numa,    RunFlag::attn_tile, RunFlag::kv_type,    RunFlag::context,
    RunFlag::sequences, RunFlag::prefetch, RunFlag::mlock,  RunFlag::sampling};

// Adds `flags` to `command`, each writing its field of `config`.
void add_run_options(CLI::App& command, RunConfig& config, std::initializer_list<RunFlag> flags);

// A flag's names ("-t,--threads") and help, for bench's LIST form of it.
struct RunFlagText {
  std::string names;
  std::string help;
};
RunFlagText run_flag_text(RunFlag flag);

}  // namespace cpullm::cli
