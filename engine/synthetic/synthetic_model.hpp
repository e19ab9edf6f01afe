// Random models at real shapes, written as GGUF under llama.cpp's names so llama.cpp can load
// them too. Weights are scaled so activations stay finite through every layer.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/format/ggml_types.hpp"
#include "engine/model/config.hpp"
#include "engine/synthetic/synthetic_vocab.hpp"

namespace cpullm {

// How a synthetic file scales RoPE: not at all; by Llama 3.1's per-pair factors (original context
// 8192, low and high frequency factors 1 and 4, and the model's factor), written as
// rope_freqs.weight as llama.cpp's converter writes them, or as {arch}.rope.scaling.* keys; or
// linearly (rope.scaling.type linear).
enum class SyntheticRopeScaling : uint8_t { none, llama3, llama3_keys, linear };

struct SyntheticShape {
  std::string name;
  int64_t n_layers, dim, ffn_dim, n_heads, n_kv_heads, vocab_size, context;
  // What else tells a family's files apart; the defaults are LLaMA 1/2's (and TinyLlama's).
  Architecture architecture = Architecture::llama;  // qwen2: q/k/v biases and NEOX RoPE
  SyntheticVocabKind vocab = SyntheticVocabKind::sentencepiece;
  float rope_base = 10000;                            // {arch}.rope.freq_base
  float rms_eps = 1e-5f;                              // {arch}.attention.layer_norm_rms_epsilon
  SyntheticRopeScaling rope_scaling = SyntheticRopeScaling::none;
  float rope_factor = 8;                              // the scaling's factor (Llama 3.1's 8)
  int64_t sliding_window = 0;                         // {arch}.attention.sliding_window; 0: not written
};

// tinyllama-1.1b, llama-7b, llama-13b, llama3-8b, mistral-7b, qwen2.5-7b; nullopt for an unknown name.
std::optional<SyntheticShape> named_shape(const std::string& name);
const std::vector<std::string>& shape_names();  // the names named_shape knows, in that order

struct SyntheticModelOptions {
  SyntheticShape shape;
  GgmlType dtype = GgmlType::F16;  // F32, F16 or BF16 for the matrices; norms and biases are F32
  uint64_t seed = 1;
  bool tied_output = false;        // leave out output.weight: the embedding is reused
  bool progress = true;
};

// Streams the model to `path`, one chunk at a time: memory does not grow with its size.
// Returns the bytes written.
uint64_t write_synthetic_model(const std::string& path, const SyntheticModelOptions& options);

}  // namespace cpullm
