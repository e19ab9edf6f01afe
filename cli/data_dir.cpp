// Finds the data folder through the binary's own path (/proc/self/exe), never a path compiled in.
#include "cli/data_dir.hpp"

#include <cstdlib>
#include <system_error>

namespace cpullm::cli {

std::vector<std::filesystem::path> data_dirs() {
  if (const char* env = std::getenv("CPULLM_DATA_DIR"); env && *env) return {env};
  std::vector<std::filesystem::path> dirs;
  std::error_code error;
  const std::filesystem::path binary = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    dirs.push_back(binary.parent_path().parent_path() / "share" / "cpullm");
    dirs.push_back(binary.parent_path() / "share" / "cpullm");
  }
  return dirs;
}

std::filesystem::path data_path(const std::string& relative) {
  const std::vector<std::filesystem::path> dirs = data_dirs();
  for (const auto& dir : dirs) {
    std::error_code error;
    if (std::filesystem::exists(dir / relative, error)) return dir / relative;
  }
  return dirs.empty() ? std::filesystem::path(relative) : dirs.front() / relative;
}

std::vector<std::filesystem::path> profile_dirs() {
  std::vector<std::filesystem::path> dirs;
  if (const char* env = std::getenv("CPULLM_PROFILES"); env && *env) dirs.emplace_back(env);
  dirs.push_back(data_path("tuning/profiles"));
  dirs.emplace_back("tuning/profiles");
  return dirs;
}

}  // namespace cpullm::cli
