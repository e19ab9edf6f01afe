// This machine's memory roof, measured in the same run as the kernels it bounds: a read
// (sum of a large array) and a STREAM triad (a = b + s * c), each over buffers far larger than
// the last-level cache, with 1..N OpenMP threads; the read of memory in 2 MiB pages; with
// --read_file=PATH, the read of a file's mapped pages too. Kernel figures mean something only
// next to these: this host's bandwidth moves from run to run.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "engine/util/aligned_vector.hpp"
#include "engine/instrument/roofs.hpp"
#include "engine/util/mapped_file.hpp"
#include "suites/kernels/memory_cases.hpp"
#include "suites/kernels/thread_counts.hpp"

namespace {

constexpr int64_t kBytes = int64_t{1} << 30;  // per array: 1 GiB, far beyond any L3

// On 64-byte boundaries: glibc's malloc starts a large std::vector 16 bytes past a page
// boundary, and then every other 32-byte load straddles two cache lines (on this project's VM
// no effect stood out of the noise: docs/kernels.md, "Decode, session 11").
cpullm::AlignedVector<float>& array(int index) {
  static cpullm::AlignedVector<float> arrays[3] = {cpullm::AlignedVector<float>(kBytes / 4, 1.0f),
                                                   cpullm::AlignedVector<float>(kBytes / 4, 2.0f),
                                                   cpullm::AlignedVector<float>(kBytes / 4, 0.0f)};
  return arrays[index];
}

// Reads n bytes (a multiple of 128) from `bytes` with `threads` threads: four independent
// integer sums per thread (one chain would be bound by add latency, not by memory; integers,
// as a file's bytes read as floats can be NaNs and denormals). kWork > 0 gives the core kWork
// multiply-adds (vpmaddwd) per 32 bytes loaded, each summed, as a kernel's compute would.
template <int kWork = 0>
__m256i read_all(const std::byte* bytes, int64_t n, int threads) {
  __m256i total = _mm256_setzero_si256();
#pragma omp parallel num_threads(threads)
  {
    __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; i += 128)
      for (int k = 0; k < 4; ++k) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + i + 32 * k));
        if constexpr (kWork == 0) acc[k] = _mm256_add_epi32(acc[k], v);
        for (int w = 0; w < kWork; ++w) acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(v, _mm256_set1_epi16(static_cast<int16_t>(w + 1))));
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
// pages the system gives it, would read faster from huge pages. On this project's VM it read
// 0.97-1.19x as fast (docs/kernels.md, "Decode, session 11").
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
// WORK multiply-adds per 32 bytes (memory_read_work/WORK/THREADS), and the same loop over
// 256 KiB that stays in L2 (cache_read_work/WORK/THREADS): how fast the core computes it when
// memory is not in the way. A decode kernel that computes at c GB/s a core against a roof share
// of r GB/s sits between the two rows whose cache rates bracket c; their memory rates, over
// memory_read_huge's, are what the roof leaves such a kernel on this machine
// (docs/kernels.md, "Decode, session 12").
template <int kWork>
void BM_ReadWithWork(benchmark::State& state, bool in_cache) {
  constexpr int64_t kCacheBytes = int64_t{256} << 10;
  const std::byte* bytes = huge_page_buffer();
  if (!bytes) {
    state.SkipWithError("cannot map 1 GiB of anonymous memory");
    return;
  }
  const int threads = static_cast<int>(state.range(1));
  const int64_t n = in_cache ? kCacheBytes * threads : kBytes;
  benchmark::DoNotOptimize(read_all<kWork>(bytes, n, threads));  // untimed: brings the cache case in
  for (auto _ : state) benchmark::DoNotOptimize(read_all<kWork>(bytes, n, threads));
  state.SetBytesProcessed(state.iterations() * n);
  state.SetLabel(fmt::format("{} multiply-adds per 32 bytes, {}", kWork, in_cache ? "256 KiB a thread, in L2" : huge_page_label(bytes)));
}

void register_reads_with_work() {
  const auto add = [](const char* name, auto function, bool in_cache, int work) {
    benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(name, function, in_cache);
    cpullm::bench::apply_thread_counts(b, work);
    b->UseRealTime()->Unit(benchmark::kMillisecond);
  };
  for (bool in_cache : {false, true}) {
    const char* name = in_cache ? "cache_read_work" : "memory_read_work";
    add(name, BM_ReadWithWork<1>, in_cache, 1);
    add(name, BM_ReadWithWork<2>, in_cache, 2);
    add(name, BM_ReadWithWork<4>, in_cache, 4);
    add(name, BM_ReadWithWork<8>, in_cache, 8);
  }
}
const bool reads_with_work_registered = (register_reads_with_work(), true);

// The same read over a file's pages, mapped as the engine maps a model (its first GiB at
// most): whether this file's page-cache pages read as fast as fresh memory. On this project's
// VM they did not once resident for hours (docs/tuning.md, "Session 8"); cpullm tune reads the
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
