// Views of a model's weights inside the GGUF mapping. Nothing here owns memory: every
// pointer points into the read-only mapping, so processes running one model share its pages.
#pragma once
#include <vector>

#include "engine/kernels/matvec.hpp"
#include "engine/model/config.hpp"

namespace cpullm {

class GgufFile;

struct LayerWeights {
  const float* attn_norm = nullptr;  // (dim) RMSNorm gain before attention
  WeightMatrix wq;                   // (dim, dim)
  WeightMatrix wk;                   // (kv_dim, dim)
  WeightMatrix wv;                   // (kv_dim, dim)
  const float* bq = nullptr;         // (dim) bias added to the queries, or null (Qwen2 has q, k and v biases)
  const float* bk = nullptr;         // (kv_dim) bias of the keys, or null
  const float* bv = nullptr;         // (kv_dim) bias of the values, or null
  WeightMatrix wo;                   // (dim, dim)
  const float* ffn_norm = nullptr;   // (dim) RMSNorm gain before the feed-forward
  WeightMatrix w_gate;               // (ffn_dim, dim)
  WeightMatrix w_up;                 // (ffn_dim, dim)
  WeightMatrix w_down;               // (dim, ffn_dim)
};

struct ModelWeights {
  WeightMatrix token_embedding;       // (vocab, dim)
  std::vector<LayerWeights> layers;   // (n_layers)
  const float* output_norm = nullptr; // (dim)
  WeightMatrix output;                // (vocab, dim); the embedding itself when tied
  bool tied_output = false;           // no output.weight in the file
};

// Every matrix a projection reads (the layers' seven and the output): what NUMA placement copies.
std::vector<const WeightMatrix*> projection_matrices(const ModelWeights& weights);

// Finds every tensor under llama.cpp's names, checks its shape against the config and that a
// kernel can run its type. q/k/v biases are read where present (llama.cpp reads them for llama
// too) and required for qwen2; any other bias is refused. Also fills config.vocab_size from
// token_embd.
ModelWeights map_weights(const GgufFile& file, LlamaConfig& config);

}  // namespace cpullm
