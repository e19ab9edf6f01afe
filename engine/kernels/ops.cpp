#include "engine/kernels/ops.hpp"

#include <algorithm>
#include <cmath>

namespace cpullm {

void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  float sum_squares = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum_squares += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum_squares / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

float max_value(const float* x, int64_t n) {
  // A vector at a time: std::max_element is one scalar chain of vmaxss, whose latency made it
  // most of a decode attention's softmax. A maximum is the same in any order.
  Lanes lane_max = Lanes{} - INFINITY;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Lanes v = load_lanes(x + i);
    lane_max = v > lane_max ? v : lane_max;
  }
  float result = -INFINITY;
  for (int64_t l = 0; l < kLanes; ++l) result = std::max(result, lane_max[l]);
  for (; i < n; ++i) result = std::max(result, x[i]);
  return result;
}

void rope_angles(float* angles, const double* frequencies, int64_t head_dim, int64_t pos) {
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    // The angle is computed in double: at long positions FP32 loses the low bits of pos*freq.
    const double angle = static_cast<double>(pos) * frequencies[i];
    angles[2 * i] = static_cast<float>(std::cos(angle));
    angles[2 * i + 1] = static_cast<float>(std::sin(angle));
  }
}

namespace {
// Pair i of a head is (x[i * step], x[i * step + offset]): one loop for both styles, each call
// with its own constants so that each compiles to its own plain loop.
inline void rope_pairs(float* vec, int64_t n_heads, int64_t head_dim, const float* angles, int64_t step, int64_t offset) {
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      float* first = vec + h * head_dim + i * step;
      const float x0 = first[0], x1 = first[offset], c = angles[2 * i], s = angles[2 * i + 1];
      first[0] = x0 * c - x1 * s;
      first[offset] = x0 * s + x1 * c;
    }
}
}  // namespace

void rope(float* vec, int64_t n_heads, int64_t head_dim, const float* angles, RopeStyle style) {
  if (style == RopeStyle::adjacent) rope_pairs(vec, n_heads, head_dim, angles, 2, 1);
  else rope_pairs(vec, n_heads, head_dim, angles, 1, head_dim / 2);
}

void swiglu(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Lanes g = load_lanes(gate + i);
    store_lanes(gate + i, g / (1.0f + exp_lanes(-g)) * load_lanes(up + i));
  }
  for (; i < n; ++i) gate[i] = gate[i] / (1.0f + exp_vectorisable(-gate[i])) * up[i];
}

void add_in_place(float* x, const float* delta, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += delta[i];
}

}  // namespace cpullm
