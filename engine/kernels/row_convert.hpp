// Rows of every type the kernels run, to and from FP32, through the format registry's codecs
// (weight_formats.hpp): embedding lookups, `quantize`, the tests and the benchmarks use it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/format/ggml_types.hpp"

namespace cpullm {

// Whether the registry lists the type (F32, F16, BF16, Q8_0, Q4_0, CPULLM_INT8_CHANNEL, the _R8 types, ...).
bool row_convertible(GgmlType type);
// Bytes of one row of n values (n a whole number of the type's blocks).
int64_t row_bytes(GgmlType type, int64_t n);
// out (n) = the row's values in FP32. Types whose rows stand alone (all but the _R8 ones).
void decode_row(GgmlType type, const std::byte* row, float* out, int64_t n);
// row (row_bytes(type, n)) = x (n) in `type`, rounded as llama.cpp rounds. Same types.
void encode_row(GgmlType type, const float* x, std::byte* row, int64_t n);

// The same for any convertible type, rows stored in groups (the _R8 types: 8) included.
// out (n) = row `row` of the matrix at `data` (rows of n values).
void decode_matrix_row(GgmlType type, const std::byte* data, int64_t row, float* out, int64_t n);
// data (rows, row_bytes(type, n)) = x (rows, n); rows a multiple of the type's row group.
void encode_rows(GgmlType type, const float* x, int64_t rows, std::byte* data, int64_t n);

// The float formats' row codecs (the registry's entries for F32, F16 and BF16).
void encode_f32_row(const float* x, std::byte* row, int64_t n);
void decode_f32_row(const std::byte* row, float* out, int64_t n);
void encode_f16_row(const float* x, std::byte* row, int64_t n);
void decode_f16_row(const std::byte* row, float* out, int64_t n);
void encode_bf16_row(const float* x, std::byte* row, int64_t n);
void decode_bf16_row(const std::byte* row, float* out, int64_t n);

}  // namespace cpullm
