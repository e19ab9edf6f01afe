// cpullm info: what a GGUF file holds: metadata, tensors and totals, as text or JSON; with
// --formats the format registry, with --costs the model's LLaMA tensors and what each op of a
// decoded token costs (FLOPs and bytes). tuning/ and reports/ read these instead of restating them.
#include <fmt/ranges.h>

#include <cstdio>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "engine/format/gguf.hpp"
#include "engine/util/text.hpp"
#include "engine/format/llama_tensors.hpp"
#include "engine/instrument/op_costs.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/model/model.hpp"
#include "engine/kernels/weight_formats.hpp"
#include "engine/model/kv_cache.hpp"
#include "engine/model/config.hpp"
#include "engine/quant/quantize_model.hpp"
#include "engine/synthetic/synthetic_model.hpp"
#include "engine/util/error.hpp"

namespace cpullm::cli {
namespace {

struct InfoOptions {
  std::string path;        // the GGUF file; empty with --formats, or --costs --shape
  bool json = false;
  bool formats = false;    // the format registry instead of a file
  bool costs = false;      // the LLaMA tensors and a decoded token's cost per op
  std::string shape;       // --costs without a file: a named shape (shape_names())
  std::string dtype;       // --costs: the tensors as `quantize --type DTYPE` writes them (a shape: f16 if none)
  std::vector<std::string> keep;  // --costs --dtype: quantize's --keep
  int64_t position = 0;    // --costs: positions cached before the token
  std::string kv_type{kv_type_name(kDefaultKvType)};  // --costs: what the cache holds
  int64_t sequences = 1;   // --costs: the decode step's sequences, for its parallel loops
};

nlohmann::json formats_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const WeightFormat& f : weight_formats()) {
    const GgmlTypeTraits& t = f.traits();
    out.push_back({{"name", f.name},
                   {"ggml_type", static_cast<uint32_t>(f.type)},
                   {"ggml_name", t.name},
                   {"block_elements", t.block_elements},
                   {"block_bytes", t.block_bytes},
                   {"row_bytes_extra", t.row_bytes_extra},
                   {"row_group", t.row_group},
                   {"bits_per_weight", f.bits_per_weight()},
                   {"layout", f.layout},
                   {"activations", f.activations == Activations::f32 ? "f32" : "q8_0"},
                   {"plain", f.plain ? nlohmann::json(find_weight_format(*f.plain)->name) : nlohmann::json()},
                   {"output_layer", weight_format(f.output_layer).name},
                   {"llama_file_type", f.llama_file_type ? nlohmann::json(*f.llama_file_type) : nlohmann::json()},
                   {"kernels", {{"scalar", f.dot.scalar != nullptr}, {"avx2", f.dot.avx2 != nullptr}, {"avx512", f.dot.avx512 != nullptr}}},
                   {"gemm", gemm_panels_name(f.gemm.panels)},
                   {"gemm_nibbles", f.gemm.nibbles}});
  }
  return out;
}

// The types a KV cache can hold (--kv-type), with the bytes a cached value takes.
nlohmann::json kv_types_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const KvTypeInfo& t : kv_types())
    out.push_back({{"name", t.name}, {"ggml_name", ggml_type_name(t.element)}, {"bytes_per_value", kv_value_bytes(t.type)},
                   {"default", t.type == kDefaultKvType}});
  return out;
}

void run_formats(const InfoOptions& o) {
  if (o.json)
    return (void)std::printf("%s\n", nlohmann::json{{"formats", formats_json()}, {"kv_types", kv_types_json()}}.dump(2).c_str());
  std::printf("%-13s %-20s %5s %6s %6s %10s  %s\n", "name", "ggml type", "block", "bytes", "bits", "gemm", "layout");
  for (const WeightFormat& f : weight_formats())
    std::printf("%-13s %-20s %5ld %6ld %6.2f %10s  %s\n", std::string(f.name).c_str(),
                fmt::format("{} ({})", f.traits().name, static_cast<uint32_t>(f.type)).c_str(), f.traits().block_elements,
                f.traits().block_bytes, f.bits_per_weight(),
                std::string(gemm_panels_name(f.gemm.panels)).c_str(),
                std::string(f.layout).c_str());
  std::printf("\nKV cache types (--kv-type):");
  for (const KvTypeInfo& t : kv_types()) std::printf(" %s (%.4g bytes a value)", std::string(t.name).c_str(), kv_value_bytes(t.type));
  std::printf("\n");
}

// The LLaMA tensors (the file's, or a named shape's from F32) as `quantize --type DTYPE --keep
// LIST` writes them (quantize's own plan: tuning/ reads sizes from here instead of restating its
// rules), and a decoded token's cost per op.
void run_costs(const InfoOptions& o) {
  LlamaDims dims;
  AttentionShape attention{};
  QuantizeSource source;
  std::optional<GgufFile> file;
  if (!o.path.empty()) {
    file.emplace(o.path);
    const LlamaConfig c = LlamaConfig::from_gguf(*file);
    dims = {c.n_layers, c.dim, c.ffn_dim, c.kv_dim(), file->require_tensor("token_embd.weight").ne[1],
            file->find_tensor("output.weight") == nullptr};
    attention = {c.n_heads, c.n_kv_heads, c.head_dim, c.sliding_window};
    source = quantize_source(*file);
  } else {
    const std::optional<SyntheticShape> s = named_shape(o.shape);
    if (!s) fail("--shape: unknown shape '{}' ({})", o.shape, fmt::join(shape_names(), ", "));
    const int64_t head_dim = s->dim / s->n_heads;
    dims = {s->n_layers, s->dim, s->ffn_dim, head_dim * s->n_kv_heads, s->vocab_size, false};
    attention = {s->n_heads, s->n_kv_heads, head_dim, s->sliding_window};
    source.path = o.shape + " shape";
    source.block_count = s->n_layers;
    source.gqa = static_cast<int>(s->n_heads / s->n_kv_heads);
    for (const LlamaTensor& t : llama_tensors(dims))
      source.tensors.push_back({.name = t.name, .n_dims = t.matrix() ? 2 : 1, .ne = {t.cols, t.rows, 1, 1},
                                .bytes = static_cast<uint64_t>(t.rows * t.cols * 4)});
  }
  const std::string dtype = o.dtype.empty() && o.path.empty() ? "f16" : o.dtype;
  QuantizeOptions quantize;
  quantize.type = dtype.empty() ? std::nullopt : std::optional(file_type_named(dtype));
  quantize.keep = o.keep;
  std::map<std::string, TensorPlan> plans;
  for (const TensorPlan& p : plan_quantize(source, quantize)) plans.emplace(p.source->name, p);

  const std::vector<LlamaTensor> tensors = llama_tensors(dims);
  std::vector<GgmlType> types;
  std::vector<uint64_t> bytes;
  for (const LlamaTensor& t : tensors) {
    const auto plan = plans.find(t.name);
    if (plan == plans.end()) fail_file(source.path, "missing tensor '{}'", t.name);
    const GgufTensorInfo& info = *plan->second.source;
    if (info.ne[0] != t.cols || (t.matrix() && info.ne[1] != t.rows))
      fail_file(source.path, "tensor '{}' has shape {}, expected [{}, {}]", t.name, info.shape_string(), t.cols, t.rows);
    types.push_back(plan->second.type);
    bytes.push_back(plan->second.type == info.type ? info.bytes
                                                   : static_cast<uint64_t>(t.rows * row_bytes(plan->second.type, t.cols)));
  }
  const KvType kv = parse_kv_type(o.kv_type);
  const std::vector<OpCost> costs =
      decode_token_costs(tensors, types, {.attention = attention, .position = o.position, .kv_value_bytes = kv_value_bytes(kv)});
  nlohmann::json out;
  out["source"] = o.path.empty() ? fmt::format("{} shape at {}", o.shape, dtype)
                                 : dtype.empty() ? o.path : fmt::format("{} at {}", o.path, dtype);
  out["dims"] = {{"n_layers", dims.n_layers}, {"dim", dims.dim}, {"ffn_dim", dims.ffn_dim}, {"kv_dim", dims.kv_dim},
                 {"vocab_size", dims.vocab_size}, {"tied_output", dims.tied_output}, {"n_heads", attention.n_heads},
                 {"n_kv_heads", attention.n_kv_heads}, {"head_dim", attention.head_dim}};
  out["tensors"] = nlohmann::json::array();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const WeightFormat* format = find_weight_format(types[i]);
    out["tensors"].push_back({{"name", tensors[i].name}, {"role", llama_role_name(tensors[i].role)}, {"rows", tensors[i].rows},
                              {"cols", tensors[i].cols}, {"type", ggml_type_name(types[i])},
                              {"format", format ? nlohmann::json(format->name) : nlohmann::json()}, {"bytes", bytes[i]}});
  }
  double flops = 0, moved = 0;
  for (const OpCost& c : costs) {
    out["decode_token"]["ops"][std::string(region_name(c.op))] = {{"flops", c.cost.flops}, {"bytes", c.cost.bytes}};
    flops += c.cost.flops, moved += c.cost.bytes;
  }
  out["decode_token"]["position"] = o.position;
  out["decode_token"]["kv_type"] = o.kv_type;
  out["decode_token"]["flops"] = flops;
  out["decode_token"]["bytes"] = moved;
  // This machine's L1d decides where 3-8 tokens stop streaming rows; a step of 1 always streams,
  // one of more than 8 never does.
  out["decode_step"] = {{"sequences", o.sequences},
                        {"parallel_loops", decode_step_parallel_loops(tensors, types, o.sequences, default_kernels().caches.l1d_bytes)}};
  if (o.json) return (void)std::printf("%s\n", out.dump(2).c_str());
  std::printf("%s: %ld layers, dim %ld, ffn %ld, kv %ld, vocab %ld\n\none decoded token at position %ld:\n  %-11s %14s %14s\n",
              out["source"].get<std::string>().c_str(), dims.n_layers, dims.dim, dims.ffn_dim, dims.kv_dim, dims.vocab_size,
              o.position, "op", "FLOPs", "bytes");
  for (const OpCost& c : costs)
    std::printf("  %-11s %14.0f %14.0f\n", std::string(region_name(c.op)).c_str(), c.cost.flops, c.cost.bytes);
  std::printf("  %-11s %14.0f %14.0f\n", "all", flops, moved);
}

nlohmann::json value_to_json(const GgufValue& value) {
  switch (value.type) {
    case GgufValueType::STRING: return valid_utf8(value.string);
    case GgufValueType::BOOL: return value.boolean;
    case GgufValueType::F32: case GgufValueType::F64: return value.real;
    case GgufValueType::ARRAY: {
      nlohmann::json items = nlohmann::json::array();
      for (uint64_t i = 0; i < value.count; ++i) {
        if (!value.items.empty()) items.push_back(value_to_json(value.items[i]));
        else if (value.element_type == GgufValueType::F32 || value.element_type == GgufValueType::F64)
          items.push_back(value.number_at(i));
        else items.push_back(value.integer_at(i));
      }
      return items;
    }
    default:
      if (value.integer < 0) return value.integer;
      return value.integer > 0 ? static_cast<uint64_t>(value.integer) : value.unsigned_integer;
  }
}

void run_info(const InfoOptions& o) {
  if (o.formats) return run_formats(o);
  if (o.costs) return run_costs(o);
  if (o.path.empty()) fail("info: a GGUF file is required (or --formats, or --costs --shape NAME)");
  const GgufFile file(o.path);
  std::map<std::string_view, std::pair<uint64_t, uint64_t>> by_type;  // type -> (elements, bytes)
  uint64_t total_elements = 0, total_bytes = 0;
  for (const auto& t : file.tensors()) {
    auto& [elements, bytes] = by_type[ggml_type_name(t.type)];
    elements += t.elements();
    bytes += t.bytes;
    total_elements += t.elements();
    total_bytes += t.bytes;
  }

  if (o.json) {
    nlohmann::json out;
    out["file"] = valid_utf8(o.path);
    out["version"] = file.version();
    out["alignment"] = file.alignment();
    out["data_offset"] = file.data_offset();
    out["file_size"] = file.file_size();
    for (const auto& [key, value] : file.metadata())
      out["metadata"][valid_utf8(key)] = {{"type", gguf_value_type_name(value.type)}, {"value", value_to_json(value)}};
    out["tensors"] = nlohmann::json::array();
    for (const auto& t : file.tensors())
      out["tensors"].push_back({{"name", valid_utf8(t.name)},
                                {"type", ggml_type_name(t.type)},
                                {"shape", std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)},
                                {"offset", t.offset},
                                {"bytes", t.bytes}});
    for (const auto& [type, totals] : by_type)
      out["totals"]["by_type"][std::string(type)] = {{"elements", totals.first}, {"bytes", totals.second}};
    out["totals"]["tensors"] = file.tensors().size();
    out["totals"]["elements"] = total_elements;
    out["totals"]["bytes"] = total_bytes;
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }

  // Strings from the file are printed escaped: a hostile general.name cannot send terminal codes.
  std::printf("%s: GGUF v%u, alignment %u, %zu metadata entries, %zu tensors, data at offset %lu, %lu bytes\n",
              printable(o.path).c_str(), file.version(), file.alignment(), file.metadata().size(), file.tensors().size(),
              file.data_offset(), file.file_size());
  std::printf("\nmetadata:\n");
  for (const auto& [key, value] : file.metadata())
    std::printf("  %-45s %-6s %s\n", printable(key).c_str(), std::string(gguf_value_type_name(value.type)).c_str(),
                printable(gguf_value_summary(value)).c_str());
  std::printf("\ntensors:\n  %-32s %-6s %-22s %14s %14s\n", "name", "type", "shape", "offset", "bytes");
  for (const auto& t : file.tensors())
    std::printf("  %-32s %-6s %-22s %14lu %14lu\n", printable(t.name).c_str(), std::string(ggml_type_name(t.type)).c_str(),
                t.shape_string().c_str(), t.offset, t.bytes);
  std::printf("\ntotals:\n");
  for (const auto& [type, totals] : by_type)
    std::printf("  %-6s %14lu elements %14lu bytes\n", std::string(type).c_str(), totals.first, totals.second);
  std::printf("  all    %14lu elements %14lu bytes (%.2f MiB)\n", total_elements, total_bytes, total_bytes / 1048576.0);
}

}  // namespace

void register_info(CLI::App& app) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* command = app.add_subcommand("info", "Show a GGUF file's metadata, tensors and totals; the weight formats; a model's costs");
  CLI::Option* file = command->add_option("file", options->path, "GGUF file")->check(CLI::ExistingFile);
  command->add_flag("--json", options->json, "Print JSON instead of text");
  CLI::Option* formats = command->add_flag("--formats", options->formats, "The weight formats cpullm runs (the format registry)");
  CLI::Option* costs = command->add_flag("--costs", options->costs,
                                         "The model's LLaMA tensors and each op's FLOPs and bytes for one decoded token");
  CLI::Option* shape = command->add_option("--shape", options->shape,
                                           fmt::format("--costs without a file: a named shape ({})", fmt::join(shape_names(), ", ")));
  CLI::Option* dtype = command->add_option("--dtype", options->dtype,
                                           "--costs: the tensors as `quantize --type DTYPE` writes them (--shape: default f16)")
                            ->needs(costs);
  command->add_option("--keep", options->keep, "--costs --dtype: tensors quantize leaves as they are (as quantize's --keep)")
      ->delimiter(',')->needs(dtype);
  command->add_option("--position", options->position, "--costs: positions cached before the token (default 0)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--kv-type", options->kv_type,
                      fmt::format("--costs: the KV cache's type ({}; default {})", fmt::join(kv_type_names(), ", "),
                                  kv_type_name(kDefaultKvType)))
      ->check(CLI::IsMember(kv_type_names()))->needs(costs);
  command->add_option("--sequences", options->sequences,
                      "--costs: sequences of the decode step whose parallel loops (fork/joins) --json counts (default 1)")
      ->check(CLI::PositiveNumber);
  formats->excludes(costs)->excludes(file);
  shape->needs(costs)->excludes(file);
  command->callback([options] { run_info(*options); });
}

}  // namespace cpullm::cli
