#include "engine/instrument/roofs.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

namespace cpullm {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

constexpr int kChains = 12;  // independent FMAs in flight: enough to cover latency x units

// `iterations` rounds of kChains FMAs on vectors of kLanes floats; returns a sum so the work stays.
template <int kLanes>
[[gnu::always_inline]] inline float fma_chains(int64_t iterations, float multiplier, float addend) {
  using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));
  Vec acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = Vec{} + static_cast<float>(c);
  const Vec m = Vec{} + multiplier, a = Vec{} + addend;
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * m + a;  // contracted to one FMA
  float total = 0;
  for (int c = 0; c < kChains; ++c) {
    float lanes[kLanes];  // a one-lane "vector" is a plain float, which has no [] to read lanes with
    std::memcpy(lanes, &acc[c], sizeof(lanes));
    for (int l = 0; l < kLanes; ++l) total += lanes[l];
  }
  return total;
}

float fma_scalar(int64_t iterations, float m, float a) { return fma_chains<1>(iterations, m, a); }
float fma_avx2(int64_t iterations, float m, float a) { return fma_chains<8>(iterations, m, a); }
// Written with intrinsics: GCC 12 inlines fma_chains<16> into a target("avx512f") function
// without its loop (it reads the accumulators uninitialised and returns at once), which made
// the AVX-512 roof read 1e16 FLOP/s. (GCC 12's headers warn about their own undefined values,
// GCC bug 105593.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) float fma_avx512(int64_t iterations, float m, float a) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 mv = _mm512_set1_ps(m), av = _mm512_set1_ps(a);
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], mv, av);
  float total = 0;
  for (int c = 0; c < kChains; ++c) total += _mm512_reduce_add_ps(acc[c]);
  return total;
}
#pragma GCC diagnostic pop

// Seconds for every thread to run `iterations` rounds at `lanes`.
double time_fma(int lanes, int64_t iterations) {
  volatile float multiplier = 0.999999f, addend = 1e-6f;  // unknown to the compiler: nothing folds
  [[maybe_unused]] volatile float sink = 0;  // keeps each thread's result alive
  const auto start = Clock::now();
#pragma omp parallel
  {
    const float m = multiplier, a = addend;
    const float result = lanes == 16 ? fma_avx512(iterations, m, a)
                         : lanes == 8 ? fma_avx2(iterations, m, a)
                                      : fma_scalar(iterations, m, a);
    if (result == 42.0f) sink = result;
  }
  return seconds_since(start);
}

}  // namespace

double measure_read_bandwidth(int64_t buffer_bytes, int passes) {
  using Vec = float __attribute__((vector_size(32)));
  const int64_t vectors = std::max<int64_t>(buffer_bytes / static_cast<int64_t>(sizeof(Vec)) / 4 * 4, 4);
  std::unique_ptr<Vec[]> buffer(new Vec[vectors]);
  // First touch by the same static schedule that reads it: each thread's pages are on its node.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < vectors; ++i) buffer[i] = Vec{} + 1.0f;
  double best = 0;
  [[maybe_unused]] volatile float sink = 0;  // keeps each thread's result alive
  for (int pass = 0; pass < passes; ++pass) {
    const auto start = Clock::now();
    float total = 0;
#pragma omp parallel reduction(+ : total)
    {
      Vec acc[4] = {};  // four chains: one would be bound by add latency, not memory
#pragma omp for schedule(static)
      for (int64_t i = 0; i < vectors; i += 4)
        for (int k = 0; k < 4; ++k) acc[k] += buffer[i + k];
      const Vec sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
      for (int l = 0; l < 8; ++l) total += sum[l];
    }
    best = std::max(best, static_cast<double>(vectors * sizeof(Vec)) / seconds_since(start));
    sink = total;
  }
  (void)sink;
  return best;
}

double measure_fma_peak(Isa isa, double seconds) {
  const int lanes = isa == Isa::Avx512 ? 16 : isa == Isa::Avx2 ? 8 : 1;
  const double flops_per_iteration = 2.0 * kChains * lanes * omp_get_max_threads();
  // Calibrate the iteration count to about `seconds`, then keep the best of three.
  int64_t iterations = 1 << 16;
  while (time_fma(lanes, iterations) < seconds / 10 && iterations < (int64_t{1} << 40)) iterations *= 4;
  iterations = static_cast<int64_t>(iterations * seconds / std::max(time_fma(lanes, iterations), 1e-9));
  double best = 0;
  for (int run = 0; run < 3; ++run) best = std::max(best, flops_per_iteration * iterations / time_fma(lanes, iterations));
  return best;
}

RoofUse roof_use(const Roofs& roofs, double flops, double bytes, double seconds) {
  if (seconds <= 0 || roofs.bytes_per_s <= 0 || roofs.flops_per_s <= 0) return {};
  if (bytes > 0 && flops / bytes < roofs.ridge()) return {bytes / seconds / roofs.bytes_per_s, true};
  return {flops / seconds / roofs.flops_per_s, false};
}

}  // namespace cpullm
