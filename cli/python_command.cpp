// Runs a Python subcommand by exec: the module's exit status, stdout and stderr become cpullm's.
#include "cli/python_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "cli/data_dir.hpp"
#include "engine/util/error.hpp"

namespace cpullm::cli {
namespace {

// Debian's interpreter: it has numpy and matplotlib, which the first python3 on PATH may lack.
constexpr const char* kPython = "/usr/bin/python3";

// "tuning.sweep" -> "tuning/sweep.py": the file that must exist in the data folder.
std::string module_file(std::string module) {
  std::replace(module.begin(), module.end(), '.', '/');
  return module + ".py";
}

[[noreturn]] void exec_python(const std::string& module, const std::vector<std::string>& arguments) {
  const std::filesystem::path file = data_path(module_file(module));
  if (!std::filesystem::is_regular_file(file))
    fail_file(file.string(), "not found (set CPULLM_DATA_DIR to the folder holding tuning/ and reports/)");
  // The packages' folder goes first on PYTHONPATH.
  std::string python_path = file.parent_path().parent_path().string();
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) python_path += std::string(":") + old;
  setenv("PYTHONPATH", python_path.c_str(), 1);
  std::vector<char*> argv = {const_cast<char*>(kPython), const_cast<char*>("-m"), const_cast<char*>(module.c_str())};
  for (const auto& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  // The tools call back the binary that started them (tuning/registry.py finds it so), unless
  // CPULLM_BIN names another.
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) setenv("CPULLM_BIN", self.c_str(), 0);
  execv(kPython, argv.data());
  fail_file(kPython, "cannot run {}: {}", module, std::strerror(errno));
}

}  // namespace

void register_python_command(CLI::App& app, const std::string& name, const std::string& description, const std::string& module) {
  CLI::App* command = app.add_subcommand(name, description + " (Python: " + module + "; --help lists its flags)");
  // Every argument, flags included, belongs to the module: CLI11 parses none of them.
  command->prefix_command();
  command->set_help_flag();
  command->allow_extras();
  command->callback([command, module] { exec_python(module, command->remaining()); });
}

}  // namespace cpullm::cli
