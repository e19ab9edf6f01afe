// --config FILE for generate and bench: a TOML file whose keys are long option names (what
// `cpullm sweep` writes for its best configuration), e.g. `n-prompt = ["512"]`, `threads = 2`,
// `cold = true`. Keys at the top are for every command that reads the file; keys under
// [bench], [generate] or [serve] for that command alone. Read with toml++, a strict TOML 1.0 parser:
// anything TOML refuses, any other section, a nested table and a date are errors.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace cpullm::cli {

// One key of a config file.
struct ConfigEntry {
  std::string section;              // "" (top level), "bench" or "generate"
  std::string key;                  // long option name, without "--"
  std::vector<std::string> values;  // as on the command line: one per array element, booleans "true"/"false"
};

// The sections a config file may have, one per command that takes --config.
inline constexpr std::string_view kConfigSections[] = {"bench", "generate", "serve"};

// Parses a config file's text into its entries, in file order. Throws cpullm::Error with
// "SOURCE: line L, column C: what is wrong" (or "SOURCE: KEY: ...") on anything malformed;
// never reads a file, so the config-file fuzz target calls it on arbitrary bytes.
std::vector<ConfigEntry> parse_config(std::string_view text, const std::string& source);

// Registers --config on `command`.
void add_config_option(CLI::App& command, std::string& path);

// Call first in the subcommand's callback: every key for this command sets its option as if
// given on the command line, except options the command line gave (those win); a key of the
// [command] section wins over the same key at the top. A key that names no option of the
// command its section is for (the other section's keys are checked against that command) and
// an unreadable file are errors naming the file.
void apply_config_file(CLI::App& command, const std::string& path);

}  // namespace cpullm::cli
