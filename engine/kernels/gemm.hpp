// The GEMM's inner part: the packed weight panels and the micro-kernel each ISA level runs
// over them. matmul.cpp does the cache blocking, the threads and the packing calls.
//
// A panel holds R consecutive weight rows (R: the micro-kernel's register tile height) over a
// range of columns, laid out so that one vector load gives one column's values for all R rows.
// The micro-kernel computes an R x N tile of outputs (N tokens) as a sum of rank-1 updates:
// per column, R weights (a few vectors) times each token's activation (a broadcast). Every
// accumulator is a whole vector of outputs: no horizontal sums, no strided loads.
//
// Packing turns every weight format into one of two panel types, so each ISA level has two
// micro-kernels in all, whatever the formats:
//   float panels (F32, F16, BF16 weights): (depth, R) FP32; column k's R rows at panel[k * R].
//   integer panels (Q8_0, Q4_0, IQ4_NL, INT8_CHANNEL, the _R8 layouts): per block of 32 columns, 8 groups of 4 columns,
//     each R rows x 4 bytes (row r's 4 weights at bytes (g * R + r) * 4 of the block), then the
//     R rows' FP32 scales. One int32 lane per row takes 4 products at once (vpdpbusd, or
//     maddubs + madd). The bytes encode the weights as the micro-kernel multiplies them
//     (PanelWeights).
//   sub-block panels (Q4_1, Q5_0, Q5_1 and the K-quants, whose values are scale * q + offset per
//     sub-block of 32 or 16): the same 8 groups of R rows x 4 bytes, holding q unsigned (0..63) as
//     stored, then R FP32 scales of each 16-value half of the block, then R FP32 offsets of each
//     half. A block's output is as * (scale * sum(q * a) + offset * sum(a)) per half, with the
//     activations' half sums computed once per token (ActivationBlock::half_sums). Formats with
//     32-value sub-blocks repeat the scale and offset in both halves, so that their tile sums the
//     block's products at once.
// Panels are packed per tile at run time and never stored: the weights stay as they are in the
// mapping, shared by every process that maps the file (docs/kernels.md measures the cost).
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/kernels/isa.hpp"
#include "engine/kernels/matvec.hpp"
#include "engine/kernels/quant_formats.hpp"

namespace cpullm {

// One token's 32 activations, quantized to Q8_0 for the integer kernels, with what those
// would otherwise recompute for every tile: the scale in FP32, and what weights stored as
// w + 128 (PanelWeights::Plus128) add to the block's products, to start its sum from
// (weights stored as w + 8 add a sixteenth of it).
struct ActivationBlock {
  float scale;             // the Q8_0 block's FP16 scale, in FP32
  int32_t offset_sum;      // -128 * (q[0] + ... + q[31])
  float half_sums[2];      // scale * (q[0] + ... + q[15]), scale * (q[16] + ... + q[31]): what the
                           // sub-block panels' offsets multiply
  int8_t q[kQuantBlock];   // the quantized values
};

// What a float micro-kernel computes: y[t][r] (+)= sum over the depth's columns k of
// panel[k][r] * x[t][k], for r < rows, t < tokens.
struct FloatTile {
  const float* panel;   // (depth, R) packed weights
  const float* x;       // (tokens, x_stride) activations, at the depth range's first column
  int64_t x_stride;     // floats between two tokens' activations
  float* y;             // (tokens, y_stride) outputs, at the tile's first row
  int64_t y_stride;     // floats between two tokens' outputs
  int64_t depth;        // columns in this pass
  int64_t rows, tokens; // the outputs to write: rows <= R (a panel's last rows are padding), tokens <= N
  bool accumulate;      // add to y (later depth ranges) or overwrite it (the first)
};

// The same for integer panels: exact int32 sums per block, scaled by the weight's and the
// activation's scales, summed in FP32 across blocks.
struct IntegerTile {
  const std::byte* panel;     // (blocks) packed blocks
  const ActivationBlock* a;   // (tokens, a_stride) activations, at the depth range's first block
  int64_t a_stride;           // blocks between two tokens' activations
  float* y;                   // (tokens, y_stride) outputs, at the tile's first row
  int64_t y_stride;           // floats between two tokens' outputs
  int64_t blocks;             // blocks of 32 columns in this pass
  int64_t rows, tokens;       // as FloatTile
  bool accumulate;            // as FloatTile
};

// How an integer panel stores each weight w, as the micro-kernel that reads it multiplies.
enum class PanelWeights : uint8_t {
  Signed,   // w, signed (maddubs with the sign trick; the scalar tile)
  Plus128,  // w + 128, unsigned (vpdpbusd multiplies unsigned weights by signed activations)
  Plus8,    // w + 8, 0..15: Q4_0's nibbles as stored (Q4_0 formats only). Small enough for
            // maddubs to multiply unsigned and for int16 sums of a whole block
  Unsigned, // q, 0..63, as the sub-block formats store it (sub-block panels only)
};

// A micro-kernel over integer panels, its register tile and the encoding it reads.
struct IntegerTileKernel {
  void (*run)(const IntegerTile& tile);
  int rows, tokens;       // R x N
  PanelWeights weights;   // how its panels are packed
};

// One ISA level's micro-kernels and their register tiles.
struct GemmKernels {
  void (*float_tile)(const FloatTile& tile);
  int float_rows, float_tokens;  // R x N of the float tile
  IntegerTileKernel integer;     // Q8_0 and INT8 per channel (their weights fill a signed byte)
  IntegerTileKernel q4_0;        // Q4_0 and CPULLM_Q4_0_R8: `integer` where the level gains nothing
                                 // from the smaller range
  IntegerTileKernel sub_blocks;  // sub-block panels, each half of a block scaled on its own
  IntegerTileKernel whole_blocks;// sub-block panels whose halves share scale and offset (32-value
                                 // sub-blocks): one sum per block
};
// The integer micro-kernel that `type` goes through (the registry's GemmEntry picks it).
const IntegerTileKernel& integer_tile_kernel(const GemmKernels& kernels, GgmlType type);

const GemmKernels& scalar_gemm_kernels();
const GemmKernels& avx2_gemm_kernels();
const GemmKernels& avx512_gemm_kernels();  // only call where cpu_supports(Isa::Avx512)
// The table of `isa`; an Error where this CPU cannot run it.
const GemmKernels& gemm_kernels(Isa isa);

// Bytes of one block of an integer panel of R rows: 32 weights and one FP32 scale per row.
constexpr int64_t integer_panel_block_bytes(int rows) { return rows * (kQuantBlock + 4); }
// Bytes of one block of a sub-block panel of R rows: 32 weights, two scales and two offsets per row.
constexpr int64_t sub_block_panel_block_bytes(int rows) { return rows * (kQuantBlock + 16); }
// The bytes per block of the panels `kernel` reads.
constexpr int64_t panel_block_bytes(const IntegerTileKernel& kernel) {
  return kernel.weights == PanelWeights::Unsigned ? sub_block_panel_block_bytes(kernel.rows)
                                                  : integer_panel_block_bytes(kernel.rows);
}

// panel (depth, R) = rows [r0, r0 + R) of a float-format matrix over columns [k0, k0 + depth);
// rows past w.rows are zeros.
void pack_float_panel(const WeightMatrix& w, int64_t r0, int64_t k0, int64_t depth, int R, float* panel);
// panel (blocks) = rows [r0, r0 + R) of an integer-format matrix over blocks [b0, b0 + blocks),
// each weight encoded as `encoding` says; rows past w.rows are zero weights with a zero scale.
// Through the format registry's packer for w.type; an Error for a type without integer panels.
void pack_integer_panel(const WeightMatrix& w, int64_t r0, int64_t b0, int64_t blocks, int R, PanelWeights encoding,
                        std::byte* panel);
// The packers the registry names: rows read through a row view (int8_rows.hpp: Q8_0Row,
// Q4_0Row, Int8ChannelRow) and transposed 8 rows at a time, or the _R8 types' interleaved blocks
// (Block: BlockQ8_0, BlockQ4_0), which are laid out as the panel already.
template <typename Row>
void pack_integer_rows(const WeightMatrix& w, int64_t r0, int64_t b0, int64_t blocks, int R, PanelWeights encoding,
                       std::byte* panel);
template <typename Block>
void pack_interleaved_rows(const WeightMatrix& w, int64_t r0, int64_t b0, int64_t blocks, int R, PanelWeights encoding,
                           std::byte* panel);
// out (cols / 32) = x (cols) quantized as Q8_0 (quantize_row_q8_0's rounding), with offset and half sums.
void quantize_activations(const float* x, ActivationBlock* out, int64_t cols);

// The end of every micro-kernel: tile (N, R) holds its outputs, of which the first `rows` of
// each of the first `tokens` tokens are written to (or added to) y. A full tile (all R rows: every
// panel's but a matrix's last) moves R floats per token, a size the compiler knows: a few vector
// moves, where a count known only at run time made GCC call memmove for every token (5% of a
// 7B-width prefill at AVX-512, docs/kernels.md).
template <int R>
inline void write_tile(const float* tile, float* y, int64_t y_stride, int64_t rows, int64_t tokens, bool accumulate) {
  const auto write_row = [accumulate](float* out, const float* in, int64_t count) {
    if (accumulate)
      for (int64_t r = 0; r < count; ++r) out[r] += in[r];
    else
      for (int64_t r = 0; r < count; ++r) out[r] = in[r];
  };
  for (int64_t t = 0; t < tokens; ++t) {
    if (rows == R) write_row(y + t * y_stride, tile + t * R, R);
    else write_row(y + t * y_stride, tile + t * R, rows);
  }
}

// Calls f.template operator()<N>() with N = tokens, for 1 <= tokens <= kMax: the micro-kernel is
// compiled for every token count, so the last tile of a panel of tokens runs the one that fits.
template <int kMax, typename F>
void with_token_count(int64_t tokens, F&& f) {
  if constexpr (kMax > 1)
    if (tokens < kMax) return with_token_count<kMax - 1>(tokens, f);
  f.template operator()<kMax>();
}

}  // namespace cpullm
