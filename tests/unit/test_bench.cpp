// The pieces of `cpullm bench`: llama-bench's list and range syntax, the statistics, the
// combinations a run measures, every reporter's output read back, the workloads file, and a
// record as the results database gets it.
#include <gtest/gtest.h>

#include <cmath>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "harness/bench/bench_db.hpp"
#include "harness/bench/bench_plan.hpp"
#include "harness/bench/load_scenario.hpp"
#include "harness/bench/reporters.hpp"
#include "harness/bench/statistics.hpp"
#include "harness/bench/value_lists.hpp"
#include "harness/bench/workloads.hpp"
#include "engine/kernels/isa.hpp"
#include "engine/run/session.hpp"
#include "engine/synthetic/synthetic_model.hpp"
#include "engine/util/error.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

TEST(BenchLists, NumbersAndRangesAsLlamaBench) {
  EXPECT_EQ(parse_int_list("1,2,4", "-t", 0, 100), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(parse_int_list("64-512*2", "-p", 0, 4096), (std::vector<int64_t>{64, 128, 256, 512}));
  EXPECT_EQ(parse_int_list("1-8+3", "-t", 0, 100), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(parse_int_list("4-6,0", "-n", 0, 100), (std::vector<int64_t>{4, 5, 6, 0}));
  EXPECT_EQ(parse_int_list("16-100*4", "-p", 0, 4096), (std::vector<int64_t>{16, 64}));  // stops below last
}

TEST(BenchLists, BadListsNameTheFlag) {
  auto message = [](const std::string& text) {
    try {
      parse_int_list(text, "-p", 0, 1000);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("abc").find("-p: 'abc' is not a whole number"), std::string::npos);
  EXPECT_NE(message("8-4").find("goes downwards"), std::string::npos);
  EXPECT_NE(message("1-8*1").find("never advances"), std::string::npos);
  EXPECT_NE(message("0-8*2").find("never advances"), std::string::npos);
  EXPECT_NE(message("5000").find("outside 0..1000"), std::string::npos);
  EXPECT_NE(message("1-9999999999*2").find("outside"), std::string::npos);
  EXPECT_NE(message("1,,2").find("not a whole number"), std::string::npos);
  EXPECT_THROW(parse_word_list("none,sideways", "--bind", {"none", "scatter"}), Error);
  EXPECT_EQ(parse_word_list("none,scatter", "--bind", {"none", "scatter"}).size(), 2u);
  EXPECT_EQ(parse_prompt_gen_pair("512,128"), (std::pair<int64_t, int64_t>{512, 128}));
  EXPECT_THROW(parse_prompt_gen_pair("512"), Error);
  EXPECT_THROW(parse_prompt_gen_pair("0,128"), Error);
}

// Found by fuzz/value_lists.cpp: 200 ranges of a million values each took a 1 GiB allocation
// (and a bench of 200 million tests). A list stops at kMaxListValues, before it is built.
TEST(BenchLists, LongListsAreRefusedBeforeTheyAreBuilt) {
  std::string ranges = "0-1048576";
  for (int i = 0; i < 199; ++i) ranges += ",0-1048576";
  EXPECT_THROW(parse_int_list(ranges, "-p", 0, 1 << 20), Error);
  EXPECT_THROW(parse_int_list("1-10001", "-p", 0, 1 << 20), Error);
  EXPECT_EQ(parse_int_list("1-10000", "-p", 0, 1 << 20).size(), kMaxListValues);
}

// Found by fuzz/value_lists.cpp: a step or factor near 2^63 overflowed int64 while computing the
// value after the last one.
TEST(BenchLists, HugeStepsStopWithoutOverflow) {
  EXPECT_EQ(parse_int_list("1-9223372036854775807+9223372036854775807", "-p", 0, 1 << 20), (std::vector<int64_t>{1}));
  EXPECT_EQ(parse_int_list("3-9223372036854775807*9223372036854775807", "-p", 0, 1 << 20), (std::vector<int64_t>{3}));
  EXPECT_THROW(parse_int_list("-9223372036854775807-9223372036854775807+9223372036854775807", "-p", -1, 1), Error);
}

// The order-statistic interval of a percentile, against scipy.stats.binom's quantiles for 24
// samples 1..24: p50 lies in [x(7), x(18)]; p90 and p99 have no upper bound from 24 samples.
TEST(BenchStatistics, PercentileIntervalsAreOrderStatistics) {
  std::vector<double> v;
  for (int i = 24; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  const Interval p50 = percentile_interval(v, 50), p90 = percentile_interval(v, 90), p99 = percentile_interval(v, 99);
  EXPECT_EQ(p50.low, 7);
  EXPECT_EQ(p50.high, 18);
  EXPECT_EQ(p90.low, 18);
  EXPECT_TRUE(std::isnan(p90.high));
  EXPECT_EQ(p99.low, 23);
  EXPECT_TRUE(std::isnan(p99.high));
  const Interval many = percentile_interval(std::vector<double>(5000, 3.0), 50);  // no underflow at thousands
  EXPECT_EQ(many.low, 3);
  EXPECT_EQ(many.high, 3);
  EXPECT_TRUE(std::isnan(percentile_interval({}, 50).low));
}

TEST(BenchStatistics, MeanStddevPercentiles) {
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(mean(v), 2.5);
  EXPECT_NEAR(stddev(v), 1.2909944487, 1e-9);  // sample (n - 1) standard deviation
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);   // rank 2.7: 3 + 0.7 * (4 - 3)
  const std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(stddev(one), 0);  // undefined for one sample: reported as 0, as llama-bench
  EXPECT_DOUBLE_EQ(percentile(one, 99), 7);
  EXPECT_DOUBLE_EQ(mean(std::vector<double>{}), 0);
  const std::vector<double> unsorted = {9, 1, 5};
  EXPECT_DOUBLE_EQ(percentile(unsorted, 50), 5);
}

// One value for every flag but those a test varies.
BenchParams single_values() {
  BenchParams p;
  p.n_batch = {512};
  p.n_seq = {1};
  p.attn_tile = {"64x64"};
  p.binding = {"none"};
  p.placement = {"first-touch"};
  p.kv_type = {"f32"};
  p.prefetch = {0};
  return p;
}

TEST(BenchPlan, EveryCombinationInLlamaBenchOrder) {
  BenchParams p = single_values();
  p.models = {"a.gguf", "b.gguf"};
  p.n_prompt = {64, 0};  // 0 is skipped, as llama-bench skips -p 0
  p.n_gen = {16, 32};
  p.prompt_gen = {{128, 8}};
  p.threads = {1, 2};
  p.isa = {"avx2", "avx512"};
  const auto points = expand_points(p);
  ASSERT_EQ(points.size(), 2u * 2 * 2 * 4);  // models x threads x isa x tests
  EXPECT_EQ(points[0].model, "a.gguf");
  EXPECT_EQ(points[0].test_name(), "pp64");
  EXPECT_EQ(points[1].test_name(), "tg16");
  EXPECT_EQ(points[2].test_name(), "tg32");
  EXPECT_EQ(points[3].test_name(), "pp128+tg8");
  EXPECT_EQ(points[4].isa, "avx512");
  EXPECT_EQ(points[8].threads, 2);
  EXPECT_EQ(points[16].model, "b.gguf");
  // Case names tell points apart, so a resumed run skips exactly the ones it has.
  std::set<std::string> names;
  for (const auto& point : points) names.insert(point.case_name());
  EXPECT_EQ(names.size(), points.size());
  EXPECT_EQ(points[16].case_name().rfind("b/pp64/t1/", 0), 0u) << points[16].case_name();
}

// -d: every test again at each depth, just outside the tests, named as llama-bench names them.
TEST(BenchPlan, DepthsRepeatEveryTestUnderLlamaBenchsNames) {
  BenchParams p = single_values();
  p.models = {"a.gguf"};
  p.n_prompt = {64};
  p.n_gen = {16};
  p.n_depth = {0, 2048};
  p.threads = {2};
  p.isa = {""};
  const auto points = expand_points(p);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].test_name(), "pp64");
  EXPECT_EQ(points[1].test_name(), "tg16");
  EXPECT_EQ(points[2].test_name(), "pp64 @ d2048");
  EXPECT_EQ(points[3].test_name(), "tg16 @ d2048");
  EXPECT_EQ(points[3].n_depth, 2048);
  EXPECT_EQ(points[1].case_name().rfind("a/tg16/t2/", 0), 0u) << points[1].case_name();  // unchanged without a depth
  EXPECT_EQ(points[3].case_name().rfind("a/tg16@d2048/t2/", 0), 0u) << points[3].case_name();
}

Record sample_record(double avg_ts) {
  Record r;
  r["model_filename"] = "m, \"quoted\".gguf";
  r["model_type"] = "llama 12M F32";
  r["model_size"] = 48 << 20;
  r["model_n_params"] = 12000000;
  r["n_threads"] = 2;
  r["isa"] = "avx2";
  r["test"] = "pp64";
  r["avg_ts"] = avg_ts;
  r["stddev_ts"] = 1.5;
  r["tpot_ms"] = nullptr;
  r["prefetch"] = false;
  r["notes"] = "it's fine";
  r["samples_ns"] = {1.0, 2.0};
  return r;
}

std::string report(const std::string& format, const std::vector<Record>& records) {
  char* buffer = nullptr;
  std::size_t size = 0;
  std::FILE* out = open_memstream(&buffer, &size);
  {
    using Kind = MarkdownColumn::Kind;
    auto reporter = make_reporter(format, out,
                                  {{"model", "model_type", Kind::text, ""}, {"size", "model_size", Kind::bytes, ""},
                                   {"t/s", "avg_ts", Kind::rate, "stddev_ts"}, {"tpot ms", "tpot_ms", Kind::number, ""}},
                                  "test");
    for (const auto& r : records) reporter->add(r);
    reporter->finish();
  }
  std::fclose(out);
  std::string text(buffer, size);
  std::free(buffer);
  return text;
}

TEST(BenchReporters, JsonAndJsonLinesReadBack) {
  const std::vector<Record> records = {sample_record(100.25), sample_record(50)};
  const auto json = nlohmann::json::parse(report("json", records));
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[0]["model_filename"], "m, \"quoted\".gguf");
  EXPECT_DOUBLE_EQ(json[1]["avg_ts"].get<double>(), 50);
  EXPECT_TRUE(json[0]["tpot_ms"].is_null());
  EXPECT_EQ(json[0]["samples_ns"].size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(report("json", {})).size(), 0u);  // no points: an empty array

  std::istringstream lines(report("jsonl", records));
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) EXPECT_EQ(nlohmann::json::parse(line)["n_threads"], 2);
  EXPECT_EQ(count, 2);
}

TEST(BenchReporters, CsvQuotesEveryValueAndLeavesOutArrays) {
  const std::string csv = report("csv", {sample_record(100.25)});
  std::istringstream in(csv);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  EXPECT_EQ(header, "model_filename,model_type,model_size,model_n_params,n_threads,isa,test,avg_ts,stddev_ts,tpot_ms,prefetch,notes");
  EXPECT_EQ(row, "\"m, \"\"quoted\"\".gguf\",\"llama 12M F32\",\"50331648\",\"12000000\",\"2\",\"avx2\",\"pp64\","
                 "\"100.250000\",\"1.500000\",\"\",\"0\",\"it's fine\"");
}

TEST(BenchReporters, SqlCreatesTheTableOnceAndEscapesQuotes) {
  const std::string sql = report("sql", {sample_record(1), sample_record(2)});
  EXPECT_EQ(sql.find("CREATE TABLE IF NOT EXISTS test ("), 0u);
  EXPECT_EQ(sql.find("CREATE TABLE", 1), std::string::npos);
  EXPECT_NE(sql.find("model_size INTEGER"), std::string::npos);
  EXPECT_NE(sql.find("avg_ts REAL"), std::string::npos);
  EXPECT_NE(sql.find("'it''s fine'"), std::string::npos);
  EXPECT_NE(sql.find("NULL"), std::string::npos);  // tpot_ms
  EXPECT_EQ(sql.find("samples_ns"), std::string::npos);
}

TEST(BenchReporters, MarkdownTable) {
  const std::string md = report("md", {sample_record(100.25)});
  EXPECT_EQ(md,
            "| model | size | t/s | tpot ms |\n"
            "| --- | ---: | ---: | ---: |\n"
            "| llama 12M F32 | 48.00 MiB | 100.25 ± 1.50 | - |\n");
  EXPECT_THROW(report("xml", {}), Error);
}

TEST(BenchWorkloads, TheShippedFileHasSeedLongContextAndCiWorkloads) {
  const Workload seed = find_workload(CPULLM_WORKLOADS_FILE, "seed");
  EXPECT_EQ(seed.shape.dim, 4096);  // LLaMA-7B
  EXPECT_EQ(seed.shape.n_layers, 32);
  EXPECT_EQ(seed.n_seq, 32);
  EXPECT_EQ(seed.n_prompt, 512);
  EXPECT_EQ(seed.kv_type, "f16");
  const Workload long_context = find_workload(CPULLM_WORKLOADS_FILE, "long-context");
  EXPECT_EQ(long_context.shape.dim, 2048);  // TinyLlama-1.1B, with room for the prompt and what follows
  EXPECT_EQ(long_context.shape.n_layers, 22);
  EXPECT_GE(long_context.shape.context, long_context.n_prompt + long_context.n_gen);
  EXPECT_EQ(long_context.n_prompt, 8192);
  EXPECT_EQ(long_context.n_gen, 256);
  const Workload tiny = find_workload(CPULLM_WORKLOADS_FILE, "ci-tiny");
  EXPECT_EQ(tiny.shape.dim, 64);
  EXPECT_EQ(tiny.shape.n_kv_heads, 2);
  try {
    find_workload(CPULLM_WORKLOADS_FILE, "nope");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("there are: seed"), std::string::npos) << e.what();
  }
}

TEST(BenchWorkloads, BadFilesNameTheWorkload) {
  test::TempDir dir;
  auto error_for = [&](const std::string& text) {
    std::ofstream(dir.file("w.json")) << text;
    try {
      read_workloads(dir.file("w.json"));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_for("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_for("{}").find("no \"workloads\" array"), std::string::npos);
  const std::string model = R"("model": {"shape": "custom", "layers": 1, "dim": 8, "ffn": 8, "heads": 1, "vocab": 10})";
  EXPECT_NE(error_for(R"({"workloads": [{"name": "w", "format": "q9", )" + model + "}]}").find("format 'q9'"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"workloads": [{"name": "w", "format": "f32", "n_seq": 0, )" + model + "}]}").find("workload 'w'"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"workloads": [{"name": "w", "format": "f32", "model": {"shape": "llama-99b"}}]})").find("llama-99b"),
            std::string::npos);
}

TEST(BenchDb, RecordBecomesAResultWithSamples) {
  Record r = sample_record(10);
  r["case_name"] = "pp64/t2";
  r["n_prompt"] = 64;
  r["n_gen"] = 0;
  r["samples_ts"] = {64.0, 32.0};
  const ResultRecord result = result_record(r, "pp");
  EXPECT_EQ(result.case_name, "pp64/t2");
  EXPECT_EQ(result.test, "pp");
  EXPECT_EQ(result.n_threads, 2);
  EXPECT_EQ(result.prefetch, 0);
  EXPECT_FALSE(result.tpot_ms.has_value());  // null stays "not measured"
  ASSERT_EQ(result.samples.size(), 2u);
  EXPECT_DOUBLE_EQ(result.samples[1].ns, 2.0);
  EXPECT_DOUBLE_EQ(*result.samples[1].ts, 32.0);
  const auto config = nlohmann::json::parse(result.config_json);
  EXPECT_EQ(config["n_prompt"], 64);
  EXPECT_FALSE(config.contains("avg_ts"));
  EXPECT_EQ(nlohmann::json::parse(result.metrics_json)["notes"], "it's fine");
}

// A point with its instrumented repetition: every region that ran becomes a row with its
// counters and the unavailable ones' reasons; energy per generated token, or why there is none.
TEST(BenchDb, MeasuredPointGetsRegionsAndEnergy) {
  Record r = sample_record(10);
  r["case_name"] = "pp8+tg4/t2";
  r["n_seq"] = 2;
  r["n_prompt"] = 8;
  r["n_gen"] = 4;
  r["energy_j"] = 6.0;
  PointMeasurement m;
  m.energy_j = {5.0, 7.0};
  PointProfile profile;
  profile.seconds = 0.5;
  profile.roofs.bytes_per_s = 2e10;
  profile.roofs.flops_per_s = 1e11;
  profile.regions.counter_names = {"task-clock"};
  RegionTotals& q = profile.regions.regions[static_cast<int>(Region::q_proj)];
  q = {.calls = 10, .shared_calls = 8, .seconds = 0.1, .flops = 2e6, .bytes = 1e6};
  q.counters[0] = 12345;
  profile.regions.regions[static_cast<int>(Region::sampling)] = {.calls = 8, .seconds = 0.01, .flops = 1e3, .bytes = 4e3};
  profile.unavailable = {{"cycles", "no PMU: ..."}};
  m.profile = profile;

  const ResultRecord result = point_result_record(r, m, "pg");
  ASSERT_EQ(result.regions.size(), 2u);  // regions that never ran are not rows
  EXPECT_EQ(result.regions[0].name, "q_proj");
  EXPECT_EQ(result.regions[0].calls, 10);
  EXPECT_DOUBLE_EQ(result.regions[0].flops, 2e6);
  EXPECT_DOUBLE_EQ(result.regions[0].bytes, 1e6);
  const auto counters = nlohmann::json::parse(result.regions[0].counters_json);
  EXPECT_EQ(counters["task-clock"], 12345);
  EXPECT_EQ(counters["shared_calls"], 8);
  EXPECT_EQ(counters["unavailable"]["cycles"], "no PMU: ...");
  EXPECT_EQ(result.regions[1].name, "sampling");
  EXPECT_FALSE(nlohmann::json::parse(result.regions[1].counters_json).contains("shared_calls"));
  const auto metrics = nlohmann::json::parse(result.metrics_json);
  EXPECT_DOUBLE_EQ(metrics["energy_j_per_generated_token"].get<double>(), 6.0 / (2 * 4));  // generated tokens only
  EXPECT_DOUBLE_EQ(metrics["profile_seconds"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(metrics["roof_flops_per_s"].get<double>(), 1e11);
  EXPECT_EQ(*result.avg_ts, 10);  // the summary is the record's (the timed repetitions'), untouched

  PointMeasurement none;
  none.energy_unavailable = "unavailable here: no powercap";
  r["energy_j"] = nullptr;
  const ResultRecord plain = point_result_record(r, none, "pg");
  EXPECT_TRUE(plain.regions.empty());
  EXPECT_FALSE(plain.energy_j.has_value());
  EXPECT_EQ(nlohmann::json::parse(plain.metrics_json)["energy_unavailable"], "unavailable here: no powercap");
}

TEST(BenchLoad, RateSearchBracketsThenBisects) {
  std::vector<double> probed;
  auto below = [&](double limit) {
    return [&probed, limit](double rate) {
      probed.push_back(rate);
      return rate <= limit;
    };
  };
  // Up from 1: 1, 2, 4, 8 pass, 16 fails; then bisections between 8 and 16 approach 10.
  const double found = find_max_rate(below(10), 1, 6);
  EXPECT_LE(found, 10);
  EXPECT_GT(found, 9.5);
  EXPECT_EQ(std::vector<double>(probed.begin(), probed.begin() + 5), (std::vector<double>{1, 2, 4, 8, 16}));
  probed.clear();
  EXPECT_DOUBLE_EQ(find_max_rate(below(3), 8, 0), 2);  // 8 and 4 fail: down to 2
  EXPECT_DOUBLE_EQ(find_max_rate(below(0), 1, 3), 0);   // nothing passes
  EXPECT_DOUBLE_EQ(find_max_rate(below(1e9), 1, 3), 512);  // ten doublings all pass: the last one
}

// Every bench point is a Session of its own: two Sessions in one process, one scalar and one at
// the best level, each report their own level and hand it to their own model; a level the CPU
// lacks is refused before anything loads.
TEST(Session, EachRunsTheKernelLevelItIsConfiguredWith) {
  test::TempDir dir;
  SyntheticModelOptions model;
  model.shape = {"custom", 2, 64, 160, 8, 2, 600, 64};
  model.progress = false;
  write_synthetic_model(dir.file("m.gguf"), model);
  RunConfig config;
  config.model = dir.file("m.gguf");
  config.context = 8;
  config.isa = "scalar";
  Session scalar(config);
  config.isa = std::string(isa_name(best_isa()));
  Session best(config);
  EXPECT_EQ(scalar.report().kernels.isa, Isa::Scalar);
  EXPECT_EQ(scalar.model().kernels().isa, Isa::Scalar);
  EXPECT_EQ(best.report().kernels.isa, best_isa());
  EXPECT_EQ(best.model().kernels().isa, best_isa());
  EXPECT_NE(scalar.describe().find("isa=scalar"), std::string::npos) << scalar.describe();
  if (!cpu_supports(Isa::Avx512)) {
    config.isa = "avx512";
    EXPECT_THROW(Session{config}, Error);
  }
}

}  // namespace
}  // namespace cpullm
