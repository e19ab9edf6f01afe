#include "engine/kernels/row_convert.hpp"

#include <immintrin.h>

#include <cstring>
#include <vector>

#include "engine/kernels/quant_formats.hpp"
#include "engine/kernels/weight_formats.hpp"
#include "engine/util/error.hpp"
#include "engine/util/half.hpp"

namespace cpullm {

bool row_convertible(GgmlType type) { return find_weight_format(type) != nullptr; }

int64_t row_bytes(GgmlType type, int64_t n) {
  return ggml_row_bytes(*ggml_type_traits(static_cast<uint32_t>(type)), n);
}

// F16 and BF16 eight at a time (F16C and a shift: AVX2 is the baseline), the GEMM's packing
// converts every float weight here; the tail one at a time.
void encode_f32_row(const float* x, std::byte* row, int64_t n) { std::memcpy(row, x, n * sizeof(float)); }
void decode_f32_row(const std::byte* row, float* out, int64_t n) { std::memcpy(out, row, n * sizeof(float)); }

void encode_f16_row(const float* x, std::byte* row, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t half = fp32_to_fp16(x[i]);
    std::memcpy(row + 2 * i, &half, 2);
  }
}

void decode_f16_row(const std::byte* row, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i))));
  for (uint16_t half; i < n; ++i) out[i] = (std::memcpy(&half, row + 2 * i, 2), fp16_to_fp32(half));
}

void encode_bf16_row(const float* x, std::byte* row, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t half = fp32_to_bf16(x[i]);
    std::memcpy(row + 2 * i, &half, 2);
  }
}

void decode_bf16_row(const std::byte* row, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i widened = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(widened, 16)));
  }
  for (uint16_t half; i < n; ++i) out[i] = (std::memcpy(&half, row + 2 * i, 2), bf16_to_fp32(half));
}

void decode_row(GgmlType type, const std::byte* row, float* out, int64_t n) {
  const WeightFormat* format = find_weight_format(type);
  if (!format) fail("no conversion from {} to FP32", ggml_type_name(type));
  if (!format->decode) fail("{} rows are interleaved in groups of 8: decode_matrix_row reads them", ggml_type_name(type));
  format->decode(row, out, n);
}

void encode_row(GgmlType type, const float* x, std::byte* row, int64_t n) {
  const WeightFormat* format = find_weight_format(type);
  if (!format) fail("no conversion from FP32 to {}", ggml_type_name(type));
  if (!format->encode) fail("{} rows are interleaved in groups of 8: encode_rows writes them", ggml_type_name(type));
  format->encode(x, row, n);
}

namespace {

template <typename Block>
void decode_interleaved_row(const std::byte* data, int64_t row, float* out, int64_t n, GgmlType plain) {
  // A block at a time through a plain block: no allocation per call (embedding lookups).
  const auto* group = reinterpret_cast<const Interleaved8<Block>*>(data);
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    Block block;
    deinterleave_row(group + b, 1, static_cast<int>(row % kInterleavedRows), &block);
    decode_row(plain, reinterpret_cast<const std::byte*>(&block), out + b * kQuantBlock, kQuantBlock);
  }
}

template <typename Block>
void encode_interleaved_rows(const float* x, int64_t rows, std::byte* data, int64_t n, GgmlType plain) {
  const int64_t blocks = n / kQuantBlock, group_bytes = kInterleavedRows * blocks * static_cast<int64_t>(sizeof(Block));
  std::vector<Block> rows_plain(static_cast<std::size_t>(kInterleavedRows * blocks));
  for (int64_t g = 0; g < rows; g += kInterleavedRows) {
    // rows end on block boundaries, so the group's 8 rows are one run of blocks
    encode_row(plain, x + g * n, reinterpret_cast<std::byte*>(rows_plain.data()), kInterleavedRows * n);
    interleave_rows(rows_plain.data(), blocks, reinterpret_cast<Interleaved8<Block>*>(data + g / kInterleavedRows * group_bytes));
  }
}

}  // namespace

void decode_matrix_row(GgmlType type, const std::byte* data, int64_t row, float* out, int64_t n) {
  const std::optional<GgmlType> plain = weight_format(type).plain;
  if (!plain) return decode_row(type, data + row * row_bytes(type, n), out, n);
  const std::byte* group = data + row / kInterleavedRows * kInterleavedRows * row_bytes(type, n);
  if (*plain == GgmlType::Q4_0) return decode_interleaved_row<BlockQ4_0>(group, row, out, n, *plain);
  decode_interleaved_row<BlockQ8_0>(group, row, out, n, *plain);
}

void encode_rows(GgmlType type, const float* x, int64_t rows, std::byte* data, int64_t n) {
  const int64_t bytes = row_bytes(type, n);
  const std::optional<GgmlType> plain = weight_format(type).plain;
  if (!plain) {
    for (int64_t r = 0; r < rows; ++r) encode_row(type, x + r * n, data + r * bytes, n);
    return;
  }
  if (rows % kInterleavedRows != 0) fail("{} stores rows in groups of 8, not {}", ggml_type_name(type), rows);
  if (*plain == GgmlType::Q4_0) return encode_interleaved_rows<BlockQ4_0>(x, rows, data, n, *plain);
  encode_interleaved_rows<BlockQ8_0>(x, rows, data, n, *plain);
}

}  // namespace cpullm
