// TensorParallel's collectives, run under `mpirun -np N` by tests/python/test_mpi.py (alone it
// is one rank, where the gather has nothing to do). Every rank fills only its share of the
// columns with values that name (token, column); after the gather every rank must hold all.
#include <gtest/gtest.h>

#include <memory>

#include "engine/runtime/tensor_parallel.hpp"

namespace cpullm {
namespace {

// MPI starts once per process and finalises at exit.
const TensorParallel& parallel() {
  static const auto instance = std::make_unique<TensorParallel>();
  return *instance;
}

float value_at(int64_t token, int64_t column) { return static_cast<float>(token * 1000 + column); }

TEST(TensorParallel, RowSharesAreConsecutiveInRankOrder) {
  const TensorParallel& tp = parallel();
  const RowSpan mine = tp.rows(1001);
  EXPECT_EQ(mine.begin, equal_share(1001, tp.rank(), tp.size()).begin);
  EXPECT_LE(mine.end - mine.begin, 1001 / tp.size() + 1);
}

TEST(TensorParallel, AllGatherRowsGivesEveryRankEveryColumn) {
  const TensorParallel& tp = parallel();
  // Decode (one token), a prefill chunk with a stride wider than the rows (a KV cache row), and
  // fewer rows than ranks (some ranks own none), rows in strips of 4 (sparse BLOCK4X4).
  struct Case { int64_t rows, tokens, stride, group; };
  for (const Case& c : {Case{288, 1, 288, 1}, Case{97, 5, 130, 1}, Case{2, 3, 2, 1}, Case{40, 2, 40, 4}}) {
    SCOPED_TRACE(::testing::Message() << c.rows << " rows, " << c.tokens << " tokens, stride " << c.stride
                                      << ", groups of " << c.group);
    std::vector<float> y(static_cast<std::size_t>(c.tokens * c.stride), -1.0f);
    const RowSpan mine = tp.rows(c.rows, c.group);
    EXPECT_EQ(mine.begin % c.group, 0);
    for (int64_t t = 0; t < c.tokens; ++t)
      for (int64_t r = mine.begin; r < mine.end; ++r) y[t * c.stride + r] = value_at(t, r);
    tp.all_gather_rows(y.data(), c.stride, c.rows, c.tokens, c.group);
    for (int64_t t = 0; t < c.tokens; ++t) {
      for (int64_t r = 0; r < c.rows; ++r) ASSERT_EQ(y[t * c.stride + r], value_at(t, r)) << "token " << t << " row " << r;
      for (int64_t r = c.rows; r < c.stride; ++r) ASSERT_EQ(y[t * c.stride + r], -1.0f) << "past the rows: untouched";
    }
  }
}

TEST(TensorParallel, AllGatherValueIsInRankOrder) {
  const TensorParallel& tp = parallel();
  const std::vector<double> values = tp.all_gather_value(10.0 * tp.rank());
  ASSERT_EQ(static_cast<int>(values.size()), tp.size());
  for (int r = 0; r < tp.size(); ++r) EXPECT_EQ(values[static_cast<std::size_t>(r)], 10.0 * r);
}

}  // namespace
}  // namespace cpullm
