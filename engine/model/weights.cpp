#include "engine/kernels/weight_formats.hpp"
#include "engine/model/weights.hpp"

#include <fmt/format.h>

#include "engine/format/gguf.hpp"
#include "engine/kernels/sparse.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

void check_alignment(const GgufFile& file, const GgufTensorInfo& t, std::size_t element_bytes) {
  if (reinterpret_cast<uintptr_t>(t.data) % element_bytes != 0)
    fail_file(file.path(), "tensor '{}' data is not aligned to {} bytes (file alignment {})", t.name, element_bytes,
              file.alignment());
}

// A pruned matrix (quantize --sparsity): its shape must suit its pattern, and every stored
// column must lie inside the row, since the kernels read x there unchecked.
WeightMatrix sparse_matrix(const GgufFile& file, const GgufTensorInfo& t, int64_t rows, int64_t cols) {
  std::string problem = sparse_shape_problem(t.type, rows, cols);
  check_alignment(file, t, 4);  // the BLOCK4X4 int32 columns; every row group starts 4-aligned
  const WeightMatrix w{t.data, t.type, rows, cols};
  if (problem.empty()) problem = sparse_index_problem(w);
  if (!problem.empty()) fail_file(file.path(), "tensor '{}' of type {}: {}", t.name, ggml_type_name(t.type), problem);
  return w;
}

WeightMatrix matrix(const GgufFile& file, const std::string& name, int64_t rows, int64_t cols) {
  const GgufTensorInfo& t = file.require_tensor(name);
  if (t.n_dims != 2 || t.ne[0] != cols || t.ne[1] != rows)
    fail_file(file.path(), "tensor '{}' has shape {}, expected [{}, {}]", name, t.shape_string(), cols, rows);
  if (is_sparse(t.type)) return sparse_matrix(file, t, rows, cols);
  if (!matvec_supports(t.type, cols))
    fail_file(file.path(),
              "tensor '{}' has type {}, which cpullm's kernels cannot run at row length {} (supported: {}; the "
              "integer ones with rows of whole 32-value blocks)",
              name, ggml_type_name(t.type), cols, weight_format_names());
  // Rows are read with unaligned loads; the check covers the scalar paths' element reads.
  check_alignment(file, t, t.type == GgmlType::F32 ? 4 : t.type == GgmlType::CPULLM_INT8_CHANNEL ? 1 : 2);
  return {t.data, t.type, rows, cols};
}

// A norm's gain or a bias: `length` F32 values, as llama.cpp writes them.
const float* f32_vector(const GgufFile& file, const GgufTensorInfo& t, int64_t length) {
  if (t.n_dims != 1 || t.ne[0] != length)
    fail_file(file.path(), "tensor '{}' has shape {}, expected [{}]", t.name, t.shape_string(), length);
  if (t.type != GgmlType::F32)
    fail_file(file.path(), "tensor '{}' has type {} (norms and biases must be F32, as llama.cpp writes them)", t.name,
              ggml_type_name(t.type));
  check_alignment(file, t, 4);
  return reinterpret_cast<const float*>(t.data);
}

const float* norm(const GgufFile& file, const std::string& name, int64_t dim) {
  return f32_vector(file, file.require_tensor(name), dim);
}

// A bias the architecture requires, or one that is there or not.
const float* bias(const GgufFile& file, const std::string& name, int64_t length, bool required) {
  const GgufTensorInfo* t = required ? &file.require_tensor(name) : file.find_tensor(name);
  return t ? f32_vector(file, *t, length) : nullptr;
}

}  // namespace

std::vector<const WeightMatrix*> projection_matrices(const ModelWeights& weights) {
  std::vector<const WeightMatrix*> matrices;
  for (const LayerWeights& l : weights.layers)
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) matrices.push_back(m);
  matrices.push_back(&weights.output);
  return matrices;
}

ModelWeights map_weights(const GgufFile& file, LlamaConfig& config) {
  const GgufTensorInfo& embedding = file.require_tensor("token_embd.weight");
  if (embedding.n_dims != 2)
    fail_file(file.path(), "tensor 'token_embd.weight' has shape {}, expected [dim, vocab]", embedding.shape_string());
  config.vocab_size = embedding.ne[1];
  const int64_t dim = config.dim, kv_dim = config.kv_dim(), ffn = config.ffn_dim;

  ModelWeights w;
  w.token_embedding = matrix(file, "token_embd.weight", config.vocab_size, dim);
  for (int64_t l = 0; l < config.n_layers; ++l) {
    auto name = [l](const char* part, const char* kind = "weight") { return fmt::format("blk.{}.{}.{}", l, part, kind); };
    LayerWeights layer;
    layer.attn_norm = norm(file, name("attn_norm"), dim);
    layer.wq = matrix(file, name("attn_q"), dim, dim);
    layer.wk = matrix(file, name("attn_k"), kv_dim, dim);
    layer.wv = matrix(file, name("attn_v"), kv_dim, dim);
    const bool biased = config.architecture == Architecture::qwen2;
    layer.bq = bias(file, name("attn_q", "bias"), dim, biased);
    layer.bk = bias(file, name("attn_k", "bias"), kv_dim, biased);
    layer.bv = bias(file, name("attn_v", "bias"), kv_dim, biased);
    layer.wo = matrix(file, name("attn_output"), dim, dim);
    layer.ffn_norm = norm(file, name("ffn_norm"), dim);
    layer.w_gate = matrix(file, name("ffn_gate"), ffn, dim);
    layer.w_up = matrix(file, name("ffn_up"), ffn, dim);
    layer.w_down = matrix(file, name("ffn_down"), dim, ffn);
    w.layers.push_back(layer);
  }
  // Other biases (the output projection's, the feed-forward's) would be left out of the sums
  // without a word: refused by name instead.
  for (const GgufTensorInfo& t : file.tensors())
    if (t.name.ends_with(".bias") && !t.name.ends_with(".attn_q.bias") && !t.name.ends_with(".attn_k.bias") &&
        !t.name.ends_with(".attn_v.bias"))
      fail_file(file.path(), "tensor '{}' is a bias cpullm does not add (it adds those of attn_q, attn_k and attn_v)",
                t.name);
  w.output_norm = norm(file, "output_norm.weight", dim);
  w.tied_output = file.find_tensor("output.weight") == nullptr;
  w.output = w.tied_output ? w.token_embedding : matrix(file, "output.weight", config.vocab_size, dim);
  return w;
}

}  // namespace cpullm
