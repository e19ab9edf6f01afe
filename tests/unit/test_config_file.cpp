// apply_config_file in a program that lacks a section's command (what the config-file fuzz
// target is: bench alone): the file is refused with a cpullm::Error naming it, never an
// exception of CLI11's. Found by scripts/fuzz once a [serve] section existed.
#include <gtest/gtest.h>

#include <fstream>

#include "cli/config_file.hpp"
#include "engine/util/error.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

TEST(ConfigFile, ASectionForACommandTheProgramLacksIsRefusedNamingTheFile) {
  test::TempDir dir;
  const std::string path = dir.file("best.toml");
  std::ofstream(path) << "[serve]\n----1--the--------------= 5\n";  // the fuzzer's input
  CLI::App app("cpullm");
  CLI::App* bench = app.add_subcommand("bench");
  std::string config;
  cli::add_config_option(*bench, config);
  try {
    cli::apply_config_file(*bench, path);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": [serve]: this program has no command serve");
  }
}

}  // namespace
}  // namespace cpullm
