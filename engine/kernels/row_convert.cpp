#include "engine/kernels/row_convert.hpp"

#include <immintrin.h>

#include <cstring>
#include <vector>

#include "engine/kernels/quant_formats.hpp"
#include "engine/util/error.hpp"
#include "engine/util/half.hpp"

namespace cpullm {

bool row_convertible(GgmlType type) {
  switch (type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q8_0: case GgmlType::Q4_0:
    case GgmlType::CPULLM_INT8_CHANNEL: case GgmlType::CPULLM_Q4_0_R8: case GgmlType::CPULLM_Q8_0_R8:
      return true;
    default: return false;
  }
}

int64_t row_bytes(GgmlType type, int64_t n) {
  return ggml_row_bytes(*ggml_type_traits(static_cast<uint32_t>(type)), n);
}

void decode_row(GgmlType type, const std::byte* row, float* out, int64_t n) {
  // F16 and BF16 eight at a time (F16C and a shift: AVX2 is the baseline), the GEMM's packing
  // converts every float weight here; the tail one at a time.
  int64_t i = 0;
  uint16_t half;
  switch (type) {
    case GgmlType::F32: std::memcpy(out, row, n * sizeof(float)); return;
    case GgmlType::F16:
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i))));
      for (; i < n; ++i) out[i] = (std::memcpy(&half, row + 2 * i, 2), fp16_to_fp32(half));
      return;
    case GgmlType::BF16:
      for (; i + 8 <= n; i += 8) {
        const __m256i widened = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
        _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(widened, 16)));
      }
      for (; i < n; ++i) out[i] = (std::memcpy(&half, row + 2 * i, 2), bf16_to_fp32(half));
      return;
    case GgmlType::Q8_0: return dequantize_row_q8_0(reinterpret_cast<const BlockQ8_0*>(row), out, n);
    case GgmlType::Q4_0: return dequantize_row_q4_0(reinterpret_cast<const BlockQ4_0*>(row), out, n);
    case GgmlType::CPULLM_INT8_CHANNEL: return dequantize_row_int8_channel(row, out, n);
    case GgmlType::CPULLM_Q4_0_R8: case GgmlType::CPULLM_Q8_0_R8:
      fail("{} rows are interleaved in groups of 8: decode_matrix_row reads them", ggml_type_name(type));
    default: fail("no conversion from {} to FP32", ggml_type_name(type));
  }
}

void encode_row(GgmlType type, const float* x, std::byte* row, int64_t n) {
  uint16_t half;
  switch (type) {
    case GgmlType::F32: std::memcpy(row, x, n * sizeof(float)); return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) half = fp32_to_fp16(x[i]), std::memcpy(row + 2 * i, &half, 2);
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) half = fp32_to_bf16(x[i]), std::memcpy(row + 2 * i, &half, 2);
      return;
    case GgmlType::Q8_0: return quantize_row_q8_0(x, reinterpret_cast<BlockQ8_0*>(row), n);
    case GgmlType::Q4_0: return quantize_row_q4_0(x, reinterpret_cast<BlockQ4_0*>(row), n);
    case GgmlType::CPULLM_INT8_CHANNEL: return quantize_row_int8_channel(x, row, n);
    case GgmlType::CPULLM_Q4_0_R8: case GgmlType::CPULLM_Q8_0_R8:
      fail("{} rows are interleaved in groups of 8: encode_rows writes them", ggml_type_name(type));
    default: fail("no conversion from FP32 to {}", ggml_type_name(type));
  }
}

std::optional<GgmlType> interleaved_plain_type(GgmlType type) {
  switch (type) {
    case GgmlType::CPULLM_Q4_0_R8: return GgmlType::Q4_0;
    case GgmlType::CPULLM_Q8_0_R8: return GgmlType::Q8_0;
    default: return std::nullopt;
  }
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
  const std::byte* group = data + row / kInterleavedRows * kInterleavedRows * row_bytes(type, n);
  switch (type) {
    case GgmlType::CPULLM_Q4_0_R8: return decode_interleaved_row<BlockQ4_0>(group, row, out, n, GgmlType::Q4_0);
    case GgmlType::CPULLM_Q8_0_R8: return decode_interleaved_row<BlockQ8_0>(group, row, out, n, GgmlType::Q8_0);
    default: return decode_row(type, data + row * row_bytes(type, n), out, n);
  }
}

void encode_rows(GgmlType type, const float* x, int64_t rows, std::byte* data, int64_t n) {
  const int64_t bytes = row_bytes(type, n);
  const std::optional<GgmlType> plain = interleaved_plain_type(type);
  if (!plain) {
    for (int64_t r = 0; r < rows; ++r) encode_row(type, x + r * n, data + r * bytes, n);
    return;
  }
  if (rows % kInterleavedRows != 0) fail("{} stores rows in groups of 8, not {}", ggml_type_name(type), rows);
  if (*plain == GgmlType::Q4_0) return encode_interleaved_rows<BlockQ4_0>(x, rows, data, n, *plain);
  encode_interleaved_rows<BlockQ8_0>(x, rows, data, n, *plain);
}

}  // namespace cpullm
