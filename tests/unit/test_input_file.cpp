// read_input_file: the small inputs named on the command line (config, evaluation text,
// workloads, hardware profiles). A FIFO would block open() forever and a sparse giant would be
// read into memory; both are refused at once, naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/util/error.hpp"
#include "engine/util/input_file.hpp"
#include "test_support.hpp"

namespace cpullm {
namespace {

std::string refusal(const std::string& path, std::uintmax_t max_bytes = 1024) {
  try {
    read_input_file(path, "the test input", max_bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(InputFile, ReadsARegularFileWhole) {
  test::TempDir dir;
  const std::string path = dir.file("in.txt");
  std::ofstream(path, std::ios::binary) << std::string("a\0b\n", 4);
  EXPECT_EQ(read_input_file(path, "the test input", 4), std::string("a\0b\n", 4));
}

TEST(InputFile, RefusesFifosFoldersGiantsAndMissingFilesByName) {
  test::TempDir dir;
  const std::string fifo = dir.file("in.fifo"), folder = dir.file("folder"), giant = dir.file("giant.txt"),
                    missing = dir.file("missing");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(refusal(fifo), fifo + ": not a regular file (the test input)");
  std::filesystem::create_directory(folder);
  EXPECT_EQ(refusal(folder), folder + ": not a regular file (the test input)");
  std::ofstream(giant).close();
  std::filesystem::resize_file(giant, 1u << 30);  // sparse: nothing is written, nothing may be read
  EXPECT_EQ(refusal(giant), giant + ": the test input of 1073741824 bytes: at most 1024 are read");
  EXPECT_NE(refusal(missing).find(missing + ": cannot open the test input: No such file"), std::string::npos);
}

}  // namespace
}  // namespace cpullm
