// Q5_0's and Q5_1's reference: llama.cpp's quantizers and dequantizers, and the scalar row
// kernels every other level is tested against.
#include "engine/kernels/q5.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace cpullm {

namespace {

inline void store_high_bits(uint8_t bytes[4], uint32_t mask) { std::memcpy(bytes, &mask, sizeof mask); }

// sum(q * a) of block b, exact in int32, q = 0..31.
template <typename Block>
int32_t block_products(const Block& block, const QuantizedActivations& a, int64_t b) {
  int levels[kQuantBlock];
  levels_in_order(block, levels);
  int32_t products = 0;
  for (int64_t j = 0; j < kQuantBlock; ++j) products += levels[j] * a.values[b * kQuantBlock + j];
  return products;
}

// Q5_0's -16 comes off the integer sum: sum((q - 16) * a) = sum(q * a) - 16 * sum(a).
float q5_0_term(const BlockQ5_0& block, const QuantizedActivations& a, int64_t b) {
  return fp16_to_fp32(block.scale) * static_cast<float>(block_products(block, a, b) - 16 * activation_sum(a, b));
}

// As Q4_1's: the minimum meets the activations' sum.
float q5_1_term(const BlockQ5_1& block, const QuantizedActivations& a, int64_t b) {
  return fp16_to_fp32(block.scale) * static_cast<float>(block_products(block, a, b)) +
         fp16_to_fp32(block.minimum) * static_cast<float>(activation_sum(a, b));
}

// Per token, each block's term times its activation scale, summed in block order.
template <typename Block, float (*Term)(const Block&, const QuantizedActivations&, int64_t)>
void dot_q5(const std::byte* row, const void* const* activations, int tokens, int64_t cols, float* out) {
  const auto* blocks = reinterpret_cast<const Block*>(row);
  for (int t = 0; t < tokens; ++t) {
    const auto& a = *static_cast<const QuantizedActivations*>(activations[t]);
    float sum = 0.0f;
    for (int64_t b = 0; b < cols / kQuantBlock; ++b) sum += a.scales[b] * Term(blocks[b], a, b);
    out[t] = sum;
  }
}

}  // namespace

namespace scalar_dot {
const RowDot q5_0 = dot_q5<BlockQ5_0, q5_0_term>;
const RowDot q5_1 = dot_q5<BlockQ5_1, q5_1_term>;
}

// From here to the end of the file every product and sum is rounded on its own, as in llama.cpp's
// ggml-base (built without FMA), rather than let the x86-64-v3 gnu++20 build fuse
// (v - min) * inverse + 0.5f into one FMA and move a value across a rounding boundary.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

void quantize_row_q5_0(const float* x, std::byte* row, int64_t n) {
  auto* out = reinterpret_cast<BlockQ5_0*>(row);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    // The value of largest magnitude, sign kept, becomes q = 0: x = d * (q - 16) with d = max / -16.
    float amax = 0.0f, max = 0.0f;
    for (int64_t j = 0; j < kQuantBlock; ++j) {
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
    }
    const float d = max / -16;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].scale = fp32_to_fp16(d);
    uint32_t mask = 0;
    for (int64_t j = 0; j < kQuantBlock / 2; ++j) {
      // (int8_t) truncates toward zero after the +16.5: llama.cpp's rounding, kept exactly.
      const auto level = [&](float v) { return static_cast<uint8_t>(std::min<int>(31, static_cast<int8_t>(v * inverse + 16.5f))); };
      const uint8_t low = level(x[j]), high = level(x[j + kQuantBlock / 2]);
      out[b].nibbles[j] = static_cast<uint8_t>((low & 0x0f) | ((high & 0x0f) << 4));
      mask |= static_cast<uint32_t>((low & 0x10u) >> 4) << j;
      mask |= static_cast<uint32_t>((high & 0x10u) >> 4) << (j + kQuantBlock / 2);
    }
    store_high_bits(out[b].high_bits, mask);
  }
}

void quantize_row_q5_1(const float* x, std::byte* row, int64_t n) {
  auto* out = reinterpret_cast<BlockQ5_1*>(row);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int64_t j = 0; j < kQuantBlock; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 31;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].scale = fp32_to_fp16(d);
    out[b].minimum = fp32_to_fp16(min);
    uint32_t mask = 0;
    for (int64_t j = 0; j < kQuantBlock / 2; ++j) {
      // (uint8_t) truncates after the +0.5, with no clamp: llama.cpp's rounding, kept exactly.
      const auto level = [&](float v) { return static_cast<uint8_t>((v - min) * inverse + 0.5f); };
      const uint8_t low = level(x[j]), high = level(x[j + kQuantBlock / 2]);
      out[b].nibbles[j] = static_cast<uint8_t>((low & 0x0f) | ((high & 0x0f) << 4));
      mask |= static_cast<uint32_t>((low & 0x10u) >> 4) << j;
      mask |= static_cast<uint32_t>((high & 0x10u) >> 4) << (j + kQuantBlock / 2);
    }
    store_high_bits(out[b].high_bits, mask);
  }
}

void dequantize_row_q5_0(const std::byte* row, float* out, int64_t n) {
  const auto* blocks = reinterpret_cast<const BlockQ5_0*>(row);
  int levels[kQuantBlock];
  for (int64_t b = 0; b < n / kQuantBlock; ++b, out += kQuantBlock) {
    const float d = fp16_to_fp32(blocks[b].scale);
    levels_in_order(blocks[b], levels);
    for (int j = 0; j < kQuantBlock; ++j) out[j] = static_cast<float>(levels[j] - 16) * d;
  }
}

void dequantize_row_q5_1(const std::byte* row, float* out, int64_t n) {
  const auto* blocks = reinterpret_cast<const BlockQ5_1*>(row);
  int levels[kQuantBlock];
  for (int64_t b = 0; b < n / kQuantBlock; ++b, out += kQuantBlock) {
    const float d = fp16_to_fp32(blocks[b].scale), m = fp16_to_fp32(blocks[b].minimum);
    levels_in_order(blocks[b], levels);
    for (int j = 0; j < kQuantBlock; ++j) out[j] = static_cast<float>(levels[j]) * d + m;
  }
}

}  // namespace cpullm
