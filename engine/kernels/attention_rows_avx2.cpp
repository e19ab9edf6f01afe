// Decode attention's row kernels at the AVX2 level (the program's baseline): the vector of
// attention_rows_simd.hpp as one __m256.
#include <immintrin.h>

#include "engine/kernels/attention_rows_simd.hpp"

namespace cpullm {
namespace {

struct Avx2Ops {
  static constexpr int64_t kLanes = 8;
  static constexpr int kLongestRun = 4;  // 8 accumulators of 16 registers
  using Vec = __m256;

  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec broadcast(float v) { return _mm256_set1_ps(v); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  template <GgmlType V>
  static Vec values(const std::byte* p) {
    if constexpr (V == GgmlType::F32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    if constexpr (V == GgmlType::Q8_0)
      return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (V == GgmlType::F16) return _mm256_cvtph_ps(halves);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16));  // BF16
  }
  // hadd(a, b) = a0+a1 a2+a3 b0+b1 b2+b3 | a4+a5 a6+a7 b4+b5 b6+b7: two rounds leave rows 0-3's
  // sums of lanes 0-3 in the low half and of lanes 4-7 in the high one; one lane swap adds them.
  static void eight_sums(const Vec* acc, float* out) {
    const __m256 rows_0123 = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
    const __m256 rows_4567 = _mm256_hadd_ps(_mm256_hadd_ps(acc[4], acc[5]), _mm256_hadd_ps(acc[6], acc[7]));
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(rows_0123, rows_4567, 0x20),
                                        _mm256_permute2f128_ps(rows_0123, rows_4567, 0x31)));
  }
};

}  // namespace

const AttentionRowTable& avx2_attention_rows() {
  static const AttentionRowTable table = attention_rows_of<SimdAttentionRows<Avx2Ops>::Rows>();
  return table;
}

}  // namespace cpullm
