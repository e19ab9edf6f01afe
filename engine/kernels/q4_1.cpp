// Q4_1's reference: llama.cpp's quantizer and dequantizer, and the scalar row kernel every other
// level is tested against.
#include "engine/kernels/q4_1.hpp"

#include <algorithm>
#include <cfloat>
#include <cstring>

namespace cpullm {

void quantize_row_q4_1(const float* x, std::byte* row, int64_t n) {
  auto* out = reinterpret_cast<BlockQ4_1*>(row);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int64_t j = 0; j < kQuantBlock; ++j) min = std::min(min, x[j]), max = std::max(max, x[j]);
    const float d = (max - min) / 15.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].scale = fp32_to_fp16(d);
    out[b].minimum = fp32_to_fp16(min);
    for (int64_t j = 0; j < kQuantBlock / 2; ++j) {
      // (int8_t) truncates toward zero after the +0.5: llama.cpp's rounding, kept exactly.
      const auto nibble = [&](float v) { return static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>((v - min) * inverse + 0.5f))); };
      out[b].nibbles[j] = static_cast<uint8_t>(nibble(x[j]) | nibble(x[j + kQuantBlock / 2]) << 4);
    }
  }
}

void dequantize_row_q4_1(const std::byte* row, float* out, int64_t n) {
  const auto* blocks = reinterpret_cast<const BlockQ4_1*>(row);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, out += kQuantBlock) {
    const float d = fp16_to_fp32(blocks[b].scale), m = fp16_to_fp32(blocks[b].minimum);
    for (int64_t j = 0; j < kQuantBlock / 2; ++j) {
      out[j] = static_cast<float>(blocks[b].nibbles[j] & 0x0f) * d + m;
      out[j + kQuantBlock / 2] = static_cast<float>(blocks[b].nibbles[j] >> 4) * d + m;
    }
  }
}

namespace {

// An exact integer sum per block, the two terms scaled, summed in order, one token after another.
void dot_q4_1(const std::byte* row, const void* const* activations, int tokens, int64_t cols, float* out) {
  const auto* blocks = reinterpret_cast<const BlockQ4_1*>(row);
  for (int t = 0; t < tokens; ++t) {
    const auto& a = *static_cast<const QuantizedActivations*>(activations[t]);
    float sum = 0.0f;
    for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
      int32_t products = 0;
      for (int64_t j = 0; j < kQuantBlock / 2; ++j) {
        products += (blocks[b].nibbles[j] & 0x0f) * a.values[b * kQuantBlock + j];
        products += (blocks[b].nibbles[j] >> 4) * a.values[b * kQuantBlock + j + kQuantBlock / 2];
      }
      sum += a.scales[b] * (fp16_to_fp32(blocks[b].scale) * static_cast<float>(products) +
                            fp16_to_fp32(blocks[b].minimum) * activation_sum(a, b));
    }
    out[t] = sum;
  }
}

}  // namespace

namespace scalar_dot {
const RowDot q4_1 = dot_q4_1;
}

}  // namespace cpullm
