// Q4_1's AVX-512 row kernel: four_blocks_avx512.hpp's, with values q = 0..15 from the nibbles
// in value order (each block's low nibbles, then its high ones; q4_1.hpp) and Q4_1's minimum. As
// dot_avx512.cpp: only the code below the target pragma uses AVX-512, and it runs only after
// cpu_supports(Isa::Avx512).
#include <immintrin.h>

#include "engine/kernels/q4_1.hpp"

// GCC 12's headers leave the upper half of a 256-to-512-bit cast undefined on purpose and
// then warn about it (GCC bug 105593); the upper halves here are always written.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")

#include "engine/kernels/four_blocks_avx512.hpp"

namespace cpullm {
namespace {

struct Nibbles {
  using Block = BlockQ4_1;
  static constexpr BlockOffset kOffset = BlockOffset::minimum;
  static __m512i pair(const Block* two) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(nibbles_in_order(two[0])), nibbles_in_order(two[1]), 1);
  }
  static __m256i one(const Block& block) { return nibbles_in_order(block); }
};

}  // namespace

namespace avx512_dot {
const RowDot q4_1 = by_token_count<FourBlockKernel<Nibbles>::Kernel>;
}

}  // namespace cpullm

#pragma GCC pop_options
