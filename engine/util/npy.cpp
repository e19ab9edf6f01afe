#include "engine/util/npy.hpp"

#include "engine/util/output_file.hpp"

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

  OutputFile file(path);
  const uint16_t header_length = static_cast<uint16_t>(header.size());
  file.write("\x93NUMPY\x01\x00", 8);
  file.write(&header_length, 2);
  file.write(header.data(), header.size());
  file.write(data.data(), data.size_bytes());
  file.commit();
}

}  // namespace cpullm
