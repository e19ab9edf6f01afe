#include "harness/bench/model_facts.hpp"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <optional>

#include <fmt/format.h>

#include "engine/format/gguf.hpp"
#include "engine/util/text.hpp"
#include "engine/kernels/weight_formats.hpp"

namespace cpullm {

ModelFacts describe_model(const GgufFile& file) {
  ModelFacts facts;
  facts.filename = valid_utf8(file.path());
  for (const GgufTensorInfo& t : file.tensors()) {
    facts.size += t.bytes;
    facts.n_params += static_cast<uint64_t>(t.elements());
  }
  const GgufTensorInfo& embedding = file.require_tensor("token_embd.weight");
  const bool tied = file.find_tensor("output.weight") == nullptr;
  facts.embedding_row_bytes = embedding.bytes / static_cast<uint64_t>(std::max<int64_t>(embedding.ne[1], 1));
  facts.decode_step_bytes = facts.size - (tied ? 0 : embedding.bytes - facts.embedding_row_bytes);
  // The matrices' format is the first block's query projection's (what quantize changes).
  const GgufTensorInfo& q = file.require_tensor("blk.0.attn_q.weight");
  // The registry's name; a type cpullm does not run keeps ggml's, in lower case. A sparse type
  // is its kept values' format and the share pruned, so that a pruned file pairs with the dense one.
  const std::optional<SparseType> sparse = sparse_type(static_cast<uint32_t>(q.type));
  if (sparse) facts.sparsity = sparse->pattern == SparsePattern::n_of_m ? 1.0 - static_cast<double>(sparse->n) / sparse->m
                                                                        : sparse->pruned_permille / 1000.0;
  const GgmlType matrices = sparse ? sparse->values : q.type;
  const std::string type_name(ggml_type_name(matrices));
  if (const WeightFormat* format = find_weight_format(matrices)) facts.format = format->name;
  else std::transform(type_name.begin(), type_name.end(), std::back_inserter(facts.format),
                      [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // llama-bench's "llama 7B Q4_0" ("qwen2 7B Q4_0"): the architecture, then parameters in
  // billions, or millions (thousands) for small models.
  const double params = static_cast<double>(facts.n_params);
  const std::string count = params >= 1e9   ? fmt::format("{:.1f}B", params / 1e9)
                            : params >= 1e6 ? fmt::format("{:.0f}M", params / 1e6)
                                            : fmt::format("{:.0f}K", params / 1e3);
  facts.type = fmt::format("{} {} {}", valid_utf8(file.require_string("general.architecture")), count, ggml_type_name(q.type));
  return facts;
}

}  // namespace cpullm
