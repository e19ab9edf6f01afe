// The LLaMA architecture's tensors as llama.cpp names and shapes them: the one list that sizes a
// model without its weights (placement plans, `info --costs`, and through it tuning/ and
// reports/). The engine's loader asks the file for the same names (model/weights.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cpullm {

// What a tensor is, whatever its layer.
enum class LlamaRole : uint8_t {
  token_embd, attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down,
  output_norm, output,
};
std::string_view llama_role_name(LlamaRole role);  // "attn_q"

struct LlamaTensor {
  std::string name;  // "blk.3.attn_q.weight", "token_embd.weight"
  LlamaRole role;
  int64_t rows = 1;  // ne[1]: output features; 1 for a norm's weight vector
  int64_t cols = 0;  // ne[0]: values per row
  bool matrix() const { return rows > 1; }
};

// The widths that fix every tensor's shape.
struct LlamaDims {
  int64_t n_layers = 0;
  int64_t dim = 0;          // embedding width
  int64_t ffn_dim = 0;      // SwiGLU hidden width
  int64_t kv_dim = 0;       // key/value width: dim / heads x kv heads
  int64_t vocab_size = 0;
  bool tied_output = false;  // no output.weight: the output layer is token_embd
};

// Every tensor, in the order llama.cpp's converter writes them: token_embd, each block's norms and
// projections, output_norm, output (unless tied).
std::vector<LlamaTensor> llama_tensors(const LlamaDims& dims);

}  // namespace cpullm
