// This machine's compute roofs, measured in the same run as the kernels they bound: the FP32
// FMA peak (AVX2 and AVX-512 widths) and the int8 dot-product peak (AVX-512 VNNI vpdpbusd, and
// the AVX2 maddubs + madd + add sequence that stands in for it on the Xeon E5 v4, and the
// shorter maddubs + add that AVX2 Q4_0 runs on its unsigned nibbles), with 1..N
// OpenMP threads. Each thread runs independent chains on registers only, enough of them to
// cover the instruction's latency on every port, so nothing but the execution units limits it.
// FLOP/s and OP/s count a multiply-add as two operations (the GEMM suites count the same way).
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <cstdint>
#include <string>

#include "engine/kernels/isa.hpp"
#include "suites/kernels/thread_counts.hpp"

namespace {

constexpr int64_t kSteps = 1 << 20;  // loop trips per thread per iteration

// Twelve 8-wide FMA chains (of 16 ymm registers): 192 FLOP per trip.
double fma_avx2(int64_t steps) {
  __m256 acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm256_set1_ps(static_cast<float>(k));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  for (int64_t i = 0; i < steps; ++i)
    for (int k = 0; k < 12; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  for (int k = 1; k < 12; ++k) acc[0] = _mm256_add_ps(acc[0], acc[k]);
  benchmark::DoNotOptimize(acc[0]);
  return 12.0 * 8 * 2 * static_cast<double>(steps);
}

// The products below depend on nothing the loop changes, so the compiler would compute them
// once and time the adds alone (GCC 12 does: the AVX2 int8 peaks would read high, 2-4x on
// Broadwell, whose adds have two ports where maddubs and madd share one). An empty asm that claims to change a and b before every
// product keeps each product in the loop.
inline void opaque(__m256i& a, __m256i& b) { asm volatile("" : "+x"(a), "+x"(b)); }

// Twelve int8 chains as the AVX2 kernels compute them: maddubs (32 byte products into 16
// int16 pairs), madd with ones (into 8 int32), add: 64 OP per chain per trip.
double int8_avx2(int64_t steps) {
  __m256i acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm256_set1_epi32(k);
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < steps; ++i)
    for (int k = 0; k < 12; ++k) {
      opaque(a, b);
      acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
    }
  for (int k = 1; k < 12; ++k) acc[0] = _mm256_add_epi32(acc[0], acc[k]);
  benchmark::DoNotOptimize(acc[0]);
  return 12.0 * 32 * 2 * static_cast<double>(steps);
}

// Twelve chains as AVX2 Q4_0's GEMM tile computes them (gemm_avx2.cpp): maddubs and an int16
// add, its unsigned nibbles keeping a block's sums within int16 (one madd per 8 trips is left
// out): 64 OP per chain per trip.
double int8_nibbles_avx2(int64_t steps) {
  __m256i acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm256_set1_epi16(static_cast<int16_t>(k));
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  for (int64_t i = 0; i < steps; ++i)
    for (int k = 0; k < 12; ++k) {
      opaque(a, b);
      acc[k] = _mm256_add_epi16(acc[k], _mm256_maddubs_epi16(a, b));
    }
  for (int k = 1; k < 12; ++k) acc[0] = _mm256_add_epi16(acc[0], acc[k]);
  benchmark::DoNotOptimize(acc[0]);
  return 12.0 * 32 * 2 * static_cast<double>(steps);
}

// Sixteen 16-wide FMA chains (of 32 zmm registers): 512 FLOP per trip.
__attribute__((target("avx512f"))) double fma_avx512(int64_t steps) {
  __m512 acc[16];
  for (int k = 0; k < 16; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  for (int64_t i = 0; i < steps; ++i)
    for (int k = 0; k < 16; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  for (int k = 1; k < 16; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  float out[16];
  _mm512_storeu_ps(out, acc[0]);
  benchmark::DoNotOptimize(out);
  return 16.0 * 16 * 2 * static_cast<double>(steps);
}

// Sixteen vpdpbusd chains: 64 byte products summed into 16 int32 each, 128 OP per chain per trip.
__attribute__((target("avx512f,avx512vnni"))) double int8_vnni(int64_t steps) {
  __m512i acc[16];
  for (int k = 0; k < 16; ++k) acc[k] = _mm512_set1_epi32(k);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < steps; ++i)
    for (int k = 0; k < 16; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], a, b);
  for (int k = 1; k < 16; ++k) acc[0] = _mm512_add_epi32(acc[0], acc[k]);
  int32_t out[16];
  _mm512_storeu_si512(out, acc[0]);
  benchmark::DoNotOptimize(out);
  return 16.0 * 64 * 2 * static_cast<double>(steps);
}

enum Peak : int64_t { kFma = 0, kInt8 = 1, kInt8Nibbles = 2 };

// Arguments: which peak (Peak), ISA, threads.
void BM_Peak(benchmark::State& state) {
  const auto peak = static_cast<Peak>(state.range(0));
  const auto isa = static_cast<cpullm::Isa>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  if (!cpullm::cpu_supports(isa)) {
    state.SkipWithError("this CPU lacks the ISA");
    return;
  }
  const bool avx512 = isa == cpullm::Isa::Avx512;
  double (*chains)(int64_t) = peak == kFma    ? (avx512 ? fma_avx512 : fma_avx2)
                              : peak == kInt8 ? (avx512 ? int8_vnni : int8_avx2)
                                              : int8_nibbles_avx2;
  double ops = 0;
  for (auto _ : state) {
    ops = 0;
#pragma omp parallel num_threads(threads) reduction(+ : ops)
    ops += chains(kSteps);
  }
  state.counters[peak == kFma ? "FLOP/s" : "OP/s"] = benchmark::Counter(ops, benchmark::Counter::kIsIterationInvariantRate);
  const char* name = peak == kFma ? "fp32 fma " : peak == kInt8 ? "int8 " : "int8 nibbles ";
  state.SetLabel(name + std::string(cpullm::isa_name(isa)));
}

// The nibble sequence only at AVX2: VNNI's Q4_0 runs the same vpdpbusd as Q8_0.
void Cases(benchmark::internal::Benchmark* b) {
  for (Peak peak : {kFma, kInt8})
    for (cpullm::Isa isa : {cpullm::Isa::Avx2, cpullm::Isa::Avx512})
      cpullm::bench::apply_thread_counts(b, peak, static_cast<int64_t>(isa));
  cpullm::bench::apply_thread_counts(b, kInt8Nibbles, static_cast<int64_t>(cpullm::Isa::Avx2));
}

BENCHMARK(BM_Peak)->Name("peak")->Apply(Cases)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
