// Matrix-vector products over weights as they lie in the GGUF mapping: F32, F16 and BF16
// converted element by element inside the kernel; Q8_0, Q4_0, their _R8 layouts and
// CPULLM_INT8_CHANNEL dotted block by block against activations quantized to Q8_0 on the fly. Nothing is converted at load time. Decoding is one
// matvec per weight matrix per token: this is where the time goes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/format/ggml_types.hpp"
#include "engine/kernels/isa.hpp"

namespace cpullm {

// A 2-D weight as stored: `rows` output features, each a contiguous row of `cols` values, or for
// CPULLM_Q4_0_R8 and CPULLM_Q8_0_R8 each group of 8 rows interleaved (rows a multiple of 8; quant_formats.hpp).
struct WeightMatrix {
  const std::byte* data = nullptr;  // (rows, row_bytes) in the format of `type`
  GgmlType type = GgmlType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
};

// The integer formats (Q8_0, Q4_0, their _R8 layouts, CPULLM_INT8_CHANNEL): their kernels take activations
// quantized to Q8_0, and so need rows of whole 32-value blocks.
bool uses_q8_0_activations(GgmlType type);
// Whether a kernel runs this type at this row length.
bool matvec_supports(GgmlType type, int64_t cols);
int64_t row_bytes(const WeightMatrix& w);
// Rows one row-kernel call takes: 1, or the type's group (the _R8 types: 8). An Error where w's
// rows are not whole groups, never a read past its end.
int64_t rows_per_kernel_call(const WeightMatrix& w);

// y (rows) = W (rows, cols) . x (cols), rows split over the OpenMP threads, with the kernels
// of `isa`.
void matvec(float* y, const WeightMatrix& w, const float* x, Isa isa);

// One product of a group that shares its input: y (w->rows) = W . x.
struct MatvecTask {
  float* y;               // (w->rows) the output; with several tokens (tokens, y_stride)
  const WeightMatrix* w;  // any type matvec runs; the same cols for the whole group
  int64_t y_stride = 0;   // floats from one token's output to the next's (several tokens)
};
// Every task's product with the same x (cols) in one parallel region, the rows of all the
// matrices split over the threads as one range: decode's q, k and v (or gate and up) cost one
// fork/join and one quantization of x instead of three. Each output equals matvec's, bit for bit.
void matvec_group(std::span<const MatvecTask> tasks, const float* x, Isa isa);

// The most tokens one pass of matvec_group streams.
inline constexpr int64_t kRowStreamTokens = 8;
// The same for `tokens` inputs x (tokens, x_stride): kRowStreamTokens tokens a pass, in which each
// row of every matrix comes from memory once and is widened or unpacked once per 4 tokens, whose
// products the row kernels accumulate side by side (matmul's path for a decode step of a few
// sequences). Each output equals matvec's of that token, bit for bit.
void matvec_group(std::span<const MatvecTask> tasks, const float* x, int64_t x_stride, int64_t tokens, Isa isa);
// Its passes (one parallel loop each) for `tokens` tokens.
inline int64_t matvec_group_passes(int64_t tokens) { return (tokens + kRowStreamTokens - 1) / kRowStreamTokens; }

// The reference: the scalar kernels on one thread, sums in order. Everything else is tested
// against it.
void matvec_reference(float* y, const WeightMatrix& w, const float* x);

// out (cols) = row `row` of W converted to FP32 (embedding lookup).
void weight_row_to_float(float* out, const WeightMatrix& w, int64_t row);

}  // namespace cpullm
