// Applying NUMA placement on this machine: buffers bound to node 0 (the one node every Linux
// machine has) and the kernel's account of where their pages are; weight copies per strategy,
// with two "nodes" that are both OS node 0 so replicate's per-node copies and shard's per-thread
// binding run here; the row splits shared with tensor parallelism.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <random>

#include "engine/kernels/matmul.hpp"
#include "engine/kernels/matvec.hpp"
#include "engine/kernels/parallel.hpp"
#include "engine/runtime/numa_memory.hpp"
#include "engine/runtime/row_split.hpp"
#include "engine/runtime/weight_placement.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

uint64_t bytes_on(const std::map<int, uint64_t>& per_node, int node) {
  const auto it = per_node.find(node);
  return it == per_node.end() ? 0 : it->second;
}

TEST(NumaMemory, PagesAppearOnTheBoundNodeAtTheFirstWrite) {
  const std::size_t bytes = 1 << 20;
  NumaBuffer buffer(bytes);
  buffer.bind(0, bytes, 0);
  EXPECT_EQ(bytes_on(bytes_per_node(buffer.data(), bytes), -1), bytes) << "nothing is present before the first write";
  std::memset(buffer.data(), 1, bytes);
  const auto after = bytes_per_node(buffer.data(), bytes);
  EXPECT_EQ(bytes_on(after, 0), bytes);
  EXPECT_EQ(after.size(), 1u) << "every page on node 0";
}

TEST(NumaMemory, InterleaveOverNodeZeroPlacesEveryPageThere) {
  const std::size_t bytes = 300 * 1024 + 5;  // not a whole number of pages
  NumaBuffer buffer(bytes);
  buffer.interleave({0});
  std::memset(buffer.data(), 1, bytes);
  const auto per_node = bytes_per_node(buffer.data(), bytes);
  EXPECT_GE(bytes_on(per_node, 0), bytes);
  EXPECT_EQ(per_node.size(), 1u);
}

TEST(NumaMemory, RefusesNodesThatDoNotExist) {
  NumaBuffer buffer(1 << 16);
  const int missing = memory_nodes().back() + 1;
  try {
    buffer.bind(0, buffer.size(), missing);
    FAIL() << "binding to node " << missing << " succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(missing)), std::string::npos) << e.what();
  }
  EXPECT_THROW(buffer.bind(0, buffer.size(), -1), Error);
  EXPECT_THROW(buffer.bind(0, buffer.size() + 1, 0), Error);
}

TEST(NumaMemory, ThisMachineHasNodeZero) {
  const std::vector<int> nodes = memory_nodes();
  ASSERT_FALSE(nodes.empty());
  EXPECT_EQ(nodes.front(), 0);
}

TEST(RowSplit, EqualSharesMatchTheProportionalSplitAndCoverEveryRow) {
  for (int64_t rows : {0, 1, 7, 64, 1001})
    for (int parts : {1, 2, 3, 5}) {
      const std::vector<int64_t> sizes = split_proportionally(rows, std::vector<int64_t>(parts, 1));
      int64_t next = 0;
      for (int p = 0; p < parts; ++p) {
        const RowSpan span = equal_share(rows, p, parts);
        EXPECT_EQ(span.begin, next) << rows << " rows, part " << p << " of " << parts;
        EXPECT_EQ(span.end - span.begin, sizes[static_cast<std::size_t>(p)]);
        next = span.end;
      }
      EXPECT_EQ(next, rows);
    }
}

TEST(RowSplit, GroupedRowsAreNeverCut) {
  // 40 rows in strips of 4 over 3 parts: 10 strips as 4, 3, 3.
  const RowSpan spans[] = {equal_share(40, 0, 3, 4), equal_share(40, 1, 3, 4), equal_share(40, 2, 3, 4)};
  EXPECT_EQ(spans[0].begin, 0);
  EXPECT_EQ(spans[0].end, 16);
  EXPECT_EQ(spans[1].end, 28);
  EXPECT_EQ(spans[2].end, 40);
}

TEST(RowSplit, RowSliceViewsTheRowsInPlace) {
  std::vector<float> data(10 * 4);
  const WeightMatrix w{reinterpret_cast<const std::byte*>(data.data()), GgmlType::F32, 10, 4};
  const WeightMatrix slice = row_slice(w, {3, 7});
  EXPECT_EQ(slice.data, reinterpret_cast<const std::byte*>(data.data() + 12));
  EXPECT_EQ(slice.rows, 4);
  EXPECT_EQ(slice.cols, 4);
}

// A random F32 matrix and an input, the projection's reference output computed in place.
struct Projection {
  int64_t rows = 37, cols = 64, tokens = 3;
  std::vector<float> weights, x, expected;
  WeightMatrix w;
  Projection() : weights(rows * cols), x(tokens * cols), expected(tokens * rows) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(-1, 1);
    for (float& v : weights) v = uniform(rng);
    for (float& v : x) v = uniform(rng);
    w = {reinterpret_cast<const std::byte*>(weights.data()), GgmlType::F32, rows, cols};
    matmul_reference(expected.data(), rows, w, x.data(), cols, tokens);
  }
};

// Two nodes that are both OS node 0, one thread on each: every strategy's mechanics, here.
WeightPlacement two_nodes_on_node_zero(NumaStrategy strategy) { return WeightPlacement(strategy, {0, 0}, {0, 1}); }

TEST(WeightPlacement, FirstTouchReadsTheFileMappingItself) {
  Projection p;
  WeightPlacement placement = two_nodes_on_node_zero(NumaStrategy::first_touch);
  placement.place(p.w);
  EXPECT_EQ(placement.copy_for_node(p.w, 1).data, p.w.data);
  EXPECT_EQ(placement.copied_bytes(), 0u);
}

TEST(WeightPlacement, CopiesPerStrategyHoldTheWeightsOnTheirNode) {
  Projection p;
  const uint64_t bytes = p.weights.size() * sizeof(float);
  for (NumaStrategy strategy : {NumaStrategy::interleave, NumaStrategy::replicate, NumaStrategy::shard}) {
    SCOPED_TRACE(std::string(numa_strategy_name(strategy)));
    WeightPlacement placement = two_nodes_on_node_zero(strategy);
    placement.place(p.w);
    placement.place(p.w);  // a tied output: placed once
    const int copies = strategy == NumaStrategy::replicate ? 2 : 1;
    EXPECT_EQ(placement.copied_bytes(), copies * bytes);
    for (int node : {0, 1}) {
      const WeightMatrix& copy = placement.copy_for_node(p.w, node);
      EXPECT_NE(copy.data, p.w.data);
      EXPECT_EQ(std::memcmp(copy.data, p.w.data, bytes), 0);
    }
    EXPECT_EQ(placement.copy_for_node(p.w, 0).data != placement.copy_for_node(p.w, 1).data, copies == 2);
    const auto resident = placement.resident_bytes_per_node();
    EXPECT_GE(bytes_on(resident, 0), copies * bytes) << "the copies' pages, as move_pages reports them";
    EXPECT_EQ(bytes_on(resident, -1), 0u);
  }
}

// In its own OpenMP region, and inside a forward pass's thread team (parallel.hpp), whose
// threads are the same OpenMP threads.
TEST(WeightPlacement, EachThreadReadsItsRowsFromItsNodesCopy) {
  Projection p;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  for (bool in_team : {false, true})
    for (NumaStrategy strategy : {NumaStrategy::replicate, NumaStrategy::shard}) {
      SCOPED_TRACE(std::string(numa_strategy_name(strategy)) + (in_team ? " in a team" : ""));
      WeightPlacement placement = two_nodes_on_node_zero(strategy);
      placement.place(p.w);
      ASSERT_TRUE(placement.per_thread_rows());
      std::vector<float> y(p.tokens * p.rows, 0.0f);
      std::vector<const std::byte*> read_from(2);
      const auto project = [&] {
        for_each_thread_rows(placement, p.w, [&](const WeightMatrix& rows, int64_t first_row) {
          read_from[static_cast<std::size_t>(omp_get_thread_num())] = rows.data;
          matmul(y.data() + first_row, p.rows, rows, p.x.data(), p.cols, p.tokens, best_isa(), sysconf_cache_sizes());
        });
      };
      if (in_team) run_as_team(project);
      else project();
      for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], p.expected[i], 1e-5) << "output " << i;
      // Thread 1's rows start at row 19 (37 rows over 2 threads) of node 1's copy.
      EXPECT_EQ(read_from[0], placement.copy_for_node(p.w, 0).data);
      EXPECT_EQ(read_from[1], placement.copy_for_node(p.w, 1).data + 19 * p.cols * sizeof(float));
    }
  omp_set_num_threads(threads);
}

TEST(WeightPlacement, ReplicateAndShardNeedBoundThreads) {
  EXPECT_THROW(WeightPlacement(NumaStrategy::shard, {0}, {}), Error);
  EXPECT_THROW(WeightPlacement(NumaStrategy::replicate, {0}, {}), Error);
  EXPECT_THROW(WeightPlacement(NumaStrategy::shard, {0}, {0, 1}), Error) << "thread on a node that is not listed";
  EXPECT_NO_THROW(WeightPlacement(NumaStrategy::interleave, {0}, {}));
}

}  // namespace
}  // namespace cpullm
