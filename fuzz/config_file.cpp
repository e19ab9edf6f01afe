// `--config FILE` on arbitrary bytes: the file is applied to a command with the kinds of option
// `cpullm bench` has (a list, a number with a range check, a flag, a word from a set), through
// the one function every subcommand calls, apply_config_file(command, path). Refusing the file
// with a cpullm::Error is a pass; any other exception, a crash or a sanitizer report is a finding.
#include <CLI/CLI.hpp>

#include "cli/config_file.hpp"
#include "engine/util/error.hpp"
#include "fuzz/memory_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const cpullm::fuzz::MemoryFile input(data, size);
  CLI::App app("cpullm");
  CLI::App* command = app.add_subcommand("bench");
  std::string config_path;
  std::vector<std::string> threads;
  int repetitions = 5;
  bool cold = false;
  std::string output = "md";
  cpullm::cli::add_config_option(*command, config_path);
  command->add_option("-t,--threads", threads);
  command->add_option("-r,--repetitions", repetitions)->check(CLI::Range(1, 1000));
  command->add_flag("--cold", cold);
  command->add_option("-o,--output", output)->check(CLI::IsMember({"md", "csv", "json"}));
  try {
    cpullm::cli::apply_config_file(*command, input.path());
  } catch (const cpullm::Error&) {
  }
  return 0;
}
