// Subcommands written in Python (report, sweep, tune): the C++ binary registers the name, so
// `cpullm --help` lists it, and hands every argument after it to a module of the Python packages
// in the data folder (cli/data_dir.hpp).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace cpullm::cli {

// Registers `name`; when it runs, replaces this process with `/usr/bin/python3 -m MODULE ARGS...`
// (MODULE e.g. "tuning.sweep"; ARGS: everything after `name`, untouched, `--help` included), with
// the data folder first on PYTHONPATH and CPULLM_BIN set to this binary where it is not set already. Fails with cpullm::Error
// when the module is missing or python3 cannot be started.
void register_python_command(CLI::App& app, const std::string& name, const std::string& description, const std::string& module);

}  // namespace cpullm::cli
