#include "engine/model/config.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <numbers>
#include <string>

#include "engine/format/gguf.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// Bounds far above any real model, low enough that products of them cannot overflow.
constexpr uint64_t kMaxWidth = 1u << 20;
constexpr uint64_t kMaxLayers = 4096;
constexpr uint64_t kMaxContext = 1u << 24;
constexpr double kMaxScalingFactor = 1024;  // Llama 3.1 scales by 8, Llama 3.2 by 32

int64_t bounded(const GgufFile& file, const std::string& key, uint64_t value, uint64_t max) {
  if (value < 1 || value > max) fail_file(file.path(), "metadata '{}' is {} (must be 1 to {})", key, value, max);
  return static_cast<int64_t>(value);
}

double finite_in(const GgufFile& file, const std::string& key, double value, double low, double high) {
  if (!std::isfinite(value) || value < low || value > high)
    fail_file(file.path(), "metadata '{}' is {} (must be finite, from {} to {})", key, value, low, high);
  return value;
}

// rope_freqs.weight: one F32 divisor per pair, as llama.cpp's converter writes Llama 3.1's.
std::vector<double> factors_from_tensor(const GgufFile& file, const GgufTensorInfo& t, int64_t pairs) {
  if (t.n_dims != 1 || t.ne[0] != pairs)
    fail_file(file.path(), "tensor '{}' has shape {}, expected [{}] (one factor per pair of a head's values)", t.name,
              t.shape_string(), pairs);
  if (t.type != GgmlType::F32)
    fail_file(file.path(), "tensor '{}' has type {} (expected F32)", t.name, ggml_type_name(t.type));
  std::vector<double> factors(pairs);
  for (int64_t i = 0; i < pairs; ++i) {
    float f;
    std::memcpy(&f, t.data + i * 4, 4);
    if (!std::isfinite(f) || f <= 0.0f || f > kMaxScalingFactor)
      fail_file(file.path(), "tensor '{}' value {} is {} (factors must be finite, above 0 and at most {})", t.name, i, f,
                kMaxScalingFactor);
    factors[i] = f;
  }
  return factors;
}

// The llama3 scaling keys, as other GGUF readers name them after Hugging Face's rope_scaling.
template <typename Key>
Llama3Scaling llama3_scaling(const GgufFile& file, const Key& key) {
  Llama3Scaling s;
  const auto number = [&](std::string_view name, double low, double high) {
    return finite_in(file, key(name), file.require_float(key(name)), low, high);
  };
  s.factor = number("rope.scaling.factor", 1.0, kMaxScalingFactor);
  s.low_freq_factor = number("rope.scaling.low_freq_factor", 1e-3, 1e3);
  s.high_freq_factor = number("rope.scaling.high_freq_factor", 1e-3, 1e3);
  if (!(s.high_freq_factor > s.low_freq_factor))
    fail_file(file.path(), "{} {} must be above {} {}", key("rope.scaling.high_freq_factor"), s.high_freq_factor,
              key("rope.scaling.low_freq_factor"), s.low_freq_factor);
  const std::string context_key = key("rope.scaling.original_context_length");
  s.original_context = static_cast<double>(bounded(file, context_key, file.require_uint(context_key), kMaxContext));
  return s;
}

// Each pair's radians per position: ggml_rope_ext's theta_scale^i / freq_factor[i] * freq_scale,
// in double. The scaling type is read as llama.cpp reads it: absent means linear (a factor of 1
// unless {arch}.rope.scaling.factor says otherwise), none ignores the factor; llama3 (which
// llama.cpp's converter writes as rope_freqs.weight instead) computes the per-pair factors.
std::vector<double> read_rope_frequencies(const GgufFile& file, std::string_view arch, int64_t head_dim) {
  const auto key = [arch](std::string_view name) { return fmt::format("{}.{}", arch, name); };
  // A float, as llama.cpp holds it: the angles stay those of every earlier cpullm.
  const float theta = static_cast<float>(file.float_or(key("rope.freq_base"), 10000.0));
  if (!(theta > 1.0f) || !std::isfinite(theta))
    fail_file(file.path(), "{} is {} (must be finite and > 1)", key("rope.freq_base"), theta);
  const int64_t pairs = head_dim / 2;

  const std::string type_key = key("rope.scaling.type");
  const std::string type(file.find(type_key) ? file.require_string(type_key) : "linear");
  const std::string factor_key = file.find(key("rope.scaling.factor")) ? key("rope.scaling.factor") : key("rope.scale_linear");
  const GgufTensorInfo* tensor = file.find_tensor("rope_freqs.weight");  // wins over the scaling keys, as in llama.cpp
  double linear = 1;
  std::vector<double> factors(pairs, 1.0);
  if (type == "linear") {
    linear = finite_in(file, factor_key, file.float_or(factor_key, 1.0), 1.0, kMaxScalingFactor);
  } else if (type == "llama3") {
    if (!tensor) factors = llama3_rope_factors(llama3_scaling(file, key), head_dim, theta);
  } else if (type != "none") {
    fail_file(file.path(), "{} is '{}': cpullm runs none, linear and llama3 RoPE scaling", type_key, type);
  }
  if (tensor) factors = factors_from_tensor(file, *tensor, pairs);

  std::vector<double> frequencies(pairs);
  for (int64_t i = 0; i < pairs; ++i)
    frequencies[i] = std::pow(static_cast<double>(theta), -static_cast<double>(2 * i) / head_dim) / factors[i] / linear;
  return frequencies;
}

}  // namespace

std::string_view architecture_name(Architecture architecture) {
  return architecture == Architecture::qwen2 ? "qwen2" : "llama";
}

std::vector<double> llama3_rope_factors(const Llama3Scaling& s, int64_t head_dim, double theta) {
  const double low_freq_wavelength = s.original_context / s.low_freq_factor;
  const double high_freq_wavelength = s.original_context / s.high_freq_factor;
  std::vector<double> factors(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double wavelength = 2 * std::numbers::pi * std::pow(theta, static_cast<double>(2 * i) / head_dim);
    if (wavelength < high_freq_wavelength) {
      factors[i] = 1;
    } else if (wavelength > low_freq_wavelength) {
      factors[i] = s.factor;
    } else {
      const double smooth = (s.original_context / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      factors[i] = 1 / ((1 - smooth) / s.factor + smooth);
    }
  }
  return factors;
}

LlamaConfig LlamaConfig::from_gguf(const GgufFile& file) {
  const std::string_view arch = file.require_string("general.architecture");
  LlamaConfig c;
  if (arch == "llama") {
    c.architecture = Architecture::llama;
  } else if (arch == "qwen2") {
    c.architecture = Architecture::qwen2;
    c.rope_style = RopeStyle::halves;  // llama.cpp's LLAMA_ROPE_TYPE_NEOX for qwen2
  } else {
    fail_file(file.path(), "architecture '{}' is not supported (cpullm runs 'llama' and 'qwen2')", arch);
  }
  const auto key = [arch](std::string_view name) { return fmt::format("{}.{}", arch, name); };
  const auto required = [&](std::string_view name, uint64_t max) {
    return bounded(file, key(name), file.require_uint(key(name)), max);
  };
  c.dim = required("embedding_length", kMaxWidth);
  c.ffn_dim = required("feed_forward_length", kMaxWidth);
  c.n_layers = required("block_count", kMaxLayers);
  c.n_heads = required("attention.head_count", kMaxWidth);
  c.n_kv_heads = bounded(file, key("attention.head_count_kv"),
                         file.uint_or(key("attention.head_count_kv"), static_cast<uint64_t>(c.n_heads)), kMaxWidth);
  c.train_context = required("context_length", kMaxContext);
  c.rms_eps = static_cast<float>(file.require_float(key("attention.layer_norm_rms_epsilon")));
  // 0 is how llama.cpp's converter says "no window".
  const uint64_t window = file.uint_or(key("attention.sliding_window"), 0);
  c.sliding_window = window == 0 ? 0 : bounded(file, key("attention.sliding_window"), window, kMaxContext);

  if (c.dim % c.n_heads != 0)
    fail_file(file.path(), "embedding_length {} is not a multiple of head_count {}", c.dim, c.n_heads);
  c.head_dim = c.dim / c.n_heads;
  if (c.head_dim % 2 != 0) fail_file(file.path(), "head size {} is odd; RoPE rotates pairs", c.head_dim);
  if (c.n_heads % c.n_kv_heads != 0)
    fail_file(file.path(), "head_count {} is not a multiple of head_count_kv {}", c.n_heads, c.n_kv_heads);
  // llama.cpp refuses partial RoPE for llama too; no file of these families has it.
  const uint64_t rope_dims = file.uint_or(key("rope.dimension_count"), static_cast<uint64_t>(c.head_dim));
  if (rope_dims != static_cast<uint64_t>(c.head_dim))
    fail_file(file.path(), "{} {} differs from the head size {} (partial RoPE is not supported)",
              key("rope.dimension_count"), rope_dims, c.head_dim);
  if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f))
    fail_file(file.path(), "{} is {} (must be in (0, 1))", key("attention.layer_norm_rms_epsilon"), c.rms_eps);
  c.rope_frequencies = read_rope_frequencies(file, arch, c.head_dim);
  // As llama.cpp: every block's tensors must belong to a block the header counts.
  for (const GgufTensorInfo& t : file.tensors()) {
    uint64_t block = 0;
    if (!t.name.starts_with("blk.")) continue;
    const char* digits = t.name.data() + 4;
    const auto [end, error] = std::from_chars(digits, t.name.data() + t.name.size(), block);
    if (error == std::errc() && end != digits && block >= static_cast<uint64_t>(c.n_layers))
      fail_file(file.path(), "tensor '{}' is in block {}, but {} is {}", t.name, block, key("block_count"), c.n_layers);
  }
  return c;
}

}  // namespace cpullm
