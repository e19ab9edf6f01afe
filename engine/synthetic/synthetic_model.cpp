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

// How a tensor's values are drawn: offset + amplitude * uniform(-1, 1).
struct TensorPlan {
  std::string name;
  std::vector<int64_t> ne;
  GgmlType type;
  float offset, amplitude;
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
  return std::nullopt;
}

uint64_t write_synthetic_model(const std::string& path, const SyntheticModelOptions& options) {
  validate(options);
  const SyntheticShape& s = options.shape;
  const int64_t kv_dim = s.dim / s.n_heads * s.n_kv_heads;
  const SyntheticVocab vocab = make_synthetic_vocab(s.vocab_size);

  GgufWriter writer(path);
  writer.add_string("general.architecture", "llama");
  writer.add_string("general.name", fmt::format("cpullm synthetic {} (seed {})", s.name, options.seed));
  writer.add_u32("general.file_type", options.dtype == GgmlType::F32 ? 0 : options.dtype == GgmlType::F16 ? 1 : 32);
  writer.add_u32("llama.context_length", static_cast<uint32_t>(s.context));
  writer.add_u32("llama.embedding_length", static_cast<uint32_t>(s.dim));
  writer.add_u32("llama.block_count", static_cast<uint32_t>(s.n_layers));
  writer.add_u32("llama.feed_forward_length", static_cast<uint32_t>(s.ffn_dim));
  writer.add_u32("llama.rope.dimension_count", static_cast<uint32_t>(s.dim / s.n_heads));
  writer.add_u32("llama.attention.head_count", static_cast<uint32_t>(s.n_heads));
  writer.add_u32("llama.attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads));
  writer.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  writer.add_f32("llama.rope.freq_base", 10000.0f);
  writer.add_u32("llama.vocab_size", static_cast<uint32_t>(s.vocab_size));
  writer.add_string("tokenizer.ggml.model", "llama");
  writer.add_strings("tokenizer.ggml.tokens", vocab.pieces);
  writer.add_f32s("tokenizer.ggml.scores", vocab.scores);
  writer.add_i32s("tokenizer.ggml.token_type", vocab.types);
  writer.add_u32("tokenizer.ggml.bos_token_id", 1);
  writer.add_u32("tokenizer.ggml.eos_token_id", 2);
  writer.add_u32("tokenizer.ggml.unknown_token_id", 0);
  writer.add_bool("tokenizer.ggml.add_bos_token", true);

  // Uniform(-a, a) has variance a^2/3: a = sqrt(3 / fan_in) keeps each projection's output at
  // unit variance; the projections back into the residual are further scaled by
  // 1/sqrt(2 * layers) so the residual stream grows little over depth.
  const float residual_scale = 1.0f / std::sqrt(2.0f * static_cast<float>(s.n_layers));
  auto amplitude = [](int64_t fan_in) { return std::sqrt(3.0f / static_cast<float>(fan_in)); };
  std::vector<TensorPlan> plan;
  plan.push_back({"token_embd.weight", {s.dim, s.vocab_size}, options.dtype, 0.0f, std::sqrt(3.0f)});
  for (int64_t l = 0; l < s.n_layers; ++l) {
    auto name = [l](const char* part) { return fmt::format("blk.{}.{}.weight", l, part); };
    plan.push_back({name("attn_norm"), {s.dim}, GgmlType::F32, 1.0f, 0.1f});
    plan.push_back({name("attn_q"), {s.dim, s.dim}, options.dtype, 0.0f, amplitude(s.dim)});
    plan.push_back({name("attn_k"), {s.dim, kv_dim}, options.dtype, 0.0f, amplitude(s.dim)});
    plan.push_back({name("attn_v"), {s.dim, kv_dim}, options.dtype, 0.0f, amplitude(s.dim)});
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
      for (float& v : values) v = t.offset + t.amplitude * rng.uniform();
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
