// Matrix-vector products over weights as they lie in the GGUF mapping (F32, F16 or BF16),
// converted element by element inside the kernel: nothing is converted at load time.
// Decoding is one matvec per weight matrix per token: this is where the time goes.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/format/ggml_types.hpp"

namespace cpullm {

// A 2-D weight as stored: `rows` output features, each a contiguous row of `cols` values.
struct WeightMatrix {
  const std::byte* data = nullptr;  // (rows, cols) elements of `type`
  GgmlType type = GgmlType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
};

bool matvec_supports(GgmlType type);

// y (rows) = W (rows, cols) . x (cols). The scalar reference: one thread, a plain sequential
// FP32 sum per row. Every faster kernel is tested against it.
void matvec_reference(float* y, const WeightMatrix& w, const float* x);

// The same product with rows split over the OpenMP threads and each dot product vectorised.
void matvec(float* y, const WeightMatrix& w, const float* x);

// out (cols) = row `row` of W converted to FP32 (embedding lookup).
void weight_row_to_float(float* out, const WeightMatrix& w, int64_t row);

}  // namespace cpullm
