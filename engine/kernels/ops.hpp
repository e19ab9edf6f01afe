// The small element-wise and row-wise steps of a LLaMA block. They cost little next to the
// matvecs, so each is one plain loop, reference and production at once; only the exponentials
// are written on vectors (exp_lanes), which GCC would not vectorise.
#pragma once
#include <cstdint>
#include <cstring>

namespace cpullm {

// Eight floats: one AVX2 register at the program's baseline (GCC's vector extension), for the
// loops that GCC would not vectorise by itself.
using Lanes = float __attribute__((vector_size(32)));
constexpr int64_t kLanes = 8;
inline Lanes load_lanes(const float* p) { Lanes v; std::memcpy(&v, p, sizeof v); return v; }
inline void store_lanes(float* p, Lanes v) { std::memcpy(p, &v, sizeof v); }

// e^x lane by lane, within 2 ulp of std::exp on [-87, 88] (tested), 0 below -87 (a masked
// score's -inf included) and e^88 above: Cephes' polynomial on r = x - n ln 2, times 2^n built
// from its bits. Written on vectors because GCC vectorised no loop of a scalar version (its
// selects and rounding became branches), and std::exp per element cost more than the
// arithmetic around it in softmax, SwiGLU and attention.
inline Lanes exp_lanes(Lanes x) {
  using Ints = int32_t __attribute__((vector_size(32)));
  const Lanes low = Lanes{} - 87.0f, high = Lanes{} + 88.0f;
  const Lanes clamped = x < low ? low : (x > high ? high : x);
  const Lanes round = Lanes{} + 0x1.8p23f;  // adding and subtracting 1.5 * 2^23 rounds to an integer
  const Lanes n = (clamped * 1.44269504f + round) - round;
  const Lanes r = (clamped - n * 0.693359375f) + n * 2.12194440e-4f;  // ln 2 in two parts
  Lanes p = 1.9875691500e-4f * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const Lanes two_to_n = reinterpret_cast<Lanes>((__builtin_convertvector(n, Ints) + 127) << 23);
  return x < low ? Lanes{} : p * two_to_n;
}
inline float exp_vectorisable(float x) { return exp_lanes(Lanes{} + x)[0]; }

// x (n) = e^(x - shift), a vector at a time (softmax's shift: its largest value); returns the
// sum of the results.
inline float exp_in_place(float* x, int64_t n, float shift = 0.0f) {
  Lanes sums = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Lanes e = exp_lanes(load_lanes(x + i) - shift);
    store_lanes(x + i, e);
    sums += e;
  }
  float sum = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) sum += sums[l];
  for (; i < n; ++i) sum += x[i] = exp_vectorisable(x[i] - shift);
  return sum;
}

// out (n) = x / sqrt(mean(x^2) + eps) * weight. out may alias x.
void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps);

// The largest of x (n), -inf for n = 0.
float max_value(const float* x, int64_t n);


// Which values of a head RoPE turns together. llama.cpp's NORMAL mode (architecture llama) turns
// adjacent pairs (x[2i], x[2i+1]); its NEOX mode (qwen2) turns (x[i], x[i + head_dim/2]). Pair i
// turns by the same angle either way.
enum class RopeStyle : uint8_t { adjacent, halves };

// Rotary position embedding: within each head, pair i turns by pos * frequencies[i] radians
// (head_dim / 2 frequencies: LlamaConfig::rope_frequencies). rope_angles computes every pair's
// (cos, sin) at one position, angles (head_dim) as cos0 sin0 cos1 sin1 ..., once per token for
// every layer and head (a pow, a cos and a sin per pair in double took 7.8 us of each TinyLlama
// layer's decode step); rope turns vec (n_heads, head_dim) by them.
void rope_angles(float* angles, const double* frequencies, int64_t head_dim, int64_t pos);
void rope(float* vec, int64_t n_heads, int64_t head_dim, const float* angles, RopeStyle style);

// gate (n) = silu(gate) * up: the SwiGLU activation.
void swiglu(float* gate, const float* up, int64_t n);

// x (n) += delta
void add_in_place(float* x, const float* delta, int64_t n);

}  // namespace cpullm
