// Random LLaMA models at real shapes, written as GGUF under llama.cpp's names so llama.cpp
// can load them too. Weights are scaled so activations stay finite through every layer.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/format/ggml_types.hpp"

namespace cpullm {

struct SyntheticShape {
  std::string name;
  int64_t n_layers, dim, ffn_dim, n_heads, n_kv_heads, vocab_size, context;
};

// tinyllama-1.1b, llama-7b, llama-13b; nullopt for an unknown name.
std::optional<SyntheticShape> named_shape(const std::string& name);

struct SyntheticModelOptions {
  SyntheticShape shape;
  GgmlType dtype = GgmlType::F16;  // F32, F16 or BF16 for the matrices; norms are F32
  uint64_t seed = 1;
  bool tied_output = false;        // leave out output.weight: the embedding is reused
  bool progress = true;
};

// Streams the model to `path`, one chunk at a time: memory does not grow with its size.
// Returns the bytes written.
uint64_t write_synthetic_model(const std::string& path, const SyntheticModelOptions& options);

}  // namespace cpullm
