// `cpullm quantize`: rewrite a GGUF model with its matrices in any format of the registry
// (kernels/weight_formats.hpp: `cpullm info --formats`).
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

namespace cpullm {

struct QuantizeOptions {
  // The matrices' new type, one the registry lists; none: they keep theirs.
  std::optional<GgmlType> type = GgmlType::Q8_0;
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
  int fell_back = 0;  // matrices written at another: F16 (rows not whole blocks), the registry's output_layer (the output layer under a 4-bit type), the plain type (rows not whole groups of 8 under an _R8 type), dense (shape unfit for --sparsity)
  int kept = 0;       // tensors --keep left as they were
  int unchanged = 0;  // tensors that are not matrices (the norms), copied as they are
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;
};

// A registry name ("q8_0", "q4_0-r8", ...) -> the type; anything else is an Error listing the choices.
GgmlType quantize_type_from_name(std::string_view name);

// Reads `input_path` (tensors of registry types where they must be converted) and
// writes `output_path`. Errors about the input name the file and, where it is one, the tensor.
QuantizeSummary quantize_model(const std::string& input_path, const std::string& output_path,
                               const QuantizeOptions& options);

}  // namespace cpullm
