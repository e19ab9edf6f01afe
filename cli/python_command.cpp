// Runs a Python subcommand by exec: the script's exit status, stdout and stderr become cpullm's.
#include "cli/python_command.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "engine/util/error.hpp"

namespace cpullm::cli {
namespace {

// Debian's interpreter: it has numpy and matplotlib, which the first python3 on PATH may lack.
constexpr const char* kPython = "/usr/bin/python3";

[[noreturn]] void exec_python(const std::string& script, const std::vector<std::string>& arguments) {
  if (!std::filesystem::is_regular_file(script)) fail_file(script, "script not found (the source tree is baked in at build time)");
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(kPython));
  argv.push_back(const_cast<char*>(script.c_str()));
  for (const auto& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  // The tools read the formats and costs from the binary that started them (tuning/registry.py),
  // unless CPULLM_BIN names another.
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) setenv("CPULLM_BIN", self.c_str(), 0);
  execv(kPython, argv.data());
  fail_file(kPython, "cannot run {}: {}", script, std::strerror(errno));
}

}  // namespace

void register_python_command(CLI::App& app, const std::string& name, const std::string& description,
                             const std::string& script_relative_path) {
  CLI::App* command = app.add_subcommand(name, description + " (Python: " + script_relative_path + "; --help lists its flags)");
  // Every argument, flags included, belongs to the script: CLI11 parses none of them.
  command->prefix_command();
  command->set_help_flag();
  command->allow_extras();
  const std::string script = std::string(CPULLM_SOURCE_DIR) + "/" + script_relative_path;
  command->callback([command, script] { exec_python(script, command->remaining()); });
}

}  // namespace cpullm::cli
