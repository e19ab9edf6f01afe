// cpullm quantize: byte-for-byte agreement with llama.cpp's llama-quantize on stories260K, the
// error bound of each format, which tensors change type and which stay, metadata copied, and
// clear errors for bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fnmatch.h>
#include <map>
#include <random>
#include <tuple>

#include "engine/format/gguf.hpp"
#include "engine/format/gguf_writer.hpp"
#include "engine/kernels/gemm.hpp"
#include "engine/kernels/quant_formats.hpp"
#include "engine/kernels/weight_formats.hpp"
#include "engine/quant/quantize_model.hpp"
#include "engine/util/error.hpp"
#include "engine/util/half.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

QuantizeSummary quantize(const std::string& input, const std::string& output, GgmlType type,
                         std::vector<std::string> keep = {}) {
  QuantizeOptions options;
  options.type = file_type_of(type);
  options.keep = std::move(keep);
  options.progress = false;
  return quantize_model(input, output, options);
}

// A tensor's values as FP32, whatever its type.
std::vector<float> values_of(const GgufTensorInfo& t) {
  std::vector<float> out(t.elements());
  const auto* halves = reinterpret_cast<const uint16_t*>(t.data);
  switch (t.type) {
    case GgmlType::F32: std::memcpy(out.data(), t.data, t.bytes); break;
    case GgmlType::F16: for (std::size_t i = 0; i < out.size(); ++i) out[i] = fp16_to_fp32(halves[i]); break;
    case GgmlType::BF16: for (std::size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_fp32(halves[i]); break;
    case GgmlType::Q8_0: dequantize_row_q8_0(reinterpret_cast<const BlockQ8_0*>(t.data), out.data(), t.elements()); break;
    case GgmlType::Q4_0: dequantize_row_q4_0(reinterpret_cast<const BlockQ4_0*>(t.data), out.data(), t.elements()); break;
    default: ADD_FAILURE() << t.name << ": unexpected type " << ggml_type_name(t.type);
  }
  return out;
}

bool same_bytes(const GgufTensorInfo& a, const GgufTensorInfo& b) {
  return a.bytes == b.bytes && std::memcmp(a.data, b.data, a.bytes) == 0;
}

bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case GgufValueType::STRING: return a.string == b.string;
    case GgufValueType::ARRAY:
      return a.element_type == b.element_type && a.count == b.count && std::ranges::equal(a.raw, b.raw) &&
             std::ranges::equal(a.items, b.items, same_value);
    default:
      return a.integer == b.integer && a.unsigned_integer == b.unsigned_integer && a.real == b.real &&
             a.boolean == b.boolean;
  }
}

// Every key of `source` in `output`, in the same order and with the same value, except
// general.file_type and general.quantization_version, which must hold the given numbers
// (quantization_version 0: must be absent). Keys absent from the source come last.
void expect_metadata_copied(const GgufFile& source, const GgufFile& output, uint32_t file_type,
                            uint32_t quantization_version) {
  std::vector<std::string_view> expected_keys;
  for (const auto& [key, value] : source.metadata()) expected_keys.push_back(key);
  if (quantization_version && !source.find("general.quantization_version"))
    expected_keys.push_back("general.quantization_version");
  if (!source.find("general.file_type")) expected_keys.push_back("general.file_type");
  std::vector<std::string_view> keys;
  for (const auto& [key, value] : output.metadata()) keys.push_back(key);
  EXPECT_EQ(keys, expected_keys);
  for (const auto& [key, value] : output.metadata()) {
    if (key == "general.file_type") {
      EXPECT_EQ(output.require_uint(key), file_type);
    } else if (key == "general.quantization_version" && quantization_version) {
      EXPECT_EQ(output.require_uint(key), quantization_version);
    } else {
      EXPECT_TRUE(same_value(value, *source.find(key))) << key;
    }
  }
}

template <typename Action>
void expect_error(Action action, std::initializer_list<std::string_view> fragments) {
  try {
    action();
    ADD_FAILURE() << "no error; expected one holding '" << *fragments.begin() << "'";
  } catch (const Error& e) {
    for (std::string_view fragment : fragments)
      EXPECT_NE(std::string_view(e.what()).find(fragment), std::string_view::npos) << e.what();
  }
}

// llama.cpp's llama-quantize output for stories260K, tensor by tensor: same set of tensors,
// and each with the same type, shape and bytes (llama.cpp orders the tensors differently).
// The vectorised Q8_0 quantizer against llama.cpp's scalar reference written out here
// (quantize_row_q8_0_ref): the same bytes for random blocks, blocks of zeros, and blocks whose
// products x / d land exactly on halves, where the rounding direction (away from zero) shows.
TEST(Quantize, Q8_0QuantizerMatchesTheScalarReference) {
  auto reference = [](const float* x, BlockQ8_0& out) {
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;
    out.scale = fp32_to_fp16(d);
    for (int j = 0; j < kQuantBlock; ++j) out.q[j] = static_cast<int8_t>(std::round(x[j] * inverse));
  };
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> x(64 * kQuantBlock);
  for (float& v : x) v = dist(rng);
  std::fill(x.begin() + kQuantBlock, x.begin() + 2 * kQuantBlock, 0.0f);
  for (int j = 0; j < kQuantBlock; ++j) x[2 * kQuantBlock + j] = (j % 2 ? -1.0f : 1.0f) * (j + 0.5f);  // d = 1 after
  x[2 * kQuantBlock] = 127.0f;                                                                        // amax = 127
  std::vector<BlockQ8_0> fast(64), expected(64);
  quantize_row_q8_0(x.data(), fast.data(), static_cast<int64_t>(x.size()));
  for (int b = 0; b < 64; ++b) {
    reference(&x[b * kQuantBlock], expected[b]);
    ASSERT_EQ(std::memcmp(&fast[b], &expected[b], sizeof(BlockQ8_0)), 0) << "block " << b;
  }
  EXPECT_EQ(fast[2].q[1], -2);  // -1.5 rounds away from zero
}

// The GEMM's activation blocks: the Q8_0 block's values, its scale in FP32, and the sums the
// integer micro-kernels start from, against sums of the stored bytes; blocks of all +127, all
// -127 (the extremes of the q + 128 trick) and zeros among random ones.
TEST(Quantize, ActivationBlocksCarryTheirQ8_0ValuesAndSums) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  constexpr int kBlocks = 16;
  std::vector<float> x(kBlocks * kQuantBlock);
  for (float& v : x) v = dist(rng);
  std::fill_n(x.begin(), kQuantBlock, 2.5f);                    // all +127
  std::fill_n(x.begin() + kQuantBlock, kQuantBlock, -0.75f);    // all -127
  std::fill_n(x.begin() + 2 * kQuantBlock, kQuantBlock, 0.0f);  // scale 0
  std::vector<BlockQ8_0> blocks(kBlocks);
  std::vector<ActivationBlock> activations(kBlocks);
  quantize_row_q8_0(x.data(), blocks.data(), static_cast<int64_t>(x.size()));
  quantize_activations(x.data(), activations.data(), static_cast<int64_t>(x.size()));
  for (int b = 0; b < kBlocks; ++b) {
    const ActivationBlock& a = activations[b];
    ASSERT_EQ(std::memcmp(a.q, blocks[b].q, kQuantBlock), 0) << "block " << b;
    EXPECT_EQ(a.scale, fp16_to_fp32(blocks[b].scale)) << "block " << b;
    int32_t halves[2] = {0, 0};
    for (int j = 0; j < kQuantBlock; ++j) halves[j / 16] += blocks[b].q[j];
    EXPECT_EQ(a.offset_sum, -128 * (halves[0] + halves[1])) << "block " << b;
    for (int h = 0; h < 2; ++h) EXPECT_EQ(a.half_sums[h], a.scale * static_cast<float>(halves[h])) << "block " << b;
  }
  EXPECT_EQ(activations[0].offset_sum, -128 * 32 * 127);
  EXPECT_EQ(activations[1].offset_sum, 128 * 32 * 127);
}

TEST(Quantize, MatchesLlamaCppByteForByte) {
  auto f32 = test::shared_model("stories260K.gguf");
  auto q8 = test::shared_model("stories260K-q8_0.gguf");
  auto q4 = test::shared_model("stories260K-q4_0.gguf");
  if (!f32 || !q8 || !q4) GTEST_SKIP() << "../shared/models/stories260K{,-q8_0,-q4_0}.gguf not found";
  test::TempDir dir;
  for (auto [reference_path, type] : {std::pair{*q8, GgmlType::Q8_0}, std::pair{*q4, GgmlType::Q4_0}}) {
    const std::string path = dir.file("ours.gguf");
    quantize(*f32, path, type);
    const GgufFile ours(path), reference(reference_path);
    ASSERT_EQ(ours.tensors().size(), reference.tensors().size());
    std::map<std::string_view, int> matched;  // type name -> tensors identical to llama.cpp's
    for (const GgufTensorInfo& expected : reference.tensors()) {
      const GgufTensorInfo& t = ours.require_tensor(expected.name);
      EXPECT_EQ(t.type, expected.type) << expected.name;
      EXPECT_EQ(t.n_dims, expected.n_dims) << expected.name;
      EXPECT_EQ(t.ne, expected.ne) << expected.name;
      EXPECT_TRUE(same_bytes(t, expected)) << expected.name << " differs from " << reference_path;
      ++matched[ggml_type_name(t.type)];
    }
    // The types the shared models' README lists: ffn_down F16, norms F32, the output layer Q8_0.
    using Counts = std::map<std::string_view, int>;
    const Counts expected_counts = type == GgmlType::Q8_0 ? Counts{{"Q8_0", 32}, {"F16", 5}, {"F32", 11}}
                                                          : Counts{{"Q4_0", 31}, {"Q8_0", 1}, {"F16", 5}, {"F32", 11}};
    EXPECT_EQ(matched, expected_counts);
    // llama.cpp appends quantization_version, then file_type, to the source's keys: so do we.
    expect_metadata_copied(GgufFile(*f32), ours, type == GgmlType::Q8_0 ? 7 : 2, 2);
    for (const auto& [key, value] : reference.metadata()) EXPECT_TRUE(same_value(value, *ours.find(key))) << key;
  }
}

// Round trip of stories260K's F32 weights, block by block. With d = amax/127 computed in FP32
// and d' its FP16 rounding (the stored scale), Q8_0 stores q = round(x/d) and reads x' = d'q:
//   |x - x'| <= |x - dq| + |d - d'||q| <= d/2 + 127|d - d'|.
// Q4_0 takes m, the value of largest magnitude with its sign, and d = m/-8, so u = x/d lies in
// [-8, 8]; it stores min(15, trunc(u + 8.5)) - 8, which is u rounded half up, except that
// u >= 7.5 (x within |d|/2 of -m) clamps to 7. So |u - q| <= max(1/2, u - 7) <= 1 and
//   |x - x'| <= |d| max(1/2, u - 7) + 8|d - d'|.
// Both get a slack of 1e-4 d for FP32 rounding of x * (1/d).
TEST(Quantize, BlockFormatsStayWithinTheirErrorBound) {
  auto f32 = test::shared_model("stories260K.gguf");
  if (!f32) GTEST_SKIP() << "../shared/models/stories260K.gguf not found";
  test::TempDir dir;
  const GgufFile source(*f32);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    const std::string path = dir.file("q.gguf");
    quantize(*f32, path, type);
    const GgufFile output(path);
    int blocks = 0, clamped = 0;
    for (const GgufTensorInfo& t : output.tensors()) {
      if (t.type != GgmlType::Q8_0 && t.type != GgmlType::Q4_0) continue;
      const std::vector<float> x = values_of(source.require_tensor(t.name)), y = values_of(t);
      for (std::size_t b = 0; b < x.size() / kQuantBlock; ++b, ++blocks) {
        const float* xb = &x[b * kQuantBlock];
        float m = 0;
        for (int j = 0; j < kQuantBlock; ++j) if (std::fabs(xb[j]) > std::fabs(m)) m = xb[j];
        const float d = t.type == GgmlType::Q8_0 ? std::fabs(m) / 127.0f : m / -8.0f;
        const double stored = fp16_to_fp32(fp32_to_fp16(d));
        for (int j = 0; j < kQuantBlock; ++j) {
          const double error = std::fabs(double(xb[j]) - y[b * kQuantBlock + j]);
          double bound;
          if (t.type == GgmlType::Q8_0) {
            bound = (0.5 + 1e-4) * d + 127 * std::fabs(d - stored);
          } else {
            const double u = d != 0 ? xb[j] / double(d) : 0;
            clamped += u >= 7.5;
            bound = std::fabs(d) * (std::max(0.5, u - 7) + 1e-4) + 8 * std::fabs(d - stored);
          }
          ASSERT_LE(error, bound) << t.name << " block " << b << " value " << j << ": " << xb[j] << " -> "
                                  << y[b * kQuantBlock + j];
        }
      }
    }
    EXPECT_GT(blocks, 1000);
    // The clamp is no corner case: stories260K has 1081 values there, so |d|/2 alone would fail.
    if (type == GgmlType::Q4_0) {
      EXPECT_GT(clamped, 1000);
    }
  }
}

// F16 and BF16 round to nearest even: relative error at most 2^-11 (F16, normal range; 2^-25
// absolute below it) and 2^-8 (BF16). Every matrix changes, ffn_down included (no blocks).
TEST(Quantize, Fp16AndBf16Targets) {
  auto f32 = test::shared_model("stories260K.gguf");
  if (!f32) GTEST_SKIP() << "../shared/models/stories260K.gguf not found";
  test::TempDir dir;
  const GgufFile source(*f32);
  for (auto [type, file_type] : {std::pair{GgmlType::F16, 1u}, std::pair{GgmlType::BF16, 32u}}) {
    const std::string path = dir.file("half.gguf");
    const QuantizeSummary summary = quantize(*f32, path, type);
    EXPECT_EQ(summary.converted, 37);
    EXPECT_EQ(summary.unchanged, 11);
    EXPECT_EQ(summary.fell_back + summary.kept, 0);
    const GgufFile output(path);
    for (const GgufTensorInfo& t : output.tensors()) {
      const GgufTensorInfo& s = source.require_tensor(t.name);
      if (t.n_dims == 1) {
        EXPECT_EQ(t.type, GgmlType::F32) << t.name;
        EXPECT_TRUE(same_bytes(t, s)) << t.name;
        continue;
      }
      EXPECT_EQ(t.type, type) << t.name;
      const std::vector<float> x = values_of(s), y = values_of(t);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double bound = type == GgmlType::F16 ? std::max(std::fabs(x[i]) * 0x1p-11, 0x1p-25) : std::fabs(x[i]) * 0x1p-8;
        ASSERT_LE(std::fabs(double(x[i]) - y[i]), bound) << t.name << " value " << i;
      }
    }
    expect_metadata_copied(source, output, file_type, 0);
  }
}

TEST(Quantize, KeepLeavesExactlyTheChosenTensors) {
  auto f32 = test::shared_model("stories260K.gguf");
  if (!f32) GTEST_SKIP() << "../shared/models/stories260K.gguf not found";
  test::TempDir dir;
  const std::string path = dir.file("kept.gguf");
  const QuantizeSummary summary =
      quantize(*f32, path, GgmlType::Q8_0, {"first", "last", "embeddings", "output", "blk.*.ffn_gate.weight"});
  const GgufFile source(*f32), output(path);
  int kept = 0;
  for (const GgufTensorInfo& t : output.tensors()) {
    const bool chosen = t.name.starts_with("blk.0.") || t.name.starts_with("blk.4.") || t.name == "token_embd.weight" ||
                        t.name == "output.weight" || fnmatch("blk.*.ffn_gate.weight", t.name.c_str(), 0) == 0;
    const GgufTensorInfo& s = source.require_tensor(t.name);
    if (chosen) {
      ++kept;
      EXPECT_EQ(t.type, s.type) << t.name;
      EXPECT_TRUE(same_bytes(t, s)) << t.name;
    } else if (t.n_dims == 1) {
      EXPECT_EQ(t.type, GgmlType::F32) << t.name;
    } else {
      EXPECT_EQ(t.type, t.name.find("ffn_down") != std::string::npos ? GgmlType::F16 : GgmlType::Q8_0) << t.name;
    }
  }
  // Blocks 0 and 4 (9 tensors each), token_embd, output and ffn_gate of blocks 1 to 3.
  EXPECT_EQ(kept, 23);
  EXPECT_EQ(summary.kept, 23);
  EXPECT_EQ(summary.converted + summary.fell_back + summary.unchanged, 48 - 23);
}

// A small model with the cases stories260K lacks: BF16 and F16 sources, an output tied to the
// embedding, a non-default alignment, every metadata type including nested arrays, and
// general.file_type / quantization_version present (replaced where they are).
struct SmallModel {
  static constexpr int32_t kInts0[] = {1, 2, 3}, kInts1[] = {4};
  GgufValue nested_ints, nested_strings;

  SmallModel() {
    nested_ints = array_of(GgufValueType::ARRAY, {int_array(kInts0), int_array(kInts1)});
    nested_strings = array_of(GgufValueType::ARRAY, {array_of(GgufValueType::STRING, {string("a"), string("bc")}),
                                                     array_of(GgufValueType::STRING, {})});
  }
  static GgufValue string(std::string_view s) {
    GgufValue v;
    v.type = GgufValueType::STRING;
    v.string = s;
    return v;
  }
  static GgufValue array_of(GgufValueType element, std::vector<GgufValue> items) {
    GgufValue v;
    v.type = GgufValueType::ARRAY;
    v.element_type = element;
    v.count = items.size();
    v.items = std::move(items);
    return v;
  }
  template <std::size_t N>
  static GgufValue int_array(const int32_t (&values)[N]) {
    GgufValue v;
    v.type = GgufValueType::ARRAY;
    v.element_type = GgufValueType::I32;
    v.count = N;
    v.raw = std::as_bytes(std::span(values));
    return v;
  }
  static GgufValue scalar(GgufValueType type, int64_t integer, uint64_t unsigned_integer, double real) {
    GgufValue v;
    v.type = type;
    v.integer = integer;
    v.unsigned_integer = unsigned_integer;
    v.real = real;
    v.boolean = type == GgufValueType::BOOL;
    return v;
  }

  void write(const std::string& path) const {
    GgufWriter w(path, 64);
    w.add_string("general.architecture", "llama");
    w.add_u32("general.file_type", 0);
    w.add_u32("general.quantization_version", 1);
    w.add_u32("llama.block_count", 2);
    w.add_value("test.u8", scalar(GgufValueType::U8, 0, 200, 0));
    w.add_value("test.i8", scalar(GgufValueType::I8, -100, 0, 0));
    w.add_value("test.u16", scalar(GgufValueType::U16, 0, 60000, 0));
    w.add_value("test.i16", scalar(GgufValueType::I16, -30000, 0, 0));
    w.add_value("test.i32", scalar(GgufValueType::I32, -2000000000, 0, 0));
    w.add_value("test.u64", scalar(GgufValueType::U64, 0, 1ull << 60, 0));
    w.add_value("test.i64", scalar(GgufValueType::I64, -(1ll << 60), 0, 0));
    w.add_value("test.f64", scalar(GgufValueType::F64, 0, 0, 0.1));
    w.add_value("test.bool", scalar(GgufValueType::BOOL, 0, 0, 0));
    w.add_value("test.nested_ints", nested_ints);
    w.add_value("test.nested_strings", nested_strings);
    const std::vector<std::tuple<std::string, GgmlType, std::vector<int64_t>>> tensors = {
        {"token_embd.weight", GgmlType::F32, {64, 16}},     // tied output: Q8_0 under q4_0
        {"blk.0.attn_norm.weight", GgmlType::F32, {64}},    // 1-D: unchanged
        {"blk.0.attn_q.weight", GgmlType::BF16, {64, 64}},  // converted from BF16
        {"blk.0.ffn_down.weight", GgmlType::F16, {48, 64}}, // 48 columns: stays F16
        {"blk.1.attn_q.weight", GgmlType::F32, {64, 64}},
        {"blk.1.ffn_down.weight", GgmlType::F32, {48, 64}}, // 48 columns: falls back to F16
    };
    for (const auto& [name, type, ne] : tensors) w.add_tensor(name, type, ne);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    for (const auto& [name, type, ne] : tensors) {
      std::vector<std::byte> bytes;
      for (int64_t i = 0; i < (ne.size() > 1 ? ne[0] * ne[1] : ne[0]); ++i) {
        const float x = normal(rng);
        const uint16_t half = type == GgmlType::F16 ? fp32_to_fp16(x) : fp32_to_bf16(x);
        const auto* b = type == GgmlType::F32 ? reinterpret_cast<const std::byte*>(&x) : reinterpret_cast<const std::byte*>(&half);
        bytes.insert(bytes.end(), b, b + (type == GgmlType::F32 ? 4 : 2));
      }
      w.write_data(bytes);
    }
    w.finish();
  }
};

TEST(Quantize, SmallModelTypesMetadataAndAlignment) {
  test::TempDir dir;
  const SmallModel model;
  const std::string source_path = dir.file("small.gguf"), path = dir.file("small-q4_0.gguf");
  model.write(source_path);
  const GgufFile source(source_path);
  // The writer's add_value, checked through the reader: nested arrays as written.
  EXPECT_TRUE(same_value(*source.find("test.nested_ints"), model.nested_ints));
  EXPECT_TRUE(same_value(*source.find("test.nested_strings"), model.nested_strings));
  ASSERT_EQ(source.find("test.nested_strings")->items[0].items[1].string, "bc");

  const QuantizeSummary summary = quantize(source_path, path, GgmlType::Q4_0);
  EXPECT_EQ(summary.converted, 2);  // the attn_q matrices
  EXPECT_EQ(summary.fell_back, 3);  // token_embd (Q8_0), both ffn_down (F16)
  EXPECT_EQ(summary.unchanged, 1);
  const GgufFile output(path);
  EXPECT_EQ(output.alignment(), 64u);
  expect_metadata_copied(source, output, 2, 2);
  const std::map<std::string, GgmlType> expected = {
      {"token_embd.weight", GgmlType::Q8_0}, {"blk.0.attn_norm.weight", GgmlType::F32},
      {"blk.0.attn_q.weight", GgmlType::Q4_0}, {"blk.0.ffn_down.weight", GgmlType::F16},
      {"blk.1.attn_q.weight", GgmlType::Q4_0}, {"blk.1.ffn_down.weight", GgmlType::F16}};
  for (const auto& [name, type] : expected) EXPECT_EQ(output.require_tensor(name).type, type) << name;
  EXPECT_TRUE(same_bytes(output.require_tensor("blk.0.ffn_down.weight"), source.require_tensor("blk.0.ffn_down.weight")));
  EXPECT_TRUE(same_bytes(output.require_tensor("blk.0.attn_norm.weight"), source.require_tensor("blk.0.attn_norm.weight")));
  // F32 -> F16 fallback rounds each value; BF16 -> Q4_0 goes through the same quantizer as F32.
  const std::vector<float> down = values_of(source.require_tensor("blk.1.ffn_down.weight"));
  const std::vector<float> down_out = values_of(output.require_tensor("blk.1.ffn_down.weight"));
  for (std::size_t i = 0; i < down.size(); ++i) ASSERT_EQ(down_out[i], fp16_to_fp32(fp32_to_fp16(down[i])));
  const std::vector<float> q = values_of(source.require_tensor("blk.0.attn_q.weight"));
  std::vector<BlockQ4_0> blocks(q.size() / kQuantBlock);
  quantize_row_q4_0(q.data(), blocks.data(), static_cast<int64_t>(q.size()));
  const GgufTensorInfo& q_out = output.require_tensor("blk.0.attn_q.weight");
  ASSERT_EQ(q_out.bytes, blocks.size() * sizeof(BlockQ4_0));
  EXPECT_EQ(std::memcmp(q_out.data, blocks.data(), q_out.bytes), 0);

  // Quantized again to Q8_0, from Q4_0 and Q8_0 sources: decoded, then encoded.
  const std::string again = dir.file("again-q8_0.gguf");
  quantize(path, again, GgmlType::Q8_0);
  const GgufFile requantized(again);
  EXPECT_EQ(requantized.require_tensor("blk.0.attn_q.weight").type, GgmlType::Q8_0);
  EXPECT_TRUE(same_bytes(requantized.require_tensor("token_embd.weight"), output.require_tensor("token_embd.weight")));
  // Q8_0's error is at most about d/2 <= amax/254 (see BlockFormatsStayWithinTheirErrorBound).
  const std::vector<float> from_q4 = values_of(q_out), from_q8 = values_of(requantized.require_tensor("blk.0.attn_q.weight"));
  float amax = 0;
  for (float v : from_q4) amax = std::max(amax, std::fabs(v));
  for (std::size_t i = 0; i < from_q4.size(); ++i) ASSERT_NEAR(from_q8[i], from_q4[i], amax / 127);
}

TEST(Quantize, BadInputIsAClearError) {
  test::TempDir dir;
  const std::string source = dir.file("small.gguf"), output = dir.file("out.gguf");
  SmallModel().write(source);
  expect_error([] { quantize_type_from_name("q7_k"); }, {"unknown --type 'q7_k'", file_type_names()});  // every name, mixtures included
  expect_error([&] { quantize("/nonexistent/model.gguf", output, GgmlType::Q8_0); }, {"/nonexistent/model.gguf: cannot open"});
  expect_error([&] { quantize(source, output, GgmlType::Q8_0, {"blk.*.fnn_down.weight"}); },
               {source, "--keep 'blk.*.fnn_down.weight' matches no tensor"});
  expect_error([&] { quantize(source, output, GgmlType::Q8_0, {"output"}); }, {"--keep 'output' (output.weight) matches no tensor"});
  expect_error([&] { quantize(source, output, GgmlType::Q8_0, {""}); }, {"--keep '' matches no tensor"});
  expect_error([&] { quantize(source, source, GgmlType::Q8_0); }, {source, "is the input file"});
  EXPECT_FALSE(std::filesystem::exists(output));  // nothing is created when the input is refused

  // A type quantize cannot decode: refused by name where it must change, copied where it is kept.
  const std::string odd = dir.file("iq4_xs.gguf");
  {
    GgufWriter w(odd);
    w.add_string("general.architecture", "llama");
    w.add_tensor("blk.0.attn_q.weight", GgmlType::IQ4_XS, {256, 2});
    w.write_data(std::vector<std::byte>(2 * 136, std::byte{3}));
    w.finish();
  }
  expect_error([&] { quantize(odd, output, GgmlType::Q8_0); }, {odd, "tensor 'blk.0.attn_q.weight' has type IQ4_XS"});
  expect_error([&] { quantize(odd, output, GgmlType::Q8_0, {"last"}); }, {odd, "llama.block_count"});
  quantize(odd, output, GgmlType::Q8_0, {"blk.0.attn_q.weight"});
  EXPECT_TRUE(same_bytes(GgufFile(output).require_tensor("blk.0.attn_q.weight"), GgufFile(odd).require_tensor("blk.0.attn_q.weight")));
}

}  // namespace
}  // namespace cpullm
