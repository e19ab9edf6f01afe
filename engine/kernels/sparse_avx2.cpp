// AVX2 + FMA + F16C sparse kernels: the 16-float vector of sparse_simd.hpp as two __m256.
#include <immintrin.h>

#include "engine/kernels/sparse_simd.hpp"

namespace cpullm {
namespace {

struct Avx2Ops {
  struct Vec { __m256 lo, hi; };
  struct Index { __m256i lo, hi; };

  static Vec zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static Vec add(Vec a, Vec b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static Vec fma(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
  static Vec broadcast(float v) { return {_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
  static Vec load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static Vec quad(const float* p) {
    const __m256 q = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(p));
    return {q, q};
  }
  static __m256 widen8_u16(const std::byte* p) {  // 8 uint16 as the high halves of FP32: BF16
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  template <GgmlType V>
  static Vec values(const std::byte* p) {
    if constexpr (V == GgmlType::F32)
      return {_mm256_loadu_ps(reinterpret_cast<const float*>(p)), _mm256_loadu_ps(reinterpret_cast<const float*>(p) + 8)};
    if constexpr (V == GgmlType::F16)
      return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
              _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))};
    if constexpr (V == GgmlType::BF16) return {widen8_u16(p), widen8_u16(p + 16)};
  }
  static Index columns_u16(const std::byte* p) {
    return {_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))};
  }
  static Index columns_u8(const std::byte* p, const int32_t* start) {
    const __m128i positions = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return {_mm256_add_epi32(_mm256_cvtepu8_epi32(positions), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(start))),
            _mm256_add_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(positions, 8)),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(start + 8)))};
  }
  static Vec gather(const float* x, Index i) { return {_mm256_i32gather_ps(x, i.lo, 4), _mm256_i32gather_ps(x, i.hi, 4)}; }
  static float sum(Vec v) {
    const __m256 eight = _mm256_add_ps(v.lo, v.hi);
    const __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
    const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
    return _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
  }
  static void quad_sums(Vec v, float* out) {
    // v.lo holds quads 0 and 1, v.hi quads 2 and 3; hadd works within 128-bit halves.
    const __m256 pairs = _mm256_hadd_ps(v.lo, v.hi);    // half sums: q0 q0 q2 q2 | q1 q1 q3 q3
    const __m256 quads = _mm256_hadd_ps(pairs, pairs);  // q0 q2 q0 q2 | q1 q3 q1 q3
    out[0] = _mm256_cvtss_f32(quads);
    out[2] = _mm_cvtss_f32(_mm_shuffle_ps(_mm256_castps256_ps128(quads), _mm256_castps256_ps128(quads), 1));
    const __m128 upper = _mm256_extractf128_ps(quads, 1);
    out[1] = _mm_cvtss_f32(upper);
    out[3] = _mm_cvtss_f32(_mm_shuffle_ps(upper, upper, 1));
  }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v.lo), _mm256_storeu_ps(p + 8, v.hi); }
};

}  // namespace

const SparseKernels& avx2_sparse_kernels() {
  static const SparseKernels kernels = sparse_kernel_table<SimdSparse<Avx2Ops>>();
  return kernels;
}

}  // namespace cpullm
