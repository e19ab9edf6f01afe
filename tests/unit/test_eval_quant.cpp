// eval-quant: the source scores as itself, and the measures order the formats as their
// precision says they must.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/eval/quant_eval.hpp"
#include "engine/synthetic/synthetic_model.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

const QuantEvalResult& by_format(const std::vector<QuantEvalResult>& results, const std::string& format) {
  for (const auto& r : results)
    if (r.format == format) return r;
  throw std::runtime_error("no result for " + format);
}

TEST(EvalQuant, SyntheticModelOrdersFormatsByPrecision) {
  test::TempDir dir;
  SyntheticModelOptions model;
  model.shape = {"custom", 2, 64, 160, 4, 2, 1000, 128};
  model.dtype = GgmlType::F32;
  model.progress = false;
  write_synthetic_model(dir.file("m.gguf"), model);
  const auto results = evaluate_quantization(dir.file("m.gguf"), default_eval_text(),
                                             {{"f16", "q8_0", "q4_0"}, {}, 64, dir.file("quantized")});
  ASSERT_EQ(results.size(), 4u);
  const auto &source = results[0], &f16 = by_format(results, "f16"), &q8 = by_format(results, "q8_0"),
             &q4 = by_format(results, "q4_0");
  EXPECT_EQ(source.format, "source");
  EXPECT_EQ(source.mean_kl, 0.0);
  EXPECT_GT(source.positions, 100);
  for (const auto& r : results) {
    EXPECT_TRUE(std::isfinite(r.perplexity) && r.perplexity > 1) << r.format;
    EXPECT_EQ(r.positions, source.positions);
  }
  EXPECT_LT(f16.mean_kl, q8.mean_kl);
  EXPECT_LT(q8.mean_kl, q4.mean_kl);
  EXPECT_GE(f16.top1_agreement, q8.top1_agreement);
  EXPECT_GE(q8.top1_agreement, q4.top1_agreement);
  EXPECT_LT(q8.file_bytes, f16.file_bytes);
  EXPECT_LT(q4.file_bytes, q8.file_bytes);
}

// Measured when written: source perplexity 5.51 on the built-in stories; Q8_0 -0.07%, KL 0.0008;
// Q4_0 +6.0%, KL 0.081, falling to 0.053 with the first and last blocks kept in F32.
TEST(EvalQuant, Stories260KOnTheBuiltInText) {
  auto path = test::shared_model("stories260K.gguf");
  if (!path) GTEST_SKIP() << "../shared/models/stories260K.gguf not found";
  test::TempDir dir;
  const auto plain = evaluate_quantization(*path, default_eval_text(), {{"q8_0", "q4_0"}, {}, 256, dir.file("a")});
  const auto kept =
      evaluate_quantization(*path, default_eval_text(), {{"q4_0"}, {"first", "last"}, 256, dir.file("b")});
  const double source = plain[0].perplexity;
  EXPECT_GT(source, 3.0);  // a model trained on such stories finds them easy
  EXPECT_LT(source, 10.0);
  EXPECT_NEAR(by_format(plain, "q8_0").perplexity / source, 1.0, 0.01);
  EXPECT_GT(by_format(plain, "q8_0").top1_agreement, 0.95);
  EXPECT_GT(by_format(plain, "q4_0").mean_kl, 10 * by_format(plain, "q8_0").mean_kl);
  EXPECT_LT(by_format(kept, "q4_0").mean_kl, by_format(plain, "q4_0").mean_kl);
}

// The KV cache's types against the F32 cache on the source file itself: each is scored, the
// finer F16 closer than BF16 (8 bits of mantissa against 11), none far off, and each costs its
// rounding (a KL of exactly 0 would mean the cache type was not applied).
TEST(EvalQuant, KvCacheTypesScoredAgainstF32) {
  test::TempDir dir;
  SyntheticModelOptions model;
  model.shape = {"custom", 2, 128, 160, 4, 2, 1000, 256};  // heads of 32: Q8_0's block
  model.dtype = GgmlType::F32;
  model.progress = false;
  write_synthetic_model(dir.file("m.gguf"), model);
  RunConfig f32_cache;
  f32_cache.kv_type = "f32";
  const auto results = evaluate_quantization(dir.file("m.gguf"), default_eval_text(),
                                             {.formats = {}, .keep = {}, .window = 200, .work_dir = dir.file("quantized"), .run = f32_cache, .kv_types = {"f16", "bf16", "q8_0"}});
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].kv_type, "f32");
  for (std::size_t i = 1; i < results.size(); ++i) {
    EXPECT_EQ(results[i].format, "source");
    EXPECT_EQ(results[i].file_bytes, results[0].file_bytes);
    EXPECT_GT(results[i].mean_kl, 0.0) << results[i].kv_type;
    EXPECT_LT(results[i].mean_kl, 1e-3) << results[i].kv_type;
    EXPECT_GT(results[i].top1_agreement, 0.9) << results[i].kv_type;
  }
  EXPECT_EQ(results[1].kv_type, "f16");
  EXPECT_EQ(results[2].kv_type, "bf16");
  EXPECT_EQ(results[3].kv_type, "q8_0");
  EXPECT_LT(results[1].mean_kl, results[2].mean_kl);
}

TEST(EvalQuant, RefusesTooShortTextsAndWindows) {
  auto path = test::shared_model("stories260K.gguf");
  if (!path) GTEST_SKIP() << "../shared/models/stories260K.gguf not found";
  test::TempDir dir;
  EXPECT_THROW(evaluate_quantization(*path, "", {{"q8_0"}, {}, 256, dir.file("a")}), std::exception);
  EXPECT_THROW(evaluate_quantization(*path, default_eval_text(), {{"q8_0"}, {}, 1, dir.file("b")}), std::exception);
  EXPECT_THROW(evaluate_quantization(*path, default_eval_text(), {{"iq4_xs"}, {}, 64, dir.file("c")}), std::exception);
}

}  // namespace
}  // namespace cpullm
