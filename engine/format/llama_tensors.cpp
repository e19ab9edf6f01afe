#include "engine/format/llama_tensors.hpp"

#include <fmt/format.h>

namespace cpullm {

std::string_view llama_role_name(LlamaRole role) {
  constexpr std::string_view kNames[] = {"token_embd", "attn_norm", "attn_q",   "attn_k", "attn_v",      "attn_output",
                                         "ffn_norm",   "ffn_gate",  "ffn_up",   "ffn_down", "output_norm", "output"};
  return kNames[static_cast<int>(role)];
}

std::vector<LlamaTensor> llama_tensors(const LlamaDims& d) {
  std::vector<LlamaTensor> tensors;
  const auto add = [&](std::string name, LlamaRole role, int64_t rows, int64_t cols) {
    tensors.push_back({std::move(name), role, rows, cols});
  };
  add("token_embd.weight", LlamaRole::token_embd, d.vocab_size, d.dim);
  for (int64_t l = 0; l < d.n_layers; ++l) {
    const auto block = [&](LlamaRole role, int64_t rows, int64_t cols) {
      add(fmt::format("blk.{}.{}.weight", l, llama_role_name(role)), role, rows, cols);
    };
    block(LlamaRole::attn_norm, 1, d.dim);
    block(LlamaRole::attn_q, d.dim, d.dim);
    block(LlamaRole::attn_k, d.kv_dim, d.dim);
    block(LlamaRole::attn_v, d.kv_dim, d.dim);
    block(LlamaRole::attn_output, d.dim, d.dim);
    block(LlamaRole::ffn_norm, 1, d.dim);
    block(LlamaRole::ffn_gate, d.ffn_dim, d.dim);
    block(LlamaRole::ffn_up, d.ffn_dim, d.dim);
    block(LlamaRole::ffn_down, d.dim, d.ffn_dim);
  }
  add("output_norm.weight", LlamaRole::output_norm, 1, d.dim);
  if (!d.tied_output) add("output.weight", LlamaRole::output, d.vocab_size, d.dim);
  return tensors;
}

}  // namespace cpullm
