// Matrix-vector kernels at the decode shapes of TinyLlama-1.1B and LLaMA-7B, for every weight
// type and every ISA level this CPU runs, with the single-threaded scalar reference beside them,
// and (matvec_decode, the rate `cpullm tune` predicts from) a step's layers in turn as the engine
// runs them: a decode step of one sequence or several decoded together, or a prompt chunk. bytes/s counts the weight bytes read: the figure to hold against
// bench_memory's read roof.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/kernels/matmul.hpp"
#include "engine/kernels/matvec.hpp"
#include "engine/kernels/weight_formats.hpp"
#include "engine/util/aligned_vector.hpp"
#include "suites/kernels/memory_cases.hpp"
#include "suites/kernels/random_weights.hpp"

namespace {

using cpullm::GgmlType;
using cpullm::Isa;

using cpullm::bench::random_weights;
using cpullm::bench::Weights;

// Arguments: weight type, rows, cols, ISA (-1: the single-threaded scalar reference).
void BM_Matvec(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2);
  const bool reference = state.range(3) < 0;
  const Isa isa = reference ? Isa::Scalar : static_cast<Isa>(state.range(3));
  if (!cpullm::cpu_supports(isa)) {
    state.SkipWithError("this CPU lacks the ISA");
    return;
  }
  Weights w = random_weights(type, rows, cols);
  std::vector<float> x(cols, 0.5f), y(rows);
  for (auto _ : state) {
    if (reference) cpullm::matvec_reference(y.data(), w.matrix, x.data());
    else cpullm::matvec(y.data(), w.matrix, x.data(), isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.storage.size()));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * rows * cols, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(cpullm::ggml_type_name(type)) + " " +
                 (reference ? "reference" : std::string(cpullm::isa_name(isa))));
}

// Attention q/o, ffn gate/up and ffn down of TinyLlama-1.1B (dim 2048, ffn 5632) and LLaMA-7B
// (dim 4096, ffn 11008). And 256 x 2048 and 96 x 5632, which in the integer formats (at most
// 0.6 MiB) stay in L2 between iterations: the kernel's own speed, memory aside, at a short and a
// long row (ffn down's length). Decode at 2 threads is memory-bound only where that is well above
// the read roof's share of one core.
void Cases(benchmark::internal::Benchmark* b) {
  for (const cpullm::WeightFormat& format : cpullm::weight_formats())
    for (auto [rows, cols] : {std::pair{256, 2048}, {96, 5632}, {2048, 2048}, {5632, 2048}, {2048, 5632}, {4096, 4096},
                              {11008, 4096}, {4096, 11008}})
      for (int isa : {-1, static_cast<int>(Isa::Scalar), static_cast<int>(Isa::Avx2), static_cast<int>(Isa::Avx512)})
        b->Args({static_cast<int64_t>(format.type), rows, cols, isa});
}

BENCHMARK(BM_Matvec)->Name("matvec")->Apply(Cases)->UseRealTime()->Unit(benchmark::kMicrosecond);

// One decode layer's projections that share an input, as separate matvecs (one fork/join and
// one activation quantization each) or as matvec_group (one for the lot): TinyLlama-1.1B's
// q, k, v (2048, 256, 256 rows of 2048) then gate, up (5632, 5632 rows of 2048).
// Arguments: weight type, ISA, 1 for matvec_group.
void BM_MatvecGroup(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const auto isa = static_cast<Isa>(state.range(1));
  const bool grouped = state.range(2) != 0;
  if (!cpullm::cpu_supports(isa)) {
    state.SkipWithError("this CPU lacks the ISA");
    return;
  }
  const std::vector<std::vector<int64_t>> groups = {{2048, 256, 256}, {5632, 5632}};  // rows of each group's matrices
  std::vector<Weights> weights;
  std::vector<std::vector<float>> outputs;
  int64_t bytes = 0;
  for (const auto& group : groups)
    for (int64_t rows : group) {
      weights.push_back(random_weights(type, rows, 2048));
      outputs.emplace_back(rows);
      bytes += static_cast<int64_t>(weights.back().storage.size());
    }
  std::vector<float> x(2048, 0.5f);
  for (auto _ : state) {
    std::size_t i = 0;
    for (const auto& group : groups) {
      std::vector<cpullm::MatvecTask> tasks;
      for (std::size_t k = 0; k < group.size(); ++k, ++i) tasks.push_back({outputs[i].data(), &weights[i].matrix});
      if (grouped) cpullm::matvec_group(tasks, x.data(), isa);
      else
        for (const auto& task : tasks) cpullm::matvec(task.y, *task.w, x.data(), isa);
    }
    benchmark::DoNotOptimize(outputs.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetLabel(std::string(cpullm::ggml_type_name(type)) + " " + std::string(cpullm::isa_name(isa)) +
                 (grouped ? " matvec_group" : " separate"));
}

void GroupCases(benchmark::internal::Benchmark* b) {
  for (auto type : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0})
    for (Isa isa : {Isa::Avx2, Isa::Avx512})
      for (int grouped : {0, 1}) b->Args({static_cast<int64_t>(type), static_cast<int64_t>(isa), grouped});
}

BENCHMARK(BM_MatvecGroup)->Name("matvec_group")->Apply(GroupCases)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Decode as the engine runs it, one layer per iteration (engine/model/model.cpp): q, k, v as
// one matvec_group, o, gate and up as one matvec_group, down, for one token and for the few
// tokens of a multi-sequence step that matmul streams rows for; one matmul per matrix beyond. The layers are taken in turn from a set
// of copies of one layer of random weights. A set the size of a model's decode step, in a file
// mapping, is what that step streams: from the caches what they hold of it, the rest from
// memory, through 4 KiB pages of the page cache. One layer in heap memory, repeated, is closer
// to what matvec above times. bytes/s counts the layer's weight bytes, read once per step
// whatever the tokens.
enum DecodeMatrix { q, k, v, o, gate, up, down, kDecodeMatrices };

// The set: `layers` copies of one layer, its matrices end to end, each at a 64-byte boundary
// (GGUF aligns tensors to 32).
struct DecodeSet {
  std::vector<int64_t> built_for;  // the case's arguments but the ISA
  int64_t rows[kDecodeMatrices], cols[kDecodeMatrices], offsets[kDecodeMatrices];
  int64_t layer_bytes = 0, layers = 0;
  std::vector<std::byte> heap;
  std::unique_ptr<cpullm::MappedFile> mapping;
  const std::byte* base = nullptr;
};

// Google Benchmark calls a case's function once per trial (1 iteration, then more): the set is
// built once and kept until a case asks for another, as writing a 1 GiB file takes seconds.
const DecodeSet& decode_set(GgmlType type, int64_t dim, int64_t ffn, int64_t kv_dim, bool in_file, int64_t set_mib) {
  static DecodeSet set;
  const std::vector<int64_t> arguments = {static_cast<int64_t>(type), dim, ffn, kv_dim, in_file, set_mib};
  if (set.built_for == arguments) return set;
  set = DecodeSet{};
  const int64_t rows[kDecodeMatrices] = {dim, kv_dim, kv_dim, dim, ffn, ffn, dim};
  const int64_t cols[kDecodeMatrices] = {dim, dim, dim, dim, dim, dim, ffn};
  // Each matrix is its first 64 random rows over and over: the values do not change a dense
  // kernel's speed, and generating every row takes seconds (tune runs this before each point).
  constexpr int64_t kRandomRows = 64;
  std::vector<std::byte> layer;
  for (int m = 0; m < kDecodeMatrices; ++m) {
    set.rows[m] = rows[m];
    set.cols[m] = cols[m];
    set.offsets[m] = set.layer_bytes;
    const Weights pool = random_weights(type, kRandomRows, cols[m]);
    const int64_t matrix_bytes = rows[m] * cpullm::row_bytes(type, cols[m]);
    set.layer_bytes += (matrix_bytes + 63) / 64 * 64;
    layer.resize(set.layer_bytes);
    for (int64_t done = 0; done < matrix_bytes; done += static_cast<int64_t>(pool.storage.size()))
      std::copy_n(pool.storage.data(), std::min<int64_t>(pool.storage.size(), matrix_bytes - done),
                  layer.begin() + set.offsets[m] + done);
  }
  set.layers = std::max<int64_t>(1, ((set_mib << 20) + set.layer_bytes - 1) / set.layer_bytes);
  if (in_file) {
    set.mapping = cpullm::bench::file_mapping(layer, set.layers);
    set.base = set.mapping->bytes().data();
  } else {
    set.heap.resize(set.layers * set.layer_bytes);
    for (int64_t l = 0; l < set.layers; ++l)
      std::copy(layer.begin(), layer.end(), set.heap.begin() + l * set.layer_bytes);
    set.base = set.heap.data();
  }
  set.built_for = arguments;
  return set;
}

// A step's `tokens` tokens through layer l of the set, as the engine's decode runs a layer's
// projections: q, k, v as one matvec_group, o, gate and up as one, down, each group where matmul
// streams rows for its width and this many tokens; otherwise one matmul per matrix.
// x: each input as (tokens, its columns); y[m]: (tokens, rows of m).
void run_decode_layer(const DecodeSet& set, int64_t l, GgmlType type, Isa isa, int64_t tokens, const float* x,
                      std::vector<float> (&y)[kDecodeMatrices]) {
  cpullm::WeightMatrix w[kDecodeMatrices];
  for (int m = 0; m < kDecodeMatrices; ++m)
    w[m] = {set.base + l * set.layer_bytes + set.offsets[m], type, set.rows[m], set.cols[m]};
  const auto task = [&](DecodeMatrix m) { return cpullm::MatvecTask{y[m].data(), &w[m], w[m].rows}; };
  const cpullm::MatvecTask qkv[] = {task(q), task(k), task(v)}, out[] = {task(o)};
  const cpullm::MatvecTask gate_up[] = {task(gate), task(up)}, ffn_down[] = {task(down)};
  using Group = std::span<const cpullm::MatvecTask>;
  const cpullm::CacheSizes caches = cpullm::sysconf_cache_sizes();
  for (Group group : {Group(qkv), Group(out), Group(gate_up), Group(ffn_down)}) {
    const int64_t cols = group[0].w->cols;
    if (cpullm::matmul_streams_rows(type, tokens, cols, caches.l1d_bytes)) {
      cpullm::matvec_group(group, x, cols, tokens, isa);
      continue;
    }
    for (const cpullm::MatvecTask& t : group) cpullm::matmul(t.y, t.w->rows, *t.w, x, cols, tokens, isa, caches);
  }
}

// Arguments: weight type, dim, ffn (gate/up rows), kv dim (k/v rows), ISA, where the weights
// lie (0: heap, 1: a temporary file, mapped), the set's size in MiB (0: one layer), tokens per
// step (sequences decoded together, or a prompt chunk).
void BM_MatvecDecode(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const auto isa = static_cast<Isa>(state.range(4));
  if (!cpullm::cpu_supports(isa)) {
    state.SkipWithError("this CPU lacks the ISA");
    return;
  }
  const DecodeSet& set = decode_set(type, state.range(1), state.range(2), state.range(3), state.range(5) != 0,
                                    state.range(6));
  const int64_t tokens = state.range(7);
  cpullm::AlignedVector<float> x(tokens * std::max(state.range(1), state.range(2)), 0.5f);  // aligned as the engine's
  std::vector<float> y[kDecodeMatrices];
  for (int m = 0; m < kDecodeMatrices; ++m) y[m].resize(tokens * set.rows[m]);
  // Untimed, every layer once: the mapping's page faults are a load's cost, not decode's (as
  // cpullm bench's warm-up run takes them).
  for (int64_t l = 0; l < set.layers; ++l) run_decode_layer(set, l, type, isa, tokens, x.data(), y);
  int64_t next = 0;
  for (auto _ : state) {
    run_decode_layer(set, next, type, isa, tokens, x.data(), y);
    next = (next + 1) % set.layers;
    benchmark::DoNotOptimize(y[0].data());
  }
  state.SetBytesProcessed(state.iterations() * set.layer_bytes);
  state.SetLabel(std::string(cpullm::ggml_type_name(type)) + " " + std::string(cpullm::isa_name(isa)) + ", " +
                 std::to_string(set.layers) + " layer(s) of " + std::to_string(set.layer_bytes >> 20) + " MiB in " +
                 (set.mapping ? "a file mapping" : "heap memory") + ", " + std::to_string(tokens) + " token(s) a step");
}

// The sets of 0 MiB (one layer) and 1 GiB (bench_memory's read buffer: beyond any cache), one
// token a step, by default; --decode_set_mib=LIST and --decode_tokens=LIST give others (tune:
// the bytes of the model's decode step; its points' sequences and prompt chunks).
void register_decode_cases(const std::vector<int64_t>& set_mib, const std::vector<int64_t>& tokens) {
  benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark("matvec_decode", BM_MatvecDecode);
  for (const cpullm::WeightFormat& format : cpullm::weight_formats())
    for (auto [dim, ffn, kv_dim] : {std::tuple{2048, 5632, 256}, {4096, 11008, 4096}})
      for (Isa isa : {Isa::Avx2, Isa::Avx512})
        for (int in_file : {0, 1})
          for (int64_t mib : set_mib)
            for (int64_t n : tokens)
              b->Args({static_cast<int64_t>(format.type), dim, ffn, kv_dim, static_cast<int64_t>(isa), in_file, mib, n});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

// Removes --NAME=VALUE from argv and returns the last VALUE, or "" where it is absent.
std::string take_flag(int& argc, char** argv, const std::string& name) {
  const std::string flag = "--" + name + "=";
  std::string value;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(flag, 0) != 0) continue;
    value = arg.substr(flag.size());
    std::copy(argv + i + 1, argv + argc + 1, argv + i);  // argv[argc] is nullptr
    --argc;
    --i;
  }
  return value;
}

// Removes --NAME=N[,N...] from argv and returns its list, or `fallback` where it is absent.
std::vector<int64_t> take_list_flag(int& argc, char** argv, const std::string& name, std::vector<int64_t> fallback) {
  const std::string value = take_flag(argc, argv, name);
  if (value.empty()) return fallback;
  std::vector<int64_t> list;
  std::stringstream items(value);
  for (std::string item; std::getline(items, item, ',');) list.push_back(std::stoll(item));
  return list;
}

}  // namespace

// BENCHMARK_MAIN, plus --decode_set_mib=N[,N...] and --decode_tokens=N[,N...] for matvec_decode.
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const std::vector<int64_t> set_mib = take_list_flag(argc, argv, "decode_set_mib", {0, 1024});
  const std::vector<int64_t> tokens = take_list_flag(argc, argv, "decode_tokens", {1});
  register_decode_cases(set_mib, tokens);
  if (const std::string file = take_flag(argc, argv, "read_file"); !file.empty()) {
    try {
      cpullm::bench::register_read_of_file(file);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_kernels: --read_file: %s\n", e.what());
      return 1;
    }
  }
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
