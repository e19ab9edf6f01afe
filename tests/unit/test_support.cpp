#include "tests/unit/test_support.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>

namespace cpullm::test {

std::optional<std::string> shared_model(const std::string& file) {
  const char* env = std::getenv("CPULLM_SHARED_MODELS");
  std::filesystem::path dir = env ? env : "../shared/models";
  std::filesystem::path path = dir / file;
  if (!std::filesystem::exists(path)) return std::nullopt;
  return path.string();
}

TempDir::TempDir() {
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() / ("cpullm-test-" + std::to_string(getpid()) + "-" + std::to_string(rd()));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void write_bytes(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::byte> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

}  // namespace cpullm::test
