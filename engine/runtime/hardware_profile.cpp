#include "engine/runtime/hardware_profile.hpp"

#include <algorithm>
#include <fmt/ranges.h>
#include <set>
#include <nlohmann/json.hpp>

#include "engine/util/error.hpp"
#include "engine/util/input_file.hpp"

namespace cpullm {
namespace {

using nlohmann::json;

// Every figure is {"value": ..., "source": "..."}: the source is what makes a profile citable.
const json& figure_object(const std::string& path, const json& root, const char* field) {
  if (!root.contains(field)) fail_file(path, "field \"{}\" is missing", field);
  const json& figure = root.at(field);
  if (!figure.is_object() || !figure.contains("value"))
    fail_file(path, "field \"{}\" must be an object {{\"value\": ..., \"source\": \"...\"}}", field);
  if (!figure.contains("source") || !figure.at("source").is_string() || figure.at("source").get<std::string>().empty())
    fail_file(path, "field \"{}\" has no \"source\" string", field);
  return figure;
}

Figure number_figure(const std::string& path, const json& root, const char* field) {
  const json& figure = figure_object(path, root, field);
  const json& value = figure.at("value");
  Figure out{std::nullopt, std::nullopt, figure.at("source").get<std::string>()};
  const bool range = value.is_array() && value.size() == 2 && value[0].is_number() && value[1].is_number();
  if (!value.is_null() && !value.is_number() && !range)
    fail_file(path, "field \"{}\": \"value\" must be a number, a range [low, high] or null (unknown)", field);
  if (value.is_number()) out.value = value.get<double>();
  if (range) {
    out.value = value[0].get<double>(), out.high = value[1].get<double>();
    if (*out.high < *out.value) fail_file(path, "field \"{}\": the range [{}, {}] runs backwards", field, *out.value, *out.high);
  }
  if (out.value && *out.value < 0) fail_file(path, "field \"{}\": \"value\" is negative", field);
  return out;
}

TextFigure text_figure(const std::string& path, const json& root, const char* field) {
  const json& figure = figure_object(path, root, field);
  if (!figure.at("value").is_string() || figure.at("value").get<std::string>().empty())
    fail_file(path, "field \"{}\": \"value\" must be a non-empty string", field);
  return {figure.at("value").get<std::string>(), figure.at("source").get<std::string>()};
}

std::string text_field(const std::string& path, const json& root, const char* field) {
  if (!root.contains(field) || !root.at(field).is_string()) fail_file(path, "field \"{}\" must be a string", field);
  return root.at(field).get<std::string>();
}

// "recommendations": [{"setting": "vm.swappiness", "value": "1", "why": "..."}, ...]
std::vector<Recommendation> recommendations(const std::string& path, const json& root) {
  if (!root.contains("recommendations") || !root.at("recommendations").is_array())
    fail_file(path, "field \"recommendations\" must be an array of {{\"setting\", \"value\", \"why\"}}");
  std::vector<Recommendation> out;
  for (const json& entry : root.at("recommendations")) {
    const std::string where = fmt::format("recommendations[{}]", out.size());
    if (!entry.is_object()) fail_file(path, "field \"{}\" must be an object", where);
    for (const char* key : {"setting", "value", "why"})
      if (!entry.contains(key) || !entry.at(key).is_string() || entry.at(key).get<std::string>().empty())
        fail_file(path, "field \"{}\" has no \"{}\" string", where, key);
    Recommendation r{entry.at("setting").get<std::string>(), entry.at("value").get<std::string>(),
                     entry.at("why").get<std::string>()};
    const auto& known = recommendation_settings();
    if (std::find(known.begin(), known.end(), r.setting) == known.end())
      fail_file(path, "field \"{}\": unknown setting \"{}\" (known: {})", where, r.setting, fmt::join(known, ", "));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

const std::vector<std::string>& recommendation_settings() {
  static const std::vector<std::string> settings{"isolation", "vm.swappiness", "transparent_hugepage", "governor",
                                                 "boost", "numa_balancing", "smt"};
  return settings;
}

const std::vector<std::pair<const char*, Figure HardwareProfile::*>>& profile_figure_fields() {
  using P = HardwareProfile;
  static const std::vector<std::pair<const char*, Figure P::*>> fields{
      {"base_clock_ghz", &P::base_clock_ghz},
      {"turbo_clock_ghz", &P::turbo_clock_ghz},
      {"avx2_clock_ghz", &P::avx2_clock_ghz},
      {"avx512_clock_ghz", &P::avx512_clock_ghz},
      {"fp32_flops_per_cycle_per_core", &P::fp32_flops_per_cycle},
      {"int8_ops_per_cycle_per_core", &P::int8_ops_per_cycle},
      {"q4_0_ops_per_cycle_per_core", &P::q4_0_ops_per_cycle},
      {"memory_channels_per_package", &P::memory_channels},
      {"memory_speed_mts", &P::memory_speed_mts},
      {"memory_bandwidth_gbs_per_package", &P::memory_bandwidth_gbs},
      {"memory_bandwidth_measured_gbs_per_package", &P::memory_bandwidth_measured_gbs},
      {"memory_gib_per_package", &P::memory_per_package_gib},
      {"socket_link_gbs_per_package", &P::socket_link_gbs},
      {"core_to_core_ns", &P::core_to_core_ns},
      {"socket_to_socket_ns", &P::socket_to_socket_ns},
      {"tdp_watts_per_package", &P::tdp_watts},
      {"idle_watts_per_package", &P::idle_watts},
      {"price_usd_per_package", &P::price_usd},
      {"price_used_usd_per_package", &P::used_price_usd}};
  return fields;
}

std::string figure_text(const Figure& figure) {
  if (!figure.value) return "unknown";
  return figure.high ? fmt::format("{:g}-{:g}", *figure.value, *figure.high) : fmt::format("{:g}", *figure.value);
}

std::vector<std::pair<const char*, const Figure*>> profile_figures(const HardwareProfile& profile) {
  std::vector<std::pair<const char*, const Figure*>> figures;
  for (const auto& [field, member] : profile_figure_fields()) figures.emplace_back(field, &(profile.*member));
  return figures;
}

HardwareProfile read_hardware_profile(const std::string& path) {
  const std::string text = read_input_file(path, "the hardware profile", 1 << 20);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    fail_file(path, "not valid JSON: {}", e.what());
  }
  if (!root.is_object()) fail_file(path, "a hardware profile is a JSON object");

  HardwareProfile p;
  p.path = path;
  p.name = text_field(path, root, "name");
  p.description = text_field(path, root, "description");
  p.topology = text_figure(path, root, "topology");
  p.isa = text_figure(path, root, "isa");
  const std::vector<std::string> levels{"scalar", "avx2", "avx512", "detect"};
  if (std::find(levels.begin(), levels.end(), p.isa.value) == levels.end())
    fail_file(path, "field \"isa\": \"{}\" is not scalar, avx2, avx512 or detect", p.isa.value);
  p.isa_detail = text_figure(path, root, "isa_detail");
  p.caches = text_figure(path, root, "caches");
  // The numeric figures, each read under the name profile_figures gives it.
  for (const auto& [field, member] : profile_figure_fields()) p.*member = number_figure(path, root, field);
  p.recommendations = recommendations(path, root);
  return p;
}

std::string find_hardware_profile(const std::string& name_or_path, const std::vector<std::filesystem::path>& dirs) {
  namespace fs = std::filesystem;
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json")) {
    if (!fs::is_regular_file(name_or_path)) fail_file(name_or_path, "no such hardware profile file");
    return name_or_path;
  }
  std::string searched;
  std::set<std::string> available;  // a set: the same folder can be reached by two of the paths
  for (const fs::path& dir : dirs) {
    const fs::path candidate = dir / (name_or_path + ".json");
    if (fs::is_regular_file(candidate)) return candidate.string();
    if (!searched.empty()) searched += ", ";
    searched += dir.string();
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(dir, error))
      if (entry.path().extension() == ".json") available.insert(entry.path().stem().string());
  }
  fail("unknown hardware profile \"{}\": no {}.json in {} (profiles there: {})", name_or_path, name_or_path,
       searched.empty() ? "no directory" : searched, available.empty() ? "none" : fmt::format("{}", fmt::join(available, ", ")));
}

Topology profile_topology(const HardwareProfile& profile) {
  if (profile.topology.value == "detect") return detect_topology();
  Topology topology;
  try {
    topology = synthetic_topology(profile.topology.value);
  } catch (const Error& e) {
    fail_file(profile.path, "field \"topology\": {}", e.what());
  }
  topology.source = "hardware profile " + profile.name + " (" + profile.path + "), " + topology.source;
  return topology;
}

}  // namespace cpullm
