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
    case GgmlType::CPULLM_INT8_CHANNEL: case GgmlType::CPULLM_Q4_0_R8:
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
    case GgmlType::CPULLM_Q4_0_R8: fail("CPULLM_Q4_0_R8 rows are interleaved in groups of 8: decode_matrix_row reads them");
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
    case GgmlType::CPULLM_Q4_0_R8: fail("CPULLM_Q4_0_R8 rows are interleaved in groups of 8: encode_rows writes them");
    default: fail("no conversion from FP32 to {}", ggml_type_name(type));
  }
}

void decode_matrix_row(GgmlType type, const std::byte* data, int64_t row, float* out, int64_t n) {
  if (type != GgmlType::CPULLM_Q4_0_R8) return decode_row(type, data + row * row_bytes(type, n), out, n);
  // A block at a time through a plain Q4_0 block: no allocation per call (embedding lookups).
  const auto* group = reinterpret_cast<const BlockQ4_0x8*>(data + row / kInterleavedRows * kInterleavedRows * row_bytes(type, n));
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    BlockQ4_0 block;
    deinterleave_q4_0_row(group + b, 1, static_cast<int>(row % kInterleavedRows), &block);
    dequantize_row_q4_0(&block, out + b * kQuantBlock, kQuantBlock);
  }
}

void encode_rows(GgmlType type, const float* x, int64_t rows, std::byte* data, int64_t n) {
  const int64_t bytes = row_bytes(type, n);
  if (type != GgmlType::CPULLM_Q4_0_R8) {
    for (int64_t r = 0; r < rows; ++r) encode_row(type, x + r * n, data + r * bytes, n);
    return;
  }
  if (rows % kInterleavedRows != 0) fail("CPULLM_Q4_0_R8 stores rows in groups of 8, not {}", rows);
  const int64_t blocks = n / kQuantBlock;
  std::vector<BlockQ4_0> plain(static_cast<std::size_t>(kInterleavedRows * blocks));
  for (int64_t g = 0; g < rows; g += kInterleavedRows) {
    quantize_row_q4_0(x + g * n, plain.data(), kInterleavedRows * n);  // rows end on block boundaries
    interleave_q4_0_rows(plain.data(), blocks, reinterpret_cast<BlockQ4_0x8*>(data + g * bytes));
  }
}

}  // namespace cpullm
