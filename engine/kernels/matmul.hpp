// Matrix-matrix products for prefill and batches: Y (tokens, rows) = X (tokens, cols) . W^T,
// with W as it lies in the mapping (any type matvec runs). For a few tokens each row is
// streamed once through the row kernels (matvec_group); otherwise a few weight rows at a time are
// packed into a thread's panel (gemm.hpp) and a register-tiled micro-kernel per ISA level runs
// every tile of tokens over it; the file's pages are only read, so every process mapping it
// keeps sharing them. Activations are used in place (float formats) or quantized to Q8_0 once
// per call (integer formats). Passes over the columns and blocks of panels are sized to L2.
#pragma once
#include <cstdint>

#include "engine/kernels/isa.hpp"
#include "engine/kernels/matvec.hpp"

namespace cpullm {

// Whether matmul runs `tokens` tokens of a matrix of this type and `cols` columns through
// matvec_group, streaming each row once (a decode step of a few sequences), instead of packing
// panels for the GEMM.
bool matmul_streams_rows(GgmlType type, int64_t tokens, int64_t cols);

// y (tokens, y_stride): y[t * y_stride + r] = W row r . x[t * x_stride ...] for r < w.rows,
// t < tokens; x is (tokens, x_stride) with w.cols values per token. Row blocks are split over
// the OpenMP threads; the result does not depend on their number. Kernels of `isa`
// (default: active_isa()).
void matmul(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride, int64_t tokens);
void matmul(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride, int64_t tokens,
            Isa isa);
// The same with the cache blocking sized for an L2 of `l2_bytes` instead of this core's (the
// tests pass a small one to cross many panels and row blocks with small matrices).
void matmul(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride, int64_t tokens,
            Isa isa, int64_t l2_bytes);

// The reference: matvec_reference for each token in turn.
void matmul_reference(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride,
                      int64_t tokens);

// The per-core L2 the blocking is sized to: set_l2_cache_bytes's, else sysconf's (256 KiB where
// it says 0). The CLI sets it from the topology the run stands for: hwloc's view of this
// machine, or a hardware profile's emulated box (`profile --hardware`).
int64_t l2_cache_bytes();
void set_l2_cache_bytes(int64_t bytes);

}  // namespace cpullm
