// Q5_0's and Q5_1's AVX-512 row kernels: four_blocks_avx512.hpp's, with values q = 0..31 from
// the nibbles (in value order, as Q4_1's) plus 16 where a fifth bit is set: the two blocks' 32-bit
// masks are the byte mask of one masked add (AVX-512BW), value j of the pair taking bit j. As
// dot_avx512.cpp: only the code below the target pragma uses AVX-512, and it runs only after
// cpu_supports(Isa::Avx512).
#include <immintrin.h>

#include "engine/kernels/q5.hpp"

// GCC 12's headers leave the upper half of a 256-to-512-bit cast undefined on purpose and
// then warn about it (GCC bug 105593); the upper halves here are always written.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")

#include "engine/kernels/four_blocks_avx512.hpp"

namespace cpullm {
namespace {

// A block's 32 low nibbles in value order: values 0-15 from the low nibbles, 16-31 from the high.
template <typename B>
inline __m256i low_nibbles(const B& block) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.nibbles));
  const __m128i low4 = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), low4), _mm_and_si128(packed, low4));
}

template <typename B, BlockOffset offset>
struct FiveBits {
  using Block = B;
  static constexpr BlockOffset kOffset = offset;
  static __m512i pair(const Block* two) {
    const __m512i low = _mm512_inserti64x4(_mm512_castsi256_si512(low_nibbles(two[0])), low_nibbles(two[1]), 1);
    const __mmask64 fifth = static_cast<uint64_t>(high_bits(two[0].high_bits)) |
                            static_cast<uint64_t>(high_bits(two[1].high_bits)) << 32;
    return _mm512_mask_add_epi8(low, fifth, low, _mm512_set1_epi8(16));
  }
  static __m256i one(const Block& block) {
    const __m256i low = low_nibbles(block);
    return _mm256_mask_add_epi8(low, high_bits(block.high_bits), low, _mm256_set1_epi8(16));
  }
};

}  // namespace

namespace avx512_dot {
const RowDot q5_0 = by_token_count<FourBlockKernel<FiveBits<BlockQ5_0, BlockOffset::zero_point_16>>::Kernel>;
const RowDot q5_1 = by_token_count<FourBlockKernel<FiveBits<BlockQ5_1, BlockOffset::minimum>>::Kernel>;
}

}  // namespace cpullm

#pragma GCC pop_options
