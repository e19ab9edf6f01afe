// This machine's memory roof, measured in the same run as the kernels it bounds: a read
// (sum of a large array) and a STREAM triad (a = b + s * c), each over buffers far larger than
// the last-level cache, with 1..N OpenMP threads; the read of memory in 2 MiB pages; with
// --read_file=PATH, the read of a file's mapped pages too. Kernel figures mean something only
// next to these: a host's bandwidth can move from run to run.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "engine/util/aligned_vector.hpp"
#include "engine/instrument/roofs.hpp"
#include "engine/kernels/int8_rows.hpp"
#include "engine/util/mapped_file.hpp"
#include "suites/kernels/memory_cases.hpp"
#include "suites/kernels/thread_counts.hpp"

namespace {

constexpr int64_t kBytes = int64_t{1} << 30;  // per array: 1 GiB, far beyond any L3

// On 64-byte boundaries: glibc's malloc starts a large std::vector 16 bytes past a page
// boundary, and then every other 32-byte load straddles two cache lines.
cpullm::AlignedVector<float>& array(int index) {
  static cpullm::AlignedVector<float> arrays[3] = {cpullm::AlignedVector<float>(kBytes / 4, 1.0f),
                                                   cpullm::AlignedVector<float>(kBytes / 4, 2.0f),
                                                   cpullm::AlignedVector<float>(kBytes / 4, 0.0f)};
  return arrays[index];
}

// What read_all does with each 32 bytes it loads: sums them (the roof), or a kernel's compute:
// kWork > 0 multiply-adds (vpmaddwd), each summed; kNibbleWork the CPULLM_Q4_0_R8 decode
// kernel's work (dot_avx2.cpp): the nibbles unpacked by an AND and a shift-AND, each half met
// by `maddubs` with 4 activations broadcast from an L1-resident array, the products summed.
constexpr int kNibbleWork = -1;
alignas(64) const std::array<int8_t, 4096> kActivations = [] {
  std::array<int8_t, 4096> a{};
  for (int i = 0; i < 4096; ++i) a[i] = static_cast<int8_t>(i * 7 % 255 - 127);
  return a;
}();

template <int kWork>
[[gnu::always_inline]] inline __m256i work_on(__m256i acc, __m256i v, int64_t at) {
  if constexpr (kWork == 0) return _mm256_add_epi32(acc, v);
  if constexpr (kWork == kNibbleWork) {
    const __m256i mask = _mm256_set1_epi8(0x0f);
    const int8_t* x = kActivations.data() + at % 2048;
    int32_t low, high;
    __builtin_memcpy(&low, x, 4);
    __builtin_memcpy(&high, x + 16, 4);
    const __m256i products = _mm256_add_epi16(
        _mm256_maddubs_epi16(_mm256_and_si256(v, mask), _mm256_set1_epi32(low)),
        _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), mask), _mm256_set1_epi32(high)));
    return _mm256_add_epi16(acc, products);
  }
  for (int w = 0; w < kWork; ++w) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(v, _mm256_set1_epi16(static_cast<int16_t>(w + 1))));
  return acc;
}

// Reads n bytes (a multiple of 128) from `bytes`, `passes` times, with `threads` threads, each
// the same static share every pass and no barrier between passes (a pass over 256 KiB takes a
// few microseconds, about what a fork/join costs): four independent sums per thread (one chain
// would be bound by add latency, not by memory; integers, as a file's bytes read as floats can
// be NaNs and denormals), the work of work_on<kWork> per 32 bytes, and with kPrefetch the decode
// kernels' prefetch 4 KiB ahead (int8_rows.hpp) per 64 bytes.
template <int kWork = 0, bool kPrefetch = false>
__m256i read_all(const std::byte* bytes, int64_t n, int threads, int passes = 1) {
  __m256i total = _mm256_setzero_si256();
#pragma omp parallel num_threads(threads)
  {
    __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int pass = 0; pass < passes; ++pass) {
#pragma omp for schedule(static) nowait
      for (int64_t i = 0; i < n; i += 128) {
        if constexpr (kPrefetch) cpullm::prefetch_ahead(bytes + i), cpullm::prefetch_ahead(bytes + i + 64);
        for (int k = 0; k < 4; ++k)
          acc[k] = work_on<kWork>(acc[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + i + 32 * k)), i / 8 + 4 * k);
      }
    }
#pragma omp critical
    total = _mm256_add_epi32(total, _mm256_add_epi32(_mm256_add_epi32(acc[0], acc[1]), _mm256_add_epi32(acc[2], acc[3])));
  }
  return total;
}

void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const auto* bytes = reinterpret_cast<const std::byte*>(array(0).data());
  for (auto _ : state) benchmark::DoNotOptimize(read_all(bytes, kBytes, threads));
  state.SetBytesProcessed(state.iterations() * kBytes);
}

// 1 GiB of anonymous memory the kernel was asked to back with 2 MiB pages, written once: the
// engine's ReadBuffer, which `cpullm profile` and `cpullm bench --roof-pairs` read; nullptr
// where it cannot be mapped.
const std::byte* huge_page_buffer() {
  static const std::byte* const bytes = []() -> const std::byte* {
    try {
      static const cpullm::ReadBuffer buffer(kBytes);
      return buffer.data();
    } catch (const std::exception&) {
      return nullptr;
    }
  }();
  return bytes;
}

std::string huge_page_label(const std::byte* bytes) {
  const std::optional<std::size_t> huge = cpullm::huge_page_bytes(bytes, kBytes);
  return huge ? fmt::format("{:.0f}% in 2 MiB pages", 100.0 * static_cast<double>(*huge) / kBytes)
              : std::string("page sizes unknown (no /proc/self/smaps)");
}

// The read over the huge-page buffer: whether the roof, read from a std::vector in whatever
// pages the system gives it, would read faster from huge pages (compare with memory_read).
void BM_ReadHugePages(benchmark::State& state) {
  const std::byte* bytes = huge_page_buffer();
  if (!bytes) {
    state.SkipWithError("cannot map 1 GiB of anonymous memory");
    return;
  }
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(read_all(bytes, kBytes, threads));
  state.SetBytesProcessed(state.iterations() * kBytes);
  state.SetLabel(huge_page_label(bytes));
}

// How much of the roof a kernel can read while it computes: the read of memory_read_huge with
// WORK multiply-adds per 32 bytes (memory_read_work/WORK/THREADS), or with the CPULLM_Q4_0_R8
// kernel's work per 32 bytes, without and with its prefetch (memory_read_nibbles/PREFETCH/THREADS);
// and the same loops over 256 KiB a thread that stays in L2, 64 passes a call
// (cache_read_work/..., cache_read_nibbles/...): how fast the core computes them when memory is
// not in the way. A kernel's rate in cache over the roof is its headroom; these say how much of
// the roof a loop with that headroom reads on the machine it runs on (docs/kernels-decode.md,
// "Headroom over the roof").
template <int kWork, bool kPrefetch = false>
void BM_ReadWithWork(benchmark::State& state, bool in_cache) {
  constexpr int64_t kCacheBytes = int64_t{256} << 10;
  constexpr int kCachePasses = 64;
  const std::byte* bytes = huge_page_buffer();
  if (!bytes) {
    state.SkipWithError("cannot map 1 GiB of anonymous memory");
    return;
  }
  const int threads = static_cast<int>(state.range(1));
  const int64_t n = in_cache ? kCacheBytes * threads : kBytes;
  const int passes = in_cache ? kCachePasses : 1;
  benchmark::DoNotOptimize(read_all<kWork, kPrefetch>(bytes, n, threads, passes));  // untimed: brings the cache case in
  for (auto _ : state) benchmark::DoNotOptimize(read_all<kWork, kPrefetch>(bytes, n, threads, passes));
  state.SetBytesProcessed(state.iterations() * n * passes);
  const std::string work = kWork == kNibbleWork ? std::string("Q4_0_R8's work") : fmt::format("{} multiply-adds", kWork);
  state.SetLabel(fmt::format("{} per 32 bytes{}, {}", work, kPrefetch ? ", prefetch 4 KiB ahead" : "",
                             in_cache ? "256 KiB a thread, in L2" : huge_page_label(bytes)));
}

void register_reads_with_work() {
  const auto add = [](const char* name, auto function, bool in_cache, int argument) {
    benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(name, function, in_cache);
    cpullm::bench::apply_thread_counts(b, argument);
    b->UseRealTime()->Unit(benchmark::kMillisecond);
  };
  for (bool in_cache : {false, true}) {
    const char* name = in_cache ? "cache_read_work" : "memory_read_work";
    add(name, BM_ReadWithWork<1>, in_cache, 1);
    add(name, BM_ReadWithWork<2>, in_cache, 2);
    add(name, BM_ReadWithWork<4>, in_cache, 4);
    add(name, BM_ReadWithWork<8>, in_cache, 8);
    const char* nibbles = in_cache ? "cache_read_nibbles" : "memory_read_nibbles";
    add(nibbles, BM_ReadWithWork<kNibbleWork, false>, in_cache, 0);
    add(nibbles, BM_ReadWithWork<kNibbleWork, true>, in_cache, 1);
  }
}
const bool reads_with_work_registered = (register_reads_with_work(), true);

// The same read over a file's pages, mapped as the engine maps a model (its first GiB at
// most): whether this file's page-cache pages read as fast as fresh memory. On some hosts they
// do not once resident for hours (docs/tuning.md, "Page-cache stalls"); cpullm tune reads the
// model it tunes so.
void BM_ReadMappedFile(benchmark::State& state, const std::shared_ptr<const cpullm::MappedFile>& file) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(file->size()), kBytes) / 128 * 128;
  if (n == 0) {
    state.SkipWithError((file->path() + ": shorter than 128 bytes").c_str());
    return;
  }
  benchmark::DoNotOptimize(read_all(file->bytes().data(), n, threads));  // untimed: the mapping's page faults
  for (auto _ : state) benchmark::DoNotOptimize(read_all(file->bytes().data(), n, threads));
  state.SetBytesProcessed(state.iterations() * n);
}

void BM_Triad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const float* b = array(0).data();
  const float* c = array(1).data();
  float* a = array(2).data();
  const int64_t n = kBytes / 4;
  for (auto _ : state) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * kBytes);  // two reads and a write per element
}

void Threads(benchmark::internal::Benchmark* b) { cpullm::bench::apply_thread_counts(b); }

BENCHMARK(BM_ReadBandwidth)->Name("memory_read")->Apply(Threads)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadHugePages)->Name("memory_read_huge")->Apply(Threads)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Triad)->Name("memory_triad")->Apply(Threads)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

void cpullm::bench::register_read_of_file(const std::string& path) {
  const auto file = std::make_shared<const cpullm::MappedFile>(path);  // throws, naming the file, where it cannot
  benchmark::RegisterBenchmark("memory_read_file", BM_ReadMappedFile, file)
      ->Apply(Threads)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}
