// The small element-wise and row-wise steps of a LLaMA block. They cost little next to the
// matvecs, so each is one plain loop: reference and production at once.
#pragma once
#include <cstdint>

namespace cpullm {

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
