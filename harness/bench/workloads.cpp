#include "harness/bench/workloads.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <algorithm>

#include "engine/kernels/weight_formats.hpp"
#include "engine/model/kv_cache.hpp"
#include "engine/quant/quantize_model.hpp"
#include "engine/util/error.hpp"
#include "engine/util/input_file.hpp"

namespace cpullm {
namespace {

// A named shape with the keys given overriding its sizes, or a custom shape from the keys alone.
SyntheticShape workload_shape(const std::string& path, const std::string& name, const nlohmann::json& model) {
  const std::string shape_name = model.value("shape", "");
  SyntheticShape shape{"custom", 0, 0, 0, 0, 0, 0, 2048};
  if (shape_name != "custom") {
    auto named = named_shape(shape_name);
    if (!named) fail_file(path, "workload '{}': unknown model shape '{}'", name, shape_name);
    shape = *named;
  }
  shape.n_layers = model.value("layers", shape.n_layers);
  shape.dim = model.value("dim", shape.dim);
  shape.ffn_dim = model.value("ffn", shape.ffn_dim);
  shape.n_heads = model.value("heads", shape.n_heads);
  shape.n_kv_heads = model.value("kv_heads", shape.n_kv_heads ? shape.n_kv_heads : shape.n_heads);
  shape.vocab_size = model.value("vocab", shape.vocab_size);
  shape.context = model.value("ctx", shape.context);
  if (shape.n_layers < 1 || shape.dim < 1 || shape.ffn_dim < 1 || shape.n_heads < 1 || shape.vocab_size < 1)
    fail_file(path, "workload '{}': the model needs layers, dim, ffn, heads and vocab >= 1", name);
  return shape;
}

}  // namespace

std::vector<Workload> read_workloads(const std::string& path) {
  const std::string text = read_input_file(path, "the workloads file", 1 << 20);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail_file(path, "not valid JSON: {}", e.what());
  }
  if (!doc.contains("workloads") || !doc["workloads"].is_array()) fail_file(path, "no \"workloads\" array");
  std::vector<Workload> workloads;
  for (const auto& item : doc["workloads"]) {
    Workload w;
    try {
      w.name = item.at("name").get<std::string>();
      w.description = item.value("description", "");
      w.shape = workload_shape(path, w.name, item.at("model"));
      w.shape.name = w.name;
      w.format = item.at("format").get<std::string>();
      w.n_seq = item.value("n_seq", 1);
      w.n_prompt = item.value("n_prompt", int64_t{0});
      w.n_gen = item.value("n_gen", int64_t{0});
      w.n_batch = item.value("n_batch", int64_t{512});
      w.repetitions = item.value("repetitions", 1);
      w.kv_type = item.value("kv_type", std::string(kv_type_name(kDefaultKvType)));
    } catch (const nlohmann::json::exception& e) {
      fail_file(path, "workload '{}': {}", w.name, e.what());
    }
    // The name becomes a file name in --workload-dir: no folders, no dot files.
    if (w.name.empty() || w.name.find('/') != std::string::npos || w.name.front() == '.')
      fail_file(path, "workload name '{}' is not a plain file name", w.name);
    if (!std::ranges::any_of(weight_formats(), [&](const WeightFormat& f) { return f.name == w.format; }))
      fail_file(path, "workload '{}': format '{}' is none of {}", w.name, w.format, weight_format_names());
    if (const auto names = kv_type_names(); std::find(names.begin(), names.end(), w.kv_type) == names.end())
      fail_file(path, "workload '{}': kv_type '{}' is none of {}", w.name, w.kv_type, fmt::join(names, ", "));
    if (w.n_seq < 1 || w.n_prompt < 0 || w.n_gen < 0 || w.n_prompt + w.n_gen < 1 || w.n_batch < 1 || w.repetitions < 1)
      fail_file(path, "workload '{}': needs n_seq, n_batch, repetitions >= 1 and some prompt or generated tokens", w.name);
    workloads.push_back(w);
  }
  return workloads;
}

Workload find_workload(const std::string& path, const std::string& name) {
  std::string names;
  for (const Workload& w : read_workloads(path)) {
    if (w.name == name) return w;
    names += (names.empty() ? "" : ", ") + w.name;
  }
  fail_file(path, "no workload named '{}' (there are: {})", name, names);
}

std::string ensure_workload_model(const Workload& workload, const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path target = fs::path(dir) / (workload.name + "-" + workload.format + ".gguf");
  if (fs::exists(target)) return target.string();
  fs::create_directories(dir);
  // The float formats are written directly; the others are quantized from F16.
  const WeightFormat& format = weight_format_named(workload.format, "workload format");
  const bool direct = format.activations == Activations::f32;
  SyntheticModelOptions options;
  options.shape = workload.shape;
  options.dtype = direct ? format.type : GgmlType::F16;
  // Each writer puts its file in place only once complete (util/output_file.hpp): an
  // interrupted run leaves no half model. A quantized format goes through a 16-bit copy first.
  if (direct) {
    write_synthetic_model(target.string(), options);
    return target.string();
  }
  const fs::path source = target.string() + ".f16";
  write_synthetic_model(source.string(), options);
  QuantizeOptions quantize;
  quantize.type = quantize_type_from_name(workload.format);
  quantize_model(source.string(), target.string(), quantize);
  fs::remove(source);
  return target.string();
}

}  // namespace cpullm
