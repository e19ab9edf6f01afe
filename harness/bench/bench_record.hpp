// A measured point as a Record: llama-bench's fields first, in llama-bench's order and with
// its names, then cpullm's. The reporters print it, the results database stores it.
#pragma once
#include <string>
#include <vector>

#include "harness/bench/bench_plan.hpp"
#include "harness/bench/bench_runner.hpp"
#include "harness/bench/load_client.hpp"
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
// Per-request service levels (--slo-ttft, --slo-tpot): goodput counts the requests per second
// that met both. 0: no bound.
struct ServiceLevels {
  double ttft_ms = 0;
  double tpot_ms = 0;
};

// One run of bench --load --url at one rate against `server`, stored under `engine` (the
// user's --label, else what the server calls its owner). Percentiles over completed requests.
Record load_record(const BenchPoint& point, const RunReport& machine, const ModelFacts& model,
                   const LoadSettings& settings, const LoadRun& run, const LoadBounds& bounds, const ServiceLevels& slo,
                   const HostInfo& host);
bool load_meets_bounds(const Record& load, const LoadBounds& bounds);
std::vector<MarkdownColumn> load_markdown_columns();

Record url_load_record(const ServerIdentity& server, const std::string& engine, const UrlLoadSettings& settings,
                       const UrlLoadRun& run, const ServiceLevels& slo, const HostInfo& host);
std::vector<MarkdownColumn> url_load_markdown_columns();

// The multi-process scenario's memory figures.
Record sharing_record(const BenchPoint& point, const SharingSettings& settings, const SharingResult& result,
                      const ModelFacts& model, const HostInfo& host);
std::vector<MarkdownColumn> sharing_markdown_columns();

// What a suites/ script holds a point against (cpullm bench --suite): the roof or peak it read
// next to the run and the work a token takes, so that tokens/s x work_per_token / rate is the
// point's share of it. Stored as the record's suite, suite_command, reference, reference_rate,
// reference_unit and work_per_token fields (metrics_json in the results database).
struct SuiteReference {
  std::string suite;          // the script, e.g. decode_bandwidth; empty: the point is no suite's
  std::string command;        // the script's command line that reproduces the run
  std::string reference;      // what rate is, e.g. "bench_kernels memory_read/2, read before the run"
  double rate = 0;            // units per second
  std::string unit;           // bytes | operations
  double work_per_token = 0;  // units one token takes: weight bytes read, or operations
};
void add_suite_reference(Record& record, const SuiteReference& suite);

// llama-bench's table (model, size, params, backend, threads, test, t/s) plus the cpullm
// dimensions that take a non-default value in some point, the latency columns, and with
// roof_pairs (--roof-pairs) the paired decode and read bandwidths.
std::vector<MarkdownColumn> point_markdown_columns(const std::vector<BenchPoint>& points, bool roof_pairs = false);

}  // namespace cpullm
