// AVX-512 sparse kernels: the 16-float vector of sparse_simd.hpp as one __m512. Only the code
// below the target pragma uses AVX-512, and it runs only after cpu_supports(Isa::Avx512).
#include <immintrin.h>

#include "engine/kernels/sparse.hpp"

// GCC 12's headers leave the upper half of a widening cast undefined on purpose and then warn
// about it (GCC bug 105593), as in dot_avx512.cpp.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")
#include "engine/kernels/sparse_simd.hpp"

namespace cpullm {
namespace {

struct Avx512Ops {
  using Vec = __m512;
  using Index = __m512i;

  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec broadcast(float v) { return _mm512_set1_ps(v); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec quad(const float* p) { return _mm512_broadcast_f32x4(_mm_loadu_ps(p)); }
  template <GgmlType V>
  static Vec values(const std::byte* p) {
    if constexpr (V == GgmlType::F32) return _mm512_loadu_ps(p);
    const __m256i halves = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (V == GgmlType::F16) return _mm512_cvtph_ps(halves);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16));  // BF16
  }
  static Index columns_u16(const std::byte* p) {
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static Index columns_u8(const std::byte* p, const int32_t* start) {
    return _mm512_add_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
                            _mm512_loadu_si512(start));
  }
  static Vec gather(const float* x, Index i) { return _mm512_i32gather_ps(i, x, 4); }
  static float sum(Vec v) { return _mm512_reduce_add_ps(v); }
  static void quad_sums(Vec v, float* out) {
    // Transpose the quads (lanes i, i + 4, i + 8, i + 12 then hold quad i's four lanes) and add
    // the four 128-bit parts.
    const __m512 t = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), v);
    const __m256 upper = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t), 1));
    const __m256 half = _mm256_add_ps(_mm512_castps512_ps256(t), upper);
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1)));
  }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
};

}  // namespace

const SparseKernels& avx512_sparse_kernels() {
  static const SparseKernels kernels = sparse_kernel_table<SimdSparse<Avx512Ops>>();
  return kernels;
}

}  // namespace cpullm

#pragma GCC pop_options
