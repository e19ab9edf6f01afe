// Packing of the sub-block formats (Q4_1, Q5_0, Q5_1, the K-quants) into the GEMM's sub-block
// panels (layout in gemm.hpp): each 32-value block of a row as its values q, unsigned as the
// format stores them (at most 6 bits), and each 16-value half's scale and offset, so that
// weight = scale * q + offset. One unpacker per format reads block b of a row; the packer
// transposes the unpacked rows into the panel. Packing runs once per panel and pass, under
// every tile of tokens that reads the panel (matmul.cpp), so plain code serves.
#include <cstring>
#include <type_traits>

#include "engine/kernels/gemm.hpp"
#include "engine/kernels/k_quants.hpp"
#include "engine/kernels/q4_1.hpp"
#include "engine/kernels/q5.hpp"
#include "engine/kernels/sub_block_panels.hpp"
#include "engine/kernels/weight_formats.hpp"
#include "engine/util/half.hpp"

namespace cpullm {
namespace {

constexpr int kHalf = kQuantBlock / 2;

// One unpacker per format: block b (32 values) of a row into q[32], scales[2] and offsets[2].
struct UnpackQ4_1 {
  static void block(const std::byte* row, int64_t b, uint8_t q[kQuantBlock], float scales[2], float offsets[2]) {
    const BlockQ4_1& block = reinterpret_cast<const BlockQ4_1*>(row)[b];
    for (int j = 0; j < kHalf; ++j) {
      q[j] = block.nibbles[j] & 0x0f;
      q[j + kHalf] = block.nibbles[j] >> 4;
    }
    scales[0] = scales[1] = fp16_to_fp32(block.scale);
    offsets[0] = offsets[1] = fp16_to_fp32(block.minimum);
  }
};

// Q5_0 (x = d * (q - 16)) and Q5_1 (x = d * q + m).
template <typename Block>
struct UnpackQ5 {
  static void block(const std::byte* row, int64_t b, uint8_t q[kQuantBlock], float scales[2], float offsets[2]) {
    const Block& block = reinterpret_cast<const Block*>(row)[b];
    int levels[kQuantBlock];
    levels_in_order(block, levels);
    for (int j = 0; j < kQuantBlock; ++j) q[j] = static_cast<uint8_t>(levels[j]);
    scales[0] = scales[1] = fp16_to_fp32(block.scale);
    if constexpr (std::is_same_v<Block, BlockQ5_0>) offsets[0] = offsets[1] = -16.0f * scales[0];
    else offsets[0] = offsets[1] = fp16_to_fp32(block.minimum);
  }
};

// Q4_K and Q5_K: block b is sub-block b % 8 of super-block b / 8; sub-blocks 2p and 2p + 1 are the
// low and high nibbles of bytes 32p..32p + 31 (and, for Q5_K, bits 2p and 2p + 1 of qh).
template <typename Block>
struct UnpackQ45_K {
  static void block(const std::byte* row, int64_t b, uint8_t q[kQuantBlock], float scales[2], float offsets[2]) {
    const Block& block = reinterpret_cast<const Block*>(row)[b / 8];
    const int sub = static_cast<int>(b % 8), shift = 4 * (sub % 2);
    const uint8_t* bytes = block.qs + 32 * (sub / 2);
    for (int j = 0; j < kQuantBlock; ++j) q[j] = (bytes[j] >> shift) & 0x0f;
    if constexpr (std::is_same_v<Block, BlockQ5_K>)
      for (int j = 0; j < kQuantBlock; ++j) q[j] |= static_cast<uint8_t>(((block.qh[j] >> sub) & 1) << 4);
    uint8_t scale, minimum;
    scale_min_k4(sub, block.scales, &scale, &minimum);
    scales[0] = scales[1] = fp16_to_fp32(block.d) * static_cast<float>(scale);
    offsets[0] = offsets[1] = -fp16_to_fp32(block.dmin) * static_cast<float>(minimum);
  }
};

// Q2_K and Q3_K keep values 128h + 32s + l (h: half of the super-block, s: 2-bit shift, l < 32)
// in bits 2s of byte 32h + l of qs; 16-value sub-block 8h + 2s + l / 16 scales them. Q3_K adds a
// third bit (bit 4h + s of hmask[l], set meaning +4) and centres q on 4.
struct UnpackQ2_K {
  static void block(const std::byte* row, int64_t b, uint8_t q[kQuantBlock], float scales[2], float offsets[2]) {
    const BlockQ2_K& block = reinterpret_cast<const BlockQ2_K*>(row)[b / 8];
    const int half = static_cast<int>(b % 8) / 4, shift = 2 * static_cast<int>(b % 4);
    for (int j = 0; j < kQuantBlock; ++j) q[j] = (block.qs[32 * half + j] >> shift) & 3;
    const float d = fp16_to_fp32(block.d), dmin = fp16_to_fp32(block.dmin);
    for (int h = 0; h < 2; ++h) {
      const uint8_t packed = block.scales[8 * half + shift + h];
      scales[h] = d * static_cast<float>(packed & 0x0f);
      offsets[h] = -dmin * static_cast<float>(packed >> 4);
    }
  }
};

struct UnpackQ3_K {
  static void block(const std::byte* row, int64_t b, uint8_t q[kQuantBlock], float scales[2], float offsets[2]) {
    const BlockQ3_K& block = reinterpret_cast<const BlockQ3_K*>(row)[b / 8];
    const int half = static_cast<int>(b % 8) / 4, step = static_cast<int>(b % 4), shift = 2 * step;
    const int bit = 1 << (4 * half + step);
    for (int j = 0; j < kQuantBlock; ++j)
      q[j] = static_cast<uint8_t>(((block.qs[32 * half + j] >> shift) & 3) + (block.hmask[j] & bit ? 4 : 0));
    int8_t sub_scales[16];
    q3_k_scales(block.scales, sub_scales);
    const float d = fp16_to_fp32(block.d);
    for (int h = 0; h < 2; ++h) {
      scales[h] = d * static_cast<float>(sub_scales[8 * half + shift + h]);
      offsets[h] = -4.0f * scales[h];
    }
  }
};

// Q6_K keeps values 128c + 32k + l (c: chunk, k: quarter, l < 32) as the low or high nibble of
// ql[64c + l] (k = 0, 2) or ql[64c + 32 + l] (k = 1, 3), and bits 2k of qh[32c + l]; 16-value
// sub-block 8c + 2k + l / 16 scales them; x = d * sc * (q - 32).
struct UnpackQ6_K {
  static void block(const std::byte* row, int64_t b, uint8_t q[kQuantBlock], float scales[2], float offsets[2]) {
    const BlockQ6_K& block = reinterpret_cast<const BlockQ6_K*>(row)[b / 8];
    const int chunk = static_cast<int>(b % 8) / 4, quarter = static_cast<int>(b % 4);
    const uint8_t* low = block.ql + 64 * chunk + 32 * (quarter % 2);
    const uint8_t* high = block.qh + 32 * chunk;
    const int low_shift = 4 * (quarter / 2), high_shift = 2 * quarter;
    for (int j = 0; j < kQuantBlock; ++j)
      q[j] = static_cast<uint8_t>(((low[j] >> low_shift) & 0x0f) | (((high[j] >> high_shift) & 3) << 4));
    const float d = fp16_to_fp32(block.d);
    for (int h = 0; h < 2; ++h) {
      scales[h] = d * static_cast<float>(block.scales[8 * chunk + 2 * quarter + h]);
      offsets[h] = -32.0f * scales[h];
    }
  }
};

// Block by block, each row's block unpacked and its 8 groups of 4 values stored at their rows.
template <typename Unpack>
void pack_sub_block_rows(const WeightMatrix& w, int64_t r0, int64_t b0, int64_t blocks, int R, PanelWeights,
                         std::byte* panel) {
  const int64_t stride = row_bytes(w);
  const int64_t block_bytes = sub_block_panel_block_bytes(R);
  for (int64_t b = 0; b < blocks; ++b) {
    std::byte* block = panel + b * block_bytes;
    auto* scales = reinterpret_cast<float*>(block + kQuantBlock * R);  // (2, R), then offsets (2, R)
    for (int r = 0; r < R; ++r) {
      uint8_t q[kQuantBlock] = {};
      float s[2] = {0.0f, 0.0f}, o[2] = {0.0f, 0.0f};
      if (r0 + r < w.rows) Unpack::block(w.data + (r0 + r) * stride, b0 + b, q, s, o);
      for (int g = 0; g < kQuantBlock / 4; ++g) std::memcpy(block + (g * R + r) * 4, q + 4 * g, 4);
      for (int h = 0; h < 2; ++h) scales[h * R + r] = s[h], scales[(2 + h) * R + r] = o[h];
    }
  }
}

}  // namespace

const PackIntegerPanel pack_q4_1_panel = pack_sub_block_rows<UnpackQ4_1>;
const PackIntegerPanel pack_q5_0_panel = pack_sub_block_rows<UnpackQ5<BlockQ5_0>>;
const PackIntegerPanel pack_q5_1_panel = pack_sub_block_rows<UnpackQ5<BlockQ5_1>>;
const PackIntegerPanel pack_q2_k_panel = pack_sub_block_rows<UnpackQ2_K>;
const PackIntegerPanel pack_q3_k_panel = pack_sub_block_rows<UnpackQ3_K>;
const PackIntegerPanel pack_q4_k_panel = pack_sub_block_rows<UnpackQ45_K<BlockQ4_K>>;
const PackIntegerPanel pack_q5_k_panel = pack_sub_block_rows<UnpackQ45_K<BlockQ5_K>>;
const PackIntegerPanel pack_q6_k_panel = pack_sub_block_rows<UnpackQ6_K>;

}  // namespace cpullm
