// Kernels against plain references: every weight type at every ISA level against the scalar
// reference, the reference against double precision, and the small ops against formulas.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <set>
#include <vector>

#include "engine/kernels/attention.hpp"
#include "engine/kernels/matmul.hpp"
#include "engine/kernels/matvec.hpp"
#include "engine/kernels/quant_formats.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/kernels/row_shares.hpp"
#include "engine/kernels/weight_formats.hpp"
#include "engine/kernels/ops.hpp"
#include "engine/util/error.hpp"
#include "engine/util/half.hpp"

namespace cpullm {
namespace {

struct Matrix {
  std::vector<std::byte> storage;
  std::vector<double> exact;  // (rows, cols) the stored values, dequantized and widened
  WeightMatrix view;
};

Matrix random_matrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(rows * cols);
  for (float& v : values) v = dist(rng);
  Matrix m;
  m.view = {nullptr, type, rows, cols};
  m.storage.resize(rows * row_bytes(m.view));
  encode_rows(type, values.data(), rows, m.storage.data(), cols);
  m.view.data = m.storage.data();
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    weight_row_to_float(row.data(), m.view, r);
    m.exact.insert(m.exact.end(), row.begin(), row.end());
  }
  return m;
}

// The activations a kernel really multiplies: x itself, or x after Q8_0 quantization.
std::vector<double> effective_activations(GgmlType type, const std::vector<float>& x) {
  if (!uses_q8_0_activations(type)) return {x.begin(), x.end()};
  std::vector<BlockQ8_0> blocks(x.size() / kQuantBlock);
  quantize_row_q8_0(x.data(), blocks.data(), static_cast<int64_t>(x.size()));
  std::vector<float> dequantized(x.size());
  dequantize_row_q8_0(blocks.data(), dequantized.data(), static_cast<int64_t>(x.size()));
  return {dequantized.begin(), dequantized.end()};
}

using MatvecCase = std::tuple<Isa, GgmlType, int64_t, int64_t>;  // ISA, weight type, rows, cols
class MatvecTest : public ::testing::TestWithParam<MatvecCase> {};

// The reference is checked against double precision, each ISA's parallel kernel against the
// reference. Bound: an FP32 sum of n terms in any order is within n * 2^-24 * sum|terms| of
// the exact sum (block kernels sum fewer terms in FP32, so the same bound covers them).
TEST_P(MatvecTest, ReferenceMatchesExactAndEveryIsaMatchesReference) {
  auto [isa, type, rows, cols] = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "this CPU has no " << isa_name(isa);
  std::mt19937 rng(static_cast<unsigned>(rows * 131 + cols));
  Matrix m = random_matrix(type, rows, cols, rng);
  std::vector<float> x(cols);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (float& v : x) v = dist(rng);
  const std::vector<double> a = effective_activations(type, x);

  std::vector<float> reference(rows), fast(rows);
  matvec_reference(reference.data(), m.view, x.data());
  matvec(fast.data(), m.view, x.data(), isa);
  for (int64_t r = 0; r < rows; ++r) {
    double exact = 0, magnitude = 0;
    for (int64_t c = 0; c < cols; ++c) {
      exact += m.exact[r * cols + c] * a[c];
      magnitude += std::abs(m.exact[r * cols + c] * a[c]);
    }
    const double bound = cols * 0x1.0p-24 * magnitude + 1e-30;
    ASSERT_LE(std::abs(reference[r] - exact), bound) << "row " << r;
    ASSERT_LE(std::abs(fast[r] - reference[r]), 2 * bound) << "row " << r;
  }
}

// Every format of the registry at every level, so a new entry is tested with no line here.
// Shapes off every vector width (8, 16, 64 floats) and block count (odd and even), plus the
// decode shapes of real models; block formats need whole blocks (25 blocks: full steps of 8 and
// 16 blocks, then the row's last blocks), types stored in groups of rows whole groups.
std::vector<MatvecCase> matvec_cases() {
  std::vector<MatvecCase> cases;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    for (const WeightFormat& f : weight_formats()) {
      const int64_t group = f.traits().row_group;
      if (f.activations == Activations::f32) {
        for (int64_t rows : {1, 7, 33})
          for (int64_t cols : {1, 13, 64, 65, 1000}) cases.emplace_back(isa, f.type, rows, cols);
        cases.emplace_back(isa, f.type, 96, 2048);
      } else if (group == 1) {
        const int64_t block = std::max<int64_t>(kQuantBlock, f.traits().block_elements);
        for (int64_t rows : {1, 7, 33})
          for (int64_t blocks : {1, 2, 3, 13, 25}) cases.emplace_back(isa, f.type, rows, blocks * block);
        cases.emplace_back(isa, f.type, 64, 4096);
      } else {
        for (int64_t rows : {group, 4 * group})
          for (int64_t cols : {32, 64, 96, 416}) cases.emplace_back(isa, f.type, rows, cols);
      }
      cases.emplace_back(isa, f.type, 8 * group, 11008);  // LLaMA-7B's ffn_down width
    }
  return cases;
}

// Names like avx2_F16_33x65, so a failing case says what it was.
std::string matvec_case_name(const ::testing::TestParamInfo<MatvecCase>& info) {
  auto [isa, type, rows, cols] = info.param;
  return std::string(isa_name(isa)) + "_" + std::string(ggml_type_name(type)) + "_" + std::to_string(rows) + "x" +
         std::to_string(cols);
}

INSTANTIATE_TEST_SUITE_P(Cases, MatvecTest, ::testing::ValuesIn(matvec_cases()), matvec_case_name);

TEST(Matvec, SameResultForAnyThreadCount) {
  std::mt19937 rng(3);
  Matrix m = random_matrix(GgmlType::F16, 300, 700, rng);
  std::vector<float> x(700, 0.25f), one(300), two(300);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  matvec(one.data(), m.view, x.data(), best_isa());
  omp_set_num_threads(2);
  matvec(two.data(), m.view, x.data(), best_isa());
  omp_set_num_threads(threads);
  EXPECT_EQ(one, two);  // each row is one thread's sequential work: bitwise equal
}

// The kernels load several blocks at a time; a mapped weight file may end right after a
// matrix, so none may read past its last byte. The matrix here ends at an inaccessible page:
// a read past it would crash the test. Columns of 1, 3, 5 and 13 blocks (of 32 values, or of the
// format's block where it is larger) end the row inside a Q4_0 step or in another kernel's last
// blocks, pairs or groups of four; 16 and 17 end it with a full step of 16 blocks (Q4_0's loads
// are not masked), and with one block after one.
TEST(Matvec, ReadsNothingPastTheMatrix) {
  const long page = sysconf(_SC_PAGESIZE);
  std::mt19937 rng(9);
  for (const WeightFormat& f : weight_formats())
    for (int64_t blocks : {1, 3, 5, 13, 16, 17}) {
      const GgmlType type = f.type;
      const int64_t cols = blocks * std::max<int64_t>(kQuantBlock, f.traits().block_elements);
      const int64_t rows = rows_per_kernel_call(WeightMatrix{nullptr, type, 8, cols}) == 8 ? 8 : 3;
      const Matrix m = random_matrix(type, rows, cols, rng);
      const auto bytes = static_cast<long>(m.storage.size()), pages = (bytes + page - 1) / page;
      auto* region = static_cast<std::byte*>(mmap(nullptr, (pages + 1) * page, PROT_READ | PROT_WRITE,
                                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      ASSERT_NE(region, MAP_FAILED);
      ASSERT_EQ(mprotect(region + pages * page, page, PROT_NONE), 0);
      std::byte* data = region + pages * page - bytes;
      std::memcpy(data, m.storage.data(), m.storage.size());
      WeightMatrix w = m.view;
      w.data = data;
      std::vector<float> x(cols, 0.5f), reference(rows), fast(rows);
      matvec_reference(reference.data(), w, x.data());
      for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
        if (!cpu_supports(isa)) continue;
        matvec(fast.data(), w, x.data(), isa);
        for (int r = 0; r < rows; ++r)
          EXPECT_NEAR(fast[r], reference[r], 1e-4 * (1 + std::abs(reference[r])))
              << ggml_type_name(type) << " " << cols << " " << isa_name(isa);
      }
      munmap(region, (pages + 1) * page);
    }
}

std::vector<float> uniform_input(int64_t n, std::mt19937& rng) {
  std::vector<float> x(static_cast<std::size_t>(n));
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (float& v : x) v = dist(rng);
  return x;
}

// check(isa, threads) at every ISA level this CPU runs and 1 to 3 threads.
template <typename Check>
void for_each_isa_and_thread_count(Check check) {
  const int threads = omp_get_max_threads();
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (!cpu_supports(isa)) continue;
    for (int t : {1, 2, 3}) {
      omp_set_num_threads(t);
      check(isa, t);
    }
  }
  omp_set_num_threads(threads);
}

// A group mixes formats and sizes so that the threads' split of the concatenated rows falls
// inside matrices and across their ends; each output must be matvec's, bit for bit.
TEST(MatvecGroup, EqualsOneMatvecPerMatrixAtEveryIsaAndThreadCount) {
  std::mt19937 rng(4);
  std::vector<Matrix> matrices;
  for (auto [type, rows] : {std::pair{GgmlType::Q4_0, 5}, {GgmlType::Q8_0, 7}, {GgmlType::F16, 3},
                            {GgmlType::CPULLM_INT8_CHANNEL, 1}, {GgmlType::CPULLM_Q4_0_R8, 16}, {GgmlType::CPULLM_Q8_0_R8, 8},
                            {GgmlType::Q4_0, 33}})
    matrices.push_back(random_matrix(type, rows, 96, rng));
  const std::vector<float> x = uniform_input(96, rng);
  for_each_isa_and_thread_count([&](Isa isa, int t) {
    std::vector<std::vector<float>> grouped, single;
    std::vector<MatvecTask> tasks;
    for (const Matrix& m : matrices) {
      grouped.emplace_back(m.view.rows, -1.0f);
      single.emplace_back(m.view.rows);
    }
    for (std::size_t i = 0; i < matrices.size(); ++i) tasks.push_back({grouped[i].data(), &matrices[i].view});
    matvec_group(tasks, x.data(), isa);
    for (std::size_t i = 0; i < matrices.size(); ++i) {
      matvec(single[i].data(), matrices[i].view, x.data(), isa);
      EXPECT_EQ(grouped[i], single[i]) << isa_name(isa) << ", " << t << " threads, matrix " << i;
    }
  });
}

// Several tokens at once (decode steps of a few sequences, prefill of the formats without a GEMM
// panel): each token's outputs are matvec's, bit for bit, at every ISA and thread count, with
// strides wider than the rows, for up to the most tokens a pass takes, and beyond it in passes.
void check_several_tokens(std::initializer_list<std::pair<GgmlType, int>> shapes, int64_t cols, std::mt19937& rng) {
  std::vector<Matrix> matrices;
  for (auto [type, rows] : shapes) matrices.push_back(random_matrix(type, rows, cols, rng));
  const int64_t kXStride = cols + 4, kYStride = 12;  // padding the kernels must leave alone
  const std::vector<float> x = uniform_input((kRowStreamTokens + 3) * kXStride, rng);
  for_each_isa_and_thread_count([&](Isa isa, int t) {
    for (int64_t tokens : {int64_t{2}, int64_t{3}, kRowStreamTokens, kRowStreamTokens + 3}) {  // the last in two passes
      std::vector<std::vector<float>> grouped;
      std::vector<MatvecTask> tasks;
      for (std::size_t i = 0; i < matrices.size(); ++i) grouped.emplace_back(tokens * kYStride, -1.0f);
      for (std::size_t i = 0; i < matrices.size(); ++i) tasks.push_back({grouped[i].data(), &matrices[i].view, kYStride});
      matvec_group(tasks, x.data(), kXStride, tokens, isa);
      for (std::size_t i = 0; i < matrices.size(); ++i) {
        const int64_t rows = matrices[i].view.rows;
        for (int64_t k = 0; k < tokens; ++k) {
          std::vector<float> single(rows);
          matvec(single.data(), matrices[i].view, x.data() + k * kXStride, isa);
          const auto out = grouped[i].begin() + k * kYStride;
          EXPECT_EQ(std::vector<float>(out, out + rows), single)
              << isa_name(isa) << ", " << t << " threads, " << tokens << " tokens, matrix " << i << ", token " << k;
          EXPECT_TRUE(std::all_of(out + rows, out + kYStride, [](float v) { return v == -1.0f; }))
              << "padding written, matrix " << i;
        }
      }
    }
  });
}

TEST(MatvecGroup, SeveralTokensEqualOneMatvecPerToken) {
  std::mt19937 rng(11);
  // 25 blocks: every kernel's full steps (8 or 16 blocks), then its tail.
  check_several_tokens({{GgmlType::Q4_0, 5}, {GgmlType::Q8_0, 7}, {GgmlType::F16, 3}, {GgmlType::BF16, 4},
                        {GgmlType::CPULLM_INT8_CHANNEL, 2}, {GgmlType::CPULLM_Q4_0_R8, 8}, {GgmlType::CPULLM_Q8_0_R8, 8},
                        {GgmlType::F32, 9}, {GgmlType::Q4_1, 3}, {GgmlType::Q5_0, 4}, {GgmlType::Q5_1, 5}},
                       800, rng);
  // The K-quants: 3 super-blocks.
  check_several_tokens({{GgmlType::Q2_K, 3}, {GgmlType::Q3_K, 4}, {GgmlType::Q4_K, 5}, {GgmlType::Q5_K, 2}, {GgmlType::Q6_K, 6}},
                       768, rng);
}

// Groups long enough to be claimed in many chunks (4096 columns: 64 KiB is 4 F32 rows or 15 Q8_0
// rows), so that at 2 and 3 threads a thread may finish its share and take the others' last
// chunks: still matvec's outputs, bit for bit.
TEST(MatvecGroup, LongGroupsEqualOneMatvecPerMatrix) {
  std::mt19937 rng(12);
  std::vector<Matrix> matrices;
  for (auto [type, rows] : {std::pair{GgmlType::F32, 37}, {GgmlType::Q8_0, 61}, {GgmlType::Q4_0, 90},
                            {GgmlType::CPULLM_Q4_0_R8, 88}, {GgmlType::CPULLM_Q8_0_R8, 48}})
    matrices.push_back(random_matrix(type, rows, 4096, rng));
  const std::vector<float> x = uniform_input(4096, rng);
  for_each_isa_and_thread_count([&](Isa isa, int t) {
    std::vector<std::vector<float>> grouped;
    std::vector<MatvecTask> tasks;
    for (const Matrix& m : matrices) grouped.emplace_back(m.view.rows, -1.0f);
    for (std::size_t i = 0; i < matrices.size(); ++i) tasks.push_back({grouped[i].data(), &matrices[i].view});
    matvec_group(tasks, x.data(), isa);
    for (std::size_t i = 0; i < matrices.size(); ++i) {
      std::vector<float> single(matrices[i].view.rows);
      matvec(single.data(), matrices[i].view, x.data(), isa);
      EXPECT_EQ(grouped[i], single) << isa_name(isa) << ", " << t << " threads, matrix " << i;
    }
  });
}

// One thread alone: its own share front to back in chunks, then the other's from the back.
TEST(RowShares, OwnShareFromTheFrontThenTheOthersFromTheBack) {
  RowShares shares(10, 2, 3);  // shares [0, 5) and [5, 10)
  std::vector<std::pair<int64_t, int64_t>> taken;
  for (int64_t begin, end; shares.next(0, begin, end);) taken.emplace_back(begin, end);
  const std::vector<std::pair<int64_t, int64_t>> expected = {{0, 3}, {3, 5}, {7, 10}, {5, 7}};
  EXPECT_EQ(taken, expected);
  int64_t begin, end;
  EXPECT_FALSE(shares.next(1, begin, end));
}

// Threads racing for chunks, one of the split's threads never arriving (OpenMP granted fewer):
// every row is claimed exactly once.
TEST(RowShares, EveryRowClaimedOnceWhileThreadsRace) {
  constexpr int64_t kRows = 100003;
  for (int round = 0; round < 20; ++round) {
    std::vector<std::atomic<int>> claims(kRows);
    RowShares shares(kRows, 5, 1 + round % 7);
#pragma omp parallel num_threads(4)
    for (int64_t begin, end; shares.next(omp_get_thread_num(), begin, end);)
      for (int64_t r = begin; r < end; ++r) claims[r].fetch_add(1, std::memory_order_relaxed);
    const auto once = std::count_if(claims.begin(), claims.end(), [](const std::atomic<int>& c) { return c.load() == 1; });
    ASSERT_EQ(once, kRows) << "round " << round;
  }
  EXPECT_THROW(RowShares(int64_t{1} << 32, 2, 1), Error);
  EXPECT_THROW(RowShares(10, 0, 1), Error);
}

TEST(MatvecGroup, RefusesMatricesOfDifferentWidths) {
  std::mt19937 rng(5);
  Matrix a = random_matrix(GgmlType::F32, 2, 64, rng), b = random_matrix(GgmlType::F32, 2, 65, rng);
  std::vector<float> x(65), ya(2), yb(2);
  const MatvecTask tasks[] = {{ya.data(), &a.view}, {yb.data(), &b.view}};
  EXPECT_THROW(matvec_group(tasks, x.data(), Isa::Scalar), Error);
  matvec_group({}, x.data(), Isa::Scalar);  // an empty group is nothing to do
}

// Q4_0's SIMD kernels take the nibbles unsigned and subtract 8 * sum(a) per block: weights at
// the ends of their range (nibbles 0 and 15) against activations at +-127 must still give the
// reference's exact block sums. The AVX2 kernel adds 16 products of nibbles and activations in
// int16 (at most 16 * 15 * 127 = 30480): rows of nothing but nibbles 15 against activations all
// +127 or all -127 reach that bound; summing twice as many (up to 60960) would wrap.
TEST(Matvec, Q4_0ExtremeNibblesAndActivationsMatchReference) {
  std::mt19937 rng(6);
  const int64_t rows = 9, cols = 800;  // 25 blocks: a full step of 16, then an odd tail for the AVX-512 pairs
  std::vector<BlockQ4_0> blocks(rows * cols / kQuantBlock);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i) / (cols / kQuantBlock);
    blocks[i].scale = fp32_to_fp16(0.5f);
    for (uint8_t& byte : blocks[i].nibbles)
      byte = row == 0   ? 0xff  // every weight +7
             : row == 1 ? 0x00  // every weight -8
                        : static_cast<uint8_t>((rng() % 2 ? 0x0f : 0x00) | (rng() % 2 ? 0xf0 : 0x00));
  }
  const WeightMatrix w{reinterpret_cast<const std::byte*>(blocks.data()), GgmlType::Q4_0, rows, cols};
  std::vector<float> random_signs(cols), plus(cols, 1.0f), minus(cols, -1.0f);
  for (float& v : random_signs) v = rng() % 2 ? 1.0f : -1.0f;  // every block's amax: quantized to exactly +-127
  for (const std::vector<float>* x : {&random_signs, &plus, &minus}) {
    std::vector<float> reference(rows), fast(rows);
    matvec_reference(reference.data(), w, x->data());
    for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
      if (!cpu_supports(isa)) continue;
      matvec(fast.data(), w, x->data(), isa);
      // Every block sum is exact on every ISA; only their FP32 sum's order may differ, within
      // cols * 2^-24 * sum|w.a| where |w| <= 4 (0.5 * 8) and |a| = 1.
      for (int64_t r = 0; r < rows; ++r) EXPECT_NEAR(fast[r], reference[r], cols * 0x1.0p-24 * cols * 4) << isa_name(isa) << " row " << r;
    }
  }
}

// matvec quantizes the activations with its own vectorised code; it must give
// quantize_row_q8_0's blocks bit for bit (llama.cpp's rounding, half away from zero). Seen
// through rows that pick one activation each (weight 1, scale 1): y[j] is then exactly the
// dequantized a[j] = scale * q[j], at every ISA. In Q8_0 the other weights are 0; in Q4_0 they
// are nibbles of 8, so the SIMD kernels' zero-point offsets (dot.hpp) must be exact too. The
// input has exact ties (+-0.5, +-2.5, +-126.5 in a block whose scale is 1), a zero block, tiny
// values and an odd block count.
TEST(Matvec, QuantizesActivationsAsQuantizeRowQ8_0) {
  const int64_t cols = 7 * kQuantBlock;
  std::vector<float> x(cols);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  for (float& v : x) v = dist(rng);
  const float ties[] = {127.0f, 0.5f, -0.5f, 2.5f, -2.5f, 126.5f, -126.5f, 1.5f, -0.49999997f, 0.0f};
  std::copy(std::begin(ties), std::end(ties), x.begin());  // block 0: amax 127, so the scale is 1
  std::fill(x.begin() + kQuantBlock, x.begin() + 2 * kQuantBlock, 0.0f);  // block 1: all zeros
  for (int64_t j = 2 * kQuantBlock; j < 3 * kQuantBlock; ++j) x[j] = 1e-30f * (j % 7 - 3);  // block 2: tiny
  std::vector<float> expected(cols);
  {
    std::vector<BlockQ8_0> blocks(cols / kQuantBlock);
    quantize_row_q8_0(x.data(), blocks.data(), cols);
    dequantize_row_q8_0(blocks.data(), expected.data(), cols);
  }
  std::vector<BlockQ8_0> picks(cols * cols / kQuantBlock);  // row j: 1 at column j, 0 elsewhere
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
      BlockQ8_0& block = picks[j * cols / kQuantBlock + b];
      block.scale = fp32_to_fp16(1.0f);
      for (int64_t k = 0; k < kQuantBlock; ++k) block.q[k] = b * kQuantBlock + k == j ? 1 : 0;
    }
  std::vector<BlockQ4_0> nibble_picks(cols * cols / kQuantBlock);  // row j: nibble 9 (+1) at j, 8 (0) elsewhere
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
      BlockQ4_0& block = nibble_picks[j * cols / kQuantBlock + b];
      block.scale = fp32_to_fp16(1.0f);
      std::fill(std::begin(block.nibbles), std::end(block.nibbles), uint8_t{0x88});
      const int64_t k = j - b * kQuantBlock;  // values k and k + 16 share byte k % 16
      if (k >= 0 && k < kQuantBlock) block.nibbles[k % 16] = k < 16 ? 0x89 : 0x98;
    }
  for (const WeightMatrix w : {WeightMatrix{reinterpret_cast<const std::byte*>(picks.data()), GgmlType::Q8_0, cols, cols},
                               WeightMatrix{reinterpret_cast<const std::byte*>(nibble_picks.data()), GgmlType::Q4_0,
                                            cols, cols}}) {
    std::vector<float> y(cols);
    matvec_reference(y.data(), w, x.data());
    EXPECT_EQ(y, expected) << ggml_type_name(w.type) << " reference";
    for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
      if (!cpu_supports(isa)) continue;
      matvec(y.data(), w, x.data(), isa);
      EXPECT_EQ(y, expected) << ggml_type_name(w.type) << " " << isa_name(isa);
    }
  }
}

TEST(Matvec, RefusesTypesWithoutAKernel) {
  std::vector<std::byte> block(136);
  WeightMatrix iq4_xs{block.data(), GgmlType::IQ4_XS, 1, 256};
  EXPECT_FALSE(matvec_supports(GgmlType::IQ4_XS, 256));
  EXPECT_FALSE(matvec_supports(GgmlType::Q8_0, 48));  // not whole blocks
  EXPECT_FALSE(matvec_supports(GgmlType::Q4_K, 64));
  EXPECT_TRUE(matvec_supports(GgmlType::Q4_K, 512));
  EXPECT_TRUE(matvec_supports(GgmlType::CPULLM_INT8_CHANNEL, 64));
  float y, x[256] = {};
  EXPECT_THROW(matvec(&y, iq4_xs, x, Isa::Scalar), std::exception);
}

// Each level runs a kernel of its own, except where the registry gives the AVX-512 level the
// AVX2 one (Q2_K, Q3_K). Same-named kernels in two files once resolved to one
// function for both levels (dot.hpp, by_token_count): the AVX-512 Q4_1 kernel never ran.
TEST(Matvec, EveryLevelRunsAKernelOfItsOwn) {
  const std::set<GgmlType> avx2_at_avx512 = {GgmlType::Q2_K, GgmlType::Q3_K};
  for (const WeightFormat& f : weight_formats()) {
    EXPECT_NE(f.dot.scalar, f.dot.avx2) << f.name;
    if (avx2_at_avx512.contains(f.type)) EXPECT_EQ(f.dot.avx512, f.dot.avx2) << f.name;
    else EXPECT_NE(f.dot.avx512, f.dot.avx2) << f.name;
  }
}

// CPULLM_Q4_0_R8 and CPULLM_Q8_0_R8 hold Q4_0's and Q8_0's bytes rearranged: the same values in
// every row, the same scalar reference products bit for bit, and the rearrangement undone
// exactly. Row counts that are not whole groups are refused, by the encoder and by matvec.
template <typename Block>
void expect_interleaving_keeps_values(GgmlType plain_type, GgmlType interleaved_type) {
  SCOPED_TRACE(ggml_type_name(interleaved_type));
  std::mt19937 rng(13);
  const int64_t rows = 24, cols = 416;
  const std::vector<float> values = uniform_input(rows * cols, rng), x = uniform_input(cols, rng);
  WeightMatrix plain{nullptr, plain_type, rows, cols}, interleaved{nullptr, interleaved_type, rows, cols};
  std::vector<std::byte> plain_bytes(rows * row_bytes(plain)), interleaved_bytes(rows * row_bytes(interleaved));
  ASSERT_EQ(plain_bytes.size(), interleaved_bytes.size());
  encode_rows(plain_type, values.data(), rows, plain_bytes.data(), cols);
  encode_rows(interleaved_type, values.data(), rows, interleaved_bytes.data(), cols);
  EXPECT_NE(plain_bytes, interleaved_bytes);
  plain.data = plain_bytes.data();
  interleaved.data = interleaved_bytes.data();
  std::vector<float> a(cols), b(cols);
  for (int64_t r = 0; r < rows; ++r) {
    weight_row_to_float(a.data(), plain, r);
    weight_row_to_float(b.data(), interleaved, r);
    ASSERT_EQ(a, b) << "row " << r;
  }
  std::vector<float> y_plain(rows), y_interleaved(rows);
  matvec_reference(y_plain.data(), plain, x.data());
  matvec_reference(y_interleaved.data(), interleaved, x.data());
  EXPECT_EQ(y_plain, y_interleaved);
  const int64_t blocks = cols / kQuantBlock;
  std::vector<Block> row(blocks);
  for (int64_t r = 0; r < rows; ++r) {
    deinterleave_row(reinterpret_cast<const Interleaved8<Block>*>(interleaved_bytes.data()) + r / 8 * blocks, blocks,
                     static_cast<int>(r % 8), row.data());
    EXPECT_EQ(std::memcmp(row.data(), plain_bytes.data() + r * row_bytes(plain), row_bytes(plain)), 0) << "row " << r;
  }
  EXPECT_THROW(encode_rows(interleaved_type, values.data(), 12, interleaved_bytes.data(), cols), Error);
  const WeightMatrix ragged{interleaved_bytes.data(), interleaved_type, 12, cols};
  EXPECT_THROW(matvec(y_plain.data(), ragged, x.data(), Isa::Scalar), Error);
  EXPECT_THROW(matvec_reference(y_plain.data(), ragged, x.data()), Error);
  std::vector<float> batch_x(16 * cols), batch_y(16 * 12);
  EXPECT_THROW(matmul(batch_y.data(), 12, ragged, batch_x.data(), cols, 16, Isa::Scalar, sysconf_cache_sizes()), Error);
  EXPECT_THROW(encode_row(interleaved_type, values.data(), interleaved_bytes.data(), cols), Error);
}

TEST(InterleavedRows, KeepThePlainFormatsValuesAndProducts) {
  expect_interleaving_keeps_values<BlockQ4_0>(GgmlType::Q4_0, GgmlType::CPULLM_Q4_0_R8);
  expect_interleaving_keeps_values<BlockQ8_0>(GgmlType::Q8_0, GgmlType::CPULLM_Q8_0_R8);
}

TEST(WeightRows, ConvertExactly) {
  std::mt19937 rng(5);
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    Matrix m = random_matrix(type, 4, 9, rng);
    std::vector<float> row(9);
    weight_row_to_float(row.data(), m.view, 2);
    for (int c = 0; c < 9; ++c) EXPECT_EQ(row[c], static_cast<float>(m.exact[2 * 9 + c]));
  }
}

TEST(Half, Bf16RoundsToNearestEvenAndKeepsNan) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between two BF16 values: ties go to the even one (1.0).
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1.0p-8f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1.8p-8f), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::nanf("")))));
  EXPECT_EQ(fp16_to_fp32(fp32_to_fp16(0.333251953125f)), 0.333251953125f);  // representable
  EXPECT_EQ(fp16_to_fp32(0x7c00), INFINITY);
}

TEST(Ops, RmsnormMatchesFormula) {
  std::vector<float> x = {1, -2, 3, 0.5f}, w = {1, 2, 0.5f, -1}, out(4);
  rmsnorm(out.data(), x.data(), w.data(), 4, 1e-5f);
  const double rms = std::sqrt((1 + 4 + 9 + 0.25) / 4.0 + 1e-5);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], x[i] / rms * w[i], 1e-6);
}

// Every 2^-12 step over the whole range, against std::exp in double: within 2 units in the last
// place of the exact value; past the ends 0 (so -inf, a masked score, gives 0) and e^88.
TEST(Ops, ExpVectorisableIsWithinTwoUlp) {
  double worst_ulps = 0;
  for (double x = -87.0; x <= 88.0; x += 0x1.0p-12) {
    const double exact = std::exp(x);
    const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(exact)) - 23);
    worst_ulps = std::max(worst_ulps, std::abs(exp_vectorisable(static_cast<float>(x)) - exact) / ulp);
  }
  EXPECT_LE(worst_ulps, 2.0);
  EXPECT_EQ(exp_vectorisable(-87.5f), 0.0f);
  EXPECT_EQ(exp_vectorisable(-INFINITY), 0.0f);
  EXPECT_EQ(exp_vectorisable(0.0f), 1.0f);
  EXPECT_EQ(exp_vectorisable(100.0f), exp_vectorisable(88.0f));
  EXPECT_TRUE(std::isfinite(exp_vectorisable(INFINITY)));
}

// The vector maximum against std::max_element: every length up to past three vectors, the
// maximum in each place (vector lanes and the scalar tail), all values negative.
TEST(Ops, MaxValueFindsTheMaximumAnywhere) {
  EXPECT_EQ(max_value(nullptr, 0), -INFINITY);
  for (int64_t n = 1; n <= 27; ++n)
    for (int64_t at = 0; at < n; ++at) {
      std::vector<float> x(n);
      for (int64_t i = 0; i < n; ++i) x[i] = -100.0f - static_cast<float>((i * 7) % 11);
      x[at] = -3.5f;
      EXPECT_EQ(max_value(x.data(), n), -3.5f) << n << " values, maximum at " << at;
    }
  const std::vector<float> masked = {-INFINITY, -INFINITY, -2.0f};
  EXPECT_EQ(max_value(masked.data(), 3), -2.0f);
}

// RoPE against its definition in double, in both pairings, with frequencies that are not one
// theta's powers (each pair divided by its own factor, as Llama 3's are): pair i of a head is
// (x[2i], x[2i+1]) (adjacent: llama) or (x[i], x[i + head_dim/2]) (halves: NEOX, qwen2), turned
// by pos * frequencies[i]. The angles' cos and sin are rounded to FP32 and the turn is computed
// in FP32: within 1e-6 of the double result for values below 1.
TEST(Ops, RopeTurnsEachStylesPairsByTheirFrequencies) {
  const int64_t heads = 3, head_dim = 8, pos = 37;
  const std::vector<double> frequencies = {1.0, 0.1 / 2.7, 1e-3 / 8, 2e-5};
  for (RopeStyle style : {RopeStyle::adjacent, RopeStyle::halves}) {
    std::vector<float> v(heads * head_dim);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.07f * static_cast<float>(i) - 0.6f;
    std::vector<float> rotated = v, angles(head_dim);
    rope_angles(angles.data(), frequencies.data(), head_dim, pos);
    rope(rotated.data(), heads, head_dim, angles.data(), style);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < head_dim / 2; ++i) {
        const int64_t a = h * head_dim + (style == RopeStyle::adjacent ? 2 * i : i);
        const int64_t b = style == RopeStyle::adjacent ? a + 1 : a + head_dim / 2;
        const double angle = pos * frequencies[i], x0 = v[a], x1 = v[b];
        EXPECT_NEAR(rotated[a], x0 * std::cos(angle) - x1 * std::sin(angle), 1e-6) << "pair " << i << " of head " << h;
        EXPECT_NEAR(rotated[b], x0 * std::sin(angle) + x1 * std::cos(angle), 1e-6) << "pair " << i << " of head " << h;
      }
    std::vector<float> at_zero = v;
    rope_angles(angles.data(), frequencies.data(), head_dim, 0);
    rope(at_zero.data(), heads, head_dim, angles.data(), style);
    EXPECT_EQ(at_zero, v);
  }
}

TEST(Ops, SwigluIsSiluTimesUp) {
  std::vector<float> gate = {-2, 0, 3}, up = {1, 5, -2};
  swiglu(gate.data(), up.data(), 3);
  EXPECT_NEAR(gate[0], -2 / (1 + std::exp(2.0)) * 1, 1e-6);
  EXPECT_EQ(gate[1], 0.0f);
  EXPECT_NEAR(gate[2], 3 / (1 + std::exp(-3.0)) * -2, 1e-5);
}

// Decode attention against a double-precision loop over the cache's widened values: head sizes
// on and off the kernel's 32-float columns, positions past its 64-row tiles and at depth (3000),
// every cache type (Q8_0 with heads of whole 32-value blocks, the only ones it takes),
// sliding windows shorter than the positions (the query sees only the last `window`), on the
// row kernels of every ISA level this CPU runs, with 4 query heads a KV head, 7 (the kernels'
// passes of 4, 2 and 1 heads) and 1; and the same output, bit for bit, at 1, 2, 3 and 5 threads.
TEST(Attention, GroupedQueryMatchesNaiveDouble) {
  struct Config {
    int64_t head_dim, positions;
    GgmlType kv_type;
    int64_t window = 0;
  };
  for (const Config config : {Config{4, 11, GgmlType::F32}, Config{48, 100, GgmlType::F16}, Config{128, 70, GgmlType::BF16},
                              Config{4, 11, GgmlType::F32, 5}, Config{48, 150, GgmlType::F16, 70},
                              Config{64, 40, GgmlType::F32, 40}, Config{12, 77, GgmlType::F16}, Config{20, 70, GgmlType::BF16},
                              Config{64, 3000, GgmlType::F16}, Config{128, 2100, GgmlType::F32, 1500},
                              Config{32, 70, GgmlType::Q8_0}, Config{64, 150, GgmlType::Q8_0, 70},
                              Config{128, 3000, GgmlType::Q8_0}, Config{96, 77, GgmlType::Q8_0}}) {
    for (const auto& [heads, kv_heads] : {std::pair<int64_t, int64_t>{8, 2}, {7, 1}, {2, 2}}) {
      const AttentionShape shape{heads, kv_heads, config.head_dim, config.window};
      const int64_t positions = config.positions, kv_dim = shape.n_kv_heads * shape.head_dim;
      std::mt19937 rng(9);
      std::uniform_real_distribution<float> dist(-1, 1);
      std::vector<float> q(shape.n_heads * shape.head_dim), keys(positions * kv_dim), values(positions * kv_dim);
      for (auto* v : {&q, &keys, &values})
        for (float& x : *v) x = dist(rng);
      const int64_t row_size = row_bytes(config.kv_type, kv_dim);
      std::vector<std::byte> key_cache(positions * row_size), value_cache(positions * row_size);
      for (int64_t t = 0; t < positions; ++t)  // the cache's values, and the widened ones the reference reads
        for (auto [v, cache] : {std::pair{&keys, &key_cache}, std::pair{&values, &value_cache}}) {
          encode_row(config.kv_type, &(*v)[t * kv_dim], &(*cache)[t * row_size], kv_dim);
          decode_row(config.kv_type, &(*cache)[t * row_size], &(*v)[t * kv_dim], kv_dim);
        }
      for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
        if (!cpu_supports(isa)) continue;
        std::vector<float> out(q.size());
        attention(out.data(), q.data(), key_cache.data(), value_cache.data(), config.kv_type, positions, shape, isa);
        const int threads = omp_get_max_threads();
        for (int t : {1, 2, 3, 5}) {
          omp_set_num_threads(t);
          std::vector<float> again(q.size());
          attention(again.data(), q.data(), key_cache.data(), value_cache.data(), config.kv_type, positions, shape, isa);
          EXPECT_EQ(again, out) << t << " threads, head_dim " << config.head_dim << ", window " << config.window << ", "
                                << isa_name(isa) << ", " << heads << " heads";
        }
        omp_set_num_threads(threads);

        for (int64_t h = 0; h < shape.n_heads; ++h) {
          const int64_t kv = h / (shape.n_heads / shape.n_kv_heads);  // with 8 over 2: heads 0-3 read kv 0, 4-7 kv 1
          std::vector<double> p(positions);
          double total = 0;
          const int64_t first = config.window > 0 ? std::max<int64_t>(0, positions - config.window) : 0;
          for (int64_t t = first; t < positions; ++t) {
            double dot = 0;
            for (int64_t i = 0; i < shape.head_dim; ++i)
              dot += q[h * shape.head_dim + i] * keys[t * kv_dim + kv * shape.head_dim + i];
            p[t] = std::exp(dot / std::sqrt(static_cast<double>(shape.head_dim)));
            total += p[t];
          }
          for (int64_t i = 0; i < shape.head_dim; ++i) {
            double expected = 0;
            for (int64_t t = first; t < positions; ++t) expected += p[t] / total * values[t * kv_dim + kv * shape.head_dim + i];
            EXPECT_NEAR(out[h * shape.head_dim + i], expected, 1e-5) << "head " << h << ", head_dim " << config.head_dim << ", "
                                                                     << ggml_type_name(config.kv_type) << ", window "
                                                                     << config.window << ", " << isa_name(isa) << ", "
                                                                     << heads << " heads";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace cpullm
