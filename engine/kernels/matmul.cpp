#include "engine/kernels/matmul.hpp"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "engine/kernels/gemm.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/parallel.hpp"
#include "engine/kernels/row_shares.hpp"
#include "engine/kernels/sparse.hpp"
#include "engine/kernels/weight_formats.hpp"
#include "engine/util/aligned_vector.hpp"
#include "engine/util/error.hpp"

namespace cpullm {

// Whether matmul streams rows through matvec_group (each row from memory once, widened or
// unpacked once per 4 tokens, every token's products in registers) instead of packing panels
// for the GEMM. Measured with bench_kernels' matvec_decode (a decode step's layers from a file
// mapping, 2 threads, AVX-512, TinyLlama-1.1B and LLaMA-7B layers; docs/kernels.md), streaming
// against the GEMM: at 2 tokens 1.2-3.6x faster for every format; at 4 tokens 1.15-1.5x for F16;
// for the integer formats at 3-4 tokens only while the tokens' quantized activations stay in
// L1 beside the rows (with 96 bytes a block, LLaMA-7B's 4 Q8_0 tokens would stream at 0.64x of
// the GEMM; with 36, 3 tokens take 0.55-0.71x the GEMM's time and 4 0.73-0.93x); at 8 tokens
// (two passes over each row) the GEMM wins, except for the Q4_0 kernels (one int32 per block
// before any scaling): Q4_0 streams up to 8 tokens, a TinyLlama layer's 8
// tokens 1.4-1.6x faster than the GEMM, whose Q4_0 packing unpacks every nibble. Q8_0 and
// INT8_CHANNEL at 8 tokens did not beat the GEMM (Q8_0 lost 7 of 8 alternated rounds) and stay
// with it. The sub-block formats (Q4_1, Q5_x, the K-quants) stream up to 24 tokens at any width,
// in passes of 8: packing their panels costs more than that many tokens repay (weight_formats.cpp).
bool matmul_streams_rows(GgmlType type, int64_t tokens, int64_t cols, int64_t l1d_bytes) {
  if (tokens <= 2) return true;
  const WeightFormat* found = find_weight_format(type);
  if (!found) return false;  // the sparse types: their own kernels (sparse.hpp)
  const WeightFormat& format = *found;
  if (format.gemm.panels == GemmPanels::none) return true;  // no GEMM for it: the row kernels
  if (tokens > format.streaming.most_tokens) return false;
  // What one token's row kernel reads per block of 32 columns (dot.hpp): the values (32 bytes),
  // the block's scale (4) and for Q4_0 its offset (4), in half of L1d (24 KiB of 48 KiB, where
  // the measurements above were made; 16 KiB on the Xeon E5 v4's 32 KiB).
  const int64_t block_bytes = format.streaming.activation_block_bytes;
  return block_bytes == 0 || tokens * block_bytes * (cols / kQuantBlock) <= l1d_bytes / 2;
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A thread's packed panels, reused from call to call; 64-byte aligned so that every panel
// vector load is one cache line.
std::byte* panel_buffer(int64_t bytes) {
  thread_local AlignedVector<std::byte> buffer;
  if (static_cast<int64_t>(buffer.size()) < bytes) buffer.resize(static_cast<std::size_t>(bytes));
  return buffer.data();
}

// The loops around the micro-kernel. `steps` are the units of the row (columns for float
// panels, blocks of 32 for integer ones), `step_bytes` what one step of an R-row panel takes.
//  - depth: the steps of one pass, the most for which one panel fills at most a quarter of L2
//    and one tile of N tokens' activations (`token_step_bytes` a token and step) at most half
//    of L1d, so that the tile stays in L1 while the panels pass under it. It depends only on the
//    cache sizes, never on the thread count: each output is the same sequence of FP32
//    additions whatever the threads.
//  - a block: the panels one thread packs per pass, at most half of L2; every thread's share
//    starts with the same number of blocks, which differ by at most one panel (512 panels, AVX2's
//    8-row panels of a 4096-row matrix, had made 37 blocks of up to 14: 266 panels for one thread
//    and 246 for the other). A thread done with its share takes blocks from the back of the
//    others' (RowShares), as matvec does: on a shared host one vCPU often runs slower than the
//    other, and a 2-thread AVX2 prefill makes 1.4-3x fewer sched_yield calls waiting at the joins.
// Per pass: pack the block's panels, then run every tile of N tokens over each panel in turn.
template <typename Pack, typename Run>
void blocked_gemm(int64_t rows, int64_t steps, int64_t tokens, int R, int N, int64_t step_bytes,
                  int64_t token_step_bytes, const CacheSizes& caches, Pack pack, Run run) {
  const int64_t l2_bytes = caches.l2_bytes;
  const int64_t depth =
      std::clamp<int64_t>(std::min(l2_bytes / 4 / step_bytes, caches.l1d_bytes / 2 / (N * token_step_bytes)), 1, steps);
  const int64_t panels = ceil_div(rows, R);
  const int64_t panel_bytes = depth * step_bytes;
  const int64_t threads = parallel_threads();
  const int64_t most_panels = std::max<int64_t>(1, l2_bytes / 2 / panel_bytes);  // per block, in half of L2
  const int64_t rounds = ceil_div(panels, threads * most_panels);                  // blocks per thread
  const int64_t blocks = std::min(panels, threads * rounds);
  const int64_t block_panels = ceil_div(panels, blocks);                           // the most in one block
  RowShares shares(blocks, static_cast<int>(threads), 1);
  // By value: each thread reads the shares' handle and the closure from its own stack (on_every_thread).
  on_every_thread([=](int thread, int) mutable {
    std::byte* buffer = panel_buffer(block_panels * panel_bytes);
    for (int64_t block, end; shares.next(thread, block, end);) {
      const int64_t first = panels * block / blocks, count = panels * (block + 1) / blocks - first;
      for (int64_t s0 = 0; s0 < steps; s0 += depth) {
        const int64_t d = std::min(depth, steps - s0);
        for (int64_t p = 0; p < count; ++p) pack(buffer + p * d * step_bytes, (first + p) * R, s0, d);
        for (int64_t t0 = 0; t0 < tokens; t0 += N)
          for (int64_t p = 0; p < count; ++p) {
            const int64_t r0 = (first + p) * R;
            run(buffer + p * d * step_bytes, r0, t0, s0, d, std::min<int64_t>(R, rows - r0),
                std::min<int64_t>(N, tokens - t0), s0 > 0);
          }
      }
    }
  });
}

void float_gemm(const GemmKernels& k, float* y, int64_t y_stride, const WeightMatrix& w, const float* x,
                int64_t x_stride, int64_t tokens, const CacheSizes& caches) {
  const int R = k.float_rows;
  blocked_gemm(
      w.rows, w.cols, tokens, R, k.float_tokens, R * static_cast<int64_t>(sizeof(float)), sizeof(float), caches,
      [=](std::byte* panel, int64_t r0, int64_t k0, int64_t depth) {
        pack_float_panel(w, r0, k0, depth, R, reinterpret_cast<float*>(panel));
      },
      [=](const std::byte* panel, int64_t r0, int64_t t0, int64_t k0, int64_t depth, int64_t rows, int64_t n,
          bool accumulate) {
        k.float_tile({reinterpret_cast<const float*>(panel), x + t0 * x_stride + k0, x_stride,
                      y + t0 * y_stride + r0, y_stride, depth, rows, n, accumulate});
      });
}

// Integer and sub-block panels. Every token's row is quantized to Q8_0 once, before any tile.
void integer_gemm(const GemmKernels& k, float* y, int64_t y_stride, const WeightMatrix& w, const float* x,
                  int64_t x_stride, int64_t tokens, const CacheSizes& caches) {
  const int64_t blocks = w.cols / kQuantBlock;
  thread_local std::vector<ActivationBlock> activations;  // (tokens, blocks), reused from call to call
  activations.resize(static_cast<std::size_t>(tokens * blocks));
  ActivationBlock* a = activations.data();  // this thread's buffer (in the loop below the name is each worker's)
  for_each_share(tokens, [=](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) quantize_activations(x + t * x_stride, a + t * blocks, w.cols);
  });

  const IntegerTileKernel& tile = integer_tile_kernel(k, w.type);
  const int R = tile.rows;
  blocked_gemm(
      w.rows, blocks, tokens, R, tile.tokens, panel_block_bytes(tile), sizeof(ActivationBlock), caches,
      [=, &tile](std::byte* panel, int64_t r0, int64_t b0, int64_t count) {
        pack_integer_panel(w, r0, b0, count, R, tile.weights, panel);
      },
      [=, &tile](const std::byte* panel, int64_t r0, int64_t t0, int64_t b0, int64_t count, int64_t rows, int64_t n,
                 bool accumulate) {
        tile.run({panel, a + t0 * blocks + b0, blocks, y + t0 * y_stride + r0, y_stride, count, rows, n, accumulate});
      });
}

}  // namespace

CacheSizes sysconf_cache_sizes() {
  const long l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return {l1d > 0 ? l1d : 32 * 1024, l2 > 0 ? l2 : 256 * 1024};
}

void check_cache_sizes(const CacheSizes& sizes) {
  constexpr int64_t kMost = int64_t{1} << 30;
  if (sizes.l1d_bytes < 1024 || sizes.l1d_bytes > kMost)
    fail("an L1d cache of {} bytes is outside 1 KiB to 1 GiB", sizes.l1d_bytes);
  if (sizes.l2_bytes < 4096 || sizes.l2_bytes > kMost)
    fail("an L2 cache of {} bytes is outside 4 KiB to 1 GiB", sizes.l2_bytes);
}

KernelConfig default_kernels() { return {resolve_isa(), sysconf_cache_sizes()}; }

const GemmKernels& gemm_kernels(Isa isa) {
  return table_for_isa(isa, scalar_gemm_kernels, avx2_gemm_kernels, avx512_gemm_kernels);
}

void matmul(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride, int64_t tokens,
            Isa isa, const CacheSizes& caches) {
  if (is_sparse(w.type)) return sparse_matmul(y, y_stride, w, x, x_stride, tokens, isa);
  if (!matvec_supports(w.type, w.cols))
    fail("matmul: no kernel for weight type {} with {} columns", ggml_type_name(w.type), w.cols);
  if (tokens <= 0 || w.rows <= 0) return;
  rows_per_kernel_call(w);  // the GEMM's packing reads whole groups too
  const GemmPanels panels = weight_format(w.type).gemm.panels;
  if (panels == GemmPanels::none || matmul_streams_rows(w.type, tokens, w.cols, caches.l1d_bytes)) {
    // kRowStreamTokens tokens a pass: a format without GEMM panels streams any number
    const MatvecTask task{y, &w, y_stride};
    return matvec_group({&task, 1}, x, x_stride, tokens, isa);
  }
  const GemmKernels& kernels = gemm_kernels(isa);
  if (panels == GemmPanels::f32) float_gemm(kernels, y, y_stride, w, x, x_stride, tokens, caches);
  else integer_gemm(kernels, y, y_stride, w, x, x_stride, tokens, caches);
}

int64_t matmul_parallel_loops(GgmlType type, int64_t tokens, int64_t cols, int64_t l1d_bytes) {
  if (tokens <= 0) return 0;
  if (is_sparse(type)) return tokens == 1 ? 1 : 2;  // sparse_matvec's rows; sparse_matmul's transpose, then its rows
  const GemmPanels panels = weight_format(type).gemm.panels;
  if (panels == GemmPanels::none || matmul_streams_rows(type, tokens, cols, l1d_bytes))
    return matvec_group_passes(tokens);
  return panels == GemmPanels::f32 ? 1 : 2;
}

void matmul_reference(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride,
                      int64_t tokens) {
  for (int64_t t = 0; t < tokens; ++t) matvec_reference(y + t * y_stride, w, x + t * x_stride);
}

}  // namespace cpullm
