// AVX2 + FMA + F16C dot products: the Xeon E5 v4's instruction set and the program's baseline.
// Float rows: four 8-wide FMA accumulators, enough independent chains to cover FMA latency.
// Block rows: int8 x int8 products summed exactly per block with maddubs/madd, then scaled.
#include <immintrin.h>

#include <type_traits>

#include "engine/kernels/dot.hpp"
#include "engine/kernels/int8_rows.hpp"
#include "engine/util/half.hpp"

namespace cpullm {
namespace {

float horizontal_sum(__m256 v) {
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
}

// Eight weights at p, widened to FP32.
inline __m256 load8_f32(const std::byte* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
inline __m256 load8_f16(const std::byte* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load8_bf16(const std::byte* p) {
  const __m256i widened = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(widened, 16));
}

template <std::size_t kElement, __m256 (*Load8)(const std::byte*), float (*Load)(const std::byte*)>
float dot_float_row(const std::byte* row, const void* activations, int64_t cols) {
  const auto* x = static_cast<const float*>(activations);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= cols; i += 32)
    for (int k = 0; k < 4; ++k)
      acc[k] = _mm256_fmadd_ps(Load8(row + (i + 8 * k) * kElement), _mm256_loadu_ps(x + i + 8 * k), acc[k]);
  for (; i + 8 <= cols; i += 8) acc[0] = _mm256_fmadd_ps(Load8(row + i * kElement), _mm256_loadu_ps(x + i), acc[0]);
  float sum = horizontal_sum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < cols; ++i) sum += Load(row + i * kElement) * x[i];
  return sum;
}

// Eight int32 partial sums of w . a over 32 signed bytes. maddubs multiplies unsigned by
// signed bytes, so |w| meets a carrying w's sign; pairs stay within int16 (2 * 128 * 127).
inline __m256i block_products(__m256i w, __m256i a) {
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

// Q4_0 blocks b and b + 1 (when `pair`) in nibble order: lanes 0-3 hold block b's sums, 4-7
// block b + 1's. One load and an AND take the low nibbles of both blocks, a shift and an AND
// the high ones; each meets its 32 activations in one maddubs (the nibbles go in unsigned, as
// stored), the two int16 products add (at most 4 * 15 * 127 per pair), and the lane starts
// from its zero-point offset. Past the last block everything is zero.
inline __m256 q4_0_pair(const BlockQ4_0* blocks, bool pair, const QuantizedActivations& a, int64_t b, __m256 acc) {
  const __m128i first = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[0].nibbles));
  const __m128i second = pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[1].nibbles)) : _mm_setzero_si128();
  const __m256i nibbles = _mm256_set_m128i(second, first);
  const __m256i mask = _mm256_set1_epi8(0x0f);
  const __m256i low = _mm256_and_si256(nibbles, mask), high = _mm256_and_si256(_mm256_srli_epi16(nibbles, 4), mask);
  // Blocks b, b + 1 are the first or the second pair of their group of four.
  const int8_t* low_acts = a.nibble_order + (b / 4) * 4 * kQuantBlock + (b % 4) * kQuantBlock / 2;
  const int8_t* high_acts = low_acts + 2 * kQuantBlock;
  const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(low, load32_i8(low_acts)),
                                         _mm256_maddubs_epi16(high, load32_i8(high_acts)));
  const __m256i sums = _mm256_add_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)),
                                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.offsets_nibble + b * 4)));
  // The two FP16 weight scales, each four times: bytes 0-1 and 18-19 of a 32-byte load,
  // spread within their 128-bit lanes, then the two lanes' low halves joined.
  __m256 weight_scales;
  if (pair) {
    const __m256i head = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks));
    const __m256i spread = _mm256_shuffle_epi8(
        head, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                               2, 3, 2, 3, 2, 3, 2, 3, -1, -1, -1, -1, -1, -1, -1, -1));
    weight_scales = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(spread, 0b1000)));
  } else {
    weight_scales = _mm256_set1_ps(fp16_to_fp32(blocks[0].scale));  // the upper lanes' sums are zero
  }
  const __m256 scales = _mm256_mul_ps(weight_scales, _mm256_loadu_ps(a.scales_by_lane4 + b * 4));
  return _mm256_fmadd_ps(scales, _mm256_cvtepi32_ps(sums), acc);
}

// Two accumulators, for even and odd steps: with one, every step waited on the previous
// step's FMA (4-5 cycles), which cost Q8_0 12% and INT8_CHANNEL 18% of their time with the
// matrix in L2. Each row is still one stream of sequential loads, which the hardware
// prefetcher follows from row to row.
struct Avx2BlockDot {
  template <typename Row>
  static float run(const Row& w, const QuantizedActivations& a, int64_t cols) {
    const int64_t blocks = cols / kQuantBlock;
    __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
    if constexpr (std::is_same_v<Row, Q4_0Row>) {
      int64_t b = 0;
      for (; b + 4 <= blocks; b += 4) {
        even = q4_0_pair(w.blocks + b, true, a, b, even);
        odd = q4_0_pair(w.blocks + b + 2, true, a, b + 2, odd);
      }
      for (; b < blocks; b += 2) even = q4_0_pair(w.blocks + b, b + 1 < blocks, a, b, even);
    } else {
      const auto step = [&](int64_t b, __m256 acc) {
        const __m256i sums = block_products(w.weights(b), load32_i8(a.values + b * kQuantBlock));
        return _mm256_fmadd_ps(_mm256_set1_ps(w.scale(b) * a.scales[b]), _mm256_cvtepi32_ps(sums), acc);
      };
      int64_t b = 0;
      for (; b + 2 <= blocks; b += 2) even = step(b, even), odd = step(b + 1, odd);
      if (b < blocks) even = step(b, even);
    }
    return horizontal_sum(_mm256_add_ps(even, odd));
  }
};
using Avx2IntegerKernels = IntegerRowKernels<Avx2BlockDot>;

}  // namespace

const DotKernels& avx2_dot_kernels() {
  static const DotKernels kernels{
      dot_float_row<4, load8_f32, load_f32>, dot_float_row<2, load8_f16, load_f16>,
      dot_float_row<2, load8_bf16, load_bf16>, Avx2IntegerKernels::q8_0, Avx2IntegerKernels::q4_0,
      Avx2IntegerKernels::int8_channel};
  return kernels;
}

}  // namespace cpullm
