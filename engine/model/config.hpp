// LLaMA hyper-parameters, read from a GGUF file's `llama.*` metadata.
#pragma once
#include <cstdint>

namespace cpullm {

class GgufFile;

struct LlamaConfig {
  int64_t dim = 0;            // embedding width (llama.embedding_length)
  int64_t ffn_dim = 0;        // SwiGLU hidden width (llama.feed_forward_length)
  int64_t n_layers = 0;       // transformer blocks (llama.block_count)
  int64_t n_heads = 0;        // query heads (llama.attention.head_count)
  int64_t n_kv_heads = 0;     // key/value heads, fewer for grouped-query attention
  int64_t head_dim = 0;       // dim / n_heads
  int64_t vocab_size = 0;     // rows of token_embd
  int64_t train_context = 0;  // llama.context_length
  float rms_eps = 1e-5f;      // llama.attention.layer_norm_rms_epsilon
  float rope_theta = 10000;   // llama.rope.freq_base

  int64_t kv_dim() const { return n_kv_heads * head_dim; }

  // Reads and validates the hyper-parameters; an Error names the file and the bad key.
  static LlamaConfig from_gguf(const GgufFile& file);
};

}  // namespace cpullm
