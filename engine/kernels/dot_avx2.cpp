// AVX2 + FMA + F16C dot products: the Xeon E5 v4's instruction set and the program's baseline.
// Float rows: four 8-wide FMA accumulators, enough independent chains to cover FMA latency.
// Block rows: int8 x int8 products summed exactly per block with maddubs/madd, then scaled.
#include <immintrin.h>

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

// The same for weights stored unsigned with a zero point of 8 (Q4_0's nibbles): they go into
// maddubs's unsigned side as they are, and lane j loses 8 * (a[4j] + .. + a[4j + 3]), which
// leaves it the same exact sum as block_products'. Pairs stay within int16 (2 * 15 * 128).
inline __m256i block_products_zero_point_8(__m256i stored, __m256i a, const int32_t* offsets) {
  const __m256i pairs = _mm256_maddubs_epi16(stored, a);
  return _mm256_sub_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets)));
}

// Even and odd blocks go to two accumulators: with one, every block waited on the previous
// block's FMA (4-5 cycles), which cost Q8_0 12% and INT8_CHANNEL 18% of their time with the
// matrix in L2 (Q4_0, bound by its instruction count, 2%). Each row is still one stream of
// sequential loads, which the hardware prefetcher follows from row to row.
struct Avx2BlockDot {
  template <typename Row>
  static float run(const Row& w, const QuantizedActivations& a, int64_t cols) {
    static_assert(Row::kZeroPoint == 0 || Row::kZeroPoint == 8, "one lane offset per 8 lanes");
    const auto step = [&](int64_t b, __m256 acc) {
      const __m256i av = load32_i8(a.blocks[b].q);
      __m256i sums;
      if constexpr (Row::kZeroPoint == 0) sums = block_products(w.weights(b), av);
      else sums = block_products_zero_point_8(w.stored(b), av, a.zero_point_offsets + b * kQuantBlock / 4);
      return _mm256_fmadd_ps(_mm256_set1_ps(w.scale(b) * a.scales[b]), _mm256_cvtepi32_ps(sums), acc);
    };
    const int64_t blocks = cols / kQuantBlock;
    __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2) even = step(b, even), odd = step(b + 1, odd);
    if (b < blocks) even = step(b, even);
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
