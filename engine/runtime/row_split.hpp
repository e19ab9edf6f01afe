// Splitting a weight matrix's rows into parts: over nodes (placement), over threads (the rows an
// OpenMP thread computes) and over MPI ranks (tensor parallelism). Rows are independent in a
// matvec, so any split is exact; what matters is that everyone computes the same split.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "engine/kernels/matvec.hpp"

namespace cpullm {

// `total` split into parts proportional to `weights` (not all zero): floors, then the leftover
// units to the largest remainders, ties to the lowest index. With equal weights the first
// total % n parts get one more, which is how OpenMP's schedule(static) splits a loop (libgomp).
inline std::vector<int64_t> split_proportionally(int64_t total, const std::vector<int64_t>& weights) {
  const int64_t sum = std::accumulate(weights.begin(), weights.end(), int64_t{0});
  std::vector<int64_t> parts(weights.size()), remainders(weights.size());
  int64_t given = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    parts[i] = total / sum * weights[i] + total % sum * weights[i] / sum;  // no overflow for huge totals
    remainders[i] = total % sum * weights[i] % sum;
    given += parts[i];
  }
  std::vector<std::size_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return remainders[a] > remainders[b]; });
  for (std::size_t i = 0; given < total; ++i, ++given) ++parts[order[i]];
  return parts;
}

struct RowSpan {
  int64_t begin = 0;  // first row
  int64_t end = 0;    // one past the last row
};

// Part `part` of `parts` equal consecutive shares of `rows` (schedule(static)'s share of a
// thread), counted in whole groups of `group` rows (rows a multiple of it).
inline RowSpan equal_share(int64_t rows, int part, int parts, int64_t group = 1) {
  const int64_t groups = rows / group, base = groups / parts, extra = groups % parts;
  const int64_t begin = part * base + std::min<int64_t>(part, extra);
  return {begin * group, (begin + base + (part < extra ? 1 : 0)) * group};
}

// Rows of `w` are stored in groups of this many (a sparse BLOCK4X4 strip: 4): splits must not cut one.
inline int64_t row_group(const WeightMatrix& w) { return ggml_type_traits(static_cast<uint32_t>(w.type))->row_group; }

// Rows [span.begin, span.end) of `w` as a matrix of their own: a view, nothing copied.
inline WeightMatrix row_slice(const WeightMatrix& w, RowSpan span) {
  return {w.data + span.begin * row_bytes(w), w.type, span.end - span.begin, w.cols};
}

}  // namespace cpullm
