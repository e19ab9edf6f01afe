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

// The cache sizes in use: set_cache_sizes's, else sysconf's (32 KiB and 256 KiB where it says
// 0). The CLI sets them from the topology the run stands for: hwloc's view of this machine, or a
// hardware profile's emulated box (`profile --hardware`). Sizes outside 4 KiB (L1d 1 KiB) to
// 1 GiB are refused.
CacheSizes cache_sizes();
void set_cache_sizes(const CacheSizes& sizes);

// Whether matmul runs `tokens` tokens of a matrix of this type and `cols` columns through
// matvec_group, streaming each row once (a decode step of a few sequences), instead of packing
// panels for the GEMM. The integer formats stream only while the tokens' quantized activations
// fit in half of L1d beside the rows.
bool matmul_streams_rows(GgmlType type, int64_t tokens, int64_t cols, int64_t l1d_bytes = cache_sizes().l1d_bytes);

// y (tokens, y_stride): y[t * y_stride + r] = W row r . x[t * x_stride ...] for r < w.rows,
// t < tokens; x is (tokens, x_stride) with w.cols values per token. Row blocks are split over
// the OpenMP threads; the result does not depend on their number. Kernels of `isa`
// (default: active_isa()).
void matmul(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride, int64_t tokens);
void matmul(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride, int64_t tokens,
            Isa isa);
// The same with the cache blocking sized for `caches` instead of cache_sizes() (the tests pass
// small ones to cross many passes, panels and row blocks with small matrices).
void matmul(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride, int64_t tokens,
            Isa isa, const CacheSizes& caches);

// The reference: matvec_reference for each token in turn.
void matmul_reference(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride,
                      int64_t tokens);

}  // namespace cpullm
