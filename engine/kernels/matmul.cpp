#include "engine/kernels/matmul.hpp"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "engine/kernels/gemm_tiles.hpp"
#include "engine/kernels/quant_formats.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/sparse.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

GemmKernel gemm_for(Isa isa, const WeightMatrix& w) {
  if (!matvec_supports(w.type, w.cols))
    fail("matmul: no kernel for weight type {} with {} columns", ggml_type_name(w.type), w.cols);
  return entry_for_type(table_for_isa(isa, scalar_gemm_kernels, avx2_gemm_kernels, avx512_gemm_kernels), w.type);
}

// n rounded down to a multiple of `step`, and at least one step.
int64_t whole_steps(int64_t n, int64_t step) { return std::max(step, n / step * step); }

}  // namespace

int64_t l2_cache_bytes() {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? l2 : 256 * 1024;
}

void matmul(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride, int64_t tokens) {
  matmul(y, y_stride, w, x, x_stride, tokens, active_isa());
}

void matmul(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride, int64_t tokens,
            Isa isa) {
  matmul(y, y_stride, w, x, x_stride, tokens, isa, l2_cache_bytes());
}

void matmul(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride, int64_t tokens,
            Isa isa, int64_t l2_bytes) {
  if (is_sparse(w.type)) return sparse_matmul(y, y_stride, w, x, x_stride, tokens, isa);
  const GemmKernel kernel = gemm_for(isa, w);
  if (tokens <= 0 || w.rows <= 0) return;

  // Pack the activations: integer weights meet every token's row quantized to Q8_0 blocks,
  // float weights meet the rows as they are.
  const std::byte* packed = reinterpret_cast<const std::byte*>(x);
  int64_t packed_stride = x_stride * static_cast<int64_t>(sizeof(float));  // bytes per token
  thread_local std::vector<BlockQ8_0> quantized;  // (tokens, cols / 32), reused from call to call
  if (uses_q8_0_activations(w.type)) {
    const int64_t blocks = w.cols / kQuantBlock;
    quantized.resize(static_cast<std::size_t>(tokens * blocks));
    BlockQ8_0* out = quantized.data();  // this thread's buffer (in the loop below the name is each worker's)
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tokens; ++t) quantize_row_q8_0(x + t * x_stride, out + t * blocks, w.cols);
    packed = reinterpret_cast<const std::byte*>(out);
    packed_stride = blocks * static_cast<int64_t>(sizeof(BlockQ8_0));
  }

  // Cache blocking. A block of weight rows fills a quarter of L2 and stays there while every
  // tile of the token panel passes over it; the panel is read again for each row block (from
  // L2 or L3: only one tile's tokens are needed at a time), the weights once per panel (from
  // memory). So the panel is as large as a core's share of L3 (about 4 x L2 on the Xeon E5 v4):
  // at 512 tokens x 4096 columns of F32, 4 x L2 ran 15% faster than half of L2 and 16 x L2 no
  // faster. Both are whole register tiles, leaving edge tiles only at the matrix's edges;
  // neither depends on the thread count.
  const int64_t w_stride = row_bytes(w);
  const int64_t panel_tokens = whole_steps(l2_bytes * 4 / packed_stride, kernel.tile_tokens);
  const int64_t block_rows = whole_steps(l2_bytes / 4 / w_stride, kernel.tile_rows);
  const int64_t row_blocks = (w.rows + block_rows - 1) / block_rows;

#pragma omp parallel
  for (int64_t t0 = 0; t0 < tokens; t0 += panel_tokens) {
#pragma omp for schedule(static)
    for (int64_t rb = 0; rb < row_blocks; ++rb) {
      const int64_t r0 = rb * block_rows;
      kernel.run({y + t0 * y_stride + r0, y_stride, w.data + r0 * w_stride, w_stride, packed + t0 * packed_stride,
                  packed_stride, std::min(block_rows, w.rows - r0), std::min(panel_tokens, tokens - t0), w.cols});
    }
  }
}

void matmul_reference(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride,
                      int64_t tokens) {
  for (int64_t t = 0; t < tokens; ++t) matvec_reference(y + t * y_stride, w, x + t * x_stride);
}

}  // namespace cpullm
