// Rows of every type the kernels run, to and from FP32: the one place that knows how each
// format encodes its values. Embedding lookups, `quantize`, the tests and the benchmarks use it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "engine/format/ggml_types.hpp"

namespace cpullm {

// F32, F16, BF16, Q8_0, Q4_0, CPULLM_INT8_CHANNEL, CPULLM_Q4_0_R8 and CPULLM_Q8_0_R8.
bool row_convertible(GgmlType type);
// Bytes of one row of n values (n a whole number of the type's blocks).
int64_t row_bytes(GgmlType type, int64_t n);
// out (n) = the row's values in FP32. Types whose rows stand alone (all but the _R8 ones).
void decode_row(GgmlType type, const std::byte* row, float* out, int64_t n);
// row (row_bytes(type, n)) = x (n) in `type`, rounded as llama.cpp rounds. Same types.
void encode_row(GgmlType type, const float* x, std::byte* row, int64_t n);

// The format an _R8 type interleaves (CPULLM_Q4_0_R8: Q4_0, CPULLM_Q8_0_R8: Q8_0); none for
// the types whose rows stand alone.
std::optional<GgmlType> interleaved_plain_type(GgmlType type);

// The same for any convertible type, rows stored in groups (the _R8 types: 8) included.
// out (n) = row `row` of the matrix at `data` (rows of n values).
void decode_matrix_row(GgmlType type, const std::byte* data, int64_t row, float* out, int64_t n);
// data (rows, row_bytes(type, n)) = x (rows, n); rows a multiple of the type's row group.
void encode_rows(GgmlType type, const float* x, int64_t rows, std::byte* data, int64_t n);

}  // namespace cpullm
