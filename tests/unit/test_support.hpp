// Helpers shared by the C++ tests: where the shared models are, scratch folders, and a byte
// builder for hand-made (and deliberately broken) GGUF files.
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cpullm::test {

// ../shared/models (or $CPULLM_SHARED_MODELS) if `file` exists there; tests skip otherwise.
std::optional<std::string> shared_model(const std::string& file);

// A fresh folder under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

void write_bytes(const std::string& path, const std::vector<std::byte>& bytes);
std::vector<std::byte> read_bytes(const std::string& path);

// Little-endian GGUF pieces, appended in order.
struct GgufBytes {
  std::vector<std::byte> bytes;
  template <typename T>
  GgufBytes& pod(T value) {
    auto* b = reinterpret_cast<const std::byte*>(&value);
    bytes.insert(bytes.end(), b, b + sizeof(T));
    return *this;
  }
  GgufBytes& u32(uint32_t v) { return pod(v); }
  GgufBytes& u64(uint64_t v) { return pod(v); }
  GgufBytes& str(std::string_view s) {
    u64(s.size());
    auto* b = reinterpret_cast<const std::byte*>(s.data());
    bytes.insert(bytes.end(), b, b + s.size());
    return *this;
  }
  GgufBytes& header(uint32_t version, uint64_t tensors, uint64_t kvs) {
    return u32(0x46554747).u32(version).u64(tensors).u64(kvs);
  }
  GgufBytes& pad(std::size_t alignment) {
    bytes.resize((bytes.size() + alignment - 1) / alignment * alignment);
    return *this;
  }
};

}  // namespace cpullm::test
