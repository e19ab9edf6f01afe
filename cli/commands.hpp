// Each subcommand registers its flags and its action on the top-level CLI11 app.
#pragma once
#include <CLI/CLI.hpp>

namespace cpullm::cli {

void register_generate(CLI::App& app);
void register_logits(CLI::App& app);
void register_info(CLI::App& app);
void register_tokenize(CLI::App& app);
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
void register_serve(CLI::App& app);

// A random seed: any whole number from 0 to 2^64-1; anything else is refused, not clamped.
CLI::Option* add_seed_option(CLI::App& command, const std::string& flags, uint64_t& seed, const std::string& help);

// Prints "cpullm: error: MESSAGE" as one line on stderr; returns the exit status, 1.
int print_error(const std::string& message);

}  // namespace cpullm::cli
