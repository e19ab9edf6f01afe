#include "engine/kernels/matvec.hpp"

#include <vector>

#include "engine/kernels/dot.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

const DotKernels& kernels_for(Isa isa) {
  return table_for_isa(isa, scalar_dot_kernels, avx2_dot_kernels, avx512_dot_kernels);
}

// The activations in the form the weight type's kernel reads: x itself, or x quantized to
// Q8_0 blocks in a per-thread buffer that is reused from call to call.
const void* prepare_activations(const WeightMatrix& w, const float* x) {
  if (!uses_q8_0_activations(w.type)) return x;
  thread_local std::vector<BlockQ8_0> quantized;
  quantized.resize(static_cast<std::size_t>(w.cols / kQuantBlock));
  quantize_row_q8_0(x, quantized.data(), w.cols);
  return quantized.data();
}

}  // namespace

bool uses_q8_0_activations(GgmlType type) {
  return type == GgmlType::Q8_0 || type == GgmlType::Q4_0 || type == GgmlType::CPULLM_INT8_CHANNEL;
}

bool matvec_supports(GgmlType type, int64_t cols) {
  return row_convertible(type) && (!uses_q8_0_activations(type) || cols % kQuantBlock == 0);
}

int64_t row_bytes(const WeightMatrix& w) { return row_bytes(w.type, w.cols); }

void matvec(float* y, const WeightMatrix& w, const float* x) { matvec(y, w, x, active_isa()); }

void matvec(float* y, const WeightMatrix& w, const float* x, Isa isa) {
  const RowDot dot = entry_for_type(kernels_for(isa), w.type);
  const void* activations = prepare_activations(w, x);
  const int64_t stride = row_bytes(w);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < w.rows; ++r) y[r] = dot(w.data + r * stride, activations, w.cols);
}

void matvec_reference(float* y, const WeightMatrix& w, const float* x) {
  const RowDot dot = entry_for_type(scalar_dot_kernels(), w.type);
  const void* activations = prepare_activations(w, x);
  const int64_t stride = row_bytes(w);
  for (int64_t r = 0; r < w.rows; ++r) y[r] = dot(w.data + r * stride, activations, w.cols);
}

void weight_row_to_float(float* out, const WeightMatrix& w, int64_t row) {
  decode_row(w.type, w.data + row * row_bytes(w), out, w.cols);
}

}  // namespace cpullm
