// A bench Record as the results database stores it (harness/results): the summary row, its
// configuration as JSON and one sample per repetition; for a measured point also its regions
// and energy.
#pragma once
#include "harness/bench/bench_runner.hpp"
#include "harness/bench/reporters.hpp"
#include "harness/results/results_db.hpp"

namespace cpullm {

// `test` is the schema's kind of point: pp, tg, pg, load or multiproc.
ResultRecord result_record(const Record& record, const std::string& test);

// A measured point's row: result_record's, plus the instrumented repetition's regions (counters
// as JSON, with the unavailable ones and why) and, in metrics_json, the roofs they are measured
// against and the repetition's time; energy per token where RAPL measured energy_j, else why not.
ResultRecord point_result_record(const Record& record, const PointMeasurement& measurement, const std::string& test);

}  // namespace cpullm
