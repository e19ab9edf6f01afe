#include "engine/synthetic/synthetic_model.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "engine/format/gguf_writer.hpp"
#include "engine/synthetic/synthetic_vocab.hpp"
#include "engine/util/error.hpp"
#include "engine/util/half.hpp"
#include "engine/util/progress.hpp"

namespace cpullm {
namespace {

// splitmix64: fast, good enough for weights, and reproducible from a seed.
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * 0x1.0p-24f * 2.0f - 1.0f; }  // [-1, 1)
};

// How a tensor's values are drawn: offset + amplitude * uniform(-1, 1), or given (rope_freqs).
struct TensorPlan {
  std::string name;
  std::vector<int64_t> ne;
  GgmlType type;
  float offset, amplitude;
  std::vector<float> values{};  // (all of the tensor's) where given
};

void validate(const SyntheticModelOptions& o) {
  const SyntheticShape& s = o.shape;
  auto positive = [](const char* what, int64_t v) {
    if (v < 1 || v > (1 << 20)) fail("gen-model: {} is {} (must be 1 to {})", what, v, 1 << 20);
  };
  positive("--layers", s.n_layers);
  positive("--dim", s.dim);
  positive("--ffn", s.ffn_dim);
  positive("--heads", s.n_heads);
  positive("--kv-heads", s.n_kv_heads);
  positive("--vocab", s.vocab_size);
  positive("--ctx", s.context);
  if (s.sliding_window < 0 || s.sliding_window > (1 << 24))
    fail("gen-model: --sliding-window is {} (must be 0 to {})", s.sliding_window, 1 << 24);
  if (!(s.rope_factor >= 1.0f && s.rope_factor <= 1024.0f))
    fail("gen-model: --rope-factor is {} (must be from 1 to 1024)", s.rope_factor);
  if (s.dim % s.n_heads != 0 || (s.dim / s.n_heads) % 2 != 0)
    fail("gen-model: --dim {} must split into --heads {} heads of even size", s.dim, s.n_heads);
  if (s.n_heads % s.n_kv_heads != 0) fail("gen-model: --heads {} is not a multiple of --kv-heads {}", s.n_heads, s.n_kv_heads);
  if (o.dtype != GgmlType::F32 && o.dtype != GgmlType::F16 && o.dtype != GgmlType::BF16)
    fail("gen-model: --dtype must be f32, f16 or bf16");
}

void append_values(std::vector<std::byte>& out, GgmlType type, const float* values, std::size_t n) {
  const std::size_t element = type == GgmlType::F32 ? 4 : 2;
  const std::size_t start = out.size();
  out.resize(start + n * element);
  std::byte* dst = out.data() + start;
  for (std::size_t i = 0; i < n; ++i) {
    uint16_t half;
    switch (type) {
      case GgmlType::F32: std::memcpy(dst + 4 * i, &values[i], 4); continue;
      case GgmlType::F16: half = fp32_to_fp16(values[i]); break;
      default: half = fp32_to_bf16(values[i]); break;
    }
    std::memcpy(dst + 2 * i, &half, 2);
  }
}

}  // namespace

std::optional<SyntheticShape> named_shape(const std::string& name) {
  // Hyper-parameters as published with each model's config.
  if (name == "tinyllama-1.1b") return SyntheticShape{name, 22, 2048, 5632, 32, 4, 32000, 2048};
  if (name == "llama-7b") return SyntheticShape{name, 32, 4096, 11008, 32, 32, 32000, 4096};
  if (name == "llama-13b") return SyntheticShape{name, 40, 5120, 13824, 40, 40, 32000, 4096};
  // Llama 3.1 8B: Llama 3's vocabulary, its 128K context reached by the rope_freqs factors.
  if (name == "llama3-8b")
    return SyntheticShape{.name = name, .n_layers = 32, .dim = 4096, .ffn_dim = 14336, .n_heads = 32, .n_kv_heads = 8,
                          .vocab_size = 128256, .context = 131072, .vocab = SyntheticVocabKind::llama3,
                          .rope_base = 500000, .rope_scaling = SyntheticRopeScaling::llama3};
  // Mistral 7B v0.1: Llama 2's vocabulary size, a 4096-position sliding window.
  if (name == "mistral-7b")
    return SyntheticShape{.name = name, .n_layers = 32, .dim = 4096, .ffn_dim = 14336, .n_heads = 32, .n_kv_heads = 8,
                          .vocab_size = 32000, .context = 32768, .sliding_window = 4096};
  // Qwen2.5 7B: q/k/v biases, NEOX RoPE, the embedding padded past the tokenizer's 151665 tokens.
  if (name == "qwen2.5-7b")
    return SyntheticShape{.name = name, .n_layers = 28, .dim = 3584, .ffn_dim = 18944, .n_heads = 28, .n_kv_heads = 4,
                          .vocab_size = 152064, .context = 32768, .architecture = Architecture::qwen2,
                          .vocab = SyntheticVocabKind::qwen2, .rope_base = 1000000, .rms_eps = 1e-6f};
  return std::nullopt;
}

const std::vector<std::string>& shape_names() {
  static const std::vector<std::string> names = {"tinyllama-1.1b", "llama-7b",   "llama-13b",
                                                 "llama3-8b",      "mistral-7b", "qwen2.5-7b"};
  return names;
}

uint64_t write_synthetic_model(const std::string& path, const SyntheticModelOptions& options) {
  validate(options);
  const SyntheticShape& s = options.shape;
  const int64_t head_dim = s.dim / s.n_heads, kv_dim = head_dim * s.n_kv_heads;
  const SyntheticVocab vocab = make_synthetic_vocab(s.vocab_size, s.vocab);
  const std::string arch(architecture_name(s.architecture));
  const auto key = [&arch](std::string_view name) { return fmt::format("{}.{}", arch, name); };

  GgufWriter writer(path);
  writer.add_string("general.architecture", arch);
  writer.add_string("general.name", fmt::format("cpullm synthetic {} (seed {})", s.name, options.seed));
  writer.add_u32("general.file_type", options.dtype == GgmlType::F32 ? 0 : options.dtype == GgmlType::F16 ? 1 : 32);
  writer.add_u32(key("context_length"), static_cast<uint32_t>(s.context));
  writer.add_u32(key("embedding_length"), static_cast<uint32_t>(s.dim));
  writer.add_u32(key("block_count"), static_cast<uint32_t>(s.n_layers));
  writer.add_u32(key("feed_forward_length"), static_cast<uint32_t>(s.ffn_dim));
  writer.add_u32(key("rope.dimension_count"), static_cast<uint32_t>(head_dim));
  writer.add_u32(key("attention.head_count"), static_cast<uint32_t>(s.n_heads));
  writer.add_u32(key("attention.head_count_kv"), static_cast<uint32_t>(s.n_kv_heads));
  writer.add_f32(key("attention.layer_norm_rms_epsilon"), s.rms_eps);
  writer.add_f32(key("rope.freq_base"), s.rope_base);
  if (s.sliding_window > 0) writer.add_u32(key("attention.sliding_window"), static_cast<uint32_t>(s.sliding_window));
  const Llama3Scaling llama3{.factor = s.rope_factor};  // Llama 3.1's other constants
  if (s.rope_scaling == SyntheticRopeScaling::llama3_keys) {
    writer.add_string(key("rope.scaling.type"), "llama3");
    writer.add_f32(key("rope.scaling.factor"), s.rope_factor);
    writer.add_f32(key("rope.scaling.low_freq_factor"), static_cast<float>(llama3.low_freq_factor));
    writer.add_f32(key("rope.scaling.high_freq_factor"), static_cast<float>(llama3.high_freq_factor));
    writer.add_u32(key("rope.scaling.original_context_length"), static_cast<uint32_t>(llama3.original_context));
  }
  if (s.rope_scaling == SyntheticRopeScaling::linear) {
    writer.add_string(key("rope.scaling.type"), "linear");
    writer.add_f32(key("rope.scaling.factor"), s.rope_factor);
  }
  writer.add_u32(key("vocab_size"), static_cast<uint32_t>(s.vocab_size));
  writer.add_string("tokenizer.ggml.model", vocab.model);
  if (!vocab.pre.empty()) writer.add_string("tokenizer.ggml.pre", vocab.pre);
  writer.add_strings("tokenizer.ggml.tokens", vocab.pieces);
  if (!vocab.scores.empty()) writer.add_f32s("tokenizer.ggml.scores", vocab.scores);
  writer.add_i32s("tokenizer.ggml.token_type", vocab.types);
  if (!vocab.merges.empty()) writer.add_strings("tokenizer.ggml.merges", vocab.merges);
  writer.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(vocab.bos));
  writer.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(vocab.eos));
  if (vocab.unknown) writer.add_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(*vocab.unknown));
  if (vocab.padding) writer.add_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*vocab.padding));
  writer.add_bool("tokenizer.ggml.add_bos_token", vocab.add_bos);

  // Uniform(-a, a) has variance a^2/3: a = sqrt(3 / fan_in) keeps each projection's output at
  // unit variance; the projections back into the residual are further scaled by
  // 1/sqrt(2 * layers) so the residual stream grows little over depth.
  const float residual_scale = 1.0f / std::sqrt(2.0f * static_cast<float>(s.n_layers));
  auto amplitude = [](int64_t fan_in) { return std::sqrt(3.0f / static_cast<float>(fan_in)); };
  std::vector<TensorPlan> plan;
  if (s.rope_scaling == SyntheticRopeScaling::llama3) {
    const std::vector<double> factors = llama3_rope_factors(llama3, head_dim, s.rope_base);
    plan.push_back({"rope_freqs.weight", {head_dim / 2}, GgmlType::F32, 0.0f, 0.0f, {factors.begin(), factors.end()}});
  }
  plan.push_back({"token_embd.weight", {s.dim, s.vocab_size}, options.dtype, 0.0f, std::sqrt(3.0f)});
  // Qwen2's biases, drawn so that they move the projections' unit-variance outputs by about as much.
  const bool biases = s.architecture == Architecture::qwen2;
  for (int64_t l = 0; l < s.n_layers; ++l) {
    auto name = [l](const char* part, const char* kind = "weight") { return fmt::format("blk.{}.{}.{}", l, part, kind); };
    plan.push_back({name("attn_norm"), {s.dim}, GgmlType::F32, 1.0f, 0.1f});
    plan.push_back({name("attn_q"), {s.dim, s.dim}, options.dtype, 0.0f, amplitude(s.dim)});
    if (biases) plan.push_back({name("attn_q", "bias"), {s.dim}, GgmlType::F32, 0.0f, 1.0f});
    plan.push_back({name("attn_k"), {s.dim, kv_dim}, options.dtype, 0.0f, amplitude(s.dim)});
    if (biases) plan.push_back({name("attn_k", "bias"), {kv_dim}, GgmlType::F32, 0.0f, 1.0f});
    plan.push_back({name("attn_v"), {s.dim, kv_dim}, options.dtype, 0.0f, amplitude(s.dim)});
    if (biases) plan.push_back({name("attn_v", "bias"), {kv_dim}, GgmlType::F32, 0.0f, 1.0f});
    plan.push_back({name("attn_output"), {s.dim, s.dim}, options.dtype, 0.0f, amplitude(s.dim) * residual_scale});
    plan.push_back({name("ffn_norm"), {s.dim}, GgmlType::F32, 1.0f, 0.1f});
    plan.push_back({name("ffn_gate"), {s.dim, s.ffn_dim}, options.dtype, 0.0f, amplitude(s.dim)});
    plan.push_back({name("ffn_up"), {s.dim, s.ffn_dim}, options.dtype, 0.0f, amplitude(s.dim)});
    plan.push_back({name("ffn_down"), {s.ffn_dim, s.dim}, options.dtype, 0.0f, amplitude(s.ffn_dim) * residual_scale});
  }
  plan.push_back({"output_norm.weight", {s.dim}, GgmlType::F32, 1.0f, 0.1f});
  if (!options.tied_output)
    plan.push_back({"output.weight", {s.dim, s.vocab_size}, options.dtype, 0.0f, amplitude(s.dim)});

  uint64_t total = 0;
  for (const TensorPlan& t : plan) total += writer.add_tensor(t.name, t.type, t.ne);

  // Values are generated and written in chunks of whole rows of about a million values.
  ProgressBar progress("gen-model " + std::filesystem::path(path).filename().string(), total);
  std::vector<float> values;
  std::vector<std::byte> bytes;
  uint64_t written = 0;
  for (std::size_t index = 0; index < plan.size(); ++index) {
    const TensorPlan& t = plan[index];
    SplitMix rng{options.seed * 0x100000001b3ull + index};
    const int64_t row = t.ne[0];
    const int64_t rows = t.ne.size() > 1 ? t.ne[1] : 1;
    const int64_t rows_per_chunk = std::max<int64_t>(1, (1 << 20) / row);
    for (int64_t first = 0; first < rows; first += rows_per_chunk) {
      const int64_t n = std::min(rows_per_chunk, rows - first) * row;
      values.resize(n);
      if (!t.values.empty()) values.assign(t.values.begin() + first * row, t.values.begin() + first * row + n);
      else for (float& v : values) v = t.offset + t.amplitude * rng.uniform();
      bytes.clear();
      append_values(bytes, t.type, values.data(), values.size());
      writer.write_data(bytes);
      written += bytes.size();
      if (options.progress) progress.update(written);
    }
  }
  writer.finish();
  if (options.progress) progress.finish();
  return std::filesystem::file_size(path);
}

}  // namespace cpullm
