// llama.cpp's file types (llama_ftype): what `quantize --type` names. A file type is a base
// weight type plus llama-quantize's rules for which tensors get another one: the output layer
// more bits, and under the K-quant mixtures (Q4_K_M, Q3_K_M, ...) attn_v and ffn_down of some
// layers more bits too. Every registry format is a file type of its own name (the output-layer
// rule only); the mixtures add names of their own. With the same rules and the same quantizers,
// cpullm writes the tensors llama.cpp writes.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/format/ggml_types.hpp"

namespace cpullm {

struct FileType {
  std::string_view name;                   // `quantize --type` ("q4_k_m")
  GgmlType base;                           // the type of every matrix no rule changes
  std::optional<uint32_t> llama_file_type; // general.file_type; none for cpullm's own types
};

// Where a matrix sits in the model, as llama-quantize's rules read it.
struct TensorSite {
  std::string_view name;   // "blk.3.attn_v.weight"
  bool is_output = false;  // output.weight, or token_embd.weight where the output is tied to it
  int layer = 0;           // attn_v / ffn_down: this tensor's index among the model's tensors of its kind
  int layers = 1;          // how many of its kind the model has
  int gqa = 1;             // attention heads per KV head
};

// Every --type name: the registry's formats, then the mixtures.
std::span<const FileType> file_types();
// The file type of that name; anything else is an Error listing the choices.
const FileType& file_type_named(std::string_view name);
std::string file_type_names();

// The file type of a registry format's own name.
const FileType& file_type_of(GgmlType format);

// The type llama-quantize's rules give that matrix under `file_type`.
GgmlType tensor_type(const FileType& file_type, const TensorSite& site);
// `type`, or llama-quantize's substitute where a row of `cols` values is not whole blocks of it
// (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16).
GgmlType fit_row_length(GgmlType type, int64_t cols);

}  // namespace cpullm
