// Each subcommand registers its flags and its action on the top-level CLI11 app.
#pragma once
#include <CLI/CLI.hpp>

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

}  // namespace cpullm::cli
