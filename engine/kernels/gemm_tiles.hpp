// The register-tiled part of the GEMM: one block of weight rows against one panel of tokens,
// walked in tiles of (tile_rows weight rows) x (tile_tokens tokens). Each ISA level supplies a
// micro-kernel `Tile::run<M, N>(block, r, t)` that computes one M x N tile over the full row
// length, holding M * N accumulators, loading each weight vector once for N tokens and each
// activation vector once for M rows. matmul.cpp does the packing, cache blocking and threads.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/kernels/quant_formats.hpp"

namespace cpullm {

// What a block kernel computes: y[t][r] = W row r . activation row t for r < rows, t < tokens.
struct GemmBlock {
  float* y;               // (tokens, y_stride) outputs; token t's row r at y[t * y_stride + r]
  int64_t y_stride;       // floats between two tokens' outputs
  const std::byte* w;     // (rows, w_stride) weight rows as stored in the mapping
  int64_t w_stride;       // bytes between two weight rows
  const std::byte* x;     // (tokens, x_stride) activations: FP32 rows, or Q8_0 blocks for integer weights
  int64_t x_stride;       // bytes between two tokens' activations
  int64_t rows, tokens;   // the block's extent
  int64_t cols;           // values per row (the K of the product)
};

struct GemmKernel {
  void (*run)(const GemmBlock& block);
  int64_t tile_rows, tile_tokens;  // the micro-kernel's register tile (RM, RN)
};

// One entry per weight type, as DotKernels.
struct GemmKernels {
  GemmKernel f32, f16, bf16;            // FP32 activations and sums
  GemmKernel q8_0, q4_0, int8_channel;  // Q8_0 activations, exact int32 sums per block
};

const GemmKernels& scalar_gemm_kernels();
const GemmKernels& avx2_gemm_kernels();
const GemmKernels& avx512_gemm_kernels();  // only call where cpu_supports(Isa::Avx512)

// What an integer micro-kernel reads for the tile at (r, t): its M weight rows through the
// format's row view, and its N tokens' Q8_0 activations. Bound with `const auto& [w, a] = ...`.
template <typename Row, int M, int N>
struct IntegerTileOperands {
  Row w[M];              // weight rows r .. r + M
  const BlockQ8_0* a[N];  // activations of tokens t .. t + N
  IntegerTileOperands(const GemmBlock& b, int64_t r, int64_t t) {
    for (int m = 0; m < M; ++m) w[m] = Row::from(b.w + (r + m) * b.w_stride);
    for (int n = 0; n < N; ++n) a[n] = reinterpret_cast<const BlockQ8_0*>(b.x + (t + n) * b.x_stride);
  }
};

// What a float micro-kernel reads for the tile at (r, t): its M weight rows as stored (F32, F16
// or BF16 bytes) and its N tokens' FP32 activations. Bound with `const auto& [w, x] = ...`.
template <int M, int N>
struct FloatTileOperands {
  const std::byte* w[M];  // weight rows r .. r + M
  const float* x[N];      // activations of tokens t .. t + N
  FloatTileOperands(const GemmBlock& b, int64_t r, int64_t t) {
    for (int m = 0; m < M; ++m) w[m] = b.w + (r + m) * b.w_stride;
    for (int n = 0; n < N; ++n) x[n] = reinterpret_cast<const float*>(b.x + (t + n) * b.x_stride);
  }
};

// Runs the M x N tile at (r, t), or, at the block's edges where only m < M rows or n < N tokens
// are left, the smaller instantiation that fits: every (m, n) up to (M, N) is compiled.
template <typename Tile, int M, int N>
void run_tile(const GemmBlock& block, int64_t r, int64_t t, int64_t m, int64_t n) {
  if constexpr (M > 1)
    if (m < M) return run_tile<Tile, M - 1, N>(block, r, t, m, n);
  if constexpr (N > 1)
    if (n < N) return run_tile<Tile, M, N - 1>(block, r, t, m, n);
  Tile::template run<M, N>(block, r, t);
}

// A whole block, tokens outermost: a tile's N activation rows stay cached while the block's
// weight rows (sized to stay in L2) pass under them. Every output is one accumulator chain
// over the full row, in the same order whatever the tile it falls in: results do not depend
// on the blocking or the thread count.
template <typename Tile>
void run_gemm_block(const GemmBlock& block) {
  constexpr int M = Tile::kRows, N = Tile::kTokens;
  for (int64_t t = 0; t < block.tokens; t += N)
    for (int64_t r = 0; r < block.rows; r += M) {
      const int64_t m = block.rows - r < M ? block.rows - r : M;
      const int64_t n = block.tokens - t < N ? block.tokens - t : N;
      run_tile<Tile, M, N>(block, r, t, m, n);
    }
}

// The table entry for a Tile type.
template <typename Tile>
constexpr GemmKernel gemm_kernel() {
  return {run_gemm_block<Tile>, Tile::kRows, Tile::kTokens};
}

}  // namespace cpullm
