// A model's hyper-parameters, read from a GGUF file's `{architecture}.*` metadata (`llama.*` for
// Llama 1-3 and Mistral, `qwen2.*` for Qwen2 and Qwen2.5) and its optional rope_freqs.weight.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/kernels/ops.hpp"  // RopeStyle

namespace cpullm {

class GgufFile;

// The architectures cpullm runs: the same pre-norm SwiGLU block, told apart by RoPE's pairing
// and Qwen2's q/k/v biases.
enum class Architecture : uint8_t { llama, qwen2 };
std::string_view architecture_name(Architecture architecture);  // "llama", as general.architecture

struct LlamaConfig {
  Architecture architecture = Architecture::llama;
  int64_t dim = 0;            // embedding width ({arch}.embedding_length)
  int64_t ffn_dim = 0;        // SwiGLU hidden width ({arch}.feed_forward_length)
  int64_t n_layers = 0;       // transformer blocks ({arch}.block_count)
  int64_t n_heads = 0;        // query heads ({arch}.attention.head_count)
  int64_t n_kv_heads = 0;     // key/value heads, fewer for grouped-query attention
  int64_t head_dim = 0;       // dim / n_heads
  int64_t vocab_size = 0;     // rows of token_embd
  int64_t train_context = 0;  // {arch}.context_length
  float rms_eps = 1e-5f;      // {arch}.attention.layer_norm_rms_epsilon
  RopeStyle rope_style = RopeStyle::adjacent;
  // (head_dim / 2) radians per position of each pair: theta^(-2i/head_dim) for theta
  // {arch}.rope.freq_base, divided by the pair's frequency factor (rope_freqs.weight, or Llama 3's
  // from {arch}.rope.scaling.*) and by a linear scaling factor. With neither, exactly theta^(-2i/head_dim).
  std::vector<double> rope_frequencies;
  int64_t sliding_window = 0;  // {arch}.attention.sliding_window: a query sees this many positions, its own included; 0: all

  int64_t kv_dim() const { return n_kv_heads * head_dim; }

  // Reads and validates the hyper-parameters; an Error names the file and the bad key or tensor.
  static LlamaConfig from_gguf(const GgufFile& file);
};

// Llama 3.1's frequency factor of each pair (head_dim / 2 of them), as Meta's apply_scaling and
// llama.cpp's converter compute them: 1 for wavelengths below original_context / high_freq_factor,
// `factor` above original_context / low_freq_factor, and in between a smooth blend of the two.
struct Llama3Scaling {
  double factor = 8;                 // {arch}.rope.scaling.factor
  double low_freq_factor = 1;        // {arch}.rope.scaling.low_freq_factor
  double high_freq_factor = 4;       // {arch}.rope.scaling.high_freq_factor
  double original_context = 8192;    // {arch}.rope.scaling.original_context_length
};
std::vector<double> llama3_rope_factors(const Llama3Scaling& scaling, int64_t head_dim, double theta);

}  // namespace cpullm
