#include "cli/config_file.hpp"

#include <algorithm>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "engine/util/error.hpp"
#include "engine/util/input_file.hpp"
#include "engine/util/text.hpp"

namespace cpullm::cli {
namespace {

// A config file is a few lines; anything larger is not one.
constexpr std::uintmax_t kMaxConfigBytes = 1 << 20;

// `key` as the user wrote it, with its section: "threads" or "[bench] threads".
std::string key_name(const std::string& section, std::string_view key) {
  return (section.empty() ? "" : "[" + section + "] ") + printable(key, false);
}

// One TOML scalar as the command line would give it.
std::string scalar_text(const toml::node& node, const std::string& source, const std::string& name) {
  if (const auto* s = node.as_string()) {
    if (s->get().find('\0') != std::string::npos) fail_file(source, "{}: a NUL character in the value", name);
    return s->get();
  }
  if (const auto* i = node.as_integer()) return std::to_string(i->get());
  if (const auto* f = node.as_floating_point()) return fmt::format("{}", f->get());
  if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
  if (node.is_table()) fail_file(source, "{}: a table, not an option's value", name);
  if (node.is_array()) fail_file(source, "{}: an array inside an array, not an option's value", name);
  fail_file(source, "{}: a date or time, not an option's value", name);
}

void add_entry(std::vector<ConfigEntry>& entries, const std::string& section, std::string_view key,
               const toml::node& node, const std::string& source) {
  const std::string name = key_name(section, key);
  if (key.empty() || key.find('\0') != std::string_view::npos) fail_file(source, "'{}' is not an option name", name);
  ConfigEntry entry{section, std::string(key), {}};
  if (const auto* array = node.as_array()) {
    if (array->empty()) fail_file(source, "{}: an empty array sets nothing", name);
    for (const toml::node& element : *array) entry.values.push_back(scalar_text(element, source, name));
  } else {
    entry.values.push_back(scalar_text(node, source, name));
  }
  entries.push_back(std::move(entry));
}

bool is_section(std::string_view name) {
  return std::find(std::begin(kConfigSections), std::end(kConfigSections), name) != std::end(kConfigSections);
}

}  // namespace

std::vector<ConfigEntry> parse_config(std::string_view text, const std::string& source) {
  toml::table table;
  try {
    table = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    fail_file(source, "line {}, column {}: {}", e.source().begin.line, e.source().begin.column, printable(e.description(), false));
  }
  std::vector<ConfigEntry> entries;
  for (const auto& [key, node] : table) {
    const auto* section = node.as_table();
    if (!section) {
      add_entry(entries, "", key.str(), node, source);
      continue;
    }
    if (!is_section(key.str()))
      fail_file(source, "[{}] is not a section: the sections are [{}]", printable(key.str(), false), fmt::join(kConfigSections, "] and ["));
    for (const auto& [name, value] : *section) add_entry(entries, std::string(key.str()), name.str(), value, source);
  }
  return entries;
}

void add_config_option(CLI::App& command, std::string& path) {
  command.add_option("--config", path, "TOML file of long option names and values; the command line wins");
}

void apply_config_file(CLI::App& command, const std::string& path) {
  if (path.empty()) return;
  const std::vector<ConfigEntry> entries = parse_config(read_input_file(path, "the config file", kMaxConfigBytes), path);
  // Every key is checked against the command its section is for, so a misspelt key in the
  // other command's section is found by either command.
  for (const ConfigEntry& entry : entries) {
    const std::string name = key_name(entry.section, entry.key);
    if (entry.key == "config") fail_file(path, "{}: a config file does not name another", name);
    const CLI::App* owner = &command;
    if (!entry.section.empty() && entry.section != command.get_name()) {
      // The section's command, looked up without CLI11's throwing get_subcommand: a program
      // built without it (the config-file fuzz target has bench alone) refuses the file instead.
      const auto found = static_cast<const CLI::App&>(*command.get_parent())
                             .get_subcommands([&](const CLI::App* app) { return app->get_name() == entry.section; });
      if (found.empty()) fail_file(path, "[{}]: this program has no command {}", entry.section, entry.section);
      owner = found.front();
    }
    const CLI::Option* option = owner->get_option_no_throw("--" + entry.key);
    if (!option) fail_file(path, "'{}' is not an option of cpullm {}", name, owner->get_name());
    if (!option->get_configurable()) fail_file(path, "{}: not an option a config file sets", name);
    if (option->get_expected_min() == 0 && entry.values.size() != 1) fail_file(path, "{}: a flag takes one value", name);
  }
  // The command's own section first: an option it sets counts as given, so the top level's
  // value for it is then skipped, as the command line's values skip both.
  std::vector<const ConfigEntry*> order;
  for (const ConfigEntry& entry : entries)
    if (entry.section == command.get_name()) order.push_back(&entry);
  for (const ConfigEntry& entry : entries)
    if (entry.section.empty()) order.push_back(&entry);
  for (const ConfigEntry* entry : order) {
    CLI::Option* option = command.get_option_no_throw("--" + entry->key);
    if (option->count() > 0) continue;  // given on the command line, or in the command's section
    try {
      if (option->get_expected_min() == 0) {  // a flag: `cold = true`, as CLI11's own config reader takes it
        option->add_result(option->get_flag_value(entry->key, entry->values[0]));
      } else {
        option->add_result(entry->values);
      }
      option->run_callback();
    } catch (const CLI::Error& e) {
      fail_file(path, "{}: {}", key_name(entry->section, entry->key), printable(e.what(), false));
    }
  }
}

}  // namespace cpullm::cli
