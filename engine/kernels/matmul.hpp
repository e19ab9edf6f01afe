// Matrix-matrix products for prefill and batches: Y (tokens, rows) = X (tokens, cols) . W^T,
// with W as it lies in the mapping (any type matvec runs). For a few tokens each row is
// streamed once through the row kernels (matvec_group); otherwise a few weight rows at a time are
// packed into a thread's panel (gemm.hpp) and a register-tiled micro-kernel per ISA level runs
// every tile of tokens over it; the file's pages are only read, so every process mapping it
// keeps sharing them. Activations are used in place (float formats) or quantized to Q8_0 once
// per call (integer formats). Passes over the columns are sized to L1 and L2, blocks of panels
// to L2.
#pragma once
#include <cstdint>

#include "engine/kernels/isa.hpp"
#include "engine/kernels/matvec.hpp"

namespace cpullm {

// One core's caches, as the blocking and the choice between streaming and the GEMM size to them.
struct CacheSizes {
  int64_t l1d_bytes;  // the L1 data cache
  int64_t l2_bytes;   // the L2
};

// sysconf's per-core L1d and L2 (32 KiB and 256 KiB where it says 0): a run's default where
// its topology reports none.
CacheSizes sysconf_cache_sizes();
// An Error for sizes outside 1 KiB (L1d; L2 4 KiB) to 1 GiB, which no blocking is sized for.
void check_cache_sizes(const CacheSizes& sizes);

// What a run's kernels are told, resolved once per run (engine/run/machine_settings.hpp) and
// passed to every kernel call: nothing in the process holds a current level or cache size.
struct KernelConfig {
  Isa isa;            // the instruction set every kernel of the run uses; one this CPU runs
  CacheSizes caches;  // the core caches the GEMM's blocking and matmul_streams_rows size to
};
// resolve_isa()'s level (CPULLM_ISA, else the best) and sysconf_cache_sizes(): a Model's
// kernels where its options name none.
KernelConfig default_kernels();

// Whether matmul runs `tokens` tokens of a matrix of this type and `cols` columns through
// matvec_group, streaming each row once (a decode step of a few sequences), instead of packing
// panels for the GEMM. The integer formats stream only while the tokens' quantized activations
// fit in half of L1d beside the rows.
bool matmul_streams_rows(GgmlType type, int64_t tokens, int64_t cols, int64_t l1d_bytes);

// The parallel loops matmul runs (each a fork/join of the threads, or a job of a forward pass's
// team; none with one thread): the rows streamed kRowStreamTokens tokens a pass, or an integer
// GEMM's activation quantization and its blocks, or a float GEMM's blocks. What a decode step's
// loops cost is tuning/roofline.py's per-step overhead.
int64_t matmul_parallel_loops(GgmlType type, int64_t tokens, int64_t cols, int64_t l1d_bytes);

// y (tokens, y_stride): y[t * y_stride + r] = W row r . x[t * x_stride ...] for r < w.rows,
// t < tokens; x is (tokens, x_stride) with w.cols values per token. Row blocks are split over
// the OpenMP threads; the result does not depend on their number. Kernels of `isa`, the
// cache blocking sized for `caches` (the tests pass small ones to cross many passes, panels and
// row blocks with small matrices).
void matmul(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride, int64_t tokens,
            Isa isa, const CacheSizes& caches);

// The reference: matvec_reference for each token in turn.
void matmul_reference(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride,
                      int64_t tokens);

}  // namespace cpullm
