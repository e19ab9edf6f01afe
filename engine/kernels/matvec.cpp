#include "engine/kernels/matvec.hpp"

#include <vector>

#include "engine/kernels/dot.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

const DotKernels& kernels_for(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return scalar_dot_kernels();
    case Isa::Avx2: return avx2_dot_kernels();
    case Isa::Avx512:
      if (!cpu_supports(Isa::Avx512)) fail("this CPU cannot run the avx512 kernels");
      return avx512_dot_kernels();
  }
  fail("unknown ISA");
}

RowDot dot_for(const DotKernels& kernels, GgmlType type) {
  switch (type) {
    case GgmlType::F32: return kernels.f32;
    case GgmlType::F16: return kernels.f16;
    case GgmlType::BF16: return kernels.bf16;
    case GgmlType::Q8_0: return kernels.q8_0;
    case GgmlType::Q4_0: return kernels.q4_0;
    case GgmlType::CPULLM_INT8_CHANNEL: return kernels.int8_channel;
    default: fail("matvec: no kernel for weight type {}", ggml_type_name(type));
  }
}

// Formats whose kernels take Q8_0 activations (and so need rows of whole 32-value blocks).
bool integer_kernel(GgmlType type) {
  return type == GgmlType::Q8_0 || type == GgmlType::Q4_0 || type == GgmlType::CPULLM_INT8_CHANNEL;
}

// The activations in the form the weight type's kernel reads: x itself, or x quantized to
// Q8_0 blocks in a per-thread buffer that is reused from call to call.
const void* prepare_activations(const WeightMatrix& w, const float* x) {
  if (!integer_kernel(w.type)) return x;
  thread_local std::vector<BlockQ8_0> quantized;
  quantized.resize(static_cast<std::size_t>(w.cols / kQuantBlock));
  quantize_row_q8_0(x, quantized.data(), w.cols);
  return quantized.data();
}

}  // namespace

bool matvec_supports(GgmlType type, int64_t cols) {
  return row_convertible(type) && (!integer_kernel(type) || cols % kQuantBlock == 0);
}

int64_t row_bytes(const WeightMatrix& w) { return row_bytes(w.type, w.cols); }

void matvec(float* y, const WeightMatrix& w, const float* x) { matvec(y, w, x, active_isa()); }

void matvec(float* y, const WeightMatrix& w, const float* x, Isa isa) {
  const RowDot dot = dot_for(kernels_for(isa), w.type);
  const void* activations = prepare_activations(w, x);
  const int64_t stride = row_bytes(w);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < w.rows; ++r) y[r] = dot(w.data + r * stride, activations, w.cols);
}

void matvec_reference(float* y, const WeightMatrix& w, const float* x) {
  const RowDot dot = dot_for(scalar_dot_kernels(), w.type);
  const void* activations = prepare_activations(w, x);
  const int64_t stride = row_bytes(w);
  for (int64_t r = 0; r < w.rows; ++r) y[r] = dot(w.data + r * stride, activations, w.cols);
}

void weight_row_to_float(float* out, const WeightMatrix& w, int64_t row) {
  decode_row(w.type, w.data + row * row_bytes(w), out, w.cols);
}

}  // namespace cpullm
