#include "engine/util/npy.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "engine/util/error.hpp"

namespace cpullm {

void write_npy(const std::string& path, std::span<const float> data, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple
  // of 64 and ended by a newline, as the format asks.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!file) fail_file(path, "cannot create: {}", std::strerror(errno));
  const uint16_t header_length = static_cast<uint16_t>(header.size());
  bool ok = std::fwrite("\x93NUMPY\x01\x00", 1, 8, file.get()) == 8 &&
            std::fwrite(&header_length, 2, 1, file.get()) == 1 &&
            std::fwrite(header.data(), 1, header.size(), file.get()) == header.size() &&
            std::fwrite(data.data(), sizeof(float), data.size(), file.get()) == data.size();
  if (!ok || std::fclose(file.release()) != 0) fail_file(path, "write failed: {}", std::strerror(errno));
}

}  // namespace cpullm
