// Writes a float32 array as a NumPy .npy file (format version 1.0), for `cpullm logits`.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cpullm {

void write_npy(const std::string& path, std::span<const float> data, const std::vector<int64_t>& shape);

}  // namespace cpullm
