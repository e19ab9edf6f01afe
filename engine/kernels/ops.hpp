// The small element-wise and row-wise steps of a LLaMA block. They cost little next to the
// matvecs, so each is one plain loop: reference and production at once.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace cpullm {

// e^x within 2 ulp of std::exp on [-87, 88] (tested), 0 below -87 (a masked score's -inf
// included) and e^88 above: Cephes' polynomial on x - n ln 2, times 2^n built from its bits.
// Branch-free, so a loop of them vectorises; std::exp does not, and a scalar exp per score or
// per SwiGLU element cost more than the arithmetic around it.
inline float exp_vectorisable(float x) {
  const float clamped = std::clamp(x, -87.0f, 88.0f);
  const float n = std::nearbyint(clamped * 1.44269504f);
  float r = std::fma(n, -0.693359375f, clamped);  // ln 2 in two parts: x - n ln 2 exactly enough
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
    p = std::fma(p, r, c);
  p = std::fma(p, r * r, r) + 1.0f;
  const float two_to_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return x < -87.0f ? 0.0f : p * two_to_n;
}

// out (n) = x / sqrt(mean(x^2) + eps) * weight. out may alias x.
void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps);

// x (n) = softmax(x), shifted by the maximum for stability.
void softmax(float* x, int64_t n);

// Rotary position embedding in llama.cpp's "normal" mode: within each head the adjacent pair
// (x[2i], x[2i+1]) turns by pos * theta^(-2i/head_dim). vec is (n_heads, head_dim).
void rope(float* vec, int64_t n_heads, int64_t head_dim, int64_t pos, float theta);

// gate (n) = silu(gate) * up: the SwiGLU activation.
void swiglu(float* gate, const float* up, int64_t n);

// x (n) += delta
void add_in_place(float* x, const float* delta, int64_t n);

}  // namespace cpullm
