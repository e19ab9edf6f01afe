// cpullm info: what a GGUF file holds: metadata, tensors and totals, as text or JSON.
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "engine/format/gguf.hpp"
#include "engine/util/text.hpp"

namespace cpullm::cli {
namespace {

struct InfoOptions {
  std::string path;
  bool json = false;
};

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
  CLI::App* command = app.add_subcommand("info", "Show a GGUF file's metadata, tensors and totals");
  command->add_option("file", options->path, "GGUF file")->required()->check(CLI::ExistingFile);
  command->add_flag("--json", options->json, "Print JSON instead of text");
  command->callback([options] { run_info(*options); });
}

}  // namespace cpullm::cli
