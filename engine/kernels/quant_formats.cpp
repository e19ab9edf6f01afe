#include "engine/kernels/quant_formats.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/gemm.hpp"
#include "engine/util/half.hpp"

namespace cpullm {
namespace {

// std::round (halves away from zero, llama.cpp's rounding) in a form the compiler inlines and
// vectorises, where std::round stays a libm call: v - trunc(v) is exact at every magnitude.
inline float round_half_away(float v) {
  const float t = std::trunc(v);
  return std::fabs(v - t) >= 0.5f ? t + std::copysign(1.0f, v) : t;
}

}  // namespace

void quantize_row_int8_channel(const float* x, std::byte* out, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  std::memcpy(out, &d, 4);
  auto* q = reinterpret_cast<int8_t*>(out + 4);
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(round_half_away(x[i] * inverse));
}

void dequantize_row_int8_channel(const std::byte* row, float* out, int64_t n) {
  float d;
  std::memcpy(&d, row, 4);
  const auto* q = reinterpret_cast<const int8_t*>(row + 4);
  for (int64_t i = 0; i < n; ++i) out[i] = d * static_cast<float>(q[i]);
}

namespace {

// One Q8_0 block of x[0..32): its FP16 scale, and its 32 int8 values in order in a register.
// Vectorised (AVX2, the baseline), with the scalar reference's exact arithmetic: the same
// amax, the same x * (1 / d) products and the same rounding, so it gives the same bytes. Every
// matvec and GEMM quantizes its activations here, so its speed shows in decode and prefill.
struct Q8_0Values {
  uint16_t scale;  // FP16
  __m256i q;       // 32 int8
};
inline Q8_0Values quantize_block_q8_0(const float* x) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  __m256 v[4], amax8 = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax8 = _mm256_max_ps(amax8, _mm256_andnot_ps(sign_bit, v[i]));
  }
  __m128 amax4 = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
  amax4 = _mm_max_ps(amax4, _mm_movehl_ps(amax4, amax4));
  const float amax = std::max(_mm_cvtss_f32(amax4), _mm_cvtss_f32(_mm_movehdup_ps(amax4)));
  const float d = amax / 127.0f;
  const __m256 inverse = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  __m256i q[4];
  for (int i = 0; i < 4; ++i) {  // round_half_away, eight at a time
    const __m256 p = _mm256_mul_ps(v[i], inverse);
    const __m256 t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 away = _mm256_cmp_ps(_mm256_andnot_ps(sign_bit, _mm256_sub_ps(p, t)), half, _CMP_GE_OQ);
    const __m256 step = _mm256_and_ps(away, _mm256_or_ps(one, _mm256_and_ps(sign_bit, p)));
    q[i] = _mm256_cvttps_epi32(_mm256_add_ps(t, step));
  }
  // int32 -> int8 (all within -127..127); packs interleave 128-bit lanes, the permute restores order.
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  return {fp32_to_fp16(d), _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))};
}

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* out, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const Q8_0Values block = quantize_block_q8_0(x + b * kQuantBlock);
    out[b].scale = block.scale;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].q), block.q);
  }
}

// The sums of each 16-value half come from the block's register: q + 128 (q xor 0x80) is
// unsigned, and vpsadbw sums 8 such bytes at a time. A loop over the stored bytes took as long as
// quantizing them (`cpullm profile` of a TinyLlama pp4096).
void quantize_activations(const float* x, ActivationBlock* out, int64_t cols) {
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
    const Q8_0Values block = quantize_block_q8_0(x + b * kQuantBlock);
    ActivationBlock& a = out[b];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.q), block.q);
    // Four sums of 8 bytes of q + 128: bytes 0-7, 8-15 in the low lane; 16-23, 24-31 in the high.
    const __m256i sums = _mm256_sad_epu8(_mm256_xor_si256(block.q, bias), _mm256_setzero_si256());
    const __m128i low = _mm256_castsi256_si128(sums), high = _mm256_extracti128_si256(sums, 1);
    const int32_t halves[2] = {static_cast<int32_t>(_mm_cvtsi128_si64(low) + _mm_extract_epi64(low, 1)) - 16 * 128,
                               static_cast<int32_t>(_mm_cvtsi128_si64(high) + _mm_extract_epi64(high, 1)) - 16 * 128};
    a.scale = fp16_to_fp32(block.scale);
    a.offset_sum = -128 * (halves[0] + halves[1]);
    for (int h = 0; h < 2; ++h) a.half_sums[h] = a.scale * static_cast<float>(halves[h]);
  }
}

void quantize_row_q4_0(const float* x, BlockQ4_0* out, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    // The scale maps the value of largest magnitude, with its sign, to -8.
    float amax = 0.0f, extreme = 0.0f;
    for (int64_t j = 0; j < kQuantBlock; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        extreme = x[j];
      }
    const float d = extreme / -8.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].scale = fp32_to_fp16(d);
    for (int64_t j = 0; j < kQuantBlock / 2; ++j) {
      // (int8_t) truncates toward zero after the +8.5 offset: llama.cpp's rounding, kept exactly.
      const uint8_t low = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x[j] * inverse + 8.5f)));
      const uint8_t high =
          static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x[j + kQuantBlock / 2] * inverse + 8.5f)));
      out[b].nibbles[j] = static_cast<uint8_t>(low | (high << 4));
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* blocks, float* out, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = fp16_to_fp32(blocks[b].scale);
    for (int64_t j = 0; j < kQuantBlock; ++j) out[b * kQuantBlock + j] = d * static_cast<float>(blocks[b].q[j]);
  }
}

void dequantize_row_q4_0(const BlockQ4_0* blocks, float* out, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = fp16_to_fp32(blocks[b].scale);
    for (int64_t j = 0; j < kQuantBlock / 2; ++j) {
      out[b * kQuantBlock + j] = d * static_cast<float>((blocks[b].nibbles[j] & 0x0f) - 8);
      out[b * kQuantBlock + j + kQuantBlock / 2] = d * static_cast<float>((blocks[b].nibbles[j] >> 4) - 8);
    }
  }
}

// The bytes after a block's scale.
static const std::byte* payload(const BlockQ4_0& block) { return reinterpret_cast<const std::byte*>(block.nibbles); }
static const std::byte* payload(const BlockQ8_0& block) { return reinterpret_cast<const std::byte*>(block.q); }
static std::byte* payload(BlockQ4_0& block) { return reinterpret_cast<std::byte*>(block.nibbles); }
static std::byte* payload(BlockQ8_0& block) { return reinterpret_cast<std::byte*>(block.q); }

template <typename Block>
void interleave_rows(const Block* rows, int64_t blocks, Interleaved8<Block>* out) {
  for (int64_t b = 0; b < blocks; ++b)
    for (int r = 0; r < kInterleavedRows; ++r) {
      const Block& block = rows[r * blocks + b];
      out[b].scales[r] = block.scale;
      for (int c = 0; c < Interleaved8<Block>::kChunks; ++c) std::memcpy(out[b].chunks[c][r], payload(block) + 4 * c, 4);
    }
}

template <typename Block>
void deinterleave_row(const Interleaved8<Block>* group, int64_t blocks, int row, Block* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    out[b].scale = group[b].scales[row];
    for (int c = 0; c < Interleaved8<Block>::kChunks; ++c) std::memcpy(payload(out[b]) + 4 * c, group[b].chunks[c][row], 4);
  }
}

template void interleave_rows(const BlockQ4_0*, int64_t, BlockQ4_0x8*);
template void interleave_rows(const BlockQ8_0*, int64_t, BlockQ8_0x8*);
template void deinterleave_row(const BlockQ4_0x8*, int64_t, int, BlockQ4_0*);
template void deinterleave_row(const BlockQ8_0x8*, int64_t, int, BlockQ8_0*);

}  // namespace cpullm
