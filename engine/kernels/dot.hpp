// Row dot products: one row of a weight matrix, as stored, against the activations. One kernel
// per format and ISA level; matvec takes the weight type's from the format registry.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/format/ggml_types.hpp"
#include "engine/kernels/quant_formats.hpp"
#include "engine/util/half.hpp"

namespace cpullm {

// An activation vector quantized to Q8_0 once per matvec, in the layouts the integer kernels
// read, with what they would otherwise redo for every row precomputed. Every array is padded
// with zeros (biased values with 128) to a multiple of 16 blocks, so a kernel may read up to 16
// blocks past the last one: zero scales make them add nothing.
//
// Natural order is x's. Nibble order is Q4_0's: a Q4_0 block's byte j holds weights j (low
// nibble) and j + 16 (high nibble), so the values come in groups of 4 consecutive blocks, the 4
// blocks' first halves, then their second halves; one AND and one shift then unpack the nibbles
// of the blocks in a register into the bytes that meet them. The AVX-512 kernel's register g of
// a 16-block step holds group g; the AVX2 kernel's steps are 8 blocks, blocks 4j + 2s and
// 4j + 2s + 1 of every group j for its half s of the 16, so its registers read 32 consecutive
// bytes of a group's first halves and 32 of its second halves. In both the in-lane reduction of
// a step's registers leaves block 4j + k's sum in place 4k + j of the 16: *reduction order*,
// 0 4 8 12 1 5 9 13 2 6 10 14 3 7 11 15. The Q4_0 kernels' scales and offsets are stored in that
// order, so no permute puts the sums back in block order (docs/formats.md, "Q4_0").
//
// vpdpbusd and maddubs multiply unsigned by signed bytes. Q4_0's nibbles are weight + 8 and go
// in as stored, unsigned: a block's lanes then hold w.a + 8 * sum(a) between them, and starting
// one of its lanes at the block's offset, -8 * the sum of its 32 values, leaves exactly w.a (a
// block's lanes share one scale, so which lane carries it does not matter).
// Q8_0's and INT8_CHANNEL's signed weights meet the activations as a + 128 (values_biased): a
// lane then holds w.a + 128 * sum(w), which the kernel takes off from the weights once for
// all the tokens. So a natural-order row reads 36 bytes of each token's activations per block
// (values and one scale) and a nibble-order one 40 (values, scale and offset): at LLaMA-7B's ffn_down (11008 columns) 12 KiB, which stays in L1 beside
// the streaming rows, where lane-repeated scales and offsets (96 bytes a block, 33 KiB) did not
// (the AVX-512 matvec then read 15 GB/s against 26 at 4096 columns; docs/kernels.md).
struct QuantizedActivations {
  const int8_t* values;               // (cols) natural order
  const uint8_t* values_biased;       // (cols) natural order, each value + 128
  const int8_t* nibble_order;         // (cols) nibble order
  const float* scales;                // (cols / 32) each block's scale
  const float* nibble_scales;         // (cols / 32) each block's scale, reduction order
  const int32_t* offsets;             // (cols / 32) -8 * the sum of each block's values (Q4_0's zero point), reduction order
  const int32_t* block_offsets;       // (cols / 32) the same in natural order (CPULLM_Q4_0_R8's kernels)
};

// The sum of activation block b's 32 quantized values, from its offset: the affine formats'
// minimums (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K) and Q5_0's -16 meet it.
inline int32_t activation_sum(const QuantizedActivations& a, int64_t b) { return a.block_offsets[b] / -8; }

// Where nibble order puts block b: the byte its first half starts at (the second half follows
// 64 bytes later), and its scale's and offset's index in reduction order.
inline int64_t nibble_order_first_half(int64_t b) { return b / 4 * 4 * kQuantBlock + b % 4 * kQuantBlock / 2; }
inline int64_t reduction_order_index(int64_t b) { return b / 16 * 16 + b % 4 * 4 + b % 16 / 4; }

// The most tokens one row-kernel call takes: each token's accumulators stay in registers.
inline constexpr int kRowDotTokens = 4;

// The dot products of one row of weights with `tokens` (1..kRowDotTokens) activation vectors.
// row: (cols) weights in the table entry's format; for a type stored in groups of rows
// (the _R8 types: kInterleavedRows) one whole group, whose rows' products come out side by
// side. activations: (tokens) pointers, each to (cols) floats for the float formats or to a
// QuantizedActivations for the block-quantized ones. out: (tokens, rows in the group; 1 for
// the other types). The row is loaded, and widened or unpacked, once for all the tokens;
// each token's sums run in the same order whatever the tokens beside it, so its result is the
// same bit for bit.
using RowDot = void (*)(const std::byte* row, const void* const* activations, int tokens, int64_t cols, float* out);

// A RowDot from a kernel templated on its token count, Kernel<T>::run(row, activations, cols, out).
// In an unnamed namespace, so every file has its own: GCC gives an instantiation on a template
// from a file's unnamed namespace external (weak) linkage when it is a template template
// argument (GCC bug 70413), and the linker then kept one of two same-named kernels, such as
// q4_1_avx2.cpp's and q4_1_avx512.cpp's Q4_1Kernel, for both levels.
namespace {
template <template <int> typename Kernel>
void by_token_count(const std::byte* row, const void* const* activations, int tokens, int64_t cols, float* out) {
  switch (tokens) {
    case 1: return Kernel<1>::run(row, activations, cols, out);
    case 2: return Kernel<2>::run(row, activations, cols, out);
    case 3: return Kernel<3>::run(row, activations, cols, out);
    default: return Kernel<4>::run(row, activations, cols, out);
  }
}
}  // namespace

// An INT8_CHANNEL row: one FP32 scale for the whole row, then its int8 values.
inline float int8_channel_scale(const std::byte* row) { float v; __builtin_memcpy(&v, row, 4); return v; }
inline const int8_t* int8_channel_values(const std::byte* row) { return reinterpret_cast<const int8_t*>(row + 4); }

// One stored element as FP32, from any byte address (memcpy: rows need not be aligned).
inline float load_f32(const std::byte* p) { float v; __builtin_memcpy(&v, p, 4); return v; }
inline float load_f16(const std::byte* p) { uint16_t v; __builtin_memcpy(&v, p, 2); return fp16_to_fp32(v); }
inline float load_bf16(const std::byte* p) { uint16_t v; __builtin_memcpy(&v, p, 2); return bf16_to_fp32(v); }
// The same for a float type V known at compile time (the sparse values, the KV cache), and the
// bytes of one such value.
template <GgmlType V>
inline constexpr int64_t kValueBytes = V == GgmlType::F32 ? 4 : 2;
template <GgmlType V>
inline float load_value(const std::byte* p) {
  if constexpr (V == GgmlType::F32) return load_f32(p);
  if constexpr (V == GgmlType::F16) return load_f16(p);
  if constexpr (V == GgmlType::BF16) return load_bf16(p);
}

// Each ISA level's row kernels, one per format, defined in dot_scalar.cpp, dot_avx2.cpp and
// dot_avx512.cpp (a format with files of its own defines its kernels there). The format registry
// (weight_formats.cpp) is the one place that says which format runs which; the AVX-512 ones run
// only where cpu_supports(Isa::Avx512).
namespace scalar_dot {
extern const RowDot f32, f16, bf16, q8_0, q4_0, int8_channel, iq4_nl, q4_0_r8, q8_0_r8;
}
namespace avx2_dot {
extern const RowDot f32, f16, bf16, q8_0, q4_0, int8_channel, iq4_nl, q4_0_r8, q8_0_r8;
}
namespace avx512_dot {
extern const RowDot f32, f16, bf16, q8_0, q4_0, int8_channel, iq4_nl, q4_0_r8, q8_0_r8;
}

}  // namespace cpullm
