#include "engine/model/model.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <initializer_list>

#include "engine/instrument/op_costs.hpp"
#include "engine/instrument/regions.hpp"
#include "engine/kernels/attention.hpp"
#include "engine/kernels/matmul.hpp"
#include "engine/kernels/matvec.hpp"
#include "engine/kernels/ops.hpp"
#include "engine/kernels/parallel.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

constexpr int64_t kDefaultContextCap = 4096;
constexpr int64_t kMaxContext = int64_t{1} << 24;

// Element-wise work on every token's row (norms, RoPE, SwiGLU, residual adds, embedding rows)
// runs over the threads from this many tokens on (a prompt chunk), on the calling thread below
// (a decode step), where handing out a job, about a microsecond, would cost more than the rows.
// Each row's arithmetic is the same either way. Serial, these take 5-8% of a 512-token prefill
// at 2 threads (`cpullm profile -p 512`), and their share grows with the thread count.
constexpr int64_t kTokensToSplit = 8;
template <typename Body>
void for_token_rows(int64_t n, const Body& body) {
  if (n >= kTokensToSplit) for_each_share(n, body);
  else body(int64_t{0}, n);
}

// What the prefetch thread maps, inside the mapping: each layer's weight matrices, then, as a
// last "layer" that the last layer's request(l + 1) asks for, the embedding table. Each
// generated token reads one embedding row, nearly always one no token read before, and without
// the table mapped each decode step begins with a page fault, up to 2% of a token
// (docs/kernels-decode.md, "The embedding table").
std::vector<std::vector<std::span<const std::byte>>> prefetch_ranges(const ModelWeights& weights) {
  const auto bytes_of = [](const WeightMatrix& m) { return std::span(m.data, static_cast<std::size_t>(m.rows * row_bytes(m))); };
  std::vector<std::vector<std::span<const std::byte>>> ranges;
  for (const LayerWeights& w : weights.layers) {
    auto& layer = ranges.emplace_back();
    for (const WeightMatrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) layer.push_back(bytes_of(*m));
  }
  ranges.push_back({bytes_of(weights.token_embedding)});
  return ranges;
}

}  // namespace

KvCacheShape Model::cache_shape(const LlamaConfig& c, const ModelOptions& options) {
  return {.sequences = options.sequences,
          .layers = c.n_layers,
          .context = options.context ? options.context : std::min(c.train_context, kDefaultContextCap),
          .kv_dim = c.kv_dim(),
          .kv_heads = c.n_kv_heads,
          .type = options.kv_type};
}

Model::Model(const std::string& path, const ModelOptions& options)
    : file_(std::make_unique<GgufFile>(path)), config_(LlamaConfig::from_gguf(*file_)),
      weights_(map_weights(*file_, config_)), options_(options),
      kernels_(options.kernels ? *options.kernels : default_kernels()) {
  const LlamaConfig& c = config_;
  check_cpu_runs(kernels_.isa);
  check_cache_sizes(kernels_.caches);
  if (options.context < 0) fail("context {} is negative", options.context);
  if (options.sequences < 1 || options.sequences > kMaxSequences)
    fail("{} sequences: must be from 1 to {}", options.sequences, kMaxSequences);
  KvCacheShape shape = cache_shape(c, options);
  if (const std::string refusal = kv_type_refusal(shape.type, c.head_dim); !refusal.empty())
    fail("{}: --kv-type {}: {}", path, kv_type_name(shape.type), refusal);
  // Refuse before computing sizes that could overflow, then before allocating anything.
  const double cache_estimate = 2.0 * shape.sequences * shape.layers * shape.context * shape.kv_dim * 4;
  if (shape.context > kMaxContext || cache_estimate > 1e15)
    fail("{}: a KV cache for {} sequences of {} positions would need {:.0f} GiB", path, shape.sequences,
         shape.context, cache_estimate / 1073741824.0);
  const int64_t chunk = std::min(kMaxChunk, shape.sequences * shape.context);
  memory_plan_ = plan_memory(*file_, c, shape, chunk);
  if (!memory_plan_.fits())
    fail("{}: this run does not fit the memory of this machine: {}", path, memory_plan_.describe());

  if (options.mlock) {
    const auto mapping = file_->bytes();
    if (mlock(mapping.data(), mapping.size()) != 0)
      fail("{}: cannot lock {:.2f} GiB of weights in memory: {} (raise the limit with `ulimit -l`, or run without "
           "--mlock)",
           path, mapping.size() / 1073741824.0, std::strerror(errno));
  }
  cache_ = KvCache(shape);
  sequence_length_.assign(shape.sequences, 0);

  BatchState& b = batch_;
  b.chunk = chunk;
  for (auto* buffer : {&b.x, &b.xb, &b.xb2, &b.q}) buffer->resize(chunk * c.dim);
  for (auto* buffer : {&b.k, &b.v}) buffer->resize(chunk * c.kv_dim());
  for (auto* buffer : {&b.hb, &b.hb2}) buffer->resize(chunk * c.ffn_dim);
  b.rope.resize(chunk * c.head_dim);
  if (options.prefetch) prefetcher_ = std::make_unique<LayerPrefetcher>(prefetch_ranges(weights_));
}

Model::~Model() = default;

uint64_t Model::prefetched_bytes() const { return prefetcher_ ? prefetcher_->bytes_mapped() : 0; }

void Model::check_batch(std::span<const BatchToken> batch) const {
  const int64_t vocab = config_.vocab_size, context = cache_.shape().context;
  std::vector<int64_t> next = sequence_length_;                 // (sequences) next position to run
  std::vector<bool> in_batch(sequence_length_.size(), false);  // seen earlier in this batch
  for (const BatchToken& t : batch) {
    if (t.token < 0 || t.token >= vocab) fail("token id {} is outside the vocabulary (0..{})", t.token, vocab - 1);
    if (t.sequence < 0 || t.sequence >= static_cast<int64_t>(next.size()))
      fail("sequence {} does not exist: the model runs {} sequences", t.sequence, next.size());
    if (t.position < 0 || t.position >= context)
      fail("position {} is outside the context of {} positions", t.position, context);
    const int64_t expected = next[t.sequence];
    if (in_batch[t.sequence] ? t.position != expected : t.position > expected)
      fail("sequence {}: position {} does not follow position {}, the last one run", t.sequence, t.position,
           expected - 1);
    in_batch[t.sequence] = true;
    next[t.sequence] = t.position + 1;
  }
}

std::span<const float> Model::forward(std::span<const BatchToken> batch) {
  const LlamaConfig& c = config_;
  if (batch.empty()) fail("forward: no tokens");
  check_batch(batch);
  BatchState& b = batch_;
  const auto wanted = std::count_if(batch.begin(), batch.end(), [](const BatchToken& t) { return t.want_logits; });
  b.logits.resize(wanted * c.vocab_size);

  // The whole pass with the threads kept in one team: a decode step's 100-odd parallel loops
  // then cost a handoff each instead of an OpenMP region (parallel.hpp).
  run_as_team([&] {
    int64_t logits_done = 0;
    for (std::size_t start = 0; start < batch.size(); start += b.chunk) {
      const auto chunk = batch.subspan(start, std::min<std::size_t>(b.chunk, batch.size() - start));
      run_chunk(chunk);
      // The wanted tokens' final norms side by side in xb, then the output projection of them all.
      int64_t rows = 0;
      for (std::size_t t = 0; t < chunk.size(); ++t)
        if (chunk[t].want_logits) {
          ScopedRegion region(Region::final_norm, rmsnorm_cost(c.dim, 1));
          rmsnorm(&b.xb[rows++ * c.dim], &b.x[t * c.dim], weights_.output_norm, c.dim, c.rms_eps);
        }
      if (rows > 0)
        project(&b.logits[logits_done * c.vocab_size], c.vocab_size, weights_.output, b.xb.data(), c.dim, rows,
                Region::lm_head);
      logits_done += rows;
    }
  });
  for (const BatchToken& t : batch) sequence_length_[t.sequence] = t.position + 1;
  // NaN or infinite weights (or activations that overflow) give logits no sampler can read: a
  // run on them would print <unk>s and succeed. Every command reads its logits from here.
  const auto bad = std::find_if_not(b.logits.begin(), b.logits.end(), [](float v) { return std::isfinite(v); });
  if (bad != b.logits.end())
    fail_file(file_->path(), "the logits are not finite ({} at vocabulary entry {}): the weights or hyper-parameters give no "
              "usable output", *bad, (bad - b.logits.begin()) % c.vocab_size);
  return b.logits;
}

std::span<const float> Model::forward(int32_t token, int64_t pos) {
  const BatchToken one{.token = token, .sequence = 0, .position = pos, .want_logits = true};
  return forward({&one, 1});
}

std::vector<BatchToken> prompt_copies(std::span<const int32_t> prompt, int sequences) {
  std::vector<BatchToken> batch;
  batch.reserve(prompt.size() * static_cast<std::size_t>(std::max(sequences, 0)));
  for (int s = 0; s < sequences; ++s)
    for (std::size_t i = 0; i < prompt.size(); ++i)
      batch.push_back({.token = prompt[i], .sequence = s, .position = static_cast<int64_t>(i),
                       .want_logits = i + 1 == prompt.size()});
  return batch;
}

int64_t decode_step_parallel_loops(std::span<const LlamaTensor> tensors, std::span<const GgmlType> types,
                                   int64_t sequences, int64_t l1d_bytes) {
  const int64_t n = sequences, split = n >= kTokensToSplit ? 1 : 0;  // a for_token_rows: norms, RoPE, adds, SwiGLU
  const auto project = [&](std::size_t i) { return matmul_parallel_loops(types[i], n, tensors[i].cols, l1d_bytes); };
  // project_normalised: one matvec_group where every matrix streams its rows, else a project each.
  const auto grouped = [&](std::initializer_list<std::size_t> group) {
    if (std::all_of(group.begin(), group.end(),
                    [&](std::size_t i) { return matmul_streams_rows(types[i], n, tensors[i].cols, l1d_bytes); }))
      return matvec_group_passes(n);
    int64_t loops = 0;
    for (std::size_t i : group) loops += project(i);
    return loops;
  };
  // Each layer's tensors by role (llama_tensors lists a layer's together), then the layer's loops
  // in run_chunk's order: norm, q/k/v, RoPE, attention (every sequence's one query in one loop),
  // o, add, norm, gate/up, SwiGLU, down, add.
  std::array<std::size_t, static_cast<std::size_t>(LlamaRole::output) + 1> at{};
  const auto layer = [&] {
    const auto r = [&](LlamaRole role) { return at[static_cast<std::size_t>(role)]; };
    return split + grouped({r(LlamaRole::attn_q), r(LlamaRole::attn_k), r(LlamaRole::attn_v)}) + split + 1 +
           project(r(LlamaRole::attn_output)) + split + split + grouped({r(LlamaRole::ffn_gate), r(LlamaRole::ffn_up)}) +
           split + project(r(LlamaRole::ffn_down)) + split;
  };
  const bool tied = std::none_of(tensors.begin(), tensors.end(), [](const LlamaTensor& t) { return t.role == LlamaRole::output; });
  int64_t loops = split;  // the embedding rows
  std::string_view current;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string_view name = tensors[i].name;
    const std::string_view block = name.starts_with("blk.") ? name.substr(0, name.find('.', 4)) : "";
    if (block != current && !current.empty()) loops += layer();
    current = block;
    at[static_cast<std::size_t>(tensors[i].role)] = i;
    if (tensors[i].role == LlamaRole::output || (tied && tensors[i].role == LlamaRole::token_embd)) loops += project(i);
  }
  if (!current.empty()) loops += layer();
  return loops;
}

std::span<const float> Model::forward_batch(std::span<const int32_t> tokens, int64_t pos, bool all_logits) {
  std::vector<BatchToken> batch(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i)
    batch[i] = {.token = tokens[i], .sequence = 0, .position = pos + static_cast<int64_t>(i),
                .want_logits = all_logits || i + 1 == tokens.size()};
  return forward(batch);
}

void Model::project(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride,
                    int64_t tokens, Region region) {
  ScopedRegion scope(region, matmul_cost(w, tokens));
  // Rows [first, first + rows.rows) of the output from those rows of the weights.
  const auto compute = [&](const WeightMatrix& rows, int64_t first) {
    if (tokens == 1) return matvec(y + first, rows, x, kernels_.isa);
    matmul(y + first, y_stride, rows, x, x_stride, tokens, kernels_.isa, kernels_.caches);
  };
  if (const TensorParallel* tp = options_.tensor_parallel.get()) {
    // --numa mpi: this rank's rows (it reads only those pages of the file), then everyone's.
    const RowSpan mine = tp->rows(w.rows, row_group(w));
    if (mine.end > mine.begin) compute(row_slice(w, mine), mine.begin);
    return tp->all_gather_rows(y, y_stride, w.rows, tokens, row_group(w));
  }
  const WeightPlacement* placement = options_.placement.get();
  if (placement && placement->per_thread_rows()) return for_each_thread_rows(*placement, w, compute);
  compute(placement ? placement->copy_for_node(w, 0) : w, 0);
}

void Model::run_chunk(std::span<const BatchToken> chunk) {
  const LlamaConfig& c = config_;
  const int64_t n = static_cast<int64_t>(chunk.size()), dim = c.dim, kv_dim = c.kv_dim();
  BatchState& b = batch_;
  const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim, c.sliding_window};
  const GgmlType kv_type = kv_element_type(cache_.shape().type);
  // Every token's input normalised into b.xb.
  auto normalise = [&](const float* weight, Region region) {
    ScopedRegion scope(region, rmsnorm_cost(dim, n));
    float* out = b.xb.data();
    const float* x = b.x.data();
    const float eps = c.rms_eps;
    for_token_rows(n, [=](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) rmsnorm(&out[t * dim], &x[t * dim], weight, dim, eps);
    });
  };
  // x (n, width) += delta (n, width), a residual connection.
  auto add_rows = [n](float* x, const float* delta, int64_t width) {
    for_token_rows(n, [=](int64_t first, int64_t last) {
      add_in_place(x + first * width, delta + first * width, (last - first) * width);
    });
  };
  // Projections of b.xb into outputs of (n, their matrix's rows). Where matmul would stream rows
  // for n tokens, a single matvec_group: one fork/join, each token's row of b.xb quantized once
  // for all the matrices. Otherwise, and wherever rows are split their own way (--numa mpi,
  // per-thread placements), one project each. Task i is region regions[i]; the group's time is
  // split among them (see ScopedRegion).
  const WeightPlacement* placement = options_.placement.get();
  const bool rows_split_elsewhere = options_.tensor_parallel || (placement && placement->per_thread_rows());
  auto project_normalised = [&](std::initializer_list<MatvecTask> tasks, std::initializer_list<Region> regions) {
    const bool grouped = !rows_split_elsewhere && std::all_of(tasks.begin(), tasks.end(), [&](const MatvecTask& t) {
      return matmul_streams_rows(t.w->type, n, t.w->cols, kernels_.caches.l1d_bytes);
    });
    if (grouped) {
      std::array<RegionShare, kMaxFusedRegions> shares;
      std::array<MatvecTask, kMaxFusedRegions> group;
      for (std::size_t i = 0; i < tasks.size(); ++i) {
        const MatvecTask& t = tasks.begin()[i];
        shares[i] = {regions.begin()[i], matmul_cost(*t.w, n)};
        group[i] = {t.y, placement ? &placement->copy_for_node(*t.w, 0) : t.w, t.w->rows};
      }
      ScopedRegion scope({shares.data(), tasks.size()});
      return matvec_group({group.data(), tasks.size()}, b.xb.data(), dim, n, kernels_.isa);
    }
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const MatvecTask& t = tasks.begin()[i];
      project(t.y, t.w->rows, *t.w, b.xb.data(), dim, n, regions.begin()[i]);
    }
  };
  std::vector<Run> runs;
  for (int64_t t = 0; t < n; ++t) {
    const BatchToken& token = chunk[t];
    if (!runs.empty() && runs.back().sequence == token.sequence &&
        runs.back().first_position + runs.back().count == token.position)
      ++runs.back().count;
    else
      runs.push_back({token.sequence, token.position, t, 1});
  }

  {
    ScopedRegion region(Region::embedding, embedding_cost(weights_.token_embedding, n));
    float* x = b.x.data();
    const WeightMatrix* table = &weights_.token_embedding;
    for_token_rows(n, [=](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) weight_row_to_float(&x[t * dim], *table, chunk[t].token);
    });
  }

  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    if (prefetcher_) prefetcher_->request(l + 1);

    // Attention: q, k, v for every token; k and v go into their sequences' cache rows. Each run
    // of a sequence's consecutive tokens then attends to its positions 0 .. its own, the run's
    // earlier tokens included: one query alone directly, several tile by tile.
    normalise(w.attn_norm, Region::attn_norm);
    project_normalised({{b.q.data(), &w.wq}, {b.k.data(), &w.wk}, {b.v.data(), &w.wv}},
                       {Region::q_proj, Region::k_proj, Region::v_proj});
    {
      // The biases (Qwen2's), then RoPE on q and k. The bias additions count in this region.
      ScopedRegion region(Region::rope, rope_cost(dim + kv_dim, n));
      float *q = b.q.data(), *k = b.k.data(), *v = b.v.data(), *angles = b.rope.data();
      const bool first_layer = l == 0;
      const int64_t hd = c.head_dim, heads = c.n_heads, kv_heads = c.n_kv_heads;
      const double* frequencies = c.rope_frequencies.data();
      const RopeStyle style = c.rope_style;
      const float *bq = w.bq, *bk = w.bk, *bv = w.bv;
      for_token_rows(n, [=](int64_t first, int64_t last) {
        for (int64_t t = first; t < last; ++t) {
          if (bq) add_in_place(&q[t * dim], bq, dim);
          if (bk) add_in_place(&k[t * kv_dim], bk, kv_dim);
          if (bv) add_in_place(&v[t * kv_dim], bv, kv_dim);
          float* angle = &angles[t * hd];
          if (first_layer) rope_angles(angle, frequencies, hd, chunk[t].position);  // for every layer
          rope(&q[t * dim], heads, hd, angle, style);
          rope(&k[t * kv_dim], kv_heads, hd, angle, style);
        }
      });
    }
    // The runs of one token (decode steps, one per sequence) attend in one parallel loop; before
    // it every run's keys and values go into the cache, so that a sequence with several runs in
    // the chunk finds all of its earlier positions whichever order the runs compute in. Longer
    // runs (prompts) go tile by tile, one after the other.
    const double kv_bytes = kv_value_bytes(cache_.shape().type);
    auto store = [&](const Run& run) {
      cache_.store(run.sequence, l, run.first_position, run.count, &b.k[run.first_token * kv_dim],
                   &b.v[run.first_token * kv_dim]);
    };
    std::vector<AttentionQuery>& single = b.single_queries;
    single.clear();
    RegionCost single_cost;
    for (const Run& run : runs)
      if (run.count == 1) {
        const RegionCost cost = attention_cost(shape, run.first_position, 1, kv_bytes);
        single_cost.flops += cost.flops, single_cost.bytes += cost.bytes;
        single.push_back({&b.xb[run.first_token * dim], &b.q[run.first_token * dim], cache_.keys(run.sequence, l),
                          cache_.values(run.sequence, l), run.first_position + 1, cache_.strides()});
      }
    if (!single.empty()) {
      ScopedRegion region(Region::attention, single_cost);
      for (const Run& run : runs) store(run);
      attention(single, kv_type, shape, kernels_.isa);
    }
    for (const Run& run : runs) {
      if (run.count == 1) continue;
      ScopedRegion region(Region::attention, attention_cost(shape, run.first_position, run.count, kv_bytes));
      if (single.empty()) store(run);
      attention_tiled(&b.xb[run.first_token * dim], &b.q[run.first_token * dim], run.first_position, run.count,
                      cache_.keys(run.sequence, l), cache_.values(run.sequence, l), kv_type, shape, attention_tiles_,
                      kernels_.isa, cache_.strides());
    }
    project(b.xb2.data(), dim, w.wo, b.xb.data(), dim, n, Region::o_proj);
    add_rows(b.x.data(), b.xb2.data(), dim);

    // Feed-forward: down(silu(gate(x)) * up(x)).
    normalise(w.ffn_norm, Region::ffn_norm);
    project_normalised({{b.hb.data(), &w.w_gate}, {b.hb2.data(), &w.w_up}}, {Region::ffn_gate, Region::ffn_up});
    {
      ScopedRegion region(Region::ffn_act, swiglu_cost(c.ffn_dim, n));
      float* gate = b.hb.data();
      const float* up = b.hb2.data();
      const int64_t ffn = c.ffn_dim;
      for_token_rows(n, [=](int64_t first, int64_t last) {
        swiglu(gate + first * ffn, up + first * ffn, (last - first) * ffn);
      });
    }
    project(b.xb.data(), dim, w.w_down, b.hb.data(), c.ffn_dim, n, Region::ffn_down);
    add_rows(b.x.data(), b.xb.data(), dim);
  }
}

}  // namespace cpullm
