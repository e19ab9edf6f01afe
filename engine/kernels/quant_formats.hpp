// ggml's block-quantized formats, in llama.cpp's exact byte layouts, so files quantized by
// llama.cpp run here and files quantized here run in llama.cpp.
//   Q8_0: 32 values per 34-byte block: FP16 scale d, then 32 int8 q;  x = d * q.
//   Q4_0: 32 values per 18-byte block: FP16 scale d, then 16 bytes whose low nibbles are
//         values 0..15 and high nibbles values 16..31;  x = d * (nibble - 8).
// The quantizers are llama.cpp's reference ones (quantize_row_q8_0_ref, quantize_row_q4_0_ref),
// rounding included, so the same FP32 input gives the same bytes.
#pragma once
#include <cstddef>
#include <cstdint>

namespace cpullm {

inline constexpr int64_t kQuantBlock = 32;  // values per Q8_0 / Q4_0 block

struct BlockQ8_0 {
  uint16_t scale;  // FP16
  int8_t q[kQuantBlock];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t scale;  // FP16
  uint8_t nibbles[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// CPULLM_Q4_0_R8 and CPULLM_Q8_0_R8: Q4_0 or Q8_0 with every 8 consecutive rows interleaved
// block by block. A group of 8 rows stores, for each block column b, one Interleaved8 block: the
// 8 rows' FP16 scales, then the bytes after each row's scale (Q4_0's 16 nibble bytes, Q8_0's 32
// values) in chunks of 32 bytes, chunk c holding bytes 4c..4c+3 of every row (row r at bytes
// 4r..4r+3): one int32 lane per row. Q8_0's chunk c is values 4c..4c+3 of each row; Q4_0's,
// unpacked, gives values 4c..4c+3 (low nibbles) and 16+4c..16+4c+3 (high). Either is the GEMM's
// integer panel layout (gemm.hpp). The bytes are the plain format's, rearranged: same size, same
// values.
inline constexpr int64_t kInterleavedRows = 8;
template <typename Block>
struct Interleaved8 {
  static constexpr int kChunks = (sizeof(Block) - 2) / 4;  // Q4_0: 4, Q8_0: 8
  uint16_t scales[kInterleavedRows];            // FP16, row r's at r
  uint8_t chunks[kChunks][kInterleavedRows][4];  // [c][r]: bytes 4c..4c+3 after row r's scale
};
using BlockQ4_0x8 = Interleaved8<BlockQ4_0>;
using BlockQ8_0x8 = Interleaved8<BlockQ8_0>;
static_assert(sizeof(BlockQ4_0x8) == kInterleavedRows * sizeof(BlockQ4_0));
static_assert(sizeof(BlockQ8_0x8) == kInterleavedRows * sizeof(BlockQ8_0));

// rows: 8 rows of `blocks` blocks each, row r at rows + r * blocks. out: (blocks).
template <typename Block>
void interleave_rows(const Block* rows, int64_t blocks, Interleaved8<Block>* out);
// out (blocks) = row `row` (0..7) of a group of (blocks) interleaved blocks, in the plain format.
template <typename Block>
void deinterleave_row(const Interleaved8<Block>* group, int64_t blocks, int row, Block* out);

// CPULLM_INT8_CHANNEL: one row = FP32 scale d = amax/127, then n int8 q = round(x / d).
void quantize_row_int8_channel(const float* x, std::byte* out, int64_t n);
void dequantize_row_int8_channel(const std::byte* row, float* out, int64_t n);

// n must be a multiple of kQuantBlock.
void quantize_row_q8_0(const float* x, BlockQ8_0* out, int64_t n);
void quantize_row_q4_0(const float* x, BlockQ4_0* out, int64_t n);
void dequantize_row_q8_0(const BlockQ8_0* blocks, float* out, int64_t n);
void dequantize_row_q4_0(const BlockQ4_0* blocks, float* out, int64_t n);

}  // namespace cpullm
