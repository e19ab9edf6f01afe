#include "cli/run_options.hpp"
#include "cli/commands.hpp"

#include "engine/model/model.hpp"

#include <fmt/ranges.h>

namespace cpullm::cli {

RunFlagText run_flag_text(RunFlag flag) {
  switch (flag) {
    case RunFlag::threads: return {"-t,--threads", "Threads for the kernels (0: one per usable core)"};
    case RunFlag::bind:
      return {"--bind", "Binding: none, compact, scatter (round-robin over packages), numa (threads kept on their node)"};
    case RunFlag::cpuset: return {"--cpuset", "CPUs threads may use, isolcpus-style (e.g. 2-31)"};
    case RunFlag::housekeeping: return {"--housekeeping", "Cores per NUMA node left to the OS (the lowest-numbered)"};
    case RunFlag::isa:
      return {"--isa", "Kernel level: scalar, avx2 or avx512 (default: $CPULLM_ISA, else the best this CPU has)"};
    case RunFlag::placement:
      return {"--placement",
              "NUMA weight placement: first-touch (the file mapping as it is), interleave, replicate (a copy per node), "
              "shard (each node the rows its threads compute); copies are private memory; one node reduces each to "
              "first-touch"};
    case RunFlag::numa:
      return {"--numa", "mpi: tensor parallelism, one process per NUMA node or host started by mpirun, each computing "
                        "its share of every projection"};
    case RunFlag::attn_tile: return {"--attn-tile", "Prompt attention tile, QUERIESxKEYS, 1..128 each"};
    case RunFlag::kv_type: return {"--kv-type", fmt::format("KV cache element type: {}", fmt::join(kv_type_names(), ", "))};
    case RunFlag::context: return {"-c,--ctx-size,--ctx", "Context positions (0: the model's, at most 4096)"};
    case RunFlag::sequences:
      return {"--np,--parallel",
              "Sequences run together: the prompt prefilled in that many copies (one batch), then each decode step "
              "one token of every sequence (sequence s samples with seed + s; also spelled -np)"};
    case RunFlag::prefetch:
      return {"--prefetch", "Double buffering: a thread maps layer l + 1's weights while layer l computes, then the "
                            "embedding table"};
    case RunFlag::mlock: return {"--mlock", "Lock the weights in memory"};
    case RunFlag::sampling: return {"--temp", "Temperature (0: greedy)"};
  }
  return {};
}

void add_run_options(CLI::App& command, RunConfig& config, std::initializer_list<RunFlag> flags) {
  for (RunFlag flag : flags) {
    const RunFlagText text = run_flag_text(flag);
    switch (flag) {
      case RunFlag::threads: command.add_option(text.names, config.threads, text.help)->check(CLI::Range(0, 4096)); break;
      case RunFlag::bind:
        command.add_option(text.names, config.bind, text.help)->check(CLI::IsMember({"none", "compact", "scatter", "numa"}));
        break;
      case RunFlag::cpuset: command.add_option(text.names, config.cpuset, text.help); break;
      case RunFlag::housekeeping:
        command.add_option(text.names, config.housekeeping, text.help)->check(CLI::Range(0, 4096));
        break;
      case RunFlag::isa: command.add_option(text.names, config.isa, text.help); break;
      case RunFlag::placement: command.add_option(text.names, config.placement, text.help); break;
      case RunFlag::numa: command.add_option(text.names, config.numa, text.help); break;
      case RunFlag::attn_tile: command.add_option(text.names, config.attn_tile, text.help); break;
      case RunFlag::kv_type: command.add_option(text.names, config.kv_type, text.help); break;
      case RunFlag::context:
        command.add_option(text.names, config.context, text.help)->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
        break;
      case RunFlag::sequences:
        command.add_option(text.names, config.sequences, text.help)
            ->check(CLI::Range(1, static_cast<int>(Model::kMaxSequences)));
        break;
      case RunFlag::prefetch: command.add_flag(text.names, config.prefetch, text.help); break;
      case RunFlag::mlock: command.add_flag(text.names, config.mlock, text.help); break;
      case RunFlag::sampling:
        command.add_option(text.names, config.sampling.temperature, text.help)->check(CLI::Range(0.0, 100.0));
        command.add_option("--top-k", config.sampling.top_k, "Keep the k most likely tokens (0: all)")
            ->check(CLI::NonNegativeNumber);
        command.add_option("--top-p", config.sampling.top_p, "Nucleus probability mass")->check(CLI::Range(0.0, 1.0));
        add_seed_option(command, "-s,--seed", config.sampling.seed, "Random seed (sequence s draws with seed + s)");
        break;
    }
  }
}

}  // namespace cpullm::cli
