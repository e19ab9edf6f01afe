#include "engine/runtime/hardware_profile.hpp"

#include <algorithm>
#include <fmt/ranges.h>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "engine/util/error.hpp"

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
  if (!value.is_null() && !value.is_number())
    fail_file(path, "field \"{}\": \"value\" must be a number or null (unknown)", field);
  if (value.is_number() && value.get<double>() < 0) fail_file(path, "field \"{}\": \"value\" is negative", field);
  return {value.is_null() ? std::nullopt : std::optional<double>(value.get<double>()), figure.at("source").get<std::string>()};
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

}  // namespace

HardwareProfile read_hardware_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail_file(path, "cannot open hardware profile");
  json root;
  try {
    root = json::parse(in);
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
  p.base_clock_ghz = number_figure(path, root, "base_clock_ghz");
  p.turbo_clock_ghz = number_figure(path, root, "turbo_clock_ghz");
  p.memory_channels = number_figure(path, root, "memory_channels_per_package");
  p.memory_speed_mts = number_figure(path, root, "memory_speed_mts");
  p.memory_bandwidth_gbs = number_figure(path, root, "memory_bandwidth_gbs_per_package");
  p.memory_per_package_gib = number_figure(path, root, "memory_gib_per_package");
  p.tdp_watts = number_figure(path, root, "tdp_watts_per_package");
  p.price_usd = number_figure(path, root, "price_usd_per_package");
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
