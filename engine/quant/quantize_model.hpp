// `cpullm quantize`: rewrite a GGUF model with its matrices in any format of the registry
// (kernels/weight_formats.hpp: `cpullm info --formats`) or one of llama.cpp's mixtures of them
// (file_types.hpp).
// Which tensors change, and to what, follows llama.cpp's llama-quantize, so for the same input
// both write the same tensor bytes. Tensors are converted one chunk of rows at a time, so memory
// stays flat whatever the model's size.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format/ggml_types.hpp"
#include "engine/format/gguf.hpp"
#include "engine/quant/file_types.hpp"

namespace cpullm {

struct QuantizeOptions {
  // The matrices' new types: a registry format, or one of llama.cpp's mixtures (file_types.hpp);
  // none: they keep theirs.
  std::optional<FileType> type = file_type_of(GgmlType::Q8_0);
  // Top-K pruning of the blocks' projections (sparsify.hpp); their values keep the source's
  // precision, or take `type` when that is F16 or BF16. Matrices whose shape the pattern cannot
  // store stay dense (counted as fell back).
  std::optional<SparseType> sparsity;
  // Tensors left at their source type and bytes: "first" / "last" (every tensor of the first /
  // last transformer block), "embeddings" (token_embd.weight), "output" (output.weight), or an
  // fnmatch glob over tensor names ("blk.*.ffn_down.weight"). Each must match some tensor.
  std::vector<std::string> keep;
  bool progress = true;  // progress bar on stderr
};

// How many tensors went which way, and the two files' sizes.
struct QuantizeSummary {
  int converted = 0;  // matrices written at the requested type
  int fell_back = 0;  // matrices written at another: a substitute where rows are not whole blocks (F16, Q8_0 for
                      // Q6_K, ...), the registry's output_layer, the plain type (rows not whole groups of 8
                      // under an _R8 type), dense (shape unfit for --sparsity)
  int kept = 0;       // tensors --keep left as they were
  int unchanged = 0;  // tensors that are not matrices (the norms), copied as they are
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;
};

// The model as quantize's rules see it: its tensors and the two metadata facts they read. From a
// file (quantize_source), or built from a named shape (`cpullm info --costs --shape`).
struct QuantizeSource {
  std::string path;                     // named in errors
  std::vector<GgufTensorInfo> tensors;  // in file order; the plan reads names, types and shapes
  std::string architecture = "llama";   // general.architecture, the prefix of its keys
  std::optional<uint64_t> block_count;  // {architecture}.block_count: --keep last
  int gqa = 1;                          // query heads per KV head (llama-quantize's attn_v rule)
};
QuantizeSource quantize_source(const GgufFile& file);

enum class QuantizeOutcome { converted, fell_back, kept, unchanged };

// What quantize writes for one tensor.
struct TensorPlan {
  const GgufTensorInfo* source;  // in the QuantizeSource
  GgmlType type;                 // the type written; the source's own type means a plain copy
  QuantizeOutcome outcome;
};

// Every tensor's plan, in file order. Every error about the input comes from here, before
// anything is written; `cpullm info --costs --dtype` prints the plan without writing.
std::vector<TensorPlan> plan_quantize(const QuantizeSource& source, const QuantizeOptions& options);

// A --type name ("q8_0", "q4_0-r8", "q4_k_m", ...) -> the file type; anything else is an Error
// listing the choices.
const FileType& quantize_type_from_name(std::string_view name);

// Reads `input_path` (tensors of registry types where they must be converted) and
// writes `output_path`. Errors about the input name the file and, where it is one, the tensor.
QuantizeSummary quantize_model(const std::string& input_path, const std::string& output_path,
                               const QuantizeOptions& options);

}  // namespace cpullm
