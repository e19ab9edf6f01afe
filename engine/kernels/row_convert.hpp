// Rows of every type the kernels run, to and from FP32: the one place that knows how each
// format encodes its values. Embedding lookups, `quantize`, the tests and the benchmarks use it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/format/ggml_types.hpp"

namespace cpullm {

// F32, F16, BF16, Q8_0, Q4_0 and CPULLM_INT8_CHANNEL.
bool row_convertible(GgmlType type);
// Bytes of one row of n values (n a whole number of the type's blocks).
int64_t row_bytes(GgmlType type, int64_t n);
// out (n) = the row's values in FP32.
void decode_row(GgmlType type, const std::byte* row, float* out, int64_t n);
// row (row_bytes(type, n)) = x (n) in `type`, rounded as llama.cpp rounds.
void encode_row(GgmlType type, const float* x, std::byte* row, int64_t n);

}  // namespace cpullm
