// A LLaMA model ready to run: the mapped file, its weights, a KV cache for one or more
// sequences and scratch buffers. forward() is the whole network for a batch of tokens, written
// as the list of steps it is.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/format/gguf.hpp"
#include "engine/format/llama_tensors.hpp"
#include "engine/instrument/regions.hpp"
#include "engine/kernels/attention.hpp"
#include "engine/kernels/matmul.hpp"
#include "engine/model/config.hpp"
#include "engine/model/kv_cache.hpp"
#include "engine/model/layer_prefetcher.hpp"
#include "engine/model/memory_plan.hpp"
#include "engine/model/weights.hpp"
#include "engine/runtime/tensor_parallel.hpp"
#include "engine/runtime/weight_placement.hpp"
#include "engine/util/aligned_vector.hpp"

namespace cpullm {

// How a model is run: how many sequences at once, how long each, the cache's precision, and
// the memory options. Everything here is decided before anything is loaded (see MemoryPlan).
struct ModelOptions {
  int64_t context = 0;         // positions per sequence; 0: min(trained context, 4096)
  int32_t sequences = 1;       // sequences in flight at once, each with its own KV cache rows
  KvType kv_type = kDefaultKvType;
  bool mlock = false;          // lock the weights in memory (--mlock)
  bool prefetch = false;       // double buffering: map layer l + 1 while layer l computes, then the embedding table (--prefetch)
  std::shared_ptr<const WeightPlacement> placement{};        // --placement: the NUMA copies threads read; null: the mapping
  std::shared_ptr<const TensorParallel> tensor_parallel{};  // --numa mpi: this rank computes its share of every projection
  std::optional<KernelConfig> kernels{};  // the level and cache sizes every kernel call uses; none: default_kernels()
};

// One token of a batch, as llama.cpp's llama_batch has it: which sequence it continues, at
// which position, and whether its next-token logits are wanted.
struct BatchToken {
  int32_t token = 0;
  int32_t sequence = 0;
  int64_t position = 0;
  bool want_logits = false;
};

// `sequences` copies of a prompt in one batch (a batched prefill), sequence s at positions
// 0 .. prompt.size() - 1, each copy's last token asking for logits.
std::vector<BatchToken> prompt_copies(std::span<const int32_t> prompt, int sequences);

// The parallel loops Model::forward runs for one decode step of `sequences` sequences (a token
// each), by run_chunk's choices for the model's tensors at `types`, without a weight placement
// or tensor parallelism: each a fork/join of the threads (a job of the pass's team), none with
// one thread. `info --costs` prints it; tuning/roofline.py multiplies it by the cost of one
// fork/join for the per-step overhead. Counted against a real step in tests/unit/test_model.cpp.
int64_t decode_step_parallel_loops(std::span<const LlamaTensor> tensors, std::span<const GgmlType> types,
                                   int64_t sequences, int64_t l1d_bytes);

// Scratch for one chunk of up to `chunk` tokens: they go through the layers together, so every
// projection is one matmul (one matvec for a single token). Every buffer starts on a cache line.
struct BatchState {
  int64_t chunk = 0;             // tokens per chunk: min(kMaxChunk, sequences * context)
  AlignedVector<float> x;        // (chunk, dim) residual streams
  AlignedVector<float> xb;       // (chunk, dim) normalised inputs, then attention outputs
  AlignedVector<float> xb2;      // (chunk, dim) projections back to dim
  AlignedVector<float> q;        // (chunk, dim) queries
  AlignedVector<float> k;        // (chunk, kv_dim) keys, before they go into the cache
  AlignedVector<float> v;        // (chunk, kv_dim) values, before they go into the cache
  AlignedVector<float> hb;       // (chunk, ffn_dim) gates, then the SwiGLU activations
  AlignedVector<float> hb2;      // (chunk, ffn_dim) up projections
  AlignedVector<float> rope;     // (chunk, head_dim) each token's rotary (cos, sin) pairs, rope_angles
  std::vector<AttentionQuery> single_queries;  // (runs of one token) a layer's decode attention, batched
  AlignedVector<float> logits;   // (tokens with want_logits, vocab) of the current call
};

class Model {
 public:
  // Maps the file, plans the memory and refuses (Error) a run that cannot fit, then allocates
  // the KV cache. Prints nothing.
  explicit Model(const std::string& path, const ModelOptions& options = {});
  Model(const std::string& path, int64_t context) : Model(path, ModelOptions{.context = context}) {}
  ~Model();

  const GgufFile& file() const { return *file_; }
  const LlamaConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const ModelOptions& options() const { return options_; }
  const KernelConfig& kernels() const { return kernels_; }  // what every forward() runs on
  const MemoryPlan& memory_plan() const { return memory_plan_; }
  int64_t context() const { return cache_.shape().context; }
  uint64_t kv_cache_bytes() const { return cache_.shape().bytes(); }
  uint64_t prefetched_bytes() const;  // weights the --prefetch thread has mapped so far

  // Runs a batch: tokens of any sequences, each sequence's tokens at consecutive positions, the
  // first at most one past the last position it ran before (position 0 restarts a sequence).
  // Returns the logits (tokens with want_logits, vocab) in batch order, valid until the next call.
  // Long batches run in chunks of kMaxChunk tokens.
  std::span<const float> forward(std::span<const BatchToken> batch);
  // Decode one token of sequence 0 at `pos`: its logits (vocab).
  std::span<const float> forward(int32_t token, int64_t pos);
  // Prefill of sequence 0: `tokens` at pos, pos + 1, ...; the last token's logits (vocab), or
  // with all_logits every token's (tokens, vocab).
  std::span<const float> forward_batch(std::span<const int32_t> tokens, int64_t pos, bool all_logits = false);

  // Tile sizes of the attention of several consecutive queries (a single query needs none).
  void set_attention_tiles(const AttentionTiles& tiles) { attention_tiles_ = tiles; }
  static constexpr int64_t kMaxChunk = 512;
  // The KV cache a run of `options` gets: its sequences and context (0: the trained context, at
  // most 4096), the model's layers and KV heads, the KV type. cpullm serve sizes its slots by it.
  static KvCacheShape cache_shape(const LlamaConfig& config, const ModelOptions& options);
  static constexpr int32_t kMaxSequences = 4096;

 private:
  // Tokens of one sequence at consecutive positions, next to each other in a chunk: their
  // attention is one call.
  struct Run {
    int32_t sequence;
    int64_t first_position;
    int64_t first_token;  // index in the chunk
    int64_t count;
  };
  void check_batch(std::span<const BatchToken> batch) const;
  // One chunk through every layer; leaves the residual streams in batch_.x.
  void run_chunk(std::span<const BatchToken> chunk);
  // y (tokens, y_stride) = x (tokens, x_stride) . W^T: every projection of the network.
  // Each call is a region (engine/instrument): `region` names which projection it is.
  void project(float* y, int64_t y_stride, const WeightMatrix& w, const float* x, int64_t x_stride, int64_t tokens,
               Region region);

  std::unique_ptr<GgufFile> file_;
  LlamaConfig config_;
  ModelWeights weights_;
  ModelOptions options_;
  KernelConfig kernels_;                  // options_.kernels, or the defaults, resolved once
  MemoryPlan memory_plan_;
  KvCache cache_;
  std::vector<int64_t> sequence_length_;  // (sequences) positions run so far
  BatchState batch_;
  AttentionTiles attention_tiles_;        // query x key tile of multi-query attention
  std::unique_ptr<LayerPrefetcher> prefetcher_;  // with --prefetch
};

}  // namespace cpullm
