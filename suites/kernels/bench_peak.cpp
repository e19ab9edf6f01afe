// This machine's compute roofs, measured in the same run as the kernels they bound: the FP32
// FMA peak (AVX2 and AVX-512 widths) and the int8 dot-product peak (AVX-512 VNNI vpdpbusd, and
// the AVX2 maddubs + madd + add sequence that stands in for it on the Xeon E5 v4), with 1..N
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

// Twelve int8 chains as the AVX2 kernels compute them: maddubs (32 byte products into 16
// int16 pairs), madd with ones (into 8 int32), add: 64 OP per chain per trip.
double int8_avx2(int64_t steps) {
  __m256i acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm256_set1_epi32(k);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < steps; ++i)
    for (int k = 0; k < 12; ++k) acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
  for (int k = 1; k < 12; ++k) acc[0] = _mm256_add_epi32(acc[0], acc[k]);
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

// Arguments: which peak (0 FP32 FMA, 1 int8), ISA, threads.
void BM_Peak(benchmark::State& state) {
  const bool int8 = state.range(0) != 0;
  const auto isa = static_cast<cpullm::Isa>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  if (!cpullm::cpu_supports(isa)) {
    state.SkipWithError("this CPU lacks the ISA");
    return;
  }
  double (*chains)(int64_t) = isa == cpullm::Isa::Avx512 ? (int8 ? int8_vnni : fma_avx512) : (int8 ? int8_avx2 : fma_avx2);
  double ops = 0;
  for (auto _ : state) {
    ops = 0;
#pragma omp parallel num_threads(threads) reduction(+ : ops)
    ops += chains(kSteps);
  }
  state.counters[int8 ? "OP/s" : "FLOP/s"] = benchmark::Counter(ops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(int8 ? "int8 " : "fp32 fma ") + std::string(cpullm::isa_name(isa)));
}

void Cases(benchmark::internal::Benchmark* b) {
  for (int int8 : {0, 1})
    for (cpullm::Isa isa : {cpullm::Isa::Avx2, cpullm::Isa::Avx512})
      cpullm::bench::apply_thread_counts(b, int8, static_cast<int64_t>(isa));
}

BENCHMARK(BM_Peak)->Name("peak")->Apply(Cases)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
