#include "cli/config_file.hpp"

#include "engine/util/error.hpp"

namespace cpullm::cli {

void add_config_option(CLI::App& command, std::string& path) {
  command.add_option("--config", path, "TOML file of long option names and values; the command line wins")
      ->check(CLI::ExistingFile);
}

void apply_config_file(CLI::App& command, const std::string& path) {
  if (path.empty()) return;
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_file(path);
  } catch (const CLI::Error& e) {
    fail_file(path, "cannot read the config file: {}", e.what());
  }
  for (const CLI::ConfigItem& item : items) {
    const bool here = item.parents.empty() || (item.parents.size() == 1 && item.parents[0] == command.get_name());
    if (!here || item.name == "config") continue;
    CLI::Option* option = command.get_option_no_throw("--" + item.name);
    if (!option) fail_file(path, "'{}' is not an option of cpullm {}", item.fullname(), command.get_name());
    if (option->count() > 0) continue;  // given on the command line
    try {
      option->add_result(item.inputs);
      option->run_callback();
    } catch (const CLI::Error& e) {
      fail_file(path, "{}: {}", item.name, e.what());
    }
  }
}

}  // namespace cpullm::cli
