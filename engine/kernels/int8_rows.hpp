// How the integer kernels see one weight row, whatever its format: block b's 32 weights (as
// int32 one by one for the scalar reference, as 32 signed bytes in an AVX2 register for the
// SIMD levels and the GEMM's packing) and the scale that goes with them. One kernel per ISA
// level then serves every integer format through IntegerRowKernels; a level may give a format
// a kernel of its own (Q4_0's matvecs read the nibbles as stored, dot.hpp says how).
#pragma once
#include <immintrin.h>

#include <cstring>

#include "engine/kernels/dot.hpp"
#include "engine/kernels/iq4_nl.hpp"

namespace cpullm {

inline __m256i load32_i8(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
// The sum of the 8 floats of v (the AVX2 kernels' last step per row and token).
inline float horizontal_sum(__m256 v) {
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
}
// The 4 bytes at p in every int32 lane (a broadcast from memory: a load-port operation, no shuffle).
inline __m256i broadcast4_i8(const int8_t* p) {
  int32_t four;
  __builtin_memcpy(&four, p, 4);
  return _mm256_set1_epi32(four);
}

// Decode reads each weight row from memory once, in order. x86 hardware prefetchers are not made
// to cross a 4 KiB page (the likely reason this helps; not measured directly here), so the row
// kernels ask for the line 4 KiB ahead of every 36 to 68 bytes they load
// (into L1): the stream then never waits at a page boundary. Past a row's end these are the rows
// the same thread reads next; a prefetch never faults, wherever it points. `bench_kernels
// matvec_decode` from a 1 GiB file, AVX-512 Q4_0 at the 7B width: 0.96-0.99 of the read roof
// against 0.82-0.88 without, 1 KiB ahead worse, 8 and 16 KiB no better; the engine 1.09-1.14x
// (docs/kernels-decode.md, "Prefetch").
inline constexpr int64_t kPrefetchAhead = 4096;
inline void prefetch_ahead(const void* p) { _mm_prefetch(static_cast<const char*>(p) + kPrefetchAhead, _MM_HINT_T0); }
// Every line of a block of any size asked for ahead: prefetches 64 bytes apart from its start
// reach each line, the last one's gap to the next block's start at most 64 (the K-quants'
// super-blocks, 84 to 210 bytes).
template <typename Block>
inline void prefetch_lines(const Block* block) {
  for (int64_t at = 0; at < static_cast<int64_t>(sizeof(Block)); at += 64)
    prefetch_ahead(reinterpret_cast<const std::byte*>(block) + at);
}
// An interleaved block is 144 bytes (Q4_0) or 272 (Q8_0): a prefetch every 72 or 68 bytes, 2 or
// 4 a block, reaches every line (the blocks are read in order).
template <typename Block>
inline void prefetch_ahead(const Interleaved8<Block>* block) {
  constexpr int64_t kStep = sizeof(*block) / (sizeof(*block) / 64);
  for (int64_t at = 0; at < static_cast<int64_t>(sizeof(*block)); at += kStep)
    prefetch_ahead(reinterpret_cast<const std::byte*>(block) + at);
}

// The end of an interleaved block's step, at every ISA level: acc[t] (one lane per row) +=
// the 8 rows' scales x token t's block scale x its int32 sums[t].
template <typename Block, int T>
inline void scale_interleaved_sums(const Interleaved8<Block>& block, const QuantizedActivations* const* a, int64_t b,
                                   const __m256i (&sums)[T], __m256 (&acc)[T]) {
  const __m256 weight_scales = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales)));
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
    acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(weight_scales, _mm256_set1_ps(a[t]->scales[b])), _mm256_cvtepi32_ps(sums[t]), acc[t]);
}

// Blocks b..b+7's FP16 scales, for blocks that start with theirs (Q8_0, IQ4_NL): 4-byte loads at
// the blocks' starts (word 0 is the scale), interleaved down to one register. (Loaded through
// memcpy, not _mm_loadu_si32, which GCC before 11.3 got wrong.)
template <typename Block>
inline __m256 leading_scales8(const Block* blocks, int64_t b) {
  const auto head = [&](int j) {
    int32_t four;
    __builtin_memcpy(&four, blocks + b + j, 4);
    return _mm_cvtsi32_si128(four);
  };
  const auto two = [&](int j) { return _mm_unpacklo_epi16(head(j), head(j + 1)); };
  return _mm256_cvtph_ps(_mm_unpacklo_epi64(_mm_unpacklo_epi32(two(0), two(2)), _mm_unpacklo_epi32(two(4), two(6))));
}

struct Q8_0Row {
  using Block = BlockQ8_0;
  // Weight j of a block from the bytes after its scale: byte j, signed.
  static int64_t byte_of(int64_t j) { return j; }
  static int32_t weight_from(uint8_t byte, int64_t) { return static_cast<int8_t>(byte); }
  const BlockQ8_0* blocks;
  static Q8_0Row from(const std::byte* row) { return {reinterpret_cast<const BlockQ8_0*>(row)}; }
  int32_t weight(int64_t b, int64_t j) const { return blocks[b].q[j]; }
  __m256i weights(int64_t b) const { return load32_i8(blocks[b].q); }
  float scale(int64_t b) const { return fp16_to_fp32(blocks[b].scale); }
  __m256 scales8(int64_t b) const { return leading_scales8(blocks, b); }
  const void* address(int64_t b) const { return blocks + b; }  // where block b's bytes start
};

// IQ4_NL: each 4-bit index (Q4_0's nibble order) selects one of 16 int8 levels; the weights are
// the levels, signed bytes as Q8_0's, so Q8_0's kernels run it.
struct Iq4NlRow {
  using Block = BlockIQ4_NL;
  static int64_t byte_of(int64_t j) { return j % (kQuantBlock / 2); }
  static int32_t weight_from(uint8_t byte, int64_t j) { return kIq4NlLevels[j < kQuantBlock / 2 ? byte & 0x0f : byte >> 4]; }
  const BlockIQ4_NL* blocks;
  static Iq4NlRow from(const std::byte* row) { return {reinterpret_cast<const BlockIQ4_NL*>(row)}; }
  int32_t weight(int64_t b, int64_t j) const { return weight_from(blocks[b].indices[byte_of(j)], j); }
  // The 32 weights in value order: the indices as Q4_0Row unpacks its nibbles, then one byte
  // shuffle looks each up in the 16 levels.
  __m256i weights(int64_t b) const {
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[b].indices)));
    const __m256i indices = _mm256_and_si256(_mm256_blend_epi32(both, _mm256_srli_epi16(both, 4), 0xf0), _mm256_set1_epi8(0x0f));
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlLevels))), indices);
  }
  float scale(int64_t b) const { return fp16_to_fp32(blocks[b].scale); }
  __m256 scales8(int64_t b) const { return leading_scales8(blocks, b); }
  const void* address(int64_t b) const { return blocks + b; }  // where block b's bytes start
};

struct Q4_0Row {
  using Block = BlockQ4_0;
  static constexpr int32_t kZeroPoint = 8;  // weight = stored nibble - 8
  // Weight j of a block from the bytes after its scale: byte j mod 16, low nibble for j < 16.
  static int64_t byte_of(int64_t j) { return j % (kQuantBlock / 2); }
  static int32_t weight_from(uint8_t byte, int64_t j) {
    return int32_t{j < kQuantBlock / 2 ? byte & 0x0f : byte >> 4} - kZeroPoint;
  }
  const BlockQ4_0* blocks;
  static Q4_0Row from(const std::byte* row) { return {reinterpret_cast<const BlockQ4_0*>(row)}; }
  int32_t weight(int64_t b, int64_t j) const { return weight_from(blocks[b].nibbles[byte_of(j)], j); }
  // The 32 weights in value order: the 16 bytes in both halves of a register (one load), the
  // upper half shifted down a nibble, masked, less the zero point.
  __m256i weights(int64_t b) const {
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[b].nibbles)));
    const __m256i shifted = _mm256_blend_epi32(both, _mm256_srli_epi16(both, 4), 0xf0);
    return _mm256_sub_epi8(_mm256_and_si256(shifted, _mm256_set1_epi8(0x0f)), _mm256_set1_epi8(kZeroPoint));
  }
  float scale(int64_t b) const { return fp16_to_fp32(blocks[b].scale); }
};

// One row of a CPULLM_Q4_0_R8 or CPULLM_Q8_0_R8 group (quant_formats.hpp), for the scalar
// reference: Plain is the row view of the format interleaved (Q4_0Row, Q8_0Row).
template <typename Plain>
struct InterleavedRow {
  const Interleaved8<typename Plain::Block>* group;  // (blocks) the group's interleaved blocks
  int row;                                           // 0..kInterleavedRows - 1
  int32_t weight(int64_t b, int64_t j) const {
    const int64_t byte = Plain::byte_of(j);
    return Plain::weight_from(group[b].chunks[byte / 4][row][byte % 4], j);
  }
  float scale(int64_t b) const { return fp16_to_fp32(group[b].scales[row]); }
};

struct Int8ChannelRow {
  float row_scale;       // one scale for the whole row
  const int8_t* values;  // (cols)
  static Int8ChannelRow from(const std::byte* row) { return {int8_channel_scale(row), int8_channel_values(row)}; }
  int32_t weight(int64_t b, int64_t j) const { return values[b * kQuantBlock + j]; }
  __m256i weights(int64_t b) const { return load32_i8(values + b * kQuantBlock); }
  float scale(int64_t) const { return row_scale; }
  __m256 scales8(int64_t) const { return _mm256_set1_ps(row_scale); }
  const void* address(int64_t b) const { return values + b * kQuantBlock; }  // where block b's bytes start
};

// The table entries for the integer formats, given an ISA's block kernel
// `BlockDot::Tokens<T>::run(const Row&, const QuantizedActivations* const* a, int64_t cols, float* out)`
// for T tokens.
template <typename BlockDot>
struct IntegerRowKernels {
  template <typename Row>
  struct Entry {
    template <int T>
    struct Kernel {
      static void run(const std::byte* row, const void* const* a, int64_t cols, float* out) {
        BlockDot::template Tokens<T>::run(Row::from(row), reinterpret_cast<const QuantizedActivations* const*>(a), cols, out);
      }
    };
  };
  static constexpr RowDot q8_0 = by_token_count<Entry<Q8_0Row>::template Kernel>;
  static constexpr RowDot q4_0 = by_token_count<Entry<Q4_0Row>::template Kernel>;
  static constexpr RowDot int8_channel = by_token_count<Entry<Int8ChannelRow>::template Kernel>;
  static constexpr RowDot iq4_nl = by_token_count<Entry<Iq4NlRow>::template Kernel>;
};

// Four blocks' first two FP16 words (Q4_1, Q5_1: d and m; Q5_0: d and half of its mask) as
// FP32: {d0..d3} and {m0..m3}. One conversion for four blocks, so the SIMD kernels of the
// formats with a minimum keep no scalar work per block.
struct ScalesAndMinimums {
  __m128 d, m;
};
template <typename Block>
inline ScalesAndMinimums scales_and_minimums(const Block* four) {
  auto head = [&](int j) {
    int32_t bits;
    std::memcpy(&bits, &four[j], sizeof bits);
    return bits;
  };
  const __m256 dm = _mm256_cvtph_ps(_mm_setr_epi32(head(0), head(1), head(2), head(3)));  // d0 m0 d1 m1 ...
  const __m256 split = _mm256_permutevar8x32_ps(dm, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
  return {_mm256_castps256_ps128(split), _mm256_extractf128_ps(split, 1)};
}

// m * s * sum(a) of four blocks from b on, for one token: the minimums' share of the dot product
// (Q4_1, Q5_1), added lane by lane (sum(a) = block_offsets / -8, exact in FP32).
inline __m128 minimum_terms(const ScalesAndMinimums& sm, const QuantizedActivations& a, int64_t b) {
  const __m128 s = _mm_loadu_ps(a.scales + b);
  const __m128 sums = _mm_mul_ps(_mm_cvtepi32_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.block_offsets + b))),
                                 _mm_set1_ps(-0.125f));
  return _mm_mul_ps(_mm_mul_ps(sm.m, s), sums);
}

}  // namespace cpullm
