#include "engine/instrument/roofs.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace cpullm {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

constexpr int64_t kHugePage = int64_t{2} << 20;  // where the buffer starts: whole 2 MiB pages

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

ReadBuffer::ReadBuffer(int64_t bytes)
    : memory_(static_cast<std::size_t>(std::max<int64_t>(bytes / 128 * 128, 128) + kHugePage), "the read roof's buffer"),
      bytes_(std::max<int64_t>(bytes / 128 * 128, 128)) {
  memory_.advise_huge_pages();
  const auto address = reinterpret_cast<uintptr_t>(memory_.data());
  auto* start = memory_.data() + (kHugePage - address % kHugePage) % kHugePage;
  start_ = start;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < bytes_; i += 128) std::memset(start + i, 1, 128);
}

double ReadBuffer::read_seconds() const {
  // Four integer sums a thread: one chain would be bound by add latency, not by memory.
  [[maybe_unused]] volatile int sink = 0;  // keeps the sums alive
  const auto start = Clock::now();
  __m256i total = _mm256_setzero_si256();
#pragma omp parallel
  {
    __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma omp for schedule(static)
    for (int64_t i = 0; i < bytes_; i += 128)
      for (int k = 0; k < 4; ++k) acc[k] = _mm256_add_epi32(acc[k], _mm256_load_si256(reinterpret_cast<const __m256i*>(start_ + i + 32 * k)));
#pragma omp critical
    total = _mm256_add_epi32(total, _mm256_add_epi32(_mm256_add_epi32(acc[0], acc[1]), _mm256_add_epi32(acc[2], acc[3])));
  }
  const double seconds = seconds_since(start);
  sink = _mm256_extract_epi32(total, 0);
  return seconds;
}

double measure_read_bandwidth(int64_t buffer_bytes, int passes) {
  const ReadBuffer buffer(buffer_bytes);
  double best = 0;
  for (int pass = 0; pass < passes; ++pass)
    best = std::max(best, static_cast<double>(buffer.bytes()) / buffer.read_seconds());
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
