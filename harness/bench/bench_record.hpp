// A measured point as a Record: llama-bench's fields first, in llama-bench's order and with
// its names, then cpullm's. The reporters print it, the results database stores it.
#pragma once
#include <string>
#include <vector>

#include "harness/bench/bench_plan.hpp"
#include "harness/bench/bench_runner.hpp"
#include "harness/bench/load_scenario.hpp"
#include "harness/bench/multiprocess.hpp"
#include "harness/bench/reporters.hpp"
#include "harness/results/host_info.hpp"

namespace cpullm {

// build_commit is the build's (harness/results), cpu_info the host's CPU model.
Record point_record(const BenchPoint& point, const PointMeasurement& measurement, const HostInfo& host);

// One run of the load scenario at one rate. The point gives the configuration (n_seq: the
// slots); avg_ts is generated tokens per second over the run; bounds_met is null without bounds.
struct LoadBounds {
  double ttft_p99_ms = 0;  // 0: no bound
  double tpot_p99_ms = 0;
  bool given() const { return ttft_p99_ms > 0 || tpot_p99_ms > 0; }
};
Record load_record(const BenchPoint& point, const RunReport& machine, const ModelFacts& model,
                   const LoadSettings& settings, const LoadRun& run, const LoadBounds& bounds, const HostInfo& host);
bool load_meets_bounds(const Record& load, const LoadBounds& bounds);
std::vector<MarkdownColumn> load_markdown_columns();

// The multi-process scenario's memory figures.
Record sharing_record(const BenchPoint& point, const SharingSettings& settings, const SharingResult& result,
                      const ModelFacts& model, const HostInfo& host);
std::vector<MarkdownColumn> sharing_markdown_columns();

// llama-bench's table (model, size, params, backend, threads, test, t/s) plus the cpullm
// dimensions that take a non-default value in some point, the latency columns, and with
// roof_pairs (--roof-pairs) the paired decode and read bandwidths.
std::vector<MarkdownColumn> point_markdown_columns(const std::vector<BenchPoint>& points, bool roof_pairs = false);

}  // namespace cpullm
