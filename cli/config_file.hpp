// --config FILE for subcommands: a TOML file whose keys are long option names (what the sweep
// writes for its best configuration), e.g. `n-prompt = ["512"]`, `threads = ["2"]`, `cold = true`.
// CLI11 2.1 reads config files for the top-level app only, so a subcommand applies its own.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace cpullm::cli {

// Registers --config on `command`.
void add_config_option(CLI::App& command, std::string& path);

// Call first in the subcommand's callback: every key sets its option as if given on the command
// line, except options the command line gave (those win). Keys may sit at the top or in a
// [SUBCOMMAND] section. An unknown key or an unreadable file is an Error naming the file.
void apply_config_file(CLI::App& command, const std::string& path);

}  // namespace cpullm::cli
