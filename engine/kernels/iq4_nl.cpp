// IQ4_NL's reference quantizer and dequantizer (iq4_nl.hpp).
#include "engine/kernels/iq4_nl.hpp"

#include <cmath>
#include <cstring>

#include "engine/util/half.hpp"

// llama.cpp's search sums its weighted products without fused multiply-adds; contracted ones
// round differently and can pick another scale.
#pragma GCC optimize("fp-contract=off")

namespace cpullm {
namespace {

constexpr int kLevels = 16;

// The index of the level nearest v (ties to the upper level; v past either end: that end).
int nearest_level(float v) {
  if (v <= kIq4NlLevels[0]) return 0;
  if (v >= kIq4NlLevels[kLevels - 1]) return kLevels - 1;
  int low = 0, high = kLevels - 1;  // kIq4NlLevels[low] <= v < kIq4NlLevels[high]
  while (high - low > 1) {
    const int middle = (low + high) / 2;
    if (v < kIq4NlLevels[middle]) high = middle;
    else low = middle;
  }
  return v - kIq4NlLevels[high - 1] < kIq4NlLevels[high] - v ? high - 1 : high;
}

// sum(w * level * x) and sum(w * level^2) of the block at inverse scale `inverse`.
void weighted_sums(const float* x, const float* weights, float inverse, float& sum_qx, float& sum_q2) {
  sum_qx = sum_q2 = 0;
  for (int j = 0; j < kQuantBlock; ++j) {
    const float q = kIq4NlLevels[nearest_level(inverse * x[j])];
    sum_qx += weights[j] * q * x[j];
    sum_q2 += weights[j] * q * q;
  }
}

// One block: the scale starts from the largest |x| on the lowest level and moves over 15 steps;
// each candidate's least-squares scale sum_qx / sum_q2 is kept when it explains more of x.
void quantize_block(const float* x, BlockIQ4_NL& out) {
  float weights[kQuantBlock], amax = 0, max = 0;
  for (int j = 0; j < kQuantBlock; ++j) {
    weights[j] = x[j] * x[j];
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
  }
  float d = 0;
  if (amax >= 1e-15f) {
    constexpr int kTries = 7;
    float sum_qx, sum_q2;
    weighted_sums(x, weights, 1 / (-max / kIq4NlLevels[0]), sum_qx, sum_q2);
    d = sum_q2 > 0 ? sum_qx / sum_q2 : 0.0f;
    float best = d * sum_qx;
    for (int step = -kTries; step <= kTries; ++step) {
      weighted_sums(x, weights, (static_cast<float>(step) + kIq4NlLevels[0]) / max, sum_qx, sum_q2);
      if (sum_q2 > 0 && sum_qx * sum_qx > best * sum_q2) d = sum_qx / sum_q2, best = d * sum_qx;
    }
  }
  out.scale = fp32_to_fp16(d);
  const float inverse = d != 0 ? 1 / d : 0.0f;
  for (int j = 0; j < kQuantBlock / 2; ++j)
    out.indices[j] = static_cast<uint8_t>(nearest_level(inverse * x[j]) | nearest_level(inverse * x[j + kQuantBlock / 2]) << 4);
}

}  // namespace

void quantize_row_iq4_nl(const float* x, std::byte* row, int64_t n) {
  auto* blocks = reinterpret_cast<BlockIQ4_NL*>(row);
  for (int64_t b = 0; b < n / kQuantBlock; ++b) quantize_block(x + b * kQuantBlock, blocks[b]);
}

void dequantize_row_iq4_nl(const std::byte* row, float* out, int64_t n) {
  const auto* blocks = reinterpret_cast<const BlockIQ4_NL*>(row);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, out += kQuantBlock) {
    const float d = fp16_to_fp32(blocks[b].scale);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      out[j] = d * static_cast<float>(kIq4NlLevels[blocks[b].indices[j] & 0x0f]);
      out[j + kQuantBlock / 2] = d * static_cast<float>(kIq4NlLevels[blocks[b].indices[j] >> 4]);
    }
  }
}

}  // namespace cpullm
