// A weight matrix of random values in any runnable format, for the kernel benchmarks.
#pragma once
#include <random>
#include <vector>

#include "engine/kernels/matvec.hpp"
#include "engine/kernels/row_convert.hpp"

namespace cpullm::bench {

struct Weights {
  std::vector<std::byte> storage;  // (rows, row bytes)
  WeightMatrix matrix;
};

inline Weights random_weights(GgmlType type, int64_t rows, int64_t cols) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(cols);
  Weights w;
  const int64_t bytes_per_row = row_bytes(type, cols);
  w.storage.resize(rows * bytes_per_row);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    encode_row(type, row.data(), w.storage.data() + r * bytes_per_row, cols);
  }
  w.matrix = {w.storage.data(), type, rows, cols};
  return w;
}

}  // namespace cpullm::bench
