// Decode attention's row kernels at the AVX-512 level: the vector of attention_rows_simd.hpp as
// one __m512. Only the code below the target pragma uses AVX-512, and it runs only after
// cpu_supports(Isa::Avx512).
#include <immintrin.h>

#include "engine/kernels/attention_rows.hpp"

// GCC 12's headers leave the upper half of a widening cast undefined on purpose and then warn
// about it (GCC bug 105593), as in dot_avx512.cpp.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")
#include "engine/kernels/attention_rows_simd.hpp"

namespace cpullm {
namespace {

struct Avx512Ops {
  static constexpr int64_t kLanes = 16;
  static constexpr int kLongestRun = 8;  // 16 accumulators of 32 registers
  using Vec = __m512;

  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec broadcast(float v) { return _mm512_set1_ps(v); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  template <GgmlType V>
  static Vec values(const std::byte* p) {
    if constexpr (V == GgmlType::F32) return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
    if constexpr (V == GgmlType::Q8_0)
      return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    const __m256i halves = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (V == GgmlType::F16) return _mm512_cvtph_ps(halves);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16));  // BF16
  }
  // Each accumulator folded to 8 lanes (lanes i and i + 8 added), then AVX2's two rounds of hadd
  // and one lane swap.
  static void eight_sums(const Vec* acc, float* out) {
    __m256 folded[8];
    for (int r = 0; r < 8; ++r)
      folded[r] = _mm256_add_ps(_mm512_castps512_ps256(acc[r]),
                                _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r]), 1)));
    const __m256 rows_0123 = _mm256_hadd_ps(_mm256_hadd_ps(folded[0], folded[1]), _mm256_hadd_ps(folded[2], folded[3]));
    const __m256 rows_4567 = _mm256_hadd_ps(_mm256_hadd_ps(folded[4], folded[5]), _mm256_hadd_ps(folded[6], folded[7]));
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(rows_0123, rows_4567, 0x20),
                                        _mm256_permute2f128_ps(rows_0123, rows_4567, 0x31)));
  }
};

}  // namespace

const AttentionRowTable& avx512_attention_rows() {
  static const AttentionRowTable table = attention_rows_of<SimdAttentionRows<Avx512Ops>::Rows>();
  return table;
}

}  // namespace cpullm

#pragma GCC pop_options
