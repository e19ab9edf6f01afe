// Q4_1 (engine/kernels/q4_1.hpp): the quantizer's error bound, llama.cpp's files read to the
// values llama.cpp's own dequantizer gives (shared kquants/dequant-reference.json), and
// `quantize --type q4_1` writing llama.cpp's bytes. Its row kernels at every ISA level are
// checked against the scalar one with the other formats (test_kernels.cpp, every registry entry).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/format/gguf.hpp"
#include "engine/kernels/q4_1.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/quant/quantize_model.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

// Each value comes back within half a step d / 2 of itself, plus what rounding d and the
// minimum m to FP16 adds (2^-11 of each, d times up to 15 steps) and the FP32 arithmetic.
TEST(Q4_1, QuantizeStaysWithinHalfAStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.3f, 1.0f);  // off-centre: the minimum matters
  std::vector<float> x(4096), back(x.size());
  for (float& v : x) v = dist(rng);
  std::vector<std::byte> row(row_bytes(GgmlType::Q4_1, 4096));
  encode_row(GgmlType::Q4_1, x.data(), row.data(), 4096);
  decode_row(GgmlType::Q4_1, row.data(), back.data(), 4096);
  for (int64_t b = 0; b < 4096 / kQuantBlock; ++b) {
    const float* block = &x[b * kQuantBlock];
    const float lo = *std::min_element(block, block + kQuantBlock), hi = *std::max_element(block, block + kQuantBlock);
    const float d = (hi - lo) / 15;
    for (int64_t j = 0; j < kQuantBlock; ++j) {
      const float bound = d / 2 + 16 * d * 0x1.0p-11f + std::abs(lo) * 0x1.0p-11f + 1e-6f;
      ASSERT_LE(std::abs(back[b * kQuantBlock + j] - block[j]), bound) << "block " << b << " value " << j;
    }
  }
}

// The layout by hand: d = 1, m = -8, nibble j = j % 16 (low) and 15 - j % 16 (high).
TEST(Q4_1, BlockLayoutIsLlamaCpps) {
  BlockQ4_1 block{fp32_to_fp16(1.0f), fp32_to_fp16(-8.0f), {}};
  for (int j = 0; j < 16; ++j) block.nibbles[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  float out[32];
  dequantize_row_q4_1(reinterpret_cast<const std::byte*>(&block), out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], static_cast<float>(j) - 8) << j;
    EXPECT_EQ(out[16 + j], static_cast<float>(15 - j) - 8) << j;
  }
}

struct KQuants {
  std::string f32, q4_1, reference;
};
std::optional<KQuants> kquants() {
  auto f32 = test::shared_model("kquants/kq-f32.gguf"), q4_1 = test::shared_model("kquants/kq-q4_1.gguf");
  auto reference = test::shared_model("kquants/dequant-reference.json");
  if (!f32 || !q4_1 || !reference) return std::nullopt;
  return KQuants{*f32, *q4_1, *reference};
}

// Every Q4_1 tensor of llama.cpp's file: its first 256 values as llama.cpp's dequantizer gave
// them (to an FP32 rounding: x = d * q + m may or may not be fused), and its sum, sum of
// magnitudes and L2 norm over all values (FP64 sums here, relative 1e-5).
TEST(Q4_1, ReadsLlamaCppFilesAsLlamaCppDoes) {
  const auto files = kquants();
  if (!files) GTEST_SKIP() << "../shared/models/kquants/ not found";
  const GgufFile file(files->q4_1);
  nlohmann::json reference;
  std::ifstream(files->reference) >> reference;
  int checked = 0;
  for (const auto& [name, expected] : reference.at("kq-q4_1.gguf").items()) {
    if (expected.at("type") != "Q4_1") continue;
    const GgufTensorInfo& t = file.require_tensor(name);
    ASSERT_EQ(t.type, GgmlType::Q4_1) << name;
    const int64_t cols = t.ne[0], rows = t.elements() / cols;
    std::vector<float> all(t.elements());
    for (int64_t r = 0; r < rows; ++r) decode_matrix_row(t.type, t.data, r, &all[r * cols], cols);
    const auto& first = expected.at("first_256");
    for (std::size_t i = 0; i < first.size(); ++i)
      ASSERT_NEAR(all[i], first[i].get<double>(), 1e-6 * std::max(1.0, std::abs(first[i].get<double>()))) << name << " " << i;
    double sum = 0, sum_abs = 0, l2 = 0;
    for (float v : all) sum += v, sum_abs += std::abs(v), l2 += double{v} * v;
    EXPECT_NEAR(sum, expected.at("sum").get<double>(), 1e-5 * expected.at("sum_abs").get<double>()) << name;
    EXPECT_NEAR(sum_abs, expected.at("sum_abs").get<double>(), 1e-5 * sum_abs) << name;
    EXPECT_NEAR(std::sqrt(l2), expected.at("l2").get<double>(), 1e-5 * std::sqrt(l2)) << name;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// `quantize --type q4_1` of llama.cpp's F32 source writes every tensor llama.cpp wrote as Q4_1
// byte for byte. llama.cpp gives the output layer Q6_K, which cpullm lacks: it is Q8_0 here.
TEST(Q4_1, QuantizeWritesLlamaCppsBytes) {
  const auto files = kquants();
  if (!files) GTEST_SKIP() << "../shared/models/kquants/ not found";
  test::TempDir dir;
  QuantizeOptions options;
  options.type = GgmlType::Q4_1;
  options.progress = false;
  quantize_model(files->f32, dir.file("q4_1.gguf"), options);
  const GgufFile ours(dir.file("q4_1.gguf")), theirs(files->q4_1);
  int same = 0;
  for (const GgufTensorInfo& t : theirs.tensors()) {
    const GgufTensorInfo& mine = ours.require_tensor(t.name);
    if (t.type == GgmlType::Q6_K) {
      EXPECT_EQ(mine.type, GgmlType::Q8_0) << t.name;
      continue;
    }
    ASSERT_EQ(mine.type, t.type) << t.name;
    ASSERT_EQ(mine.bytes, t.bytes) << t.name;
    EXPECT_EQ(std::memcmp(mine.data, t.data, t.bytes), 0) << t.name;
    same += t.type == GgmlType::Q4_1;
  }
  EXPECT_GT(same, 0);
  EXPECT_EQ(ours.require_uint("general.file_type"), 3u);  // MOSTLY_Q4_1
}

}  // namespace
}  // namespace cpullm
