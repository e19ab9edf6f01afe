// The architectures and hyper-parameters a file can carry: llama and qwen2 keys, RoPE frequencies
// (plain, linear, Llama 3's from rope_freqs.weight or from the scaling keys), q/k/v biases and
// sliding windows; every bad value refused with the file and the key or tensor named. Then whole
// models: decode matches prefill with a window and with NEOX RoPE and biases, and a window
// changes exactly the positions it should.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <numbers>
#include <string>
#include <vector>

#include "engine/format/gguf.hpp"
#include "engine/format/gguf_writer.hpp"
#include "engine/model/config.hpp"
#include "engine/model/model.hpp"
#include "engine/model/weights.hpp"
#include "engine/synthetic/synthetic_model.hpp"
#include "engine/util/error.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

// A tiny model written tensor by tensor: dim 16, 2 heads of 8, 1 KV head, ffn 32, vocab 8, one
// block, every value 0.01 (zeros in a 2-byte type); `metadata` adds keys, `tensors` adds or
// replaces tensors by name, `without` leaves tensors out.
struct TinyTensor {
  std::string name;
  std::vector<int64_t> ne;
  GgmlType type = GgmlType::F32;
  std::vector<float> values{};  // all of them, or empty for 0.01 everywhere
};
struct TinyFile {
  std::string arch = "llama";
  float rope_base = 10000;
  std::function<void(GgufWriter&, const std::string& arch)> metadata = [](GgufWriter&, const std::string&) {};
  std::vector<TinyTensor> tensors{};
  std::vector<std::string> without{};
};

std::string write_tiny(const test::TempDir& dir, const TinyFile& spec) {
  const std::string path = dir.file("tiny.gguf");
  GgufWriter writer(path);
  const auto key = [&](const char* name) { return spec.arch + "." + name; };
  writer.add_string("general.architecture", spec.arch);
  writer.add_u32(key("context_length"), 64);
  writer.add_u32(key("embedding_length"), 16);
  writer.add_u32(key("block_count"), 1);
  writer.add_u32(key("feed_forward_length"), 32);
  writer.add_u32(key("attention.head_count"), 2);
  writer.add_u32(key("attention.head_count_kv"), 1);
  writer.add_f32(key("attention.layer_norm_rms_epsilon"), 1e-5f);
  writer.add_f32(key("rope.freq_base"), spec.rope_base);
  spec.metadata(writer, spec.arch);
  std::vector<TinyTensor> tensors = {
      {"token_embd.weight", {16, 8}},       {"blk.0.attn_norm.weight", {16}},  {"blk.0.attn_q.weight", {16, 16}},
      {"blk.0.attn_k.weight", {16, 8}},     {"blk.0.attn_v.weight", {16, 8}},  {"blk.0.attn_output.weight", {16, 16}},
      {"blk.0.ffn_norm.weight", {16}},      {"blk.0.ffn_gate.weight", {16, 32}}, {"blk.0.ffn_up.weight", {16, 32}},
      {"blk.0.ffn_down.weight", {32, 16}},  {"output_norm.weight", {16}}};
  for (const TinyTensor& t : spec.tensors) {
    auto same = std::find_if(tensors.begin(), tensors.end(), [&](const TinyTensor& u) { return u.name == t.name; });
    if (same != tensors.end()) *same = t;
    else tensors.push_back(t);
  }
  std::erase_if(tensors, [&](const TinyTensor& t) { return std::ranges::count(spec.without, t.name) > 0; });
  for (const TinyTensor& t : tensors) writer.add_tensor(t.name, t.type, t.ne);
  for (const TinyTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    std::vector<float> values = t.values.empty() ? std::vector<float>(n, 0.01f) : t.values;
    std::vector<std::byte> bytes(n * (t.type == GgmlType::F32 ? 4 : 2));
    for (int64_t i = 0; i < n; ++i) {
      if (t.type == GgmlType::F32) std::memcpy(&bytes[4 * i], &values[i], 4);
      else bytes[2 * i] = bytes[2 * i + 1] = std::byte{0};
    }
    writer.write_data(bytes);
  }
  writer.finish();
  return path;
}

// Runs `load` and expects an Error whose message names the file and every one of `words`.
void expect_refused(const std::string& path, const std::function<void()>& load, std::vector<std::string> words) {
  try {
    load();
    ADD_FAILURE() << "accepted; expected an error naming " << words.front();
  } catch (const Error& e) {
    const std::string message = e.what();
    words.push_back(path);
    for (const std::string& word : words) EXPECT_NE(message.find(word), std::string::npos) << message << "\nlacks: " << word;
  }
}

LlamaConfig config_of(const std::string& path) { return LlamaConfig::from_gguf(GgufFile(path)); }

// theta^(-2i/head_dim) for the tiny model's head of 8, in double from theta's float.
std::vector<double> plain_frequencies(double theta = 10000) {
  std::vector<double> f;
  for (int64_t i = 0; i < 4; ++i) f.push_back(std::pow(theta, -2.0 * i / 8));
  return f;
}

TEST(Architectures, ReadsEachArchitecturesOwnKeys) {
  test::TempDir dir;
  const LlamaConfig llama = config_of(write_tiny(dir, {}));
  EXPECT_EQ(llama.architecture, Architecture::llama);
  EXPECT_EQ(llama.rope_style, RopeStyle::adjacent);
  EXPECT_EQ(llama.sliding_window, 0);
  EXPECT_EQ(llama.rope_frequencies, plain_frequencies());  // exactly: the angles of every earlier build
  const LlamaConfig qwen = config_of(write_tiny(dir, {.arch = "qwen2"}));
  EXPECT_EQ(qwen.architecture, Architecture::qwen2);
  EXPECT_EQ(qwen.rope_style, RopeStyle::halves);
  EXPECT_EQ(qwen.dim, 16);
  EXPECT_EQ(qwen.n_kv_heads, 1);
  // llama keys in a qwen2 file are not qwen2's.
  const std::string mixed = write_tiny(dir, {.arch = "qwen2", .metadata = [](GgufWriter& w, const std::string&) {
                                               w.add_u32("llama.attention.sliding_window", 4);
                                             }});
  EXPECT_EQ(config_of(mixed).sliding_window, 0);
}

TEST(Architectures, RefusesUnknownArchitecturesByName) {
  test::TempDir dir;
  const std::string path = write_tiny(dir, {.arch = "gpt2"});
  expect_refused(path, [&] { config_of(path); }, {"architecture 'gpt2' is not supported"});
}

TEST(RopeScaling, LinearAndNoneAsLlamaCppReadsThem) {
  test::TempDir dir;
  const auto with = [&](const char* type, std::optional<float> factor, const char* factor_key = "rope.scaling.factor") {
    return config_of(write_tiny(dir, {.metadata = [=](GgufWriter& w, const std::string& arch) {
                                        if (type) w.add_string(arch + ".rope.scaling.type", type);
                                        if (factor) w.add_f32(arch + "." + factor_key, *factor);
                                      }}))
        .rope_frequencies;
  };
  std::vector<double> quarter = plain_frequencies();
  for (double& f : quarter) f /= 4;
  EXPECT_EQ(with("linear", 4.0f), quarter);
  EXPECT_EQ(with(nullptr, 4.0f), quarter);  // no type: linear, as llama.cpp assumes
  EXPECT_EQ(with(nullptr, 4.0f, "rope.scale_linear"), quarter);  // the older key
  EXPECT_EQ(with("none", 4.0f), plain_frequencies());  // none never scales
  EXPECT_EQ(with("linear", std::nullopt), plain_frequencies());
}

// Meta's apply_scaling, written as Meta writes it (new frequencies, not llama.cpp's divisors).
std::vector<double> meta_llama3(const std::vector<double>& freqs, double factor, double low, double high, double original) {
  std::vector<double> out;
  for (double f : freqs) {
    const double wavelength = 2 * std::numbers::pi / f;
    if (wavelength < original / high) out.push_back(f);
    else if (wavelength > original / low) out.push_back(f / factor);
    else {
      const double smooth = (original / wavelength - low) / (high - low);
      out.push_back((1 - smooth) * f / factor + smooth * f);
    }
  }
  return out;
}

// With theta 500000 and a head of 8 the four pairs' wavelengths are 6.3, 167, 4443 and 118000
// positions: kept, kept, blended and divided by the factor with original context 8192 and
// frequency factors 1 and 4, so each branch is met.
TEST(RopeScaling, Llama3FactorsFromKeysAndFromRopeFreqsMatchMetas) {
  test::TempDir dir;
  const std::vector<double> plain = plain_frequencies(500000);
  const std::vector<double> expected = meta_llama3(plain, 8, 1, 4, 8192);
  ASSERT_EQ(expected[0], plain[0]);
  ASSERT_EQ(expected[1], plain[1]);
  ASSERT_TRUE(expected[2] > plain[2] / 8 && expected[2] < plain[2]);
  ASSERT_EQ(expected[3], plain[3] / 8);
  TinyFile from_keys{.rope_base = 500000, .metadata = [](GgufWriter& w, const std::string& arch) {
                       w.add_string(arch + ".rope.scaling.type", "llama3");
                       w.add_f32(arch + ".rope.scaling.factor", 8.0f);
                       w.add_f32(arch + ".rope.scaling.low_freq_factor", 1.0f);
                       w.add_f32(arch + ".rope.scaling.high_freq_factor", 4.0f);
                       w.add_u32(arch + ".rope.scaling.original_context_length", 8192);
                     }};
  const std::vector<double> got = config_of(write_tiny(dir, from_keys)).rope_frequencies;
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i] / expected[i], 1.0, 1e-12) << "pair " << i;

  // The same factors as rope_freqs.weight (F32: within its rounding), read with the llama3 type
  // and no other key, and without a scaling type too, as llama.cpp applies it.
  const std::vector<double> factors = llama3_rope_factors({}, 8, 500000);
  TinyFile from_tensor{.rope_base = 500000,
                       .metadata = [](GgufWriter& w, const std::string& arch) {
                         w.add_string(arch + ".rope.scaling.type", "llama3");
                       },
                       .tensors = {{"rope_freqs.weight", {4}, GgmlType::F32, {factors.begin(), factors.end()}}}};
  const std::vector<double> tensor = config_of(write_tiny(dir, from_tensor)).rope_frequencies;
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(tensor[i] / expected[i], 1.0, 1e-7) << "pair " << i;
  from_tensor.metadata = [](GgufWriter&, const std::string&) {};
  EXPECT_EQ(config_of(write_tiny(dir, from_tensor)).rope_frequencies, tensor);
}

TEST(RopeScaling, RefusesUnknownTypesAndAbsurdValuesByName) {
  test::TempDir dir;
  struct Bad {
    std::function<void(GgufWriter&, const std::string&)> metadata;
    std::vector<TinyTensor> tensors;
    std::vector<std::string> words;
  };
  const auto type = [](const char* t) { return [=](GgufWriter& w, const std::string& a) { w.add_string(a + ".rope.scaling.type", t); }; };
  const auto factor = [](float f) {
    return [=](GgufWriter& w, const std::string& a) { w.add_f32(a + ".rope.scaling.factor", f); };
  };
  const auto llama3_with = [](float low, float high) {
    return [=](GgufWriter& w, const std::string& a) {
      w.add_string(a + ".rope.scaling.type", "llama3");
      w.add_f32(a + ".rope.scaling.factor", 8);
      w.add_f32(a + ".rope.scaling.low_freq_factor", low);
      w.add_f32(a + ".rope.scaling.high_freq_factor", high);
      w.add_u32(a + ".rope.scaling.original_context_length", 8192);
    };
  };
  const std::vector<Bad> cases = {
      {type("yarn"), {}, {"llama.rope.scaling.type", "'yarn'"}},
      {type("longrope"), {}, {"llama.rope.scaling.type", "'longrope'"}},
      {type("mystery"), {}, {"llama.rope.scaling.type", "'mystery'"}},
      {factor(NAN), {}, {"llama.rope.scaling.factor", "nan"}},
      {factor(0.0f), {}, {"llama.rope.scaling.factor"}},
      {factor(-2.0f), {}, {"llama.rope.scaling.factor"}},
      {factor(1e9f), {}, {"llama.rope.scaling.factor"}},
      {type("llama3"), {}, {"missing required metadata key 'llama.rope.scaling.factor'"}},
      {llama3_with(4, 1), {}, {"llama.rope.scaling.high_freq_factor", "llama.rope.scaling.low_freq_factor"}},
      {llama3_with(INFINITY, 8), {}, {"llama.rope.scaling.low_freq_factor", "inf"}},
      {nullptr, {{"rope_freqs.weight", {3}}}, {"rope_freqs.weight", "[3]", "expected [4]"}},
      {nullptr, {{"rope_freqs.weight", {4, 2}}}, {"rope_freqs.weight", "expected [4]"}},
      {nullptr, {{"rope_freqs.weight", {4}, GgmlType::F16}}, {"rope_freqs.weight", "F16"}},
      {nullptr, {{"rope_freqs.weight", {4}, GgmlType::F32, {1, 0, 1, 1}}}, {"rope_freqs.weight", "value 1"}},
      {nullptr, {{"rope_freqs.weight", {4}, GgmlType::F32, {1, 1, NAN, 1}}}, {"rope_freqs.weight", "value 2"}},
      {nullptr, {{"rope_freqs.weight", {4}, GgmlType::F32, {1, 1, 1, -8}}}, {"rope_freqs.weight", "value 3"}},
      {[](GgufWriter& w, const std::string& a) { w.add_u32(a + ".attention.sliding_window", 1u << 30); }, {},
       {"llama.attention.sliding_window", "1073741824"}},
  };
  for (const Bad& bad : cases) {
    TinyFile spec{.tensors = bad.tensors};
    if (bad.metadata) spec.metadata = bad.metadata;
    const std::string path = write_tiny(dir, spec);
    expect_refused(path, [&] { config_of(path); }, bad.words);
  }
}

// A file's weights, with the mapping they point into.
struct Loaded {
  explicit Loaded(const std::string& path) : file(path), config(LlamaConfig::from_gguf(file)), weights(map_weights(file, config)) {}
  GgufFile file;
  LlamaConfig config;
  ModelWeights weights;
};

TEST(Biases, RequiredForQwen2OptionalForLlamaCheckedAndOthersRefusedByName) {
  test::TempDir dir;
  const std::vector<TinyTensor> biases = {{"blk.0.attn_q.bias", {16}}, {"blk.0.attn_k.bias", {8}}, {"blk.0.attn_v.bias", {8}}};
  const std::string qwen = write_tiny(dir, {.arch = "qwen2", .tensors = biases});
  const Loaded loaded(qwen);
  const LayerWeights& layer = loaded.weights.layers[0];
  EXPECT_NE(layer.bq, nullptr);
  EXPECT_NE(layer.bk, nullptr);
  EXPECT_NE(layer.bv, nullptr);
  EXPECT_EQ(layer.bk[7], 0.01f);
  const std::string plain_llama = write_tiny(dir, {});
  EXPECT_EQ(Loaded(plain_llama).weights.layers[0].bq, nullptr);
  const std::string biased_llama = write_tiny(dir, {.tensors = {{"blk.0.attn_v.bias", {8}}}});
  const Loaded llama(biased_llama);
  EXPECT_EQ(llama.weights.layers[0].bq, nullptr);
  EXPECT_NE(llama.weights.layers[0].bv, nullptr);

  const std::string missing = write_tiny(dir, {.arch = "qwen2", .tensors = biases, .without = {"blk.0.attn_k.bias"}});
  expect_refused(missing, [&] { Loaded{missing}; }, {"missing required tensor 'blk.0.attn_k.bias'"});
  const std::string wide = write_tiny(dir, {.arch = "qwen2", .tensors = {biases[0], {"blk.0.attn_k.bias", {16}}, biases[2]}});
  expect_refused(wide, [&] { Loaded{wide}; }, {"blk.0.attn_k.bias", "[16]", "expected [8]"});
  const std::string half = write_tiny(dir, {.arch = "qwen2", .tensors = {{"blk.0.attn_q.bias", {16}, GgmlType::F16}, biases[1], biases[2]}});
  expect_refused(half, [&] { Loaded{half}; }, {"blk.0.attn_q.bias", "F16"});
  const std::string matrix = write_tiny(dir, {.tensors = {{"blk.0.attn_v.bias", {8, 2}}}});
  expect_refused(matrix, [&] { Loaded{matrix}; }, {"blk.0.attn_v.bias", "expected [8]"});
  const std::string output_bias = write_tiny(dir, {.tensors = {{"blk.0.attn_output.bias", {16}}}});
  expect_refused(output_bias, [&] { Loaded{output_bias}; }, {"blk.0.attn_output.bias", "does not add"});
}

// Whole models: cuts of the named shapes at width 64 in F32.
std::string write_cut(const test::TempDir& dir, const std::string& shape_name, int64_t window = -1) {
  SyntheticShape shape = *named_shape(shape_name);
  shape.n_layers = 2, shape.dim = 64, shape.ffn_dim = 160, shape.n_heads = 4, shape.n_kv_heads = 2;
  shape.vocab_size = 1024, shape.context = 128;
  if (window >= 0) shape.sliding_window = window;
  const std::string path = dir.file(shape_name + std::to_string(window) + ".gguf");
  write_synthetic_model(path, {.shape = shape, .dtype = GgmlType::F32, .seed = 3, .progress = false});
  return path;
}

std::vector<int32_t> tokens(int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 131 + 7) % 700);
  return t;
}

// The prompt at once (tiled attention, chunks of 4x4 tiles) and token by token (single queries)
// give the same logits within the engine's 1e-4 batch bound, with a window shorter than the
// prompt, and with Qwen2's biases and NEOX RoPE.
TEST(ArchitectureModels, DecodeMatchesPrefill) {
  test::TempDir dir;
  for (const std::string& path : {write_cut(dir, "mistral-7b", 6), write_cut(dir, "qwen2.5-7b"), write_cut(dir, "llama3-8b")}) {
    const std::vector<int32_t> prompt = tokens(30);
    Model prefill(path, 32);
    prefill.set_attention_tiles({4, 4});
    const std::span<const float> all = prefill.forward_batch(prompt, 0, true);
    const std::vector<float> batch(all.begin(), all.end());
    Model decode(path, 32);
    const int64_t vocab = decode.config().vocab_size;
    for (int64_t p = 0; p < static_cast<int64_t>(prompt.size()); ++p) {
      const std::span<const float> one = decode.forward(prompt[p], p);
      double worst = 0;
      for (int64_t v = 0; v < vocab; ++v) worst = std::max(worst, std::abs(double{one[v]} - batch[p * vocab + v]));
      EXPECT_LE(worst, 1e-4) << path << " position " << p;
    }
  }
}

// A window of 6 leaves the first 6 positions as they are without one (bit for bit: the same
// keys, the same arithmetic) and changes every later one.
TEST(ArchitectureModels, AWindowChangesExactlyThePositionsPastIt) {
  test::TempDir dir;
  const std::vector<int32_t> prompt = tokens(20);
  Model windowed(write_cut(dir, "mistral-7b", 6), 20), full(write_cut(dir, "mistral-7b", 0), 20);
  EXPECT_EQ(windowed.config().sliding_window, 6);
  EXPECT_EQ(full.config().sliding_window, 0);
  const std::span<const float> a = windowed.forward_batch(prompt, 0, true);
  const std::vector<float> with(a.begin(), a.end());
  const std::span<const float> b = full.forward_batch(prompt, 0, true);
  const int64_t vocab = full.config().vocab_size;
  for (int64_t p = 0; p < 20; ++p) {
    double difference = 0;
    for (int64_t v = 0; v < vocab; ++v) difference = std::max(difference, std::abs(double{with[p * vocab + v]} - b[p * vocab + v]));
    if (p < 6) EXPECT_EQ(difference, 0.0) << "position " << p;
    else EXPECT_GT(difference, 1e-3) << "position " << p;
  }
}

}  // namespace
}  // namespace cpullm
