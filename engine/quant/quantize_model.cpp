#include "engine/quant/quantize_model.hpp"

#include <fmt/format.h>
#include <fnmatch.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

#include "engine/format/gguf.hpp"
#include "engine/format/gguf_writer.hpp"
#include "engine/kernels/matvec.hpp"
#include "engine/kernels/quant_formats.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/kernels/sparse.hpp"
#include "engine/kernels/weight_formats.hpp"
#include "engine/quant/file_types.hpp"
#include "engine/quant/sparsify.hpp"
#include "engine/util/error.hpp"
#include "engine/util/progress.hpp"

namespace cpullm {
namespace {

// ggml's GGML_QNT_VERSION: the Q4_0/Q8_0 layouts llama.cpp has written since 2023. Loaders
// check it, so quantized files carry it.
constexpr uint32_t kQuantizationVersion = 2;

using Outcome = QuantizeOutcome;

// One flag per tensor: whether a --keep item names it. The four words become globs; an item that
// matches nothing is an error, since it is most likely a typo.
std::vector<bool> resolve_keep(const QuantizeSource& source, const std::vector<std::string>& keep) {
  std::vector<bool> kept(source.tensors.size(), false);
  for (const std::string& item : keep) {
    std::string pattern = item;
    if (item == "first") pattern = "blk.0.*";
    if (item == "embeddings") pattern = "token_embd.weight";
    if (item == "output") pattern = "output.weight";
    if (item == "last") {
      if (!source.block_count) fail_file(source.path, "--keep last: the model has no {}.block_count", source.architecture);
      if (*source.block_count == 0) fail_file(source.path, "--keep last: {}.block_count is 0", source.architecture);
      pattern = fmt::format("blk.{}.*", *source.block_count - 1);
    }
    bool matched = false;
    for (std::size_t i = 0; i < kept.size(); ++i)
      if (fnmatch(pattern.c_str(), source.tensors[i].name.c_str(), 0) == 0) kept[i] = matched = true;
    if (!matched)
      fail_file(source.path, "--keep '{}'{} matches no tensor", item, pattern == item ? "" : " (" + pattern + ")");
  }
  return kept;
}

// --sparsity: a block's projection is pruned into the sparse type with its values at `values`,
// unless its shape does not fit the pattern; then it stays dense at `values`.
TensorPlan plan_sparse(const std::string& path, const GgufTensorInfo& t, SparseType sparse, GgmlType values) {
  if (values != GgmlType::F32 && values != GgmlType::F16 && values != GgmlType::BF16)
    fail_file(path, "tensor '{}': --sparsity stores values as F32, F16 or BF16, not {} (--type f16 or bf16 "
              "converts them)", t.name, ggml_type_name(values));
  if (!row_convertible(t.type))
    fail_file(path, "tensor '{}' has type {}, which --sparsity cannot read", t.name, ggml_type_name(t.type));
  sparse.values = values;
  const GgmlType type = sparse_type_number(sparse);
  if (sparse_shape_problem(type, t.elements() / t.ne[0], t.ne[0]).empty()) return {&t, type, Outcome::converted};
  return {&t, values, Outcome::fell_back};
}

// What llama-quantize's rules read besides the tensor: how many attn_v and ffn_down matrices the
// model has, which of them each is (counted in file order, as llama-quantize counts), and GQA.
struct ModelSites {
  int attn_v = 0, ffn_down = 0;  // seen so far
  int attn_v_total = 0, ffn_down_total = 0;
  int gqa = 1;
  bool has_output = false;  // an output.weight of its own; else token_embd is the output layer too
};

ModelSites count_sites(const QuantizeSource& source) {
  ModelSites sites{.gqa = source.gqa};
  for (const GgufTensorInfo& t : source.tensors) {
    sites.attn_v_total += t.name.find("attn_v.weight") != std::string::npos;
    sites.ffn_down_total += t.name.find("ffn_down") != std::string::npos;
    sites.has_output |= t.name == "output.weight";
  }
  return sites;
}

// llama-quantize's rules: only matrices (*.weight of two or more dimensions) change type.
TensorPlan plan_tensor(const std::string& path, const GgufTensorInfo& t, bool kept, const QuantizeOptions& options,
                       ModelSites& sites) {
  // The counters advance on every attn_v / ffn_down, kept or not, as llama-quantize's do.
  const bool attn_v = t.name.find("attn_v.weight") != std::string::npos;
  const bool ffn_down = t.name.find("ffn_down") != std::string::npos;
  const int layer = attn_v ? sites.attn_v++ : ffn_down ? sites.ffn_down++ : 0;
  if (kept) return {&t, t.type, Outcome::kept};
  if (t.n_dims < 2 || !t.name.ends_with(".weight")) return {&t, t.type, Outcome::unchanged};
  if (options.sparsity && is_block_projection(t.name))
    return plan_sparse(path, t, *options.sparsity, options.type ? options.type->base : t.type);
  if (!options.type) return {&t, t.type, Outcome::unchanged};
  const GgmlType target = options.type->base;
  // The output layer is token_embd where the output is tied to it.
  const bool output = t.name == "output.weight" || (t.name == "token_embd.weight" && !sites.has_output);
  const GgmlType chosen = tensor_type(*options.type, {.name = t.name, .is_output = output, .layer = layer,
                                                      .layers = attn_v ? sites.attn_v_total : sites.ffn_down_total,
                                                      .gqa = sites.gqa});
  GgmlType type = fit_row_length(chosen, t.ne[0]);
  // Interleaving takes whole groups of 8 rows; a matrix of other row counts stays in the plain format.
  if (const auto plain = weight_format(type).plain; plain && (t.elements() / t.ne[0]) % kInterleavedRows != 0)
    type = *plain;
  // The integer formats need rows of whole 32-value blocks (Q8_0 and Q4_0 by layout, INT8_CHANNEL
  // for its kernels' Q8_0 activations); llama.cpp writes other matrices as F16 (stories260K's
  // ffn_down, 172 columns).
  if (!matvec_supports(type, t.ne[0])) type = GgmlType::F16;
  if (type != t.type && !row_convertible(t.type))
    fail_file(path, "tensor '{}' has type {}; quantize converts from the types `cpullm info --formats` lists "
              "(--keep '{}' copies it as it is)", t.name, ggml_type_name(t.type), t.name);
  // A mixture's rule is what the file type asks for; the output layer's own type and every
  // substitute for a row length are fallbacks.
  return {&t, type, type == chosen && (type == target || !output) ? Outcome::converted : Outcome::fell_back};
}

// Unmaps the input pages before `end` that this process has finished with. Pages read through a
// mapping count as resident until then, so without this the peak would be the whole input; the
// kernel's page cache keeps them, and a page touched again is simply read back.
void release_input(const std::byte* begin, const std::byte* end) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(begin) / page * page;
  const uintptr_t last = reinterpret_cast<uintptr_t>(end) / page * page;  // the page holding `end` is still in use
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

// Metadata in the input's order, with general.file_type (and, for block formats,
// general.quantization_version) describing the output; absent ones are appended, as llama.cpp does.
// Without a target type the matrices keep theirs, and so does general.file_type.
void copy_metadata(const GgufFile& source, GgufWriter& writer, const std::optional<FileType>& target) {
  // llama.cpp's LLAMA_FTYPE for general.file_type: what most of the file's weights are; none
  // for cpullm's own types, whose files carry no general.file_type.
  const bool has_file_type = target && target->llama_file_type;
  const uint32_t file_type = has_file_type ? *target->llama_file_type : 0;
  const bool block_format = target && weight_format(target->base).traits().block_elements > 1;
  for (const auto& [key, value] : source.metadata()) {
    if (key == "general.file_type" && target) {
      if (has_file_type) writer.add_u32(key, file_type);
    }
    else if (key == "general.quantization_version" && block_format) writer.add_u32(key, kQuantizationVersion);
    // The writer writes a non-default alignment itself, taking it from its constructor.
    else if (key == "general.alignment" && source.alignment() != kGgufDefaultAlignment) continue;
    else writer.add_value(key, value);
  }
  if (block_format && !source.find("general.quantization_version"))
    writer.add_u32("general.quantization_version", kQuantizationVersion);
  if (has_file_type && !source.find("general.file_type")) writer.add_u32("general.file_type", file_type);
}

}  // namespace

QuantizeSource quantize_source(const GgufFile& file) {
  QuantizeSource source;
  source.path = file.path();
  source.tensors.assign(file.tensors().begin(), file.tensors().end());
  const GgufValue* arch = file.find("general.architecture");
  if (arch && arch->type == GgufValueType::STRING) {
    const std::string prefix(arch->string);
    source.architecture = prefix;
    if (file.find(prefix + ".block_count")) source.block_count = file.require_uint(prefix + ".block_count");
    const uint64_t heads = file.uint_or(prefix + ".attention.head_count", 1);
    const uint64_t kv_heads = file.uint_or(prefix + ".attention.head_count_kv", heads);
    if (kv_heads > 0 && heads / kv_heads < 1024) source.gqa = static_cast<int>(heads / kv_heads);
  }
  return source;
}

std::vector<TensorPlan> plan_quantize(const QuantizeSource& source, const QuantizeOptions& options) {
  const std::vector<bool> kept = resolve_keep(source, options.keep);
  ModelSites sites = count_sites(source);
  std::vector<TensorPlan> plans;
  for (std::size_t i = 0; i < source.tensors.size(); ++i)
    plans.push_back(plan_tensor(source.path, source.tensors[i], kept[i], options, sites));
  return plans;
}

const FileType& quantize_type_from_name(std::string_view name) { return file_type_named(name); }

QuantizeSummary quantize_model(const std::string& input_path, const std::string& output_path,
                               const QuantizeOptions& options) {
  const GgufFile source(input_path);
  // Replacing the source by its quantized copy would lose the source: refused.
  if (std::filesystem::exists(output_path) && std::filesystem::equivalent(input_path, output_path))
    fail_file(output_path, "is the input file; write the quantized model to another path");

  // Every decision, and so every error about the input, comes before the output is created.
  const QuantizeSource input = quantize_source(source);
  const std::vector<TensorPlan> plans = plan_quantize(input, options);
  QuantizeSummary summary;
  uint64_t total = 0;
  for (const TensorPlan& plan : plans) {
    total += plan.source->bytes;
    switch (plan.outcome) {
      case Outcome::converted: ++summary.converted; break;
      case Outcome::fell_back: ++summary.fell_back; break;
      case Outcome::kept: ++summary.kept; break;
      case Outcome::unchanged: ++summary.unchanged; break;
    }
  }

  GgufWriter writer(output_path, source.alignment());
  copy_metadata(source, writer, options.type);
  if (options.sparsity) writer.add_string("cpullm.sparsity", sparsity_name(*options.sparsity));
  for (const TensorPlan& plan : plans)
    writer.add_tensor(plan.source->name, plan.type,
                      std::vector<int64_t>(plan.source->ne.begin(), plan.source->ne.begin() + plan.source->n_dims));

  // Each tensor goes through in chunks of whole rows of about a million values: copied where its
  // type stays, else decoded to FP32 and encoded again, row by row (sparse types: by row group).
  ProgressBar progress("quantize " + std::filesystem::path(output_path).filename().string(), total);
  std::vector<float> values;     // (rows in chunk * row length) the chunk in FP32
  std::vector<std::byte> bytes;  // the chunk encoded in the output type
  uint64_t done = 0;
  for (const TensorPlan& plan : plans) {
    const GgufTensorInfo& t = *plan.source;
    const int64_t row = t.ne[0];
    const int64_t rows = t.elements() / row;
    const uint64_t in_row_bytes = row_bytes(t.type, row), out_row_bytes = row_bytes(plan.type, row);
    // Chunks and the parallel loop go by whole groups of the input's and the output's rows (1, 4
    // or 8: the larger is a multiple of the smaller).
    const int64_t group = std::max(ggml_type_traits(static_cast<uint32_t>(plan.type))->row_group,
                                   ggml_type_traits(static_cast<uint32_t>(t.type))->row_group);
    const int64_t rows_per_chunk = std::max<int64_t>(1, (1 << 20) / row / group) * group;
    for (int64_t first = 0; first < rows; first += rows_per_chunk) {
      const int64_t n = std::min(rows_per_chunk, rows - first);
      const std::byte* in = t.data + first * in_row_bytes;
      if (plan.type == t.type) {
        writer.write_data({in, n * in_row_bytes});
      } else {
        values.resize(n * row);
        bytes.resize(n * out_row_bytes);
#pragma omp parallel for
        for (int64_t g = 0; g < n / group; ++g) {
          for (int64_t r = g * group; r < (g + 1) * group; ++r) decode_matrix_row(t.type, in, r, values.data() + r * row, row);
          float* dense = values.data() + g * group * row;
          std::byte* out = bytes.data() + g * group * out_row_bytes;
          if (is_sparse(plan.type)) encode_sparse_rows(plan.type, dense, group, row, out);
          else encode_rows(plan.type, dense, group, out, row);
        }
        writer.write_data(bytes);
      }
      release_input(in, in + n * in_row_bytes);
      done += n * in_row_bytes;
      if (options.progress) progress.update(done);
    }
  }
  writer.finish();
  if (options.progress) progress.finish();
  summary.input_bytes = source.file_size();
  summary.output_bytes = std::filesystem::file_size(output_path);
  return summary;
}

}  // namespace cpullm
