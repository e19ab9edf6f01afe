#include "engine/kernels/sparse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/parallel.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

int value_index(GgmlType values) { return values == GgmlType::F32 ? 0 : values == GgmlType::F16 ? 1 : 2; }

// Rows per unit of work: whole BLOCK4X4 strips, enough to amortise the call.
constexpr int64_t kRowChunk = 16;

}  // namespace

bool is_sparse(GgmlType type) { return sparse_type(static_cast<uint32_t>(type)).has_value(); }

SparseView sparse_view(const WeightMatrix& w) {
  const SparseType s = *sparse_type(static_cast<uint32_t>(w.type));
  const GgmlTypeTraits traits = *ggml_type_traits(static_cast<uint32_t>(w.type));
  SparseView v{w.data, ggml_row_bytes(traits, w.cols) * traits.row_group,
               ggml_stored_blocks(traits, w.cols / traits.block_elements), w.rows, w.cols};
  if (s.pattern == SparsePattern::n_of_m) {
    v.kept *= s.n;
    thread_local std::vector<int32_t> group_start;
    group_start.resize(static_cast<std::size_t>(v.kept));
    for (int64_t j = 0; j < v.kept; ++j) group_start[j] = static_cast<int32_t>(j / s.n * s.m);
    v.group_start = group_start.data();
  }
  return v;
}

void sparse_matvec(float* y, const WeightMatrix& w, const float* x, Isa isa) {
  const SparseType s = *sparse_type(static_cast<uint32_t>(w.type));
  const SparseRows rows = table_for_isa(isa, scalar_sparse_kernels, avx2_sparse_kernels, avx512_sparse_kernels)
                              .rows[static_cast<int>(s.pattern) - 1][value_index(s.values)];
  const SparseView v = sparse_view(w);
  const int64_t chunks = (w.rows + kRowChunk - 1) / kRowChunk;
  for_each_share(chunks, [=](int64_t first, int64_t last) {
    rows(v, x, y, first * kRowChunk, std::min(w.rows, last * kRowChunk));
  });
}

void sparse_matmul(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride,
                   int64_t tokens, Isa isa) {
  const SparseType s = *sparse_type(static_cast<uint32_t>(w.type));
  const SparseTile tile = table_for_isa(isa, scalar_sparse_kernels, avx2_sparse_kernels, avx512_sparse_kernels)
                              .tile[static_cast<int>(s.pattern) - 1][value_index(s.values)];
  if (tokens <= 0 || w.rows <= 0) return;
  const SparseView v = sparse_view(w);

  // Tile i holds tokens 16i .. 16i + 15 transposed: column c's 16 values side by side, so a
  // stored weight meets all 16 tokens in one vector.
  constexpr int64_t T = kSparseTileTokens;
  const int64_t tiles = (tokens + T - 1) / T;
  thread_local std::vector<float> transposed;  // (tiles, cols, T)
  transposed.assign(static_cast<std::size_t>(tiles * w.cols * T), 0.0f);
  float* xt = transposed.data();  // this thread's buffer (in the loops below the name is each worker's)
  for_each_share(tiles, [=](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i)
      for (int64_t t = i * T; t < std::min(tokens, (i + 1) * T); ++t)
        for (int64_t c = 0; c < w.cols; ++c) xt[(i * w.cols + c) * T + t - i * T] = x[t * x_stride + c];
  });

  // A chunk of rows runs over a panel of 4 tiles while its weights stay in L1/L2; every thread
  // reads the panel's transposed tokens (4 x cols x 64 bytes), from L2/L3 where the threads keep
  // pace (no barrier holds them to one panel).
  constexpr int64_t kPanelTiles = 4;
  const int64_t chunks = (w.rows + kRowChunk - 1) / kRowChunk;
  for_each_share(chunks, [=](int64_t first, int64_t last) {
    for (int64_t p = 0; p < tiles; p += kPanelTiles)
      for (int64_t c = first; c < last; ++c)
        for (int64_t i = p; i < std::min(tiles, p + kPanelTiles); ++i)
          tile(v, xt + i * w.cols * T, std::min(T, tokens - i * T), y + i * T * y_stride, y_stride, c * kRowChunk,
               std::min(w.rows, (c + 1) * kRowChunk));
  });
}

std::string sparse_shape_problem(GgmlType type, int64_t rows, int64_t cols) {
  const SparseType s = *sparse_type(static_cast<uint32_t>(type));
  switch (s.pattern) {
    case SparsePattern::ell:
      return cols <= 65536 ? "" : fmt::format("rows of {} values are longer than a uint16 column reaches", cols);
    case SparsePattern::n_of_m:
      return cols % s.m == 0 ? "" : fmt::format("rows of {} values are not whole groups of {}", cols, s.m);
    case SparsePattern::block4x4:
      return rows % 4 == 0 && cols % 4 == 0 ? "" : fmt::format("{} x {} is not whole 4x4 blocks", rows, cols);
  }
  return "unknown pattern";
}

std::string sparse_index_problem(const WeightMatrix& w) {
  const SparseType s = *sparse_type(static_cast<uint32_t>(w.type));
  const SparseView v = sparse_view(w);
  const int64_t value_bytes = s.values == GgmlType::F32 ? 4 : 2;
  const int64_t groups = s.pattern == SparsePattern::block4x4 ? w.rows / 4 : w.rows;
  for (int64_t g = 0; g < groups; ++g) {
    const std::byte* row = v.data + g * v.stride;
    for (int64_t j = 0; j < v.kept; ++j) {
      int64_t column = 0, limit = 0;
      switch (s.pattern) {
        case SparsePattern::ell: {
          uint16_t c;
          std::memcpy(&c, row + v.kept * value_bytes + 2 * j, 2);
          column = c, limit = w.cols;
          break;
        }
        case SparsePattern::n_of_m:
          column = std::to_integer<int64_t>(row[v.kept * value_bytes + j]), limit = s.m;
          break;
        case SparsePattern::block4x4: {
          int32_t b;
          std::memcpy(&b, row + v.kept * 16 * value_bytes + 4 * j, 4);
          column = b, limit = w.cols / 4;
          break;
        }
      }
      if (column < 0 || column >= limit)
        return fmt::format("{} {} stores column index {} at position {}, outside 0..{}",
                           s.pattern == SparsePattern::block4x4 ? "strip" : "row", g, column, j, limit - 1);
    }
  }
  return "";
}

}  // namespace cpullm
