// Each subcommand registers its flags and its action on the top-level CLI11 app.
#pragma once
#include <CLI/CLI.hpp>

#include "engine/runtime/thread_plan.hpp"

namespace cpullm::cli {

void register_generate(CLI::App& app);
void register_logits(CLI::App& app);
void register_info(CLI::App& app);
void register_gen_model(CLI::App& app);
void register_quantize(CLI::App& app);
void register_eval_quant(CLI::App& app);
void register_topo(CLI::App& app);
void register_bench(CLI::App& app);

// llama.cpp spells some flags with one dash and several letters (-pg, -np), which CLI11 refuses:
// bench's -pg becomes --pg, and -np --np for bench, generate and profile. Called by main before
// parsing.
std::vector<std::string> prepare_arguments(int argc, const char* const* argv);
void register_profile(CLI::App& app);
void register_db(CLI::App& app);

// -t/--threads, shared by every command that runs the model. 0 keeps OpenMP's default.
void add_threads_option(CLI::App& command, int& threads);
void apply_threads(int threads);

// A random seed: any whole number from 0 to 2^64-1; anything else is refused, not clamped.
CLI::Option* add_seed_option(CLI::App& command, const std::string& flags, uint64_t& seed, const std::string& help);

// Prints "cpullm: error: MESSAGE" as one line on stderr; returns the exit status, 1.
int print_error(const std::string& message);

// --isa scalar|avx2|avx512, shared by every command that runs kernels. Empty keeps the
// CPULLM_ISA environment variable or, without it, the best level the CPU has.
void add_isa_option(CLI::App& command, std::string& isa);
void apply_isa(const std::string& isa);
// Sizes the GEMM's cache blocking to the per-core L2 of `topology` (where hwloc reports one) and
// returns a line saying what it used, for the run's output.
std::string apply_cache_sizes(const Topology& topology);

// --bind, --cpuset, --housekeeping: how threads are laid over the CPUs (see engine/runtime).
struct BindingOptions {
  std::string bind = "none";  // none, compact, scatter, numa
  std::string cpuset;         // isolcpus-style list; empty: every CPU
  int housekeeping = 0;       // cores per NUMA node left to the OS
  bool given() const { return bind != "none" || !cpuset.empty() || housekeeping > 0; }
};
void add_binding_options(CLI::App& command, BindingOptions& binding);
ThreadRequest thread_request(const BindingOptions& binding, int threads);

}  // namespace cpullm::cli
