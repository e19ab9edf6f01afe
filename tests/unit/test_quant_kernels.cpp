// Q8_0 and Q4_0: the block layouts, the quantizers' error bounds, the error added by quantizing
// activations, and whole quantized models against their FP32 source by top-1 agreement and KL.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "engine/kernels/matvec.hpp"
#include "engine/kernels/quant_formats.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/quant/quantize_model.hpp"
#include "engine/model/model.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/half.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

std::vector<float> random_values(int64_t n, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(Q4_0, NibblesHoldValues0To15LowAndValues16To31High) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j % 16) - 8.0f;  // -8..7 twice
  BlockQ4_0 block;
  quantize_row_q4_0(x.data(), &block, 32);
  EXPECT_EQ(fp16_to_fp32(block.scale), 1.0f);  // the extreme, -8, maps to nibble 0
  for (int j = 0; j < 16; ++j) EXPECT_EQ(block.nibbles[j], (j & 0x0f) | (j << 4)) << j;
  std::vector<float> back(32);
  dequantize_row_q4_0(&block, back.data(), 32);
  EXPECT_EQ(back, x);
}

TEST(Q8_0, QuantizeStaysWithinHalfAStep) {
  const std::vector<float> x = random_values(4096, 1.0f, 1);
  std::vector<BlockQ8_0> blocks(x.size() / 32);
  quantize_row_q8_0(x.data(), blocks.data(), 4096);
  std::vector<float> back(x.size());
  dequantize_row_q8_0(blocks.data(), back.data(), 4096);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const float d = fp16_to_fp32(blocks[b].scale);
    // Half a step, plus the FP16 rounding of the scale (2^-11 relative) times up to 127 steps.
    const float bound = d / 2 + 127 * d * 0x1.0p-11f;
    for (int j = 0; j < 32; ++j) ASSERT_LE(std::abs(back[b * 32 + j] - x[b * 32 + j]), bound) << b << "," << j;
  }
}

TEST(Q4_0, QuantizeStaysWithinOneStep) {
  const std::vector<float> x = random_values(4096, 1.0f, 2);
  std::vector<BlockQ4_0> blocks(x.size() / 32);
  quantize_row_q4_0(x.data(), blocks.data(), 4096);
  std::vector<float> back(x.size());
  dequantize_row_q4_0(blocks.data(), back.data(), 4096);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const float d = std::abs(fp16_to_fp32(blocks[b].scale));
    // Half a step, except that values of the extreme's opposite sign reach +8 steps, clamped
    // to 7: up to one step. Plus FP16 rounding of the scale over 8 steps.
    const float bound = d + 8 * d * 0x1.0p-11f;
    for (int j = 0; j < 32; ++j) ASSERT_LE(std::abs(back[b * 32 + j] - x[b * 32 + j]), bound) << b << "," << j;
  }
}

// The block kernels multiply Q8_0 activations, not x. Their extra error is bounded by
// sum_c |w_c| * (the activation's quantization bound), on top of FP32 rounding.
TEST(BlockKernels, ActivationQuantizationErrorIsBounded) {
  const int64_t rows = 16, cols = 1024;
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::CPULLM_INT8_CHANNEL}) {
    const std::vector<float> weights = random_values(rows * cols, 0.05f, 3);
    const std::vector<float> x = random_values(cols, 1.0f, 4);
    WeightMatrix w{nullptr, type, rows, cols};
    std::vector<std::byte> storage(rows * row_bytes(w));
    w.data = storage.data();
    for (int64_t r = 0; r < rows; ++r) encode_row(type, &weights[r * cols], storage.data() + r * row_bytes(w), cols);
    std::vector<BlockQ8_0> xq(cols / 32);
    quantize_row_q8_0(x.data(), xq.data(), cols);
    std::vector<float> y(rows), w_row(cols);
    matvec_reference(y.data(), w, x.data());
    for (int64_t r = 0; r < rows; ++r) {
      weight_row_to_float(w_row.data(), w, r);
      double exact = 0, bound = 0;
      for (int64_t c = 0; c < cols; ++c) {
        exact += static_cast<double>(w_row[c]) * x[c];
        const float d = fp16_to_fp32(xq[c / 32].scale);
        bound += std::abs(w_row[c]) * (d / 2 + 127 * d * 0x1.0p-11f) + cols * 0x1.0p-24 * std::abs(w_row[c] * x[c]);
      }
      EXPECT_LE(std::abs(y[r] - exact), bound) << ggml_type_name(type) << " row " << r;
      EXPECT_GT(bound, 0.0);
    }
  }
}

// Logits at every position of a story, for a model file.
std::vector<std::vector<float>> story_logits(const std::string& path, Isa isa) {
  Model model(path, ModelOptions{.context = 128, .kernels = KernelConfig{isa, sysconf_cache_sizes()}});
  const Tokenizer tokenizer = Tokenizer::from_gguf(model.file());
  const auto tokens = tokenizer.encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she "
      "saw a big red ball and ran to get it. Her mom said no.",
      true);
  std::vector<std::vector<float>> out;
  for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
    auto logits = model.forward(tokens[pos], static_cast<int64_t>(pos));
    out.emplace_back(logits.begin(), logits.end());
  }
  return out;
}

double kl_divergence(const std::vector<float>& p_logits, const std::vector<float>& q_logits) {
  auto log_softmax = [](const std::vector<float>& l) {
    const double max = *std::max_element(l.begin(), l.end());
    double sum = 0;
    for (float v : l) sum += std::exp(v - max);
    std::vector<double> out;
    for (float v : l) out.push_back(v - max - std::log(sum));
    return out;
  };
  const auto lp = log_softmax(p_logits), lq = log_softmax(q_logits);
  double kl = 0;
  for (std::size_t i = 0; i < lp.size(); ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
  return kl;
}

// llama.cpp's quantized stories260K, and cpullm's INT8-per-channel and Q4_1 ones, against the F32 original
// at every ISA level. Measured at the time of writing: Q8_0 top-1 agreement 0.98, mean KL
// 0.0005; Q4_0 0.84 and 0.058; INT8_CHANNEL as printed by the test. The bounds leave room for
// kernel changes, not for a broken format.
TEST(QuantizedModels, LlamaCppFilesAgreeWithTheFp32Model) {
  auto f32 = test::shared_model("stories260K.gguf");
  auto q8 = test::shared_model("stories260K-q8_0.gguf");
  auto q4 = test::shared_model("stories260K-q4_0.gguf");
  if (!f32 || !q8 || !q4) GTEST_SKIP() << "../shared/models/stories260K{,-q8_0,-q4_0}.gguf not found";
  const auto reference = story_logits(*f32, resolve_isa());
  test::TempDir dir;
  QuantizeOptions int8_channel;
  int8_channel.type = file_type_of(GgmlType::CPULLM_INT8_CHANNEL);
  int8_channel.progress = false;
  quantize_model(*f32, dir.file("int8-channel.gguf"), int8_channel);
  QuantizeOptions q4_1 = int8_channel;
  q4_1.type = file_type_of(GgmlType::Q4_1);
  quantize_model(*f32, dir.file("q4_1.gguf"), q4_1);
  struct Expectation { std::string path; double min_top1, max_mean_kl; };
  for (const Expectation& e : {Expectation{*q8, 0.95, 0.005}, Expectation{*q4, 0.75, 0.15},
                               Expectation{dir.file("int8-channel.gguf"), 0.9, 0.01},
                               Expectation{dir.file("q4_1.gguf"), 0.75, 0.15}}) {
    std::vector<std::vector<float>> first_isa;
    double first_kl = 0, first_agree = 0;
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (!cpu_supports(isa)) continue;
      const auto logits = story_logits(e.path, isa);
      double agree = 0, kl = 0;
      for (std::size_t pos = 0; pos < logits.size(); ++pos) {
        auto top = [](const std::vector<float>& l) { return std::max_element(l.begin(), l.end()) - l.begin(); };
        agree += top(logits[pos]) == top(reference[pos]);
        kl += kl_divergence(reference[pos], logits[pos]);
      }
      std::printf("%s %s: top-1 agreement %.3f, mean KL %.5f\n", e.path.c_str(), std::string(isa_name(isa)).c_str(),
                  agree / logits.size(), kl / logits.size());
      EXPECT_GE(agree / logits.size(), e.min_top1) << e.path << " " << isa_name(isa);
      EXPECT_LE(kl / logits.size(), e.max_mean_kl) << e.path << " " << isa_name(isa);
      // Every ISA computes the same integer sums of the same quantized activations, but FP32
      // rounding differs by ISA (the order of the block products' sum, fused or not), and where
      // an activation sits on a rounding boundary of its Q8_0 quantization it lands one quantum
      // apart: that moves a logit by |w| * d_a, up to ~0.2 here, and the next layers carry it on.
      // Seen: INT8_CHANNEL on AVX2 0.0098 mean |difference| from the scalar path; Q4_0 on AVX2,
      // which sums 8 blocks in 8 lanes, 0.035 (max under 0.5). So: never far, mean under 0.05, and
      // the same quality against FP32 (KL within 10%, top-1 within 0.05).
      if (first_isa.empty()) first_isa = logits, first_kl = kl / logits.size(), first_agree = agree / logits.size();
      double total_difference = 0, values = 0;
      for (std::size_t pos = 0; pos < logits.size(); ++pos)
        for (std::size_t i = 0; i < logits[pos].size(); ++i) {
          const double difference = std::abs(logits[pos][i] - first_isa[pos][i]);
          ASSERT_LT(difference, 0.5) << e.path << " " << isa_name(isa) << " position " << pos;
          total_difference += difference;
          ++values;
        }
      EXPECT_LT(total_difference / values, 0.05) << e.path << " " << isa_name(isa);
      EXPECT_NEAR(kl / logits.size(), first_kl, 0.1 * first_kl) << e.path << " " << isa_name(isa);
      EXPECT_NEAR(agree / logits.size(), first_agree, 0.05) << e.path << " " << isa_name(isa);
    }
  }
}

}  // namespace
}  // namespace cpullm
