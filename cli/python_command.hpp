// Subcommands written in Python (report, sweep, tune): the C++ binary registers the name, so
// `cpullm --help` lists it, and hands every argument after it to a script in the source tree.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace cpullm::cli {

// Registers `name`; when it runs, replaces this process with
// `/usr/bin/python3 CPULLM_SOURCE_DIR/script_relative_path ARGS...` (ARGS: everything after
// `name`, untouched, `--help` included). Fails with cpullm::Error when the script is missing or
// python3 cannot be started.
void register_python_command(CLI::App& app, const std::string& name, const std::string& description,
                             const std::string& script_relative_path);

}  // namespace cpullm::cli
