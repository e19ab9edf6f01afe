// OutputFile and the private temporary folder: a link planted at an output's path is replaced,
// never followed; an output not committed leaves nothing behind.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/util/error.hpp"
#include "engine/util/output_file.hpp"
#include "test_support.hpp"

namespace cpullm {
namespace {

namespace fs = std::filesystem;

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(OutputFile, ReplacesAPlantedLinkAndLeavesItsTargetAlone) {
  test::TempDir dir;
  const std::string victim = dir.file("victim"), output = dir.file("out.gguf");
  write_text(victim, "victim");
  fs::create_symlink(victim, output);
  OutputFile file(output);
  file.write("new bytes", 9);
  file.commit();
  EXPECT_EQ(contents(victim), "victim");
  EXPECT_FALSE(fs::is_symlink(output));
  EXPECT_EQ(contents(output), "new bytes");
  EXPECT_EQ(std::distance(fs::directory_iterator(fs::path(output).parent_path()), fs::directory_iterator{}), 2);
}

TEST(OutputFile, UncommittedLeavesTheDestinationAsItWas) {
  test::TempDir dir;
  const std::string output = dir.file("out.npy");
  write_text(output, "old");
  {
    OutputFile file(output);
    file.write("half", 4);
  }  // an error between write and commit
  EXPECT_EQ(contents(output), "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(fs::path(output).parent_path()), fs::directory_iterator{}), 1);
}

TEST(OutputFile, FolderMissingOrAFileIsAnErrorNamingThePath) {
  test::TempDir dir;
  write_text(dir.file("plain"), "x");
  for (const std::string& path : {dir.file("missing/out.gguf"), dir.file("plain/out.gguf")}) {
    try {
      OutputFile file(path);
      FAIL() << path << " opened";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": cannot create"), std::string::npos) << e.what();
    }
  }
}

TEST(PrivateTemporaryFolder, FreshUnderTmpdirAndOnlyOurs) {
  test::TempDir dir;
  ::setenv("TMPDIR", dir.file("").c_str(), 1);
  const std::string a = make_private_temporary_folder("cpullm-eval-"), b = make_private_temporary_folder("cpullm-eval-");
  ::unsetenv("TMPDIR");
  EXPECT_NE(a, b);
  EXPECT_TRUE(fs::equivalent(fs::path(a).parent_path(), dir.file("")));
  EXPECT_TRUE(fs::path(a).filename().string().starts_with("cpullm-eval-"));
  struct stat st {};
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

}  // namespace
}  // namespace cpullm
