// Prefill attention per tile size: 512 queries (a prompt chunk) at the end of a 512- and a
// 2048-position context, LLaMA-7B's head layout (32 heads of 128), against the plain kernel run
// query by query; decode's one query (attention_decode); and a decode step's queries of several
// sequences, one call each or batched (attention_decode_batch). FLOP/s counts 4 * head_dim per
// (query, visible key, head): q.k and p.v.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/attention.hpp"
#include "engine/kernels/row_convert.hpp"

namespace {

using cpullm::AttentionShape;
using cpullm::AttentionTiles;

constexpr AttentionShape kShape{32, 32, 128};  // LLaMA-7B: 32 heads of 128
constexpr int64_t kQueries = 512;

struct Inputs {
  std::vector<float> q, out;
  std::vector<std::byte> keys, values;  // (sequence, dim) in the cache's type
};

Inputs random_inputs(int64_t sequence, cpullm::GgmlType kv_type) {
  const int64_t dim = kShape.n_heads * kShape.head_dim, row_size = cpullm::row_bytes(kv_type, dim);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Inputs in{std::vector<float>(kQueries * dim), std::vector<float>(kQueries * dim),
            std::vector<std::byte>(sequence * row_size), std::vector<std::byte>(sequence * row_size)};
  for (float& x : in.q) x = dist(rng);
  std::vector<float> row(dim);
  for (auto* cache : {&in.keys, &in.values})
    for (int64_t t = 0; t < sequence; ++t) {
      for (float& x : row) x = dist(rng);
      cpullm::encode_row(kv_type, row.data(), cache->data() + t * row_size, dim);
    }
  return in;
}

double attention_flops(int64_t sequence) {
  const int64_t first = sequence - kQueries;
  double pairs = 0;  // (query, visible key) pairs
  for (int64_t i = 0; i < kQueries; ++i) pairs += static_cast<double>(first + i + 1);
  return pairs * kShape.n_heads * 4.0 * kShape.head_dim;
}

// Arguments: context length, query tile, key tile (0 x 0: the plain kernel, query by query), the
// cache's type (F32, or F16 as the seed workload keeps it).
void BM_Attention(benchmark::State& state) {
  const int64_t sequence = state.range(0);
  const AttentionTiles tiles{state.range(1), state.range(2)};
  const auto kv_type = static_cast<cpullm::GgmlType>(state.range(3));
  Inputs in = random_inputs(sequence, kv_type);
  const int64_t dim = kShape.n_heads * kShape.head_dim, first = sequence - kQueries;
  const cpullm::Isa isa = cpullm::resolve_isa();  // $CPULLM_ISA, else the best
  for (auto _ : state) {
    if (tiles.queries == 0) {
      for (int64_t i = 0; i < kQueries; ++i)
        cpullm::attention(in.out.data() + i * dim, in.q.data() + i * dim, in.keys.data(), in.values.data(), kv_type,
                          first + i + 1, kShape, isa);
    } else {
      cpullm::attention_tiled(in.out.data(), in.q.data(), first, kQueries, in.keys.data(), in.values.data(), kv_type,
                              kShape, tiles, isa);
    }
    benchmark::DoNotOptimize(in.out.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(attention_flops(sequence), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel((tiles.queries == 0 ? "plain" : std::to_string(tiles.queries) + "x" + std::to_string(tiles.keys)) +
                 " " + std::string(cpullm::ggml_type_name(kv_type)) + " cache");
}

void Cases(benchmark::internal::Benchmark* b) {
  for (int64_t sequence : {512, 2048})
    for (auto [q, k] : {std::pair{0, 0}, {1, 64}, {8, 8}, {16, 16}, {32, 32}, {16, 64}, {64, 64}, {128, 128}})
      for (auto kv_type : {cpullm::GgmlType::F32, cpullm::GgmlType::F16})
        b->Args({sequence, q, k, static_cast<int64_t>(kv_type)});
}

BENCHMARK(BM_Attention)->Name("attention")->Apply(Cases)->UseRealTime()->Unit(benchmark::kMillisecond);

// One decode step's attention, one query at the end of `positions` cached ones, as each layer of
// a decode step runs it, over a cache laid out as the engine's; bytes/s counts the cache bytes it reads, the figure to hold against the
// read roof at depth. Arguments: positions, KV heads (32 query heads: over 32 KV heads of 128,
// LLaMA-7B; over 8 of 128, Llama 3 8B; over 4 of 64, TinyLlama's grouped-query layout; over 1 of
// 64, multi-query attention, where every thread must share one KV head's cache), the cache's type.
void BM_AttentionDecode(benchmark::State& state) {
  const int64_t positions = state.range(0), kv_heads = state.range(1);
  const auto kv_type = static_cast<cpullm::GgmlType>(state.range(2));
  const AttentionShape shape{32, kv_heads, kv_heads == 32 || kv_heads == 8 ? 128 : 64};
  const int64_t dim = shape.n_heads * shape.head_dim;
  const int64_t head_bytes = cpullm::row_bytes(kv_type, shape.head_dim), row_size = kv_heads * head_bytes;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> q(dim), out(dim), row(shape.head_dim);
  for (float& x : q) x = dist(rng);
  // Laid out as the KV cache keeps a layer: each head's positions together (kv_cache.hpp).
  std::vector<std::byte> keys(positions * row_size), values(positions * row_size);
  for (auto* cache : {&keys, &values})
    for (int64_t at = 0; at < positions * kv_heads; ++at) {
      for (float& x : row) x = dist(rng);
      cpullm::encode_row(kv_type, row.data(), cache->data() + at * head_bytes, shape.head_dim);
    }
  const cpullm::AttentionQuery query{out.data(), q.data(), keys.data(), values.data(), positions,
                                     {head_bytes, positions * head_bytes}};
  const cpullm::Isa isa = cpullm::resolve_isa();  // $CPULLM_ISA, else the best
  for (auto _ : state) {
    cpullm::attention({&query, 1}, kv_type, shape, isa);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(4.0 * shape.head_dim * shape.n_heads * positions,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetBytesProcessed(state.iterations() * 2 * positions * row_size);  // the cache's keys and values, read once
  state.SetLabel(std::to_string(shape.n_heads) + " heads of " + std::to_string(shape.head_dim) + ", " +
                 std::to_string(kv_heads) + " KV heads, " + std::string(cpullm::ggml_type_name(kv_type)) + " cache");
}

void DecodeCases(benchmark::internal::Benchmark* b) {
  for (int64_t positions : {64, 512, 2048, 8192})
    for (int64_t kv_heads : {1, 4, 8, 32})
      for (auto kv_type : {cpullm::GgmlType::F32, cpullm::GgmlType::F16, cpullm::GgmlType::BF16, cpullm::GgmlType::Q8_0})
        b->Args({positions, kv_heads, static_cast<int64_t>(kv_type)});
}

BENCHMARK(BM_AttentionDecode)->Name("attention_decode")->Apply(DecodeCases)->UseRealTime()->Unit(benchmark::kMicrosecond);

// A decode step's attention for several sequences: the first at `first_positions`, the others at
// `other_positions`, TinyLlama's layout (32 heads of 64, 4 KV heads), F32 cache; every query reads
// a prefix of one shared cache. Mode 0 runs one call per query (one parallel loop each), mode 1
// one batched call. Arguments: sequences, first_positions, other_positions, mode.
void BM_AttentionDecodeBatch(benchmark::State& state) {
  const int64_t sequences = state.range(0), first_positions = state.range(1), other_positions = state.range(2);
  const bool batched = state.range(3) == 1;
  const AttentionShape shape{32, 4, 64};
  const int64_t dim = shape.n_heads * shape.head_dim, kv_dim = shape.n_kv_heads * shape.head_dim;
  const int64_t longest = std::max(first_positions, other_positions);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> q(sequences * dim), out(sequences * dim), keys(longest * kv_dim), values(longest * kv_dim);
  for (auto* v : {&q, &keys, &values})
    for (float& x : *v) x = dist(rng);
  std::vector<cpullm::AttentionQuery> batch;
  for (int64_t s = 0; s < sequences; ++s)
    batch.push_back({out.data() + s * dim, q.data() + s * dim, keys.data(), values.data(),
                     s == 0 ? first_positions : other_positions});
  const cpullm::Isa isa = cpullm::resolve_isa();
  for (auto _ : state) {
    if (batched) {
      cpullm::attention(batch, cpullm::GgmlType::F32, shape, isa);
    } else {
      for (const cpullm::AttentionQuery& one : batch)
        cpullm::attention(one.out, one.q, one.keys, one.values, cpullm::GgmlType::F32, one.n_positions, shape, isa);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(batched ? "one batched call" : "one call per query");
}

BENCHMARK(BM_AttentionDecodeBatch)
    ->Name("attention_decode_batch")
    ->ArgsProduct({{32}, {16}, {16}, {0, 1}})
    ->ArgsProduct({{32}, {2048}, {16}, {0, 1}})
    ->ArgsProduct({{4}, {32768}, {16}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
