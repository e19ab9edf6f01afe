// Top-K sparse weight matrices (`quantize --sparsity`): each row keeps its largest weights, and
// only those are stored and multiplied. The layouts, for a matrix of `rows` x `cols` whose kept
// values are in precision V (F32, F16 or BF16, the source's):
//   ELL (unstructured): every row keeps the same number K of weights, so rows have one size:
//     K values, then their K uint16 columns in ascending order.
//   N:M: every group of M consecutive columns keeps N weights: a row is its (cols / M) * N
//     values, then as many uint8 positions within their group.
//   BLOCK4X4: rows go in strips of 4; a strip keeps the same number KB of its 4x4 blocks: KB
//     blocks of 16 values (row-major), then their KB int32 block columns (column / 4).
// The type number carries the pattern, V and the density (ggml_types.hpp), so the reader sizes
// the tensors. The kernels gather x at the stored columns; matvec and matmul dispatch here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/format/ggml_types.hpp"
#include "engine/kernels/dot.hpp"
#include "engine/kernels/isa.hpp"
#include "engine/kernels/matvec.hpp"

namespace cpullm {

bool is_sparse(GgmlType type);

// A sparse matrix as the kernels read it.
struct SparseView {
  const std::byte* data = nullptr;  // (rows, stride) or (rows / 4, stride) for BLOCK4X4
  int64_t stride = 0;               // bytes per row (ELL, N:M) or per strip of 4 rows (BLOCK4X4)
  int64_t kept = 0;                 // values per row (ELL, N:M) or blocks per strip (BLOCK4X4)
  int64_t rows = 0, cols = 0;
  const int32_t* group_start = nullptr;  // N:M: (kept) the first column of each stored value's group
};

// The layout of a sparse w. The N:M group starts live in a per-thread buffer, valid until this
// thread's next call.
SparseView sparse_view(const WeightMatrix& w);

// The column of stored value j of an ELL or N:M row whose indices start at `indices`.
template <SparsePattern P>
inline int64_t column_of(const SparseView& w, const std::byte* indices, int64_t j) {
  if constexpr (P == SparsePattern::ell) {
    uint16_t c;
    __builtin_memcpy(&c, indices + 2 * j, 2);
    return c;
  } else {
    return w.group_start[j] + std::to_integer<int64_t>(indices[j]);
  }
}

// The block column (column / 4) of kept block b of a BLOCK4X4 strip whose columns start at `columns`.
inline int64_t block_column(const std::byte* columns, int64_t b) {
  int32_t c;
  __builtin_memcpy(&c, columns + 4 * b, 4);
  return c;
}

// The kernels of one ISA level, by pattern (ell, n_of_m, block4x4) and value precision (F32,
// F16, BF16). `rows` computes y[r] for r0 <= r < r1 (whole strips for BLOCK4X4). `tile`
// computes y[t * y_stride + r] for r0 <= r < r1 and t < tokens <= kSparseTileTokens, from the
// token tile transposed: xt (cols, kSparseTileTokens), zero past `tokens`.
inline constexpr int64_t kSparseTileTokens = 16;
using SparseRows = void (*)(const SparseView& w, const float* x, float* y, int64_t r0, int64_t r1);
using SparseTile = void (*)(const SparseView& w, const float* xt, int64_t tokens, float* y, int64_t y_stride,
                            int64_t r0, int64_t r1);
struct SparseKernels {
  SparseRows rows[3][3];
  SparseTile tile[3][3];
};
// The table of an ISA level whose kernels are `K::gather_rows<P, V>` and `K::gather_tile<P, V>`
// (ELL, N:M), `K::block_rows<V>` and `K::block_tile<V>` (BLOCK4X4).
template <typename K>
constexpr SparseKernels sparse_kernel_table() {
  using enum SparsePattern;
  using enum GgmlType;
  return {{{K::template gather_rows<ell, F32>, K::template gather_rows<ell, F16>, K::template gather_rows<ell, BF16>},
           {K::template gather_rows<n_of_m, F32>, K::template gather_rows<n_of_m, F16>,
            K::template gather_rows<n_of_m, BF16>},
           {K::template block_rows<F32>, K::template block_rows<F16>, K::template block_rows<BF16>}},
          {{K::template gather_tile<ell, F32>, K::template gather_tile<ell, F16>, K::template gather_tile<ell, BF16>},
           {K::template gather_tile<n_of_m, F32>, K::template gather_tile<n_of_m, F16>,
            K::template gather_tile<n_of_m, BF16>},
           {K::template block_tile<F32>, K::template block_tile<F16>, K::template block_tile<BF16>}}};
}
const SparseKernels& scalar_sparse_kernels();
const SparseKernels& avx2_sparse_kernels();
const SparseKernels& avx512_sparse_kernels();  // only call where cpu_supports(Isa::Avx512)

// y (rows) = W . x for a sparse W, rows split over the OpenMP threads.
void sparse_matvec(float* y, const WeightMatrix& w, const float* x, Isa isa);
// y (tokens, y_stride) = X (tokens, x_stride) . W^T for a sparse W: token tiles transposed once,
// then each block of rows runs over a panel of tiles.
void sparse_matmul(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride,
                   int64_t tokens, Isa isa);

// Why W's shape does not suit its sparse type ("" when it does): ELL rows longer than a uint16
// column reaches, N:M rows not whole groups, BLOCK4X4 rows or columns not multiples of 4.
std::string sparse_shape_problem(GgmlType type, int64_t rows, int64_t cols);
// The first stored column that lies outside its row (a hostile or corrupt file), described, or
// "" when every one is inside: the kernels read x at these columns unchecked.
std::string sparse_index_problem(const WeightMatrix& w);

}  // namespace cpullm
