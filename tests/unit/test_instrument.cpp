// Regions (accumulation, off means nothing recorded), the analytic costs against hand-computed
// values for every weight type, the counters' available and unavailable paths, RAPL energy on a
// fake powercap tree (wraparound included) and the roofline arithmetic.
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/instrument/counters.hpp"
#include "engine/instrument/energy.hpp"
#include "engine/instrument/op_costs.hpp"
#include "engine/instrument/regions.hpp"
#include "engine/instrument/roofs.hpp"
#include "engine/kernels/parallel.hpp"
#include "engine/util/error.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

using Clock = std::chrono::steady_clock;

// Spins (rather than sleeps) so that CPU-time counters see the wait too.
void busy_wait(double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
  }
}

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Regions are global: each test starts from nothing recorded and leaves them off.
class Regions : public ::testing::Test {
 protected:
  void SetUp() override {
    attach_region_counters(nullptr);
    reset_regions();
  }
  void TearDown() override {
    enable_regions(false);
    attach_region_counters(nullptr);
  }
};

TEST_F(Regions, OffRecordsNothing) {
  enable_regions(false);
  { ScopedRegion region(Region::q_proj, {100, 200}); }
  const RegionProfile profile = region_snapshot();
  for (const RegionTotals& totals : profile.regions) EXPECT_EQ(totals.calls, 0);
}

TEST_F(Regions, AccumulateCallsTimeAndCosts) {
  enable_regions(true);
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) {
    ScopedRegion region(Region::attention, {10, 20});
    busy_wait(0.002);
  }
  { ScopedRegion region(Region::sampling, {1, 4}); }
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const RegionProfile profile = region_snapshot();
  EXPECT_EQ(profile[Region::attention].calls, 3);
  EXPECT_DOUBLE_EQ(profile[Region::attention].flops, 30);
  EXPECT_DOUBLE_EQ(profile[Region::attention].bytes, 60);
  EXPECT_GE(profile[Region::attention].seconds, 0.006);
  EXPECT_LE(profile[Region::attention].seconds + profile[Region::sampling].seconds, wall);
  EXPECT_EQ(profile[Region::sampling].calls, 1);
  EXPECT_EQ(profile[Region::q_proj].calls, 0);
  EXPECT_TRUE(profile.counter_names.empty());

  reset_regions();
  EXPECT_EQ(region_snapshot()[Region::attention].calls, 0);
  EXPECT_EQ(region_snapshot()[Region::attention].seconds, 0);
}

TEST_F(Regions, NamesFollowTheEnum) {
  EXPECT_EQ(region_name(Region::embedding), "embedding");
  EXPECT_EQ(region_name(Region::q_proj), "q_proj");
  EXPECT_EQ(region_name(Region::ffn_act), "ffn_act");
  EXPECT_EQ(region_name(Region::sampling), "sampling");
}

// A counter source whose values are known: every read adds `step` to each.
class SteppingCounters : public RegionCounterSource {
 public:
  explicit SteppingCounters(std::vector<std::string> names, double step) : names_(std::move(names)), step_(step) {}
  const std::vector<std::string>& names() const override { return names_; }
  void read(double* values) override {
    now_ += step_;
    for (std::size_t i = 0; i < names_.size(); ++i) values[i] = now_ * static_cast<double>(i + 1);
  }

 private:
  std::vector<std::string> names_;
  double step_;
  double now_ = 0;
};

TEST_F(Regions, CountersAreReadAtEntryAndExit) {
  SteppingCounters counters({"a", "b"}, 5);
  attach_region_counters(&counters);
  enable_regions(true);
  for (int i = 0; i < 4; ++i) ScopedRegion region(Region::ffn_down, {});
  const RegionProfile profile = region_snapshot();
  ASSERT_EQ(profile.counter_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_DOUBLE_EQ(profile[Region::ffn_down].counters[0], 4 * 5);   // one step between entry and exit
  EXPECT_DOUBLE_EQ(profile[Region::ffn_down].counters[1], 4 * 10);  // the second counter moves twice as fast
}

// Decode's q, k and v run as one fused matvec_group: one scope, its time and counters split by bytes.
TEST_F(Regions, FusedRegionsShareTimeByBytes) {
  SteppingCounters counters({"a"}, 8);
  attach_region_counters(&counters);
  enable_regions(true);
  const RegionShare shares[] = {{Region::q_proj, {10, 100}}, {Region::k_proj, {30, 300}}};
  {
    ScopedRegion region(shares);
    busy_wait(0.004);
  }
  const RegionProfile profile = region_snapshot();
  const RegionTotals& q = profile[Region::q_proj];
  const RegionTotals& k = profile[Region::k_proj];
  EXPECT_EQ(q.calls, 1);
  EXPECT_EQ(k.calls, 1);
  EXPECT_EQ(q.shared_calls, 1);
  EXPECT_EQ(k.shared_calls, 1);
  EXPECT_DOUBLE_EQ(q.flops, 10);  // each member keeps its own analytic cost
  EXPECT_DOUBLE_EQ(k.bytes, 300);
  EXPECT_GE(q.seconds + k.seconds, 0.004);
  EXPECT_NEAR(k.seconds, 3 * q.seconds, 1e-12);
  EXPECT_DOUBLE_EQ(q.counters[0], 8 * 0.25);
  EXPECT_DOUBLE_EQ(k.counters[0], 8 * 0.75);

  const std::vector<RegionShare> too_many(kMaxFusedRegions + 1, RegionShare{Region::v_proj, {}});
  EXPECT_THROW(ScopedRegion{too_many}, Error);
}

TEST_F(Regions, TooManyCountersAreRefused) {
  SteppingCounters counters(std::vector<std::string>(kMaxRegionCounters + 1, "x"), 1);
  EXPECT_THROW(attach_region_counters(&counters), Error);
}

// Software events exist wherever perf_event_open does: they prove the plumbing (one group per
// OpenMP thread, summed) on machines without a PMU, such as many VMs.
TEST_F(Regions, SoftwareCounterCountsEveryThread) {
  PerfCounters counters({{"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK}});
  if (counters.names().empty()) GTEST_SKIP() << "task-clock unavailable: " << counters.unavailable().at(0).reason;
  if (omp_get_dynamic()) GTEST_SKIP() << "OMP_DYNAMIC: OpenMP may give the counters' region fewer threads";
  ASSERT_EQ(counters.threads(), omp_get_max_threads());
  attach_region_counters(&counters);
  enable_regions(true);
  double main_thread_cpu = 0;  // what the main thread alone ran inside the region, by its own clock
  {
    ScopedRegion region(Region::ffn_gate, {});
    const double before = thread_cpu_seconds();
#pragma omp parallel
    busy_wait(0.02);
    main_thread_cpu = thread_cpu_seconds() - before;
  }
  const RegionProfile profile = region_snapshot();
  const RegionTotals& totals = profile[Region::ffn_gate];
  const double cpu_seconds = totals.counters[0] * 1e-9;  // task-clock counts nanoseconds
  // The sum over threads holds at least the main thread's share (how much the others add depends
  // on how busy this shared machine is) and at most every thread busy for the whole region.
  EXPECT_GE(cpu_seconds, 0.9 * main_thread_cpu) << counters.describe();
  EXPECT_GT(cpu_seconds, 0);
  EXPECT_LT(cpu_seconds, omp_get_max_threads() * totals.seconds * 1.05 + 0.002);
}

// Inside a forward pass's thread team each thread reads its own group in a job of the team: a
// region around a job in which only the other threads work (thread 0 sleeps, so that its own
// count stays near zero) is charged their CPU time, and no more than every thread busy for the
// region plus the reads.
TEST_F(Regions, SoftwareCounterCountsTheTeamsOtherThreads) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "needs 2 OpenMP threads";
  PerfCounters counters({{"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK}});
  if (counters.names().empty()) GTEST_SKIP() << "task-clock unavailable: " << counters.unavailable().at(0).reason;
  attach_region_counters(&counters);
  enable_regions(true);
  constexpr double kWork = 0.02;
  int team_threads = 0;
  run_as_team([&] {
    if (const ThreadTeam* team = ThreadTeam::current()) team_threads = team->threads();
    ScopedRegion region(Region::ffn_up, {});
    on_every_thread([](int thread, int) {
      if (thread > 0) {  // kWork of this thread's own CPU time, however the cores are shared
        const double start = thread_cpu_seconds();
        while (thread_cpu_seconds() - start < kWork) {
        }
      } else {
        std::this_thread::sleep_for(std::chrono::duration<double>(1.25 * kWork));
      }
    });
  });
  if (team_threads == 0) GTEST_SKIP() << "no thread team here (OMP_WAIT_POLICY=passive)";
  if (counters.threads() < team_threads) GTEST_SKIP() << "counters opened on fewer threads than the team has (OMP_DYNAMIC)";
  const RegionTotals totals = region_snapshot()[Region::ffn_up];
  const double cpu_seconds = totals.counters[0] * 1e-9;
  EXPECT_GE(cpu_seconds, 0.9 * kWork * (team_threads - 1)) << counters.describe();
  EXPECT_LT(cpu_seconds, omp_get_max_threads() * totals.seconds * 1.05 + 0.002);
}

// Hardware events: counted where the kernel has a PMU, else each is listed with its reason.
TEST(Counters, HardwareEventsAreCountedOrExplained) {
  PerfCounters counters;
  const std::vector<std::string> hardware = {"cycles", "instructions", "cache-references", "cache-misses",
                                             "LLC-load-misses"};
  for (const std::string& name : hardware) {
    const bool opened = std::find(counters.names().begin(), counters.names().end(), name) != counters.names().end();
    const auto missing = std::find_if(counters.unavailable().begin(), counters.unavailable().end(),
                                      [&](const UnavailableCounter& u) { return u.name == name; });
    EXPECT_NE(opened, missing != counters.unavailable().end()) << name;
    if (missing != counters.unavailable().end()) {
      EXPECT_FALSE(missing->reason.empty()) << name;
    }
  }
  if (!has_cpu_pmu()) {  // no PMU (many VMs), and the reason says so
    ASSERT_FALSE(counters.unavailable().empty());
    EXPECT_EQ(counters.unavailable()[0].name, "cycles");
    EXPECT_NE(counters.unavailable()[0].reason.find("no PMU"), std::string::npos) << counters.unavailable()[0].reason;
    EXPECT_NE(counters.describe().find("unavailable: cycles, instructions"), std::string::npos) << counters.describe();
  }
}

TEST(Counters, ReasonsNameTheCauseAndTheFix) {
  const std::string denied = counter_unavailable_reason(EACCES, 3, true);
  EXPECT_NE(denied.find("perf_event_paranoid is 3"), std::string::npos) << denied;
  EXPECT_NE(denied.find("sysctl -w kernel.perf_event_paranoid="), std::string::npos) << denied;
  EXPECT_NE(counter_unavailable_reason(EPERM, -99, true).find("is unreadable"), std::string::npos);
  EXPECT_NE(counter_unavailable_reason(EPERM, 1, true).find("seccomp"), std::string::npos);
  EXPECT_NE(counter_unavailable_reason(ENOENT, 2, false).find("no PMU"), std::string::npos);
  EXPECT_NE(counter_unavailable_reason(ENOENT, 2, true).find("does not offer"), std::string::npos);
  EXPECT_NE(counter_unavailable_reason(ENOSYS, 2, true).find("CONFIG_PERF_EVENTS"), std::string::npos);
  EXPECT_GE(read_perf_event_paranoid(), -1);  // Linux has it; -1 is its most permissive value
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text << "\n";
}

TEST(Energy, PackageAndDramFromAFakePowercapTree) {
  test::TempDir dir;
  const std::filesystem::path root = dir.file("powercap");
  write_file(root / "intel-rapl:0" / "name", "package-0");
  write_file(root / "intel-rapl:0" / "energy_uj", "1000000");
  write_file(root / "intel-rapl:0" / "max_energy_range_uj", "262143328850");
  write_file(root / "intel-rapl:0:0" / "name", "dram");
  write_file(root / "intel-rapl:0:0" / "energy_uj", "262143000000");  // about to wrap
  write_file(root / "intel-rapl:0:0" / "max_energy_range_uj", "262143328850");
  write_file(root / "intel-rapl:0:1" / "name", "core");  // neither package nor DRAM: not read
  write_file(root / "intel-rapl:0:1" / "energy_uj", "5");

  const EnergyMeter meter(root.string());
  ASSERT_TRUE(meter.available()) << meter.reason();
  ASSERT_EQ(meter.domains().size(), 2u);
  const std::vector<uint64_t> before = meter.read();
  EXPECT_EQ(before, (std::vector<uint64_t>{1000000, 262143000000}));
  write_file(root / "intel-rapl:0" / "energy_uj", "3500000");  // +2.5 J
  write_file(root / "intel-rapl:0:0" / "energy_uj", "671150");  // wrapped: +328850 + 671150 = 1 J
  const EnergyUse use = meter.between(before, meter.read());
  EXPECT_NEAR(use.package_j, 2.5, 1e-9);
  EXPECT_TRUE(use.has_dram);
  EXPECT_NEAR(use.dram_j, 1.0, 1e-9);
}

TEST(Energy, UnavailableSaysWhy) {
  test::TempDir dir;
  const EnergyMeter missing(dir.file("no-such-dir"));
  EXPECT_FALSE(missing.available());
  EXPECT_NE(missing.reason().find("does not exist"), std::string::npos) << missing.reason();
  EXPECT_TRUE(missing.read().empty());

  std::filesystem::create_directories(dir.file("empty"));
  const EnergyMeter empty(dir.file("empty"));
  EXPECT_NE(empty.reason().find("no intel-rapl package or dram zone"), std::string::npos) << empty.reason();

  const EnergyMeter here;  // this machine: RAPL, or a reason (a VM may have no powercap at all)
  if (!here.available()) {
    EXPECT_TRUE(here.reason().starts_with("unavailable here: ")) << here.reason();
  }
}

TEST(Energy, PowercapRootFromTheEnvironment) {
  test::TempDir dir;
  const std::filesystem::path root = dir.file("fake-powercap");
  write_file(root / "intel-rapl:0" / "name", "package-0");
  write_file(root / "intel-rapl:0" / "energy_uj", "42");
  ASSERT_EQ(setenv("CPULLM_POWERCAP_ROOT", root.c_str(), 1), 0);
  const std::string chosen = default_powercap_root();
  const EnergyMeter meter;  // the default root: the variable's
  unsetenv("CPULLM_POWERCAP_ROOT");
  EXPECT_EQ(chosen, root.string());
  ASSERT_TRUE(meter.available()) << meter.reason();
  EXPECT_EQ(meter.read(), std::vector<uint64_t>{42});
  EXPECT_EQ(default_powercap_root(), "/sys/class/powercap");  // unset: the kernel's tree
}

TEST(OpCosts, MatmulForEveryWeightType) {
  // 4 rows of 64 values, 3 tokens: 2 * 4 * 64 * 3 FLOPs; inputs 3 * 64 and outputs 3 * 4 floats.
  const double activations = 3 * (64 + 4) * 4;
  const std::vector<std::pair<GgmlType, double>> weight_bytes = {
      {GgmlType::F32, 4 * 64 * 4},
      {GgmlType::F16, 4 * 64 * 2},
      {GgmlType::BF16, 4 * 64 * 2},
      {GgmlType::Q8_0, 4 * 2 * 34},             // two blocks of 32: fp16 scale + 32 int8
      {GgmlType::Q4_0, 4 * 2 * 18},             // two blocks of 32: fp16 scale + 16 bytes of nibbles
      {GgmlType::CPULLM_INT8_CHANNEL, 4 * (4 + 64)},  // one fp32 scale per row + 64 int8
  };
  for (const auto& [type, bytes] : weight_bytes) {
    const WeightMatrix w{nullptr, type, 4, 64};
    const RegionCost cost = matmul_cost(w, 3);
    EXPECT_DOUBLE_EQ(cost.flops, 2 * 4 * 64 * 3) << ggml_type_name(type);
    EXPECT_DOUBLE_EQ(cost.bytes, bytes + activations) << ggml_type_name(type);
  }
  const RegionCost matvec = matmul_cost({nullptr, GgmlType::Q8_0, 4, 64}, 1);
  EXPECT_DOUBLE_EQ(matvec.flops, 2 * 4 * 64);
  EXPECT_DOUBLE_EQ(matvec.bytes, 4 * 2 * 34 + (64 + 4) * 4);
}

TEST(OpCosts, SmallOpsByHand) {
  const RegionCost embedding = embedding_cost({nullptr, GgmlType::F16, 10, 64}, 2);
  EXPECT_DOUBLE_EQ(embedding.flops, 0);
  EXPECT_DOUBLE_EQ(embedding.bytes, 2 * (64 * 2 + 64 * 4));

  const RegionCost norm = rmsnorm_cost(8, 2);  // 4 per value; x and out per token, weight once
  EXPECT_DOUBLE_EQ(norm.flops, 4 * 8 * 2);
  EXPECT_DOUBLE_EQ(norm.bytes, (2 * 2 + 1) * 8 * 4);

  const RegionCost rotation = rope_cost(12, 2);
  EXPECT_DOUBLE_EQ(rotation.flops, 3 * 12 * 2);
  EXPECT_DOUBLE_EQ(rotation.bytes, 2 * 12 * 2 * 4);

  const RegionCost activation = swiglu_cost(10, 3);
  EXPECT_DOUBLE_EQ(activation.flops, 4 * 30);
  EXPECT_DOUBLE_EQ(activation.bytes, 3 * 30 * 4);

  EXPECT_DOUBLE_EQ(sampling_cost(100, true).flops, 100);
  EXPECT_DOUBLE_EQ(sampling_cost(100, false).flops, 400);
  EXPECT_DOUBLE_EQ(sampling_cost(100, false).bytes, 400);
}

TEST(OpCosts, AttentionCountsEveryQueryKeyPair) {
  // 4 heads over 2 KV heads of 8; queries at positions 3 and 4 meet 4 + 5 = 9 keys.
  const AttentionShape shape{4, 2, 8};
  const RegionCost prefill = attention_cost(shape, 3, 2, 2);
  EXPECT_DOUBLE_EQ(prefill.flops, 4 * 9 * (4 * 8 + 5));
  // Keys and values of positions 0..4 (F16: 2 bytes), q read and out written (FP32).
  EXPECT_DOUBLE_EQ(prefill.bytes, 5 * 2 * 16 * 2 + 2 * 2 * 32 * 4);
  // Decode at position 9: 10 keys.
  const RegionCost decode = attention_cost(shape, 9, 1, 4);
  EXPECT_DOUBLE_EQ(decode.flops, 4 * 10 * (4 * 8 + 5));
  EXPECT_DOUBLE_EQ(decode.bytes, 10 * 2 * 16 * 4 + 2 * 32 * 4);
  // A window of 4: positions 3, 4 and 5 meet 4 keys each, positions 1 and 2 their 2 and 3; the
  // rows read run from the first query's first key.
  const AttentionShape windowed{4, 2, 8, 4};
  const RegionCost late = attention_cost(windowed, 3, 3, 2);
  EXPECT_DOUBLE_EQ(late.flops, 4 * 12 * (4 * 8 + 5));
  EXPECT_DOUBLE_EQ(late.bytes, 6 * 2 * 16 * 2 + 2 * 3 * 32 * 4);
  EXPECT_DOUBLE_EQ(attention_cost(windowed, 1, 2, 2).flops, 4 * 5 * (4 * 8 + 5));
  const RegionCost decode_windowed = attention_cost(windowed, 9, 1, 4);
  EXPECT_DOUBLE_EQ(decode_windowed.flops, 4 * 4 * (4 * 8 + 5));
  EXPECT_DOUBLE_EQ(decode_windowed.bytes, 4 * 2 * 16 * 4 + 2 * 32 * 4);
}

TEST(Roofs, TheBindingRoofIsChosenByIntensity) {
  Roofs roofs;
  roofs.bytes_per_s = 10e9;
  roofs.flops_per_s = 100e9;
  EXPECT_DOUBLE_EQ(roofs.ridge(), 10);
  const RoofUse memory = roof_use(roofs, 1e9, 1e9, 0.2);  // 1 FLOP/byte at 5 GB/s
  EXPECT_TRUE(memory.memory_bound);
  EXPECT_DOUBLE_EQ(memory.fraction, 0.5);
  const RoofUse compute = roof_use(roofs, 100e9, 1e9, 2);  // 100 FLOP/byte at 50 GFLOP/s
  EXPECT_FALSE(compute.memory_bound);
  EXPECT_DOUBLE_EQ(compute.fraction, 0.5);
  EXPECT_DOUBLE_EQ(roof_use(roofs, 1, 1, 0).fraction, 0);  // no time, no figure
}

TEST(Roofs, ReadBufferReadsEveryByteInWholeSteps) {
  EXPECT_EQ(ReadBuffer(1000).bytes(), 896);  // the loop reads 128 bytes a step
  EXPECT_EQ(ReadBuffer(1).bytes(), 128);
  const ReadBuffer buffer(int64_t{64} << 20);
  // Physical: no machine reads 64 MiB in under 64 us (1 TB/s), which a loop the compiler had
  // dropped would.
  for (int pass = 0; pass < 2; ++pass) {
    const double seconds = buffer.read_seconds();
    EXPECT_TRUE(std::isfinite(seconds) && seconds > static_cast<double>(buffer.bytes()) / 1e12) << seconds;
  }
}

TEST(Roofs, MeasurementsGiveFigures) {
  const double bandwidth = measure_read_bandwidth(int64_t{8} << 20, 2);
  EXPECT_GT(bandwidth, 0);
  // Only that they are figures: how fast depends on how busy this shared machine is.
  EXPECT_TRUE(std::isfinite(bandwidth));
  // And that they are physical: no core does more than 64 FP32 FLOP per cycle (two 16-lane
  // FMAs) at more than 8 GHz, which a roof timed around a loop the compiler dropped exceeds by
  // orders of magnitude (the AVX-512 roof once read 2e16 FLOP/s).
  const double most = 64.0 * 8e9 * omp_get_max_threads();
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (!cpu_supports(isa)) continue;
    const double peak = measure_fma_peak(isa, 0.005);
    EXPECT_TRUE(std::isfinite(peak) && peak > 0 && peak < most) << isa_name(isa) << ": " << peak;
  }
}

}  // namespace
}  // namespace cpullm
