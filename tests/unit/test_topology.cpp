// Topology, thread plans, NUMA placement and hardware profiles, on emulated (hwloc synthetic)
// 1-, 2- and 4-node machines: the plans are data, so a 2-core VM can check a 4-socket server's.
#include <gtest/gtest.h>

#include <fstream>
#include <numeric>

#include "engine/format/gguf.hpp"
#include "engine/runtime/bind_threads.hpp"
#include "engine/runtime/hardware_profile.hpp"
#include "engine/runtime/placement.hpp"
#include "engine/util/error.hpp"
#include "test_support.hpp"

namespace cpullm {
namespace {

// The reference server: 4 packages x 10 cores, one node each (../shared/reference/hardware.md).
const char* kE5 = "pack:4 [numa(memory=64GiB)] l3:1(size=25MiB) l2:10(size=256KiB) l1d:1(size=32KiB) core:1 pu:1";
// Two nodes of 4 cores: CPUs 0-3 and 4-7.
const char* kTwoNodes = "pack:2 [numa(memory=1GiB)] core:4 pu:1";
// One node, 2 cores with 2 hardware threads each: CPUs 0,1 on core 0 and 2,3 on core 1.
const char* kOneNodeSmt = "pack:1 [numa(memory=1GiB)] core:2 pu:2";

ThreadPlan plan(const Topology& t, int threads, BindPolicy policy, std::vector<int> cpuset = {}, int housekeeping = 0) {
  return plan_threads(t, {threads, policy, std::move(cpuset), housekeeping});
}

std::vector<int> pus_of(const ThreadPlan& p) {
  std::vector<int> pus;
  for (const ThreadSlot& s : p.threads) pus.push_back(s.pu);
  return pus;
}

// Expects `fn` to throw an Error whose message holds `fragment`.
template <typename Fn>
void expect_error(Fn fn, const std::string& fragment) {
  try {
    fn();
    FAIL() << "no error; expected one with \"" << fragment << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Topology, SyntheticFourSocketServer) {
  const Topology t = synthetic_topology(kE5);
  EXPECT_FALSE(t.is_this_system);
  EXPECT_EQ(t.package_count, 4);
  ASSERT_EQ(t.nodes.size(), 4u);
  ASSERT_EQ(t.cores.size(), 40u);
  for (std::size_t n = 0; n < 4; ++n) {
    EXPECT_EQ(t.nodes[n].memory_bytes, 64ull << 30);
    EXPECT_EQ(t.nodes[n].package, static_cast<int>(n));
  }
  EXPECT_EQ(t.cores[13].package, 1);
  EXPECT_EQ(t.cores[13].node, 1);
  EXPECT_EQ(t.cores[13].pus, std::vector<int>{13});
  ASSERT_EQ(t.caches.size(), 3u);
  EXPECT_EQ(t.caches[0].name, "L1d");
  EXPECT_EQ(t.caches[0].size_bytes, 32u << 10);
  EXPECT_EQ(t.caches[2].name, "L3");
  EXPECT_EQ(t.caches[2].count, 4);
  EXPECT_EQ(t.caches[2].cores_sharing, 10);
  EXPECT_TRUE(t.isolated_cpus.empty());
}

TEST(Topology, DetectsThisMachine) {
  const Topology t = detect_topology();
  EXPECT_TRUE(t.is_this_system);
  EXPECT_GE(t.cores.size(), 1u);
  EXPECT_GE(t.nodes.size(), 1u);
}

TEST(Topology, BadSyntheticOrXmlIsAnError) {
  expect_error([] { synthetic_topology("pack:four core:1"); }, "invalid synthetic topology");
  test::TempDir dir;
  std::ofstream(dir.file("bad.xml")) << "<topology>not really";
  expect_error([&] { xml_topology(dir.file("bad.xml")); }, dir.file("bad.xml"));
}

TEST(Topology, CpuLists) {
  EXPECT_EQ(parse_cpu_list("2-5,9,4"), (std::vector<int>{2, 3, 4, 5, 9}));
  EXPECT_EQ(parse_cpu_list("0\n"), std::vector<int>{0});
  EXPECT_EQ(format_cpu_list({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(format_cpu_list({}), "");
  for (const char* bad : {"", "a", "5-3", "1,,2", "-1", "3-", "0-99999999"})
    EXPECT_THROW(parse_cpu_list(bad), Error) << bad;
}

TEST(ThreadPlan, CompactFillsCoresInOrder) {
  const ThreadPlan p = plan(synthetic_topology(kE5), 12, BindPolicy::compact);
  EXPECT_EQ(pus_of(p), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(p.threads[9].node, 0);
  EXPECT_EQ(p.threads[10].node, 1);
}

TEST(ThreadPlan, ScatterRoundRobinOverPackages) {
  const Topology t = synthetic_topology(kE5);
  const ThreadPlan p = plan(t, 6, BindPolicy::scatter);
  EXPECT_EQ(pus_of(p), (std::vector<int>{0, 10, 20, 30, 1, 11}));
  EXPECT_EQ(threads_per_node(t, p), (std::vector<int>{2, 2, 1, 1}));
  EXPECT_TRUE(p.notes.empty());
}

TEST(ThreadPlan, NumaKeepsEachNodesThreadsTogether) {
  const Topology t = synthetic_topology(kE5);
  const ThreadPlan p = plan(t, 6, BindPolicy::numa);
  EXPECT_EQ(pus_of(p), (std::vector<int>{0, 1, 10, 11, 20, 30}));
  EXPECT_EQ(threads_per_node(t, p), (std::vector<int>{2, 2, 1, 1}));
  const ThreadPlan all = plan(t, 0, BindPolicy::numa);  // 0: one per usable core
  EXPECT_EQ(all.threads.size(), 40u);
  EXPECT_EQ(threads_per_node(t, all), (std::vector<int>{10, 10, 10, 10}));
}

TEST(ThreadPlan, SpreadingOverOneGroupIsCompactAndSaysSo) {
  const Topology t = synthetic_topology(kOneNodeSmt);
  const ThreadPlan scatter = plan(t, 2, BindPolicy::scatter);
  EXPECT_EQ(scatter.policy, BindPolicy::compact);
  ASSERT_EQ(scatter.notes.size(), 1u);
  EXPECT_EQ(scatter.notes[0], "scatter over 1 package is compact");
  const ThreadPlan numa = plan(t, 2, BindPolicy::numa);
  EXPECT_EQ(numa.policy, BindPolicy::compact);
  EXPECT_EQ(numa.notes.at(0), "numa binding over 1 NUMA node is compact");
}

TEST(ThreadPlan, OneThreadPerCoreOnItsFirstAllowedPu) {
  const Topology t = synthetic_topology(kOneNodeSmt);
  EXPECT_EQ(plan(t, 0, BindPolicy::compact).usable_pus, (std::vector<int>{0, 2}));
  EXPECT_EQ(pus_of(plan(t, 0, BindPolicy::compact, {1, 3})), (std::vector<int>{1, 3}));
}

TEST(ThreadPlan, CpusetAndHousekeeping) {
  const Topology t = synthetic_topology(kTwoNodes);
  // CPU 0 is outside the set; housekeeping then takes the lowest usable core per node: 1 and 4.
  const ThreadPlan p = plan(t, 0, BindPolicy::compact, parse_cpu_list("1-7"), 1);
  EXPECT_EQ(p.usable_pus, (std::vector<int>{2, 3, 5, 6, 7}));
  EXPECT_EQ(pus_of(p), (std::vector<int>{2, 3, 5, 6, 7}));
  EXPECT_EQ(threads_per_node(t, p), (std::vector<int>{2, 3}));
}

TEST(ThreadPlan, ImpossibleRequestsAreErrors) {
  const Topology t = synthetic_topology(kTwoNodes);
  expect_error([&] { plan(t, 2, BindPolicy::compact, {3, 8}); }, "CPU 8 does not exist on this topology (CPUs 0-7)");
  expect_error([&] { plan(t, 0, BindPolicy::numa, {}, 4); }, "no usable core");
  expect_error([&] { plan(t, 0, BindPolicy::compact, {0, 4}, 1); }, "no usable core");
  expect_error([&] { plan(t, 9, BindPolicy::scatter); }, "9 threads but 8 usable core(s)");
  expect_error([&] { plan(t, 3, BindPolicy::none, {0, 1}); }, "3 threads but 2 usable core(s)");
  expect_error([] { parse_bind_policy("spread"); }, "unknown binding policy");
}

TEST(ThreadPlan, NoneLeavesThreadsUnbound) {
  const ThreadPlan p = plan(synthetic_topology(kTwoNodes), 3, BindPolicy::none, {4, 5, 6});
  ASSERT_EQ(p.threads.size(), 3u);
  for (const ThreadSlot& s : p.threads) EXPECT_EQ(s.pu, -1);
  EXPECT_EQ(p.notes.at(0), "threads are not bound: the OS places them on CPUs 4-6");
}

// Two matrices (row counts that do not divide evenly) and a norm vector.
const std::vector<TensorSize> kTensors{{"wq", 4096, 4096 * 100}, {"norm", 1, 16}, {"w_down", 11008, 11008 * 10}};
const uint64_t kTotal = 4096 * 100 + 16 + 11008 * 10;

uint64_t sum(const std::vector<uint64_t>& v) { return std::accumulate(v.begin(), v.end(), uint64_t{0}); }

TEST(Placement, ShardSplitsRowsByThreadsPerNode) {
  const Topology t = synthetic_topology(kTwoNodes);
  const ThreadPlan threads = plan(t, 3, BindPolicy::numa);  // 2 threads on node 0, 1 on node 1
  const PlacementPlan p = plan_placement(t, threads, NumaStrategy::shard, kTensors);
  EXPECT_EQ(p.strategy, NumaStrategy::shard);
  ASSERT_EQ(p.shards.size(), 3u);
  // 4096 x 2/3 = 2730.67: the leftover row goes to the larger remainder.
  EXPECT_EQ(p.shards[0].ranges.size(), 2u);
  EXPECT_EQ(p.shards[0].ranges[0].node, 0);
  EXPECT_EQ(p.shards[0].ranges[0].end, 2731);
  EXPECT_EQ(p.shards[0].ranges[1].begin, 2731);
  EXPECT_EQ(p.shards[0].ranges[1].end, 4096);
  ASSERT_EQ(p.shards[1].ranges.size(), 1u);  // the vector sits whole on one node
  EXPECT_EQ(p.shards[1].ranges[0].node, 0);
  EXPECT_EQ(p.shards[2].ranges[0].end, 7339);  // 11008 x 2/3 = 7338.67
  EXPECT_EQ(p.bytes_per_node[0], 2731u * 100 + 16 + 7339u * 10);
  EXPECT_EQ(p.bytes_per_node[1], 1365u * 100 + 3669u * 10);
  EXPECT_EQ(sum(p.bytes_per_node), kTotal);
  EXPECT_EQ(p.weight_bytes, kTotal);
}

TEST(Placement, ShardOnFourNodesCoversEveryRowOnce) {
  const Topology t = synthetic_topology(kE5);
  const ThreadPlan threads = plan(t, 40, BindPolicy::numa);
  const PlacementPlan p = plan_placement(t, threads, NumaStrategy::shard, kTensors);
  for (std::size_t i = 0; i < kTensors.size(); ++i) {
    int64_t next = 0;
    for (const RowRange& r : p.shards[i].ranges) {
      EXPECT_EQ(r.begin, next) << kTensors[i].name;
      EXPECT_GT(r.end, r.begin);
      next = r.end;
    }
    EXPECT_EQ(next, kTensors[i].rows) << kTensors[i].name;
  }
  EXPECT_EQ(p.shards[0].ranges[2].begin, 2048);  // 4096 rows, 10 threads per node: 1024 each
  EXPECT_EQ(p.bytes_per_node[3], 1024u * 100 + 2752u * 10);
  EXPECT_EQ(sum(p.bytes_per_node), kTotal);
}

TEST(Placement, ShardWithScatterSaysTheRowsAndThreadsDoNotLineUp) {
  const Topology t = synthetic_topology(kE5);
  const PlacementPlan p = plan_placement(t, plan(t, 40, BindPolicy::scatter), NumaStrategy::shard, kTensors);
  EXPECT_EQ(p.bytes_per_node[3], 1024u * 100 + 2752u * 10);
  EXPECT_NE(p.notes.back().find("--bind numa keeps them together"), std::string::npos);
}

TEST(Placement, ShardNeedsBoundThreads) {
  const Topology t = synthetic_topology(kTwoNodes);
  expect_error([&] { plan_placement(t, plan(t, 4, BindPolicy::none), NumaStrategy::shard, kTensors); },
               "needs bound threads");
}

TEST(Placement, ReplicateCopiesToEveryNode) {
  const Topology t = synthetic_topology(kE5);
  const PlacementPlan p = plan_placement(t, plan(t, 8, BindPolicy::numa), NumaStrategy::replicate, kTensors);
  EXPECT_EQ(p.bytes_per_node, std::vector<uint64_t>(4, kTotal));
  EXPECT_NE(p.notes.at(0).find("4 x the weight memory"), std::string::npos);
  EXPECT_NE(p.notes.at(0).find("mmap sharing is lost"), std::string::npos);
}

TEST(Placement, InterleaveSpreadsEvenly) {
  const Topology t = synthetic_topology(kE5);
  const PlacementPlan p = plan_placement(t, plan(t, 0, BindPolicy::none), NumaStrategy::interleave, kTensors);
  EXPECT_EQ(sum(p.bytes_per_node), kTotal);
  for (uint64_t bytes : p.bytes_per_node) EXPECT_TRUE(bytes == kTotal / 4 || bytes == kTotal / 4 + 1) << bytes;
}

TEST(Placement, FirstTouchFollowsTheStaticRowSplit) {
  const Topology t = synthetic_topology(kTwoNodes);
  // Compact, 3 threads: all on node 0, so every page is first touched there.
  const PlacementPlan compact = plan_placement(t, plan(t, 3, BindPolicy::compact), NumaStrategy::first_touch, kTensors);
  EXPECT_EQ(compact.bytes_per_node, (std::vector<uint64_t>{kTotal, 0}));
  // Scatter, 3 threads on nodes 0, 1, 0: thread 1's static share (the middle third) lands on node 1.
  const PlacementPlan scatter = plan_placement(t, plan(t, 3, BindPolicy::scatter), NumaStrategy::first_touch, kTensors);
  EXPECT_EQ(scatter.bytes_per_node[1], 1365u * 100 + 3669u * 10);
  EXPECT_EQ(sum(scatter.bytes_per_node), kTotal);
  // Unbound threads: which node is up to the OS.
  const PlacementPlan unbound = plan_placement(t, plan(t, 3, BindPolicy::none), NumaStrategy::first_touch, kTensors);
  EXPECT_EQ(unbound.unplaced_bytes, kTotal);
  EXPECT_EQ(sum(unbound.bytes_per_node), 0u);
}

TEST(Placement, OneNodeReducesEveryStrategyToFirstTouch) {
  const Topology t = synthetic_topology(kOneNodeSmt);
  for (NumaStrategy s : {NumaStrategy::first_touch, NumaStrategy::interleave, NumaStrategy::replicate, NumaStrategy::shard}) {
    const PlacementPlan p = plan_placement(t, plan(t, 2, BindPolicy::none), s, kTensors);
    EXPECT_EQ(p.strategy, NumaStrategy::first_touch);
    EXPECT_EQ(p.bytes_per_node, std::vector<uint64_t>{kTotal});
    if (s != NumaStrategy::first_touch) {
      EXPECT_EQ(p.notes.at(0), "one NUMA node: " + std::string(numa_strategy_name(s)) + " is first-touch");
    }
  }
}

TEST(Placement, TensorSizesFromAShapeAndFromAFile) {
  const std::vector<TensorSize> llama7b = shape_tensor_sizes(*named_shape("llama-7b"), GgmlType::Q8_0);
  uint64_t bytes = 0;
  for (const TensorSize& t : llama7b) bytes += t.bytes;
  EXPECT_EQ(llama7b.size(), 2u + 32 * 9 + 1);
  EXPECT_GT(bytes, 7.0e9);  // hardware.md: "LLaMA-7B Q8_0 is about 7.2 GB"
  EXPECT_LT(bytes, 7.3e9);
  expect_error([] { shape_tensor_sizes({"odd", 1, 100, 200, 4, 4, 1000, 64}, GgmlType::Q8_0); }, "not whole");

  const auto path = test::shared_model("stories260K.gguf");
  if (!path) GTEST_SKIP() << "stories260K.gguf not in the shared models";
  const GgufFile file(*path);
  const std::vector<TensorSize> sizes = gguf_tensor_sizes(*path);
  ASSERT_EQ(sizes.size(), file.tensors().size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(sizes[i].bytes, file.tensors()[i].bytes);
    EXPECT_EQ(sizes[i].bytes % static_cast<uint64_t>(sizes[i].rows), 0u) << sizes[i].name;
  }
}

std::string profile_path(const std::string& name) { return std::string(CPULLM_PROFILES_DIR) + "/" + name + ".json"; }

TEST(HardwareProfile, E5ProfileIsFourPackagesOfTenCores) {
  const HardwareProfile p = read_hardware_profile(profile_path("e5-4627v4"));
  EXPECT_EQ(p.name, "e5-4627v4");
  EXPECT_EQ(p.isa.value, "avx2");
  EXPECT_EQ(p.tdp_watts.value, 135.0);
  EXPECT_EQ(p.memory_bandwidth_gbs.value, 76.8);
  EXPECT_FALSE(p.price_usd.source.empty());
  const Topology t = profile_topology(p);
  EXPECT_FALSE(t.is_this_system);
  EXPECT_EQ(t.package_count, 4);
  EXPECT_EQ(t.cores.size(), 40u);
  for (int package = 0; package < 4; ++package)
    EXPECT_EQ(std::count_if(t.cores.begin(), t.cores.end(), [&](const Core& c) { return c.package == package; }), 10);
}

TEST(HardwareProfile, HostProfileDetects) {
  const HardwareProfile p = read_hardware_profile(profile_path("host"));
  EXPECT_EQ(p.topology.value, "detect");
  EXPECT_FALSE(p.tdp_watts.value.has_value());
  EXPECT_TRUE(profile_topology(p).is_this_system);
}

TEST(HardwareProfile, FoundByNameOrPath) {
  const std::vector<std::filesystem::path> dirs{"/nonexistent", CPULLM_PROFILES_DIR};
  EXPECT_EQ(find_hardware_profile("e5-4627v4", dirs), profile_path("e5-4627v4"));
  EXPECT_EQ(find_hardware_profile(profile_path("host"), dirs), profile_path("host"));
  expect_error([&] { find_hardware_profile("e5-2699v4", dirs); }, "unknown hardware profile \"e5-2699v4\"");
  expect_error([&] { find_hardware_profile("/nonexistent/x.json", dirs); }, "/nonexistent/x.json: no such");
}

TEST(HardwareProfile, MalformedProfilesNameTheFileAndField) {
  std::ifstream in(profile_path("e5-4627v4"));
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  test::TempDir dir;
  const auto broken = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    std::ofstream(dir.file("p.json")) << text;
    return dir.file("p.json");
  };
  const std::string p = dir.file("p.json");
  expect_error([&] { read_hardware_profile(broken("\"value\": 135", "\"value\": \"lots\"")); },
               p + ": field \"tdp_watts_per_package\": \"value\" must be a number");
  expect_error([&] { read_hardware_profile(broken("\"tdp_watts_per_package\"", "\"tdp\"")); },
               p + ": field \"tdp_watts_per_package\" is missing");
  expect_error([&] { read_hardware_profile(broken("\"source\": \"launch price", "\"from\": \"launch price")); },
               p + ": field \"price_usd_per_package\" has no \"source\"");
  expect_error([&] { read_hardware_profile(broken("\"value\": \"avx2\"", "\"value\": \"sse2\"")); },
               p + ": field \"isa\"");
  expect_error([&] { read_hardware_profile(broken("{", "[")); }, p + ": not valid JSON");
  expect_error([&] { profile_topology(read_hardware_profile(broken("pack:4", "pack:x"))); }, p + ": field \"topology\"");
}

TEST(BindThreads, PinsEachThreadWhereThePlanSays) {
  const Topology topology = detect_topology();
  ThreadRequest request;
  request.threads = 1;
  request.policy = BindPolicy::compact;
  request.cpuset = {all_pus(topology).back()};
  const ThreadPlan plan = plan_threads(topology, request);
  const auto granted = apply_thread_plan(topology, plan);
  ASSERT_EQ(granted.size(), 1u);
  EXPECT_EQ(granted[0], std::vector<int>{request.cpuset[0]});  // read back from the kernel
  // Leave the test process as it was: unbound over every CPU.
  ThreadRequest all;
  all.threads = 1;
  apply_thread_plan(topology, plan_threads(topology, all));
}

TEST(BindThreads, RefusesEmulatedTopologies) {
  const Topology emulated = synthetic_topology("pack:2 core:2 pu:1");
  ThreadRequest request;
  request.threads = 2;
  request.policy = BindPolicy::compact;
  EXPECT_THROW(apply_thread_plan(emulated, plan_threads(emulated, request)), Error);
}

}  // namespace
}  // namespace cpullm
