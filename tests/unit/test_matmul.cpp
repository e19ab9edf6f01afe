// The blocked GEMM against its reference (one matvec_reference per token) at every ISA level,
// on shapes off every register tile and cache block, and batched prefill against the model
// run token by token.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/kernels/k_quants.hpp"
#include "engine/kernels/matmul.hpp"
#include "engine/kernels/quant_formats.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/kernels/weight_formats.hpp"
#include "engine/model/model.hpp"
#include "engine/quant/quantize_model.hpp"
#include "engine/util/error.hpp"
#include "engine/util/half.hpp"
#include "engine/synthetic/synthetic_model.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

struct Matrix {
  std::vector<std::byte> storage;  // (rows, row bytes)
  std::vector<double> exact;       // (rows, cols) the stored values, dequantized and widened
  WeightMatrix view;
};

Matrix random_matrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(rows * cols), row(cols);
  for (float& v : values) v = dist(rng);
  Matrix m;
  m.view = {nullptr, type, rows, cols};
  m.storage.resize(rows * row_bytes(type, cols));
  encode_rows(type, values.data(), rows, m.storage.data(), cols);
  for (int64_t r = 0; r < rows; ++r) {
    decode_matrix_row(type, m.storage.data(), r, row.data(), cols);
    m.exact.insert(m.exact.end(), row.begin(), row.end());
  }
  m.view.data = m.storage.data();
  return m;
}

// The activations a kernel really multiplies: x itself, or x after Q8_0 quantization.
std::vector<double> effective_activations(GgmlType type, const float* x, int64_t cols) {
  if (!uses_q8_0_activations(type)) return {x, x + cols};
  std::vector<BlockQ8_0> blocks(cols / kQuantBlock);
  std::vector<float> dequantized(cols);
  quantize_row_q8_0(x, blocks.data(), cols);
  dequantize_row_q8_0(blocks.data(), dequantized.data(), cols);
  return {dequantized.begin(), dequantized.end()};
}

// What bounds the terms summed for weight c of a row, per |a_c|: |w_c| itself, or for the
// sub-block formats (w = scale * q + offset, in the GEMM's panels and in the row kernels alike)
// |scale * q| + |offset| <= |w_c| + 2 |offset|, with |offset| taken as at most twice the largest
// |w| of the 16-value half (the quantizers map a sub-block's extreme onto q = 0 or its top level).
double term_magnitude(GgmlType type, const std::vector<double>& exact, int64_t row, int64_t cols, int64_t c) {
  const double w = std::abs(exact[row * cols + c]);
  if (weight_format(type).gemm.panels != GemmPanels::sub_blocks) return w;
  double largest = 0;
  for (int64_t j = c / 16 * 16; j < c / 16 * 16 + 16; ++j) largest = std::max(largest, std::abs(exact[row * cols + j]));
  return w + 4 * largest;
}

// matmul at `isa` against matmul_reference for one shape. x and y have strides wider than
// their rows, as the model's KV-cache rows do. Bound as in test_kernels.cpp: an FP32 sum of n
// terms in any order is within n * 2^-24 * sum|terms| of exact; both results are, so they are
// within twice that of each other (integer formats: per-block int32 sums are exact, only the
// FP32 sum across blocks differs, within the same bound; the sub-block panels' terms as
// term_magnitude bounds them).
// caches: the cache sizes the blocking is sized for (zeros: sysconf_cache_sizes()).
void expect_matches_reference(Isa isa, GgmlType type, int64_t tokens, int64_t rows, int64_t cols,
                              CacheSizes caches = {0, 0}) {
  std::mt19937 rng(static_cast<unsigned>(tokens * 7919 + rows * 131 + cols));
  const Matrix m = random_matrix(type, rows, cols, rng);
  const int64_t x_stride = cols + 3, y_stride = rows + 2;
  std::vector<float> x(tokens * x_stride);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (float& v : x) v = dist(rng);

  std::vector<float> reference(tokens * y_stride, -1.0f), fast(tokens * y_stride, -1.0f);
  matmul_reference(reference.data(), y_stride, m.view, x.data(), x_stride, tokens);
  matmul(fast.data(), y_stride, m.view, x.data(), x_stride, tokens, isa, caches.l2_bytes ? caches : sysconf_cache_sizes());
  for (int64_t t = 0; t < tokens; ++t) {
    const std::vector<double> a = effective_activations(type, &x[t * x_stride], cols);
    for (int64_t r = 0; r < rows; ++r) {
      double magnitude = 0;
      for (int64_t c = 0; c < cols; ++c) magnitude += term_magnitude(type, m.exact, r, cols, c) * std::abs(a[c]);
      const double bound = 2 * cols * 0x1.0p-24 * magnitude + 1e-30;
      ASSERT_LE(std::abs(fast[t * y_stride + r] - reference[t * y_stride + r]), bound)
          << tokens << " tokens x " << rows << " rows x " << cols << " cols: token " << t << ", row " << r;
    }
    for (int64_t r = rows; r < y_stride; ++r) ASSERT_EQ(fast[t * y_stride + r], -1.0f) << "wrote past its rows";
  }
}

using MatmulCase = std::tuple<Isa, GgmlType>;
class MatmulTest : public ::testing::TestWithParam<MatmulCase> {};

// Rows for a shape test: any count, or whole groups of 8 for the _R8 types.
std::vector<int64_t> row_counts(GgmlType type, std::vector<int64_t> any, std::vector<int64_t> grouped) {
  return weight_format(type).plain ? grouped : any;
}

// Columns for a shape test: any count for the float formats, whole 32-value blocks (odd and even
// counts) for the integer ones, whole 256-value super-blocks for the K-quants.
std::vector<int64_t> column_counts(GgmlType type) {
  if (!uses_q8_0_activations(type)) return {1, 13, 65, 1000};
  if (weight_format(type).traits().block_elements == 256) return {256, 768};
  return {32, 96, 416};
}

// Tokens off every register tile's width (N: 4 or 6 tokens), rows off every panel height (R: 8,
// 16, 32 or 64 rows, the last panel padded); columns off every vector width and 8 x 8 transpose
// (8, 16 floats), and odd and even block counts.
TEST_P(MatmulTest, MatchesReferenceOnRaggedShapes) {
  auto [isa, type] = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "this CPU has no " << isa_name(isa);
  for (int64_t tokens : {1, 3, 5, 17, 64})
    for (int64_t rows : row_counts(type, {1, 7, 33, 130}, {8, 40, 136}))
      for (int64_t cols : column_counts(type)) expect_matches_reference(isa, type, tokens, rows, cols);
}

// Blocking sized for a 1 KiB L1d and a 4 KiB L2: passes of a few columns (float) or one block
// (integer) and blocks of one panel, so these shapes cross many of both, ragged at the ends, and
// every output is summed over many passes. With a 1 MiB L2 the L1d alone cuts the passes short
// (21 columns for a tile of 6 tokens, 1-2 blocks for the integer tiles).
TEST_P(MatmulTest, MatchesReferenceAcrossCacheBlocks) {
  auto [isa, type] = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "this CPU has no " << isa_name(isa);
  const int64_t cols = column_counts(type).back();
  for (const CacheSizes caches : {CacheSizes{1024, 4096}, CacheSizes{1024, 1 << 20}})
    for (int64_t tokens : {17, 64})
      for (int64_t rows : row_counts(type, {33, 130}, {40, 136}))
        expect_matches_reference(isa, type, tokens, rows, cols, caches);
}

std::string matmul_case_name(const ::testing::TestParamInfo<MatmulCase>& info) {
  auto [isa, type] = info.param;
  return std::string(isa_name(isa)) + "_" + std::string(ggml_type_name(type));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MatmulTest,
    ::testing::Combine(::testing::Values(Isa::Scalar, Isa::Avx2, Isa::Avx512),
                       ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                                         GgmlType::CPULLM_INT8_CHANNEL, GgmlType::CPULLM_Q4_0_R8,
                                         GgmlType::CPULLM_Q8_0_R8, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                         GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                         GgmlType::Q6_K, GgmlType::IQ4_NL)),
    matmul_case_name);

// Tokens +1, -1, then random signs: every block's amax is 1, so every activation quantizes to +-127.
std::vector<float> extreme_activations(int64_t tokens, int64_t cols, std::mt19937& rng) {
  std::vector<float> x(tokens * cols);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < cols; ++c) x[t * cols + c] = t == 0 ? 1.0f : t == 1 ? -1.0f : (rng() % 2 ? 1.0f : -1.0f);
  return x;
}

// matmul of w (rows, cols) by x (tokens, cols) at every ISA level this CPU runs, through the GEMM
// (a 1 KiB L1d leaves no room to stream rows), within `bound` of matmul_reference.
void expect_gemm_matches_reference(const WeightMatrix& w, const std::vector<float>& x, int64_t tokens, double bound) {
  std::vector<float> reference(tokens * w.rows), fast(tokens * w.rows);
  matmul_reference(reference.data(), w.rows, w, x.data(), w.cols, tokens);
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (!cpu_supports(isa)) continue;
    matmul(fast.data(), w.rows, w, x.data(), w.cols, tokens, isa, CacheSizes{1024, 1 << 20});
    for (int64_t i = 0; i < tokens * w.rows; ++i)
      ASSERT_NEAR(fast[i], reference[i], bound)
          << ggml_type_name(w.type) << " " << isa_name(isa) << " token " << i / w.rows << " row " << i % w.rows;
  }
}

// The AVX2 tile for Q4_0 sums a block's nibble-activation products in int16 (gemm_avx2.cpp):
// at most 16 x 15 x 127 = 30480 in a lane, reached by rows of nibbles 15 against activations
// all +127 (or -127). Rows of nibbles 15, of 0, and of random 0s and 15s, in both Q4_0 layouts,
// against tokens whose every block quantizes to +-127; a 1 KiB L1d makes matmul take the GEMM
// even for 7 tokens. A version that summed more in int16 before widening overflows here.
TEST(Matmul, Q4_0ExtremeNibblesAndActivationsMatchReference) {
  std::mt19937 rng(8);
  const int64_t rows = 16, blocks = 13, cols = blocks * kQuantBlock, tokens = 7;
  std::vector<BlockQ4_0> plain(rows * blocks);
  for (std::size_t i = 0; i < plain.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i) / blocks;
    plain[i].scale = fp32_to_fp16(0.5f);
    for (uint8_t& byte : plain[i].nibbles)
      byte = row == 0   ? 0xff  // every weight +7
             : row == 1 ? 0x00  // every weight -8
                        : static_cast<uint8_t>((rng() % 2 ? 0x0f : 0x00) | (rng() % 2 ? 0xf0 : 0x00));
  }
  std::vector<BlockQ4_0x8> interleaved(rows / kInterleavedRows * blocks);
  for (int64_t g = 0; g < rows / kInterleavedRows; ++g)
    interleave_rows(&plain[g * kInterleavedRows * blocks], blocks, &interleaved[g * blocks]);
  const std::vector<float> x = extreme_activations(tokens, cols, rng);
  for (const WeightMatrix& w : {WeightMatrix{reinterpret_cast<const std::byte*>(plain.data()), GgmlType::Q4_0, rows, cols},
                                WeightMatrix{reinterpret_cast<const std::byte*>(interleaved.data()),
                                             GgmlType::CPULLM_Q4_0_R8, rows, cols}}) {
    // Block sums are exact; the FP32 sum over blocks is within cols * 2^-24 * sum|w.a|, |w| <= 4, |a| = 1.
    expect_gemm_matches_reference(w, x, tokens, cols * 0x1.0p-24 * cols * 4);
  }
}

// The AVX2 sub-block tile adds two groups' maddubs pairs in int16 (gemm_avx2.cpp): at most
// 2 x 2 x 63 x 127 = 32004 in a lane, reached by Q6_K's top value 63 against activations all
// +127 (or -127). Rows of q = 63, of q = 0 and of random 0s and 63s with the largest scales,
// against tokens whose every block quantizes to +-127; a 1 KiB L1d makes matmul take the GEMM.
TEST(Matmul, Q6_KExtremeValuesAndActivationsMatchReference) {
  std::mt19937 rng(9);
  const int64_t rows = 9, super_blocks = 3, cols = super_blocks * 256, tokens = 7;
  std::vector<BlockQ6_K> blocks(rows * super_blocks);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i) / super_blocks;
    BlockQ6_K& block = blocks[i];
    block.d = fp32_to_fp16(1.0f / 1024);
    for (int8_t& scale : block.scales) scale = row % 2 ? 127 : -128;
    const auto fill = [&](uint8_t* bytes, int n) {
      for (int j = 0; j < n; ++j)
        bytes[j] = row == 0 ? 0xff : row == 1 ? 0x00 : static_cast<uint8_t>(rng() % 2 ? 0xff : 0x00);
    };
    fill(block.ql, sizeof block.ql);
    fill(block.qh, sizeof block.qh);
  }
  const std::vector<float> x = extreme_activations(tokens, cols, rng);
  const WeightMatrix w{reinterpret_cast<const std::byte*>(blocks.data()), GgmlType::Q6_K, rows, cols};
  // |w| <= 128 * 32 / 1024 = 4, |a| = 1; the terms (scale * q and the offset) at most 8 and 4.
  expect_gemm_matches_reference(w, x, tokens, 2 * cols * 0x1.0p-24 * cols * 12);
}

// n activations drawn uniformly from [-1, 1).
std::vector<float> uniform_values(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

TEST(Matmul, SameResultForAnyThreadCount) {
  std::mt19937 rng(3);
  for (GgmlType type : {GgmlType::F16, GgmlType::Q4_0}) {
    const Matrix m = random_matrix(type, 300, 4096, rng);
    const int64_t tokens = 150;
    const std::vector<float> x = uniform_values(tokens * 4096, rng);
    const int threads = omp_get_max_threads();
    // Small caches make many blocks of panels, so that with 2 or 3 threads on this machine's cores a
    // thread that finishes its share takes blocks from the others'.
    for (const CacheSizes caches : {sysconf_cache_sizes(), CacheSizes{4096, 16384}}) {
      std::vector<float> one(tokens * 300);
      omp_set_num_threads(1);
      matmul(one.data(), 300, m.view, x.data(), 4096, tokens, best_isa(), caches);
      for (int t : {2, 3}) {
        std::vector<float> several(tokens * 300);
        omp_set_num_threads(t);
        matmul(several.data(), 300, m.view, x.data(), 4096, tokens, best_isa(), caches);
        // the passes over the columns do not depend on the threads
        EXPECT_EQ(one, several) << ggml_type_name(type) << ", " << t << " threads, L2 " << caches.l2_bytes;
      }
    }
    omp_set_num_threads(threads);
  }
}

// A run's cache sizes come from its topology (hwloc's, or a hardware profile's box): sizes no
// blocking is meant for are refused before any kernel is sized for them.
TEST(Matmul, RefusesCacheSizesOutsideTheBlockingsRange) {
  check_cache_sizes(sysconf_cache_sizes());
  check_cache_sizes({1024, 4096});
  EXPECT_THROW(check_cache_sizes({512, 4096}), Error);
  EXPECT_THROW(check_cache_sizes({32768, 1024}), Error);
  EXPECT_THROW(check_cache_sizes({32768, int64_t{1} << 40}), Error);
}

TEST(Matmul, RefusesTypesWithoutAKernel) {
  std::vector<std::byte> block(136);
  const WeightMatrix iq4_xs{block.data(), GgmlType::IQ4_XS, 1, 256};
  float y, x[256] = {};
  EXPECT_THROW(matmul(&y, 1, iq4_xs, x, 256, 1, Isa::Scalar, sysconf_cache_sizes()), std::exception);
}

// The streaming policy at the shapes it was measured on (docs/kernels.md), with a
// 48 KiB L1d: 1-2 tokens always, float rows up to 4 tokens, Q8_0 and Q4_0 rows up to 4 (Q4_0 and
// Q4_0_R8: 8) while the tokens' quantized activations fit in 24 KiB, never more; with the Xeon
// E5 v4's 32 KiB, in 16 KiB; the sub-block formats up to 24 at any width.
TEST(Matmul, StreamsRowsWhileTheTokensActivationsFitBesideThem) {
  constexpr int64_t kL1d = 48 * 1024, kXeonL1d = 32 * 1024;
  for (GgmlType type : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::CPULLM_Q4_0_R8, GgmlType::CPULLM_Q8_0_R8}) {
    EXPECT_TRUE(matmul_streams_rows(type, 2, 11008, kL1d)) << ggml_type_name(type);
    EXPECT_FALSE(matmul_streams_rows(type, 9, 32, kL1d)) << ggml_type_name(type);
  }
  EXPECT_FALSE(matmul_streams_rows(GgmlType::F16, 5, 32, kL1d));
  EXPECT_FALSE(matmul_streams_rows(GgmlType::Q8_0, 5, 32, kL1d));
  EXPECT_TRUE(matmul_streams_rows(GgmlType::Q4_0, 8, 2048, kL1d));    // 8 x 64 x 40 = 20 KiB: TinyLlama's width
  EXPECT_FALSE(matmul_streams_rows(GgmlType::Q4_0, 8, 4096, kL1d));   // 40 KiB
  EXPECT_TRUE(matmul_streams_rows(GgmlType::CPULLM_Q4_0_R8, 8, 2048, kL1d));  // the same 40 bytes a block: values, scale, offset
  EXPECT_FALSE(matmul_streams_rows(GgmlType::CPULLM_Q4_0_R8, 8, 4096, kL1d));
  EXPECT_TRUE(matmul_streams_rows(GgmlType::F16, 4, 11008, kL1d));
  EXPECT_TRUE(matmul_streams_rows(GgmlType::Q8_0, 4, 4096, kL1d));    // 4 x 128 blocks x 36 bytes = 18 KiB
  for (GgmlType type : {GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q6_K}) {  // at any width, up to 24
    EXPECT_TRUE(matmul_streams_rows(type, 24, 11008, kL1d)) << ggml_type_name(type);
    EXPECT_FALSE(matmul_streams_rows(type, 25, 256, kL1d)) << ggml_type_name(type);
  }
  EXPECT_TRUE(matmul_streams_rows(GgmlType::Q8_0, 4, 5440, kL1d));    // 24,480 bytes
  EXPECT_FALSE(matmul_streams_rows(GgmlType::Q8_0, 4, 5472, kL1d));   // 24,624 bytes
  EXPECT_TRUE(matmul_streams_rows(GgmlType::CPULLM_Q8_0_R8, 4, 5440, kL1d));   // as Q8_0
  EXPECT_FALSE(matmul_streams_rows(GgmlType::CPULLM_Q8_0_R8, 5, 32, kL1d));
  EXPECT_FALSE(matmul_streams_rows(GgmlType::CPULLM_INT8_CHANNEL, 3, 11008, kL1d));
  EXPECT_TRUE(matmul_streams_rows(GgmlType::Q4_0, 4, 4096, kL1d));    // 4 x 128 x 40 = 20 KiB
  EXPECT_TRUE(matmul_streams_rows(GgmlType::Q4_0, 4, 4800, kL1d));    // 24,000 bytes
  EXPECT_FALSE(matmul_streams_rows(GgmlType::Q4_0, 4, 4928, kL1d));   // 24,640 bytes
  EXPECT_FALSE(matmul_streams_rows(GgmlType::Q4_0, 4, 5632, kL1d));
  EXPECT_FALSE(matmul_streams_rows(GgmlType::Q8_0, 4, 4096, kXeonL1d));  // 18 KiB
  EXPECT_TRUE(matmul_streams_rows(GgmlType::Q8_0, 4, 3616, kXeonL1d));   // 16,272 bytes
  EXPECT_TRUE(matmul_streams_rows(GgmlType::F16, 4, 11008, kXeonL1d));
}

// Logits of forward_batch (every position, and the last alone) against forward() token by
// token on a fresh model, within 1e-4, with an F32 cache (an F16 one rounds the paths' last-bit
// differences of a key to whole steps of its own).
void expect_batch_matches_token_by_token(const std::string& path, int64_t context, int64_t n_tokens) {
  const ModelOptions options{.context = context, .kv_type = KvType::f32};
  Model one_by_one(path, options), batched(path, options);
  const int64_t vocab = one_by_one.config().vocab_size;
  std::vector<int32_t> tokens = {1};
  for (int32_t i = 1; i < n_tokens; ++i) tokens.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));

  const std::span<const float> all = batched.forward_batch(tokens, 0, true);
  ASSERT_EQ(all.size(), tokens.size() * vocab);
  std::vector<float> all_copy(all.begin(), all.end());
  double worst = 0;
  for (int64_t pos = 0; pos < n_tokens; ++pos) {
    const std::span<const float> expected = one_by_one.forward(tokens[pos], pos);
    for (int64_t i = 0; i < vocab; ++i)
      worst = std::max(worst, std::abs(double{expected[i]} - all_copy[pos * vocab + i]));
  }
  EXPECT_LE(worst, 1e-4) << path;

  // The same run split in two calls, the second continuing at its position: last logits only.
  Model split(path, options);
  const int64_t half = n_tokens / 2;
  split.forward_batch(std::span(tokens).first(half), 0);
  const std::span<const float> last = split.forward_batch(std::span(tokens).subspan(half), half);
  ASSERT_EQ(last.size(), static_cast<std::size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i)
    EXPECT_NEAR(last[i], all_copy[(n_tokens - 1) * vocab + i], 1e-4) << "logit " << i;
}

TEST(ForwardBatch, Stories260KMatchesTokenByToken) {
  auto model_path = test::shared_model("stories260K.gguf");
  if (!model_path) GTEST_SKIP() << "../shared/models/stories260K.gguf not found";
  expect_batch_matches_token_by_token(*model_path, 128, 67);
}

SyntheticModelOptions tiny_model(int64_t context) {
  SyntheticModelOptions options;
  options.shape = {"custom", 2, 64, 160, 8, 2, 600, context};  // grouped-query heads
  options.dtype = GgmlType::F32;
  options.progress = false;
  return options;
}

TEST(ForwardBatch, SyntheticQ8_0MatchesTokenByToken) {
  test::TempDir dir;
  write_synthetic_model(dir.file("f32.gguf"), tiny_model(64));
  QuantizeOptions q8_0;
  q8_0.progress = false;
  quantize_model(dir.file("f32.gguf"), dir.file("q8_0.gguf"), q8_0);
  expect_batch_matches_token_by_token(dir.file("q8_0.gguf"), 64, 45);
}

TEST(ForwardBatch, ChunksAcrossThe512TokenBoundary) {
  test::TempDir dir;
  write_synthetic_model(dir.file("tiny.gguf"), tiny_model(700));
  expect_batch_matches_token_by_token(dir.file("tiny.gguf"), 700, 600);
}

TEST(ForwardBatch, RefusesPositionsPastTheContext) {
  test::TempDir dir;
  write_synthetic_model(dir.file("tiny.gguf"), tiny_model(64));
  Model model(dir.file("tiny.gguf"), 16);
  const std::vector<int32_t> tokens(10, 1);
  model.forward_batch(tokens, 0);
  EXPECT_THROW(model.forward_batch(tokens, 10), std::exception);
  EXPECT_THROW(model.forward_batch({}, 0), std::exception);
}

}  // namespace
}  // namespace cpullm
