// AVX-512 (F, BW, VL) + VNNI dot products, for the hosts that have them (Ice Lake, Zen 4/5).
// The program's baseline is AVX2: only the functions below this file's target pragma use
// AVX-512, and they run only after cpu_supports(Isa::Avx512). Nothing from the standard
// library is instantiated under the pragma, so no AVX-512 copy of a shared inline function can
// leak into baseline code. The row views (int8_rows.hpp) are included before the pragma: they
// are baseline functions, inlined here.
#include <immintrin.h>

#include "engine/kernels/dot.hpp"
#include "engine/kernels/int8_rows.hpp"

// GCC 12's headers leave the upper half of a 256-to-512-bit cast undefined on purpose and
// then warn about it (GCC bug 105593); the upper halves here are always written or unused.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")

namespace cpullm {
namespace {

inline __m512 load16_f32(const std::byte* p) { return _mm512_loadu_ps(reinterpret_cast<const float*>(p)); }
inline __m512 load16_f16(const std::byte* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load16_bf16(const std::byte* p) {
  const __m512i widened = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(widened, 16));
}

// Four 16-wide FMA accumulators; the last cols % 16 elements go through the scalar loads.
template <int kElement, __m512 (*Load16)(const std::byte*), float (*Load)(const std::byte*)>
float dot_float_row(const std::byte* row, const void* activations, int64_t cols) {
  const auto* x = static_cast<const float*>(activations);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= cols; i += 64) {
    acc0 = _mm512_fmadd_ps(Load16(row + i * kElement), _mm512_loadu_ps(x + i), acc0);
    acc1 = _mm512_fmadd_ps(Load16(row + (i + 16) * kElement), _mm512_loadu_ps(x + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(Load16(row + (i + 32) * kElement), _mm512_loadu_ps(x + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(Load16(row + (i + 48) * kElement), _mm512_loadu_ps(x + i + 48), acc3);
  }
  for (; i + 16 <= cols; i += 16) acc0 = _mm512_fmadd_ps(Load16(row + i * kElement), _mm512_loadu_ps(x + i), acc0);
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
  for (; i < cols; ++i) sum += Load(row + i * kElement) * x[i];
  return sum;
}

// Sixteen int32 sums over two blocks (eight lanes each): VNNI's dpbusd multiplies unsigned
// by signed bytes, so |w| meets a with w's sign moved onto it.
inline __m512i block_pair_products(__m512i w, __m512i a) {
  const __mmask64 negative = _mm512_movepi8_mask(w);
  const __m512i signed_a = _mm512_mask_sub_epi8(a, negative, _mm512_setzero_si512(), a);
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), signed_a);
}

// Blocks b and b + 1 in one register (lanes 0-7 and 8-15); past the last block the upper
// half is zero, so its products are zero whatever its scale.
inline __m512i block_pair(__m256i low, __m256i high, bool has_high) {
  return has_high ? _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1) : _mm512_zextsi256_si512(low);
}
inline __m512 scale_pair(float low, float high) {
  return _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castps_si512(_mm512_set1_ps(low)),
                                                _mm256_castps_si256(_mm256_set1_ps(high)), 1));
}

// Two blocks per 512-bit step: lanes 0-7 hold block b's partial sums, lanes 8-15 block b + 1.
// Weights stored unsigned with a zero point of 8 (Q4_0's nibbles) go into dpbusd's unsigned
// side as they are, and lane j loses 8 * (the sum of the 4 activations it multiplied), which
// leaves it the same exact sum as the signed path's.
struct Avx512BlockDot {
  template <typename Row>
  static float run(const Row& w, const QuantizedActivations& a, int64_t cols) {
    static_assert(Row::kZeroPoint == 0 || Row::kZeroPoint == 8, "one lane offset per 8 lanes");
    const int64_t blocks = cols / kQuantBlock;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; b += 2) {
      const bool pair = b + 1 < blocks;
      const int64_t b1 = pair ? b + 1 : b;  // the upper half's block (ignored when zeroed)
      const __m512i acts = block_pair(load32_i8(a.blocks[b].q), load32_i8(a.blocks[b1].q), pair);
      __m512i sums;
      if constexpr (Row::kZeroPoint == 0) {
        sums = block_pair_products(block_pair(w.weights(b), w.weights(b1), pair), acts);
      } else {
        // Past an odd last block the offsets are zero-padded, as the upper half's products are zero.
        const __m512i offsets = _mm512_loadu_si512(a.zero_point_offsets + b * kQuantBlock / 4);
        const __m512i products = _mm512_dpbusd_epi32(_mm512_setzero_si512(), block_pair(w.stored(b), w.stored(b1), pair), acts);
        sums = _mm512_sub_epi32(products, offsets);
      }
      const __m512 scales = scale_pair(w.scale(b) * a.scales[b], w.scale(b1) * a.scales[b1]);
      acc = _mm512_fmadd_ps(scales, _mm512_cvtepi32_ps(sums), acc);
    }
    return _mm512_reduce_add_ps(acc);
  }
};
using Avx512IntegerKernels = IntegerRowKernels<Avx512BlockDot>;

}  // namespace

const DotKernels& avx512_dot_kernels() {
  static const DotKernels kernels{dot_float_row<4, load16_f32, load_f32>, dot_float_row<2, load16_f16, load_f16>,
                                  dot_float_row<2, load16_bf16, load_bf16>, Avx512IntegerKernels::q8_0,
                                  Avx512IntegerKernels::q4_0, Avx512IntegerKernels::int8_channel};
  return kernels;
}

}  // namespace cpullm

#pragma GCC pop_options
