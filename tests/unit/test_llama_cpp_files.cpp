// llama.cpp's own files (shared kquants/: one small F32 model quantized by llama-quantize to nine
// file types, and the values llama.cpp's dequantizer gives for each tensor): cpullm reads every
// tensor to llama.cpp's values, and `quantize --type` of the F32 source picks llama.cpp's type for
// every tensor (the K-quant mixtures' rules included) and writes llama.cpp's bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/format/gguf.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/quant/quantize_model.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

// The llama.cpp files and the --type that names each one's file type.
const std::pair<const char*, const char*> kFiles[] = {
    {"kq-q2_k.gguf", "q2_k"},     {"kq-q3_k_m.gguf", "q3_k_m"}, {"kq-q4_k_s.gguf", "q4_k_s"},
    {"kq-q4_k_m.gguf", "q4_k_m"}, {"kq-q5_k_m.gguf", "q5_k_m"}, {"kq-q6_k.gguf", "q6_k"},
    {"kq-q4_1.gguf", "q4_1"},     {"kq-q5_0.gguf", "q5_0"},     {"kq-q5_1.gguf", "q5_1"},
};

std::optional<std::string> kquants(const std::string& name) { return test::shared_model("kquants/" + name); }

class LlamaCppFile : public testing::TestWithParam<std::pair<const char*, const char*>> {};

// Every tensor: its first 256 values as llama.cpp's dequantizer gave them (to an FP32 rounding:
// d * q - m may or may not be fused), and its sum, sum of magnitudes and L2 norm over all values
// (FP64 sums here, relative 1e-5).
TEST_P(LlamaCppFile, ReadsEveryTensorAsLlamaCppDoes) {
  const auto path = kquants(GetParam().first);
  const auto reference_path = kquants("dequant-reference.json");
  if (!path || !reference_path) GTEST_SKIP() << "../shared/models/kquants/ not found";
  const GgufFile file(*path);
  nlohmann::json reference;
  std::ifstream(*reference_path) >> reference;
  int checked = 0;
  for (const auto& [name, expected] : reference.at(GetParam().first).items()) {
    const GgufTensorInfo& t = file.require_tensor(name);
    ASSERT_EQ(ggml_type_name(t.type), expected.at("type").get<std::string>()) << name;
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
  EXPECT_EQ(checked, static_cast<int>(file.tensors().size()));
}

// `quantize --type` of the F32 source: every tensor of llama.cpp's type, byte for byte.
TEST_P(LlamaCppFile, QuantizeWritesLlamaCppsTypesAndBytes) {
  const auto source = kquants("kq-f32.gguf");
  const auto path = kquants(GetParam().first);
  if (!source || !path) GTEST_SKIP() << "../shared/models/kquants/ not found";
  test::TempDir dir;
  QuantizeOptions options;
  options.type = quantize_type_from_name(GetParam().second);
  options.progress = false;
  quantize_model(*source, dir.file("ours.gguf"), options);
  const GgufFile ours(dir.file("ours.gguf")), theirs(*path);
  ASSERT_EQ(ours.tensors().size(), theirs.tensors().size());
  for (const GgufTensorInfo& t : theirs.tensors()) {
    const GgufTensorInfo& mine = ours.require_tensor(t.name);
    ASSERT_EQ(ggml_type_name(mine.type), ggml_type_name(t.type)) << t.name;
    ASSERT_EQ(mine.bytes, t.bytes) << t.name;
    EXPECT_EQ(std::memcmp(mine.data, t.data, t.bytes), 0) << t.name << " (" << ggml_type_name(t.type) << ")";
  }
  EXPECT_EQ(ours.require_uint("general.file_type"), theirs.require_uint("general.file_type"));
}

INSTANTIATE_TEST_SUITE_P(KQuants, LlamaCppFile, testing::ValuesIn(kFiles), [](const auto& info) {
  return std::string(info.param.second);
});

}  // namespace
}  // namespace cpullm
