// Top-K sparsity: the type numbers, the pruning (what is kept), the sparse kernels at every
// ISA level against dense products of the pruned matrices, and pruned models end to end
// against dense models with the same weights zeroed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "harness/eval/quant_eval.hpp"
#include "engine/format/gguf.hpp"
#include "engine/format/gguf_writer.hpp"
#include "engine/kernels/matmul.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/kernels/sparse.hpp"
#include "engine/model/model.hpp"
#include "engine/quant/quantize_model.hpp"
#include "engine/quant/sparsify.hpp"
#include "engine/synthetic/synthetic_model.hpp"
#include "engine/util/error.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

std::vector<float> random_values(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

GgmlType sparse(const std::string& pattern, std::optional<double> sparsity, GgmlType values) {
  SparseType s = parse_sparsity(pattern, sparsity);
  s.values = values;
  return sparse_type_number(s);
}

// A pruned matrix: its packed bytes and the dense matrix they stand for.
struct Pruned {
  std::vector<std::byte> bytes;
  std::vector<float> dense;  // (rows, cols), pruned weights zero, kept ones rounded to the values' precision
  WeightMatrix matrix;
};

Pruned prune(GgmlType type, int64_t rows, int64_t cols, unsigned seed) {
  Pruned p;
  const std::vector<float> source = random_values(rows * cols, seed);
  p.bytes.resize(rows * row_bytes(type, cols));
  encode_sparse_rows(type, source.data(), rows, cols, p.bytes.data());
  p.dense.resize(rows * cols);
  decode_sparse_rows(type, p.bytes.data(), rows, cols, p.dense.data());
  p.matrix = {p.bytes.data(), type, rows, cols};
  return p;
}

TEST(SparseTypes, NumbersCarryPatternValuesAndDensity) {
  const GgmlType ell = sparse("unstructured", 0.2, GgmlType::F16);
  const auto s = sparse_type(static_cast<uint32_t>(ell));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pattern, SparsePattern::ell);
  EXPECT_EQ(s->values, GgmlType::F16);
  EXPECT_EQ(s->pruned_permille, 200);
  EXPECT_EQ(ggml_type_name(ell), "CPULLM_SPARSE_ELL_F16");
  // 4096 columns at 20%: 819 pruned, 3277 kept, each 2 bytes of value + 2 of column.
  EXPECT_EQ(row_bytes(ell, 4096), 3277 * 4);
  // 2:4 in BF16: 2 values of 2 bytes and 2 one-byte positions per 4 columns.
  EXPECT_EQ(row_bytes(sparse("2:4", std::nullopt, GgmlType::BF16), 4096), 1024 * 6);
  // block4x4 at 50% in F32: 512 of 1024 blocks, 16 * 4 + 4 bytes each, a quarter per row.
  EXPECT_EQ(row_bytes(sparse("block4x4", 0.5, GgmlType::F32), 4096), 512 * (16 * 4 + 4) / 4);
  // Fields no layout has are not types: pattern 4, values 3, N > M, 1000 per mille.
  for (uint32_t bad : {kSparseTypeTag | 4u << 20, kSparseTypeTag | 1u << 20 | 3u << 16,
                       kSparseTypeTag | 2u << 20 | (5u << 8 | 4u), kSparseTypeTag | 1u << 20 | 1000u}) {
    EXPECT_FALSE(ggml_type_traits(bad)) << std::hex << bad;
    EXPECT_EQ(ggml_type_rejection(bad), "a cpullm sparse type number with invalid fields");
  }
}

TEST(SparseTypes, ParseRefusesWhatNoPatternMeans) {
  EXPECT_EQ(parse_sparsity("2:4", 0.5).n, 2);
  EXPECT_THROW(parse_sparsity("2:4", 0.2), Error);            // contradicts the pattern
  EXPECT_THROW(parse_sparsity("unstructured", std::nullopt), Error);
  EXPECT_THROW(parse_sparsity("unstructured", 1.0), Error);   // nothing would be left
  EXPECT_THROW(parse_sparsity("unstructured", 0.2345), Error);  // finer than 0.001
  EXPECT_THROW(parse_sparsity("5:4", std::nullopt), Error);
  EXPECT_THROW(parse_sparsity("2:x", std::nullopt), Error);
  EXPECT_THROW(parse_sparsity("diagonal", 0.5), Error);
  EXPECT_TRUE(is_block_projection("blk.3.ffn_down.weight"));
  EXPECT_FALSE(is_block_projection("output.weight"));
  EXPECT_FALSE(is_block_projection("blk.3.attn_norm.weight"));
}

// Every row keeps exactly its largest weights: no pruned |w| exceeds a kept one within a row
// (ELL), a group (N:M) or, by block sums, a strip (BLOCK4X4).
TEST(Sparsify, KeepsTheLargestWeights) {
  const int64_t rows = 8, cols = 96;
  for (const auto& [pattern, sparsity, unit_rows, unit_cols, kept_units] :
       {std::tuple{"unstructured", 0.3, 1, 96, 68}, std::tuple{"3:8", 0.625, 1, 8, 3},
        std::tuple{"block4x4", 0.5, 4, 96, 12}}) {
    const Pruned p = prune(sparse(pattern, sparsity, GgmlType::F32), rows, cols, 3);
    const std::vector<float> source = random_values(rows * cols, 3);
    const bool blocks = std::string(pattern) == "block4x4";
    for (int64_t r0 = 0; r0 < rows; r0 += unit_rows)
      for (int64_t c0 = 0; c0 < cols; c0 += unit_cols) {
        // The unit's items (weights, or 4x4 blocks) by score, kept ones marked.
        std::vector<std::pair<float, bool>> items;
        for (int64_t c = c0; c < c0 + unit_cols; c += blocks ? 4 : 1) {
          float score = 0;
          bool kept = false;
          for (int64_t i = 0; i < unit_rows; ++i)
            for (int64_t k = 0; k < (blocks ? 4 : 1); ++k) {
              const int64_t at = (r0 + i) * cols + c + k;
              score += std::fabs(source[at]);
              kept |= p.dense[at] != 0;
              if (p.dense[at] != 0) {
                ASSERT_EQ(p.dense[at], source[at]) << pattern;  // F32 values are exact
              }
            }
          items.emplace_back(score, kept);
        }
        ASSERT_EQ(std::count_if(items.begin(), items.end(), [](auto& i) { return i.second; }), kept_units) << pattern;
        float smallest_kept = INFINITY, largest_pruned = 0;
        for (auto [score, kept] : items) {
          if (kept) smallest_kept = std::min(smallest_kept, score);
          else largest_pruned = std::max(largest_pruned, score);
        }
        EXPECT_GE(smallest_kept, largest_pruned) << pattern << " at " << r0 << "," << c0;
      }
  }
}

struct KernelCase {
  std::string pattern;
  double sparsity;
  int64_t rows, cols;  // not multiples of the 16-value vectors, nor of the 16-row chunks
};

class SparseKernelTest : public ::testing::TestWithParam<std::tuple<KernelCase, GgmlType, Isa>> {};

// matvec and matmul against the dense product of the pruned matrix in double precision. Bound:
// the FP32 sums of `kept` terms in any order, 2 * kept * 2^-24 * sum |w x|.
TEST_P(SparseKernelTest, MatchesTheDensePrunedProduct) {
  const auto& [c, values, isa] = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "this CPU has no " << isa_name(isa);
  const Pruned p = prune(sparse(c.pattern, c.sparsity, values), c.rows, c.cols, 7);
  const int64_t tokens = 37;  // two full tiles of 16 and a ragged one
  const std::vector<float> x = random_values(tokens * c.cols, 8);
  std::vector<float> y(c.rows), y_batch(tokens * c.rows);
  matvec(y.data(), p.matrix, x.data(), isa);
  matmul(y_batch.data(), c.rows, p.matrix, x.data(), c.cols, tokens, isa, sysconf_cache_sizes());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t r = 0; r < c.rows; ++r) {
      double exact = 0, magnitude = 0;
      int64_t kept = 0;
      for (int64_t k = 0; k < c.cols; ++k) {
        const double term = static_cast<double>(p.dense[r * c.cols + k]) * x[t * c.cols + k];
        exact += term, magnitude += std::fabs(term), kept += p.dense[r * c.cols + k] != 0;
      }
      const double bound = 2 * kept * 0x1.0p-24 * magnitude + 1e-30;
      if (t == 0) {
        ASSERT_LE(std::fabs(y[r] - exact), bound) << "matvec row " << r;
      }
      ASSERT_LE(std::fabs(y_batch[t * c.rows + r] - exact), bound) << "matmul token " << t << " row " << r;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Patterns, SparseKernelTest,
    ::testing::Combine(::testing::Values(KernelCase{"unstructured", 0.2, 21, 83}, KernelCase{"unstructured", 0.9, 19, 130},
                                         KernelCase{"unstructured", 0.5, 17, 100},
                                         KernelCase{"2:4", 0.5, 21, 100}, KernelCase{"3:7", 4.0 / 7, 18, 70},
                                         KernelCase{"block4x4", 0.2, 20, 76}, KernelCase{"block4x4", 0.7, 36, 148}),
                       ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16),
                       ::testing::Values(Isa::Scalar, Isa::Avx2, Isa::Avx512)),
    [](const auto& info) {
      const KernelCase& c = std::get<0>(info.param);
      std::string name = c.pattern + "_" + std::to_string(static_cast<int>(std::lround(c.sparsity * 100))) + "_" +
                         std::string(ggml_type_name(std::get<1>(info.param))) + "_" +
                         std::string(isa_name(std::get<2>(info.param)));
      std::replace(name.begin(), name.end(), ':', '_');
      return name;
    });

// A tiny LLaMA with every kind of row length the patterns meet: dim 64, ffn 96.
std::string tiny_model(const test::TempDir& dir, GgmlType dtype) {
  SyntheticModelOptions options;
  options.shape = {"tiny", 2, 64, 96, 4, 2, 512, 64};
  options.dtype = dtype;
  options.progress = false;
  const std::string path = dir.file("tiny.gguf");
  write_synthetic_model(path, options);
  return path;
}

// The pruned model with each sparse matrix written back dense (F32, pruned weights zero).
void write_dense_copy(const std::string& pruned_path, const std::string& path) {
  const GgufFile pruned(pruned_path);
  GgufWriter writer(path, pruned.alignment());
  for (const auto& [key, value] : pruned.metadata())
    if (key != "general.alignment") writer.add_value(key, value);
  for (const GgufTensorInfo& t : pruned.tensors())
    writer.add_tensor(t.name, is_sparse(t.type) ? GgmlType::F32 : t.type,
                      std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims));
  for (const GgufTensorInfo& t : pruned.tensors()) {
    if (!is_sparse(t.type)) {
      writer.write_data({t.data, t.bytes});
      continue;
    }
    std::vector<float> dense(t.ne[0] * t.ne[1]);
    decode_sparse_rows(t.type, t.data, t.ne[1], t.ne[0], dense.data());
    writer.write_data(std::as_bytes(std::span(dense)));
  }
  writer.finish();
}

QuantizeSummary prune_model(const std::string& in, const std::string& out, const std::string& pattern,
                            std::optional<double> sparsity, std::vector<std::string> keep = {}) {
  QuantizeOptions options;
  options.type = std::nullopt;
  options.sparsity = parse_sparsity(pattern, sparsity);
  options.keep = std::move(keep);
  options.progress = false;
  return quantize_model(in, out, options);
}

// A pruned model's logits equal those of the dense model with the same weights zeroed, within
// FP32 summation-order differences, for a prompt (matmul) and token by token (matvec).
TEST(SparseModel, LogitsEqualTheDenseModelWithTheWeightsZeroed) {
  test::TempDir dir;
  const std::string source = tiny_model(dir, GgmlType::F16);
  const std::vector<int32_t> prompt = {1, 17, 300, 42, 7, 99, 211, 5, 64, 128, 3, 400, 8, 9, 10, 11, 12, 13, 14, 15};
  for (const auto& [pattern, sparsity] : {std::pair{"unstructured", std::optional(0.2)},
                                          std::pair{"2:4", std::optional<double>()},
                                          std::pair{"block4x4", std::optional(0.5)}}) {
    const QuantizeSummary s = prune_model(source, dir.file("pruned.gguf"), pattern, sparsity);
    EXPECT_EQ(s.converted, 14) << pattern;  // 7 projections x 2 blocks; embeddings, output and norms untouched
    write_dense_copy(dir.file("pruned.gguf"), dir.file("zeroed.gguf"));
    Model pruned(dir.file("pruned.gguf"), 64), zeroed(dir.file("zeroed.gguf"), 64);
    EXPECT_TRUE(is_sparse(pruned.weights().layers[1].w_down.type)) << pattern;
    EXPECT_EQ(pruned.weights().output.type, GgmlType::F16) << pattern;
    const std::span<const float> logits_pruned = pruned.forward_batch(prompt, 0, true);
    const std::vector<float> batch_pruned(logits_pruned.begin(), logits_pruned.end());
    const std::span<const float> batch_zeroed = zeroed.forward_batch(prompt, 0, true);
    ASSERT_EQ(batch_pruned.size(), batch_zeroed.size());
    for (std::size_t i = 0; i < batch_pruned.size(); ++i) ASSERT_NEAR(batch_pruned[i], batch_zeroed[i], 1e-4) << pattern;
    for (int64_t pos = 0; pos < 4; ++pos) {
      const std::span<const float> logits = pruned.forward(prompt[pos], pos);
      const std::vector<float> a(logits.begin(), logits.end());
      const std::span<const float> b = zeroed.forward(prompt[pos], pos);
      for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4) << pattern << " position " << pos;
    }
  }
}

TEST(SparseModel, KeepAndFallBackLeaveMatricesDense) {
  test::TempDir dir;
  const std::string source = tiny_model(dir, GgmlType::F32);
  // 3:8 needs rows of whole groups of 8: dim 64 and ffn 96 both are, so everything prunes but
  // the kept first block.
  QuantizeSummary s = prune_model(source, dir.file("a.gguf"), "3:8", std::nullopt, {"first"});
  EXPECT_EQ(s.converted, 7);
  EXPECT_EQ(s.kept, 9);  // blk.0: 7 projections and 2 norms
  const GgufFile a(dir.file("a.gguf"));
  EXPECT_EQ(a.require_tensor("blk.0.attn_q.weight").type, GgmlType::F32);
  EXPECT_EQ(ggml_type_name(a.require_tensor("blk.1.attn_q.weight").type), "CPULLM_SPARSE_NM_F32");
  EXPECT_EQ(a.require_string("cpullm.sparsity"), "3:8");
  // 5:7 cannot store rows of 64 or 96: every projection stays dense, counted as fallen back.
  s = prune_model(source, dir.file("b.gguf"), "5:7", std::nullopt);
  EXPECT_EQ(s.converted, 0);
  EXPECT_EQ(s.fell_back, 14);
}

// A stored column outside its row would make the kernels read past x: the loader refuses it,
// naming the tensor. So does the reader for a BLOCK4X4 tensor of ragged strips.
TEST(SparseModel, HostileIndicesAreRefusedAtLoad) {
  test::TempDir dir;
  const std::string source = tiny_model(dir, GgmlType::F16);
  for (const auto& [pattern, sparsity] : {std::pair{"unstructured", std::optional(0.5)},
                                          std::pair{"2:4", std::optional<double>()},
                                          std::pair{"block4x4", std::optional(0.5)}}) {
    prune_model(source, dir.file("pruned.gguf"), pattern, sparsity);
    std::vector<std::byte> bytes = test::read_bytes(dir.file("pruned.gguf"));
    const GgufFile file(dir.file("pruned.gguf"));
    const GgufTensorInfo& t = file.require_tensor("blk.1.ffn_up.weight");
    // The last index of the tensor's last row (strip): set every byte to 0xff.
    const uint64_t end = file.data_offset() + t.offset + t.bytes;
    const int size = std::string(pattern) == "unstructured" ? 2 : std::string(pattern) == "2:4" ? 1 : 4;
    for (int i = 1; i <= size; ++i) bytes[end - i] = std::byte{0xff};
    test::write_bytes(dir.file("hostile.gguf"), bytes);
    try {
      Model model(dir.file("hostile.gguf"), 64);
      ADD_FAILURE() << pattern << ": loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("blk.1.ffn_up.weight"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("outside"), std::string::npos) << e.what();
    }
  }
}

TEST(SparseEval, FormatNamesCombineATypeAndASparsity) {
  QuantizeOptions o = quantize_options_for("f16+sparse0.2");
  ASSERT_TRUE(o.type);
  EXPECT_EQ(o.type->base, GgmlType::F16);
  ASSERT_TRUE(o.sparsity);
  EXPECT_EQ(o.sparsity->pruned_permille, 200);
  o = quantize_options_for("2:4");
  EXPECT_FALSE(o.type);
  EXPECT_EQ(o.sparsity->m, 4);
  EXPECT_EQ(quantize_options_for("bf16+block0.5").sparsity->pattern, SparsePattern::block4x4);
  EXPECT_FALSE(quantize_options_for("q8_0").sparsity);
  EXPECT_THROW(quantize_options_for("f16+sparse"), Error);
  EXPECT_THROW(quantize_options_for("f16+sparse0.2x"), Error);
  EXPECT_THROW(quantize_options_for("f17+2:4"), Error);
}

// More pruning costs more: KL and top-1 disagreement grow with the sparsity.
TEST(SparseEval, AccuracyFallsWithSparsity) {
  test::TempDir dir;
  const std::string source = tiny_model(dir, GgmlType::F32);
  const auto results = evaluate_quantization(source, default_eval_text().substr(0, 600),
                                             {{"sparse0.2", "sparse0.5", "sparse0.9"}, {}, 64, dir.file("eval")});
  ASSERT_EQ(results.size(), 4u);
  EXPECT_GT(results[1].mean_kl, 0);
  EXPECT_LT(results[1].mean_kl, results[2].mean_kl);
  EXPECT_LT(results[2].mean_kl, results[3].mean_kl);
  EXPECT_GE(results[1].top1_agreement, results[3].top1_agreement);
  for (const auto& r : results) EXPECT_TRUE(std::isfinite(r.perplexity)) << r.format;
}

}  // namespace
}  // namespace cpullm
