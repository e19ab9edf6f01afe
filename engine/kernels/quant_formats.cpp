#include "engine/kernels/quant_formats.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/util/half.hpp"

namespace cpullm {

void quantize_row_int8_channel(const float* x, std::byte* out, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  std::memcpy(out, &d, 4);
  auto* q = reinterpret_cast<int8_t*>(out + 4);
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::round(x[i] * inverse));
}

void dequantize_row_int8_channel(const std::byte* row, float* out, int64_t n) {
  float d;
  std::memcpy(&d, row, 4);
  const auto* q = reinterpret_cast<const int8_t*>(row + 4);
  for (int64_t i = 0; i < n; ++i) out[i] = d * static_cast<float>(q[i]);
}

void quantize_row_q8_0(const float* x, BlockQ8_0* out, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].scale = fp32_to_fp16(d);
    for (int64_t j = 0; j < kQuantBlock; ++j) out[b].q[j] = static_cast<int8_t>(std::round(x[j] * inverse));
  }
}

void quantize_row_q4_0(const float* x, BlockQ4_0* out, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    // The scale maps the value of largest magnitude, with its sign, to -8.
    float amax = 0.0f, extreme = 0.0f;
    for (int64_t j = 0; j < kQuantBlock; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        extreme = x[j];
      }
    const float d = extreme / -8.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].scale = fp32_to_fp16(d);
    for (int64_t j = 0; j < kQuantBlock / 2; ++j) {
      // (int8_t) truncates toward zero after the +8.5 offset: llama.cpp's rounding, kept exactly.
      const uint8_t low = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x[j] * inverse + 8.5f)));
      const uint8_t high =
          static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x[j + kQuantBlock / 2] * inverse + 8.5f)));
      out[b].nibbles[j] = static_cast<uint8_t>(low | (high << 4));
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* blocks, float* out, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = fp16_to_fp32(blocks[b].scale);
    for (int64_t j = 0; j < kQuantBlock; ++j) out[b * kQuantBlock + j] = d * static_cast<float>(blocks[b].q[j]);
  }
}

void dequantize_row_q4_0(const BlockQ4_0* blocks, float* out, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = fp16_to_fp32(blocks[b].scale);
    for (int64_t j = 0; j < kQuantBlock / 2; ++j) {
      out[b * kQuantBlock + j] = d * static_cast<float>((blocks[b].nibbles[j] & 0x0f) - 8);
      out[b * kQuantBlock + j + kQuantBlock / 2] = d * static_cast<float>((blocks[b].nibbles[j] >> 4) - 8);
    }
  }
}

}  // namespace cpullm
