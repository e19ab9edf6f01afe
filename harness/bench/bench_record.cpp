#include "harness/bench/bench_record.hpp"

#include <fmt/format.h>

#include <cmath>

#include "harness/bench/statistics.hpp"
#include "harness/results/results_db.hpp"
#include "engine/util/process_memory.hpp"

namespace cpullm {
namespace {

// A statistic that does not exist for this point (no inter-token gaps in a pp test) is null.
nlohmann::ordered_json value_or_null(bool defined, double value) {
  return defined ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
}

// llama-bench's leading fields: the build, the host, the model and the configuration.
Record leading_fields(const ModelFacts& model, const HostInfo& host, const BenchPoint& p, const RunReport& machine,
                      const std::string& test_time) {
  Record r;
  r["build_commit"] = build_git_commit();
  r["cpu_info"] = host.cpu_model;
  r["backends"] = "CPU";
  r["model_filename"] = model.filename;
  r["model_type"] = model.type;
  r["model_size"] = model.size;
  r["model_n_params"] = model.n_params;
  r["n_batch"] = p.n_batch;
  r["n_threads"] = machine.threads;
  r["type_k"] = p.kv_type;
  r["type_v"] = p.kv_type;
  r["n_prompt"] = p.n_prompt;
  r["n_gen"] = p.n_gen;
  r["n_depth"] = p.n_depth;
  r["test_time"] = test_time;
  return r;
}

// cpullm's dimensions of the point, after llama-bench's fields.
void add_dimensions(Record& r, const BenchPoint& p, const RunReport& machine, const ModelFacts& model,
                    const std::string& test, const std::string& case_name) {
  r["test"] = test;
  r["case_name"] = case_name;
  r["format"] = model.format;
  r["sparsity"] = model.sparsity;
  r["isa"] = std::string(isa_name(machine.kernels.isa));
  r["attn_tile"] = p.attn_tile;
  r["binding"] = machine.binding;
  r["cpuset"] = p.cpuset;
  r["housekeeping"] = p.housekeeping;
  r["numa"] = p.numa;
  r["placement"] = machine.placement;  // in effect: one NUMA node reduces every strategy to first-touch
  r["placement_requested"] = p.placement;
  r["kv_type"] = p.kv_type;
  r["n_seq"] = p.n_seq;
  r["prefetch"] = p.prefetch;
}

std::string joined_notes(const std::vector<std::string>& notes) {
  std::string text;
  for (const auto& note : notes) text += (text.empty() ? "" : " ") + note;
  return text;
}

// p50, p90 and p99 of `samples` as NAME_p50_ms, ... (null without samples), and the mean as NAME_ms.
void add_percentiles(Record& r, const std::string& name, const std::vector<double>& samples) {
  r[name + "_ms"] = value_or_null(!samples.empty(), mean(samples));
  for (int p : {50, 90, 99}) r[fmt::format("{}_p{}_ms", name, p)] = value_or_null(!samples.empty(), percentile(samples, p));
}

// add_percentiles, plus each percentile's 95% interval as NAME_pP_low_ms and NAME_pP_high_ms
// (null where the samples are too few to bound it): the load scenarios' runs are compared by them.
void add_percentiles_with_intervals(Record& r, const std::string& name, const std::vector<double>& samples) {
  add_percentiles(r, name, samples);
  for (int p : {50, 90, 99}) {
    const Interval i = percentile_interval(samples, p);
    r[fmt::format("{}_p{}_low_ms", name, p)] = value_or_null(!std::isnan(i.low), i.low);
    r[fmt::format("{}_p{}_high_ms", name, p)] = value_or_null(!std::isnan(i.high), i.high);
  }
}

// --roof-pairs: the decode's weight bandwidth and the read roof over all pairs, their ratio, and
// the median of the pairs' own ratios (null without pairs).
void add_roof_pairs(Record& r, const std::optional<RoofPairs>& pairs) {
  const bool paired = pairs && !pairs->step_ms.empty();
  double decode_gbs = 0, read_gbs = 0, median_share = 0;
  if (paired) {
    const auto gbs = [](double bytes, double ms) { return bytes / ms / 1e6; };
    const double step_bytes = static_cast<double>(pairs->step_bytes), read_bytes = static_cast<double>(pairs->read_bytes);
    std::vector<double> shares;
    for (std::size_t i = 0; i < pairs->step_ms.size(); ++i)
      shares.push_back(gbs(step_bytes, pairs->step_ms[i]) / gbs(read_bytes, pairs->read_ms[i]));
    decode_gbs = gbs(step_bytes, mean(pairs->step_ms));
    read_gbs = gbs(read_bytes, mean(pairs->read_ms));
    median_share = percentile(shares, 50);
  }
  r["paired_steps"] = paired ? Record(pairs->step_ms.size()) : Record(nullptr);
  r["paired_step_bytes"] = paired ? Record(pairs->step_bytes) : Record(nullptr);
  r["paired_decode_gbs"] = value_or_null(paired, decode_gbs);
  r["paired_read_gbs"] = value_or_null(paired, read_gbs);
  r["paired_roof_share"] = value_or_null(paired, decode_gbs / read_gbs);
  r["paired_roof_share_p50"] = value_or_null(paired, median_share);
}

// The mean over repetitions of `tokens` over each one's time (ms).
double mean_rate(double tokens, const std::vector<double>& times_ms) {
  std::vector<double> rates;
  for (double ms : times_ms) rates.push_back(tokens / (ms / 1e3));
  return mean(rates);
}

// The SLOs and the goodput: requests per second of the run that met both.
void add_service_levels(Record& r, const ServiceLevels& slo, int meeting, double wall_ms) {
  r["slo_ttft_ms"] = value_or_null(slo.ttft_ms > 0, slo.ttft_ms);
  r["slo_tpot_ms"] = value_or_null(slo.tpot_ms > 0, slo.tpot_ms);
  r["goodput_rps"] = meeting / (wall_ms / 1e3);
}

}  // namespace

Record point_record(const BenchPoint& p, const PointMeasurement& m, const HostInfo& host) {
  const auto& itl = m.itl_ms;
  Record r = leading_fields(m.model, host, p, m.machine, m.test_time);
  r["avg_ns"] = std::llround(mean(m.samples_ns));
  r["stddev_ns"] = std::llround(stddev(m.samples_ns));
  r["avg_ts"] = mean(m.samples_ts);
  r["stddev_ts"] = stddev(m.samples_ts);
  r["samples_ns"] = m.samples_ns;
  r["samples_ts"] = m.samples_ts;
  // avg_ts counts prompt and generated tokens, as llama-bench's; these two keep them apart.
  std::vector<double> total_ms;
  for (double ns : m.samples_ns) total_ms.push_back(ns / 1e6);
  r["gen_ts"] = value_or_null(p.n_gen > 0, mean_rate(static_cast<double>(p.n_seq * p.n_gen), total_ms));
  r["prompt_ts"] = value_or_null(p.n_prompt > 0, mean_rate(static_cast<double>(p.n_seq * p.n_prompt), m.ttft_ms));
  add_dimensions(r, p, m.machine, m.model, p.test_name(), p.case_name());
  r["cold"] = p.cold;
  r["inject_delay_ms"] = p.inject_delay_ms;
  r["repetitions"] = p.repetitions;
  r["ttft_ms"] = mean(m.ttft_ms);
  r["tpot_ms"] = value_or_null(!itl.empty(), mean(itl));
  r["itl_p50_ms"] = value_or_null(!itl.empty(), percentile(itl, 50));
  r["itl_p90_ms"] = value_or_null(!itl.empty(), percentile(itl, 90));
  r["itl_p99_ms"] = value_or_null(!itl.empty(), percentile(itl, 99));
  r["peak_rss_bytes"] = m.peak_rss_bytes;
  // How much of the model's mapping was in 2 MiB pages: decode from a file mapped in 4 KiB pages
  // can run slower (docs/kernels-decode.md, "Page sizes"). Under
  // --numa placements that copy the matrices, decode reads the copies instead.
  r["model_huge_page_bytes"] = m.huge_page_bytes ? Record(*m.huge_page_bytes) : Record(nullptr);
  r["energy_j"] = value_or_null(!m.energy_j.empty(), mean(m.energy_j));  // per repetition, as avg_ns; null without RAPL
  add_roof_pairs(r, m.roof_pairs);
  r["notes"] = joined_notes(m.machine.notes);
  return r;
}

Record load_record(const BenchPoint& p, const RunReport& machine, const ModelFacts& model, const LoadSettings& s,
                   const LoadRun& run, const LoadBounds& bounds, const ServiceLevels& slo, const HostInfo& host) {
  const LoadLatencies latencies = load_latencies(run, s.n_gen);
  Record r = leading_fields(model, host, p, machine, utc_timestamp());
  add_dimensions(r, p, machine, model, "load",
                 fmt::format("load/rate{:.4g}/{}", s.rate, p.case_name()));
  r["rate"] = s.rate;
  r["requests"] = s.requests;
  r["seed"] = s.seed;
  r["wall_ms"] = run.wall_ms;
  r["forward_calls"] = run.forward_calls;
  r["max_batch_tokens"] = run.max_batch_tokens;
  r["avg_ts"] = run.generated_tokens / (run.wall_ms / 1e3);
  r["gen_ts"] = r["avg_ts"];  // a load run's rate counts generated tokens only
  r["achieved_rps"] = s.requests / (run.wall_ms / 1e3);
  add_percentiles_with_intervals(r, "ttft", latencies.ttft_ms);
  add_percentiles_with_intervals(r, "tpot", latencies.tpot_ms);
  add_percentiles(r, "e2e", latencies.e2e_ms);
  r["ttft_samples_ms"] = latencies.ttft_ms;  // per request, in arrival order
  r["e2e_samples_ms"] = latencies.e2e_ms;
  r["ttft_bound_ms"] = value_or_null(bounds.ttft_p99_ms > 0, bounds.ttft_p99_ms);
  r["tpot_bound_ms"] = value_or_null(bounds.tpot_p99_ms > 0, bounds.tpot_p99_ms);
  r["bounds_met"] = nullptr;
  if (bounds.given()) r["bounds_met"] = load_meets_bounds(r, bounds);
  int meeting = 0;
  for (std::size_t i = 0; i < latencies.ttft_ms.size(); ++i)
    meeting += (slo.ttft_ms <= 0 || latencies.ttft_ms[i] <= slo.ttft_ms) &&
               (slo.tpot_ms <= 0 || latencies.tpot_ms.empty() || latencies.tpot_ms[i] <= slo.tpot_ms);
  add_service_levels(r, slo, meeting, run.wall_ms);
  r["peak_rss_bytes"] = peak_resident_bytes();
  r["notes"] = joined_notes(machine.notes);
  return r;
}

bool load_meets_bounds(const Record& load, const LoadBounds& bounds) {
  auto within = [&](const char* key, double bound) {
    return bound <= 0 || load[key].is_null() || load[key].get<double>() <= bound;
  };
  return within("ttft_p99_ms", bounds.ttft_p99_ms) && within("tpot_p99_ms", bounds.tpot_p99_ms);
}

std::vector<MarkdownColumn> load_markdown_columns() {
  using Kind = MarkdownColumn::Kind;
  return {{"model", "model_type", Kind::text, ""},      {"threads", "n_threads", Kind::number, ""},
          {"slots", "n_seq", Kind::number, ""},          {"test", "test", Kind::text, ""},
          {"rate req/s", "rate", Kind::number, ""},      {"requests", "requests", Kind::number, ""},
          {"ttft p50 ms", "ttft_p50_ms", Kind::number, ""}, {"ttft p99 ms", "ttft_p99_ms", Kind::number, ""},
          {"tpot p50 ms", "tpot_p50_ms", Kind::number, ""}, {"tpot p99 ms", "tpot_p99_ms", Kind::number, ""},
          {"gen t/s", "avg_ts", Kind::number, ""},       {"done req/s", "achieved_rps", Kind::number, ""},
          {"goodput req/s", "goodput_rps", Kind::number, ""}, {"bounds met", "bounds_met", Kind::text, ""}};
}

Record url_load_record(const ServerIdentity& server, const std::string& engine, const UrlLoadSettings& s,
                       const UrlLoadRun& run, const ServiceLevels& slo, const HostInfo& host) {
  const UrlLoadLatencies l = url_load_latencies(run, slo.ttft_ms, slo.tpot_ms);
  Record r;
  r["build_commit"] = build_git_commit();
  r["cpu_info"] = host.cpu_model;
  r["model_filename"] = "";
  r["model_type"] = server.model;
  r["n_prompt"] = s.prompts.empty() ? Record(s.n_prompt) : Record(nullptr);
  r["n_gen"] = s.n_gen;
  r["n_seq"] = server.slots > 0 ? Record(server.slots) : Record(nullptr);  // the server's slots, where it says
  r["test_time"] = utc_timestamp();
  r["test"] = "load";
  r["case_name"] = fmt::format("load-url/rate{:.4g}/{}/{}", s.rate, engine, server.model);
  r["engine"] = engine;
  r["server_url"] = server.url;
  r["server_owned_by"] = server.owned_by;
  r["rate"] = s.rate;
  r["requests"] = static_cast<int64_t>(run.requests.size());
  r["duration_s"] = value_or_null(s.duration_s > 0, s.duration_s);
  r["completed"] = l.completed;
  Record errors = Record::object();
  for (const auto& [kind, count] : l.errors) errors[kind] = count;
  r["errors"] = errors;
  r["seed"] = s.seed;
  r["wall_ms"] = run.wall_ms;
  r["avg_ts"] = static_cast<double>(l.output_tokens) / (run.wall_ms / 1e3);
  r["gen_ts"] = r["avg_ts"];
  r["achieved_rps"] = l.completed / (run.wall_ms / 1e3);
  add_percentiles_with_intervals(r, "ttft", l.ttft_ms);
  add_percentiles_with_intervals(r, "tpot", l.tpot_ms);
  add_percentiles(r, "itl", l.itl_ms);
  add_percentiles(r, "e2e", l.e2e_ms);
  add_service_levels(r, slo, l.meeting_slo, run.wall_ms);
  return r;
}

std::vector<MarkdownColumn> url_load_markdown_columns() {
  using Kind = MarkdownColumn::Kind;
  return {{"server", "engine", Kind::text, ""},          {"model", "model_type", Kind::text, ""},
          {"rate req/s", "rate", Kind::number, ""},      {"requests", "requests", Kind::number, ""},
          {"done", "completed", Kind::number, ""},       {"ttft p50 ms", "ttft_p50_ms", Kind::number, ""},
          {"ttft p99 ms", "ttft_p99_ms", Kind::number, ""}, {"tpot p50 ms", "tpot_p50_ms", Kind::number, ""},
          {"tpot p99 ms", "tpot_p99_ms", Kind::number, ""}, {"itl p99 ms", "itl_p99_ms", Kind::number, ""},
          {"out t/s", "avg_ts", Kind::number, ""},       {"done req/s", "achieved_rps", Kind::number, ""},
          {"goodput req/s", "goodput_rps", Kind::number, ""}};
}

Record sharing_record(const BenchPoint& p, const SharingSettings& s, const SharingResult& result,
                      const ModelFacts& model, const HostInfo& host) {
  RunReport machine;  // the processes' own: each applies the point's settings
  machine.threads = s.threads;
  Record r = leading_fields(model, host, p, machine, utc_timestamp());
  add_dimensions(r, p, machine, model, "multiproc", fmt::format("multiproc/p{}/t{}", s.processes, s.threads));
  r["processes"] = s.processes;
  r["model_file_bytes"] = result.model_file_bytes;
  r["touched_bytes"] = result.touched_bytes;
  uint64_t rss = 0, pss = 0, model_rss = 0, model_pss = 0;
  for (const ProcessMemory& m : result.processes) rss += m.rss_bytes, pss += m.pss_bytes, model_rss += m.model_rss_bytes, model_pss += m.model_pss_bytes;
  r["sum_rss_bytes"] = rss;
  r["sum_pss_bytes"] = pss;
  r["model_sum_rss_bytes"] = model_rss;
  r["model_sum_pss_bytes"] = model_pss;
  r["saved_fraction"] = result.saved_fraction;
  r["model_saved_fraction"] = result.model_saved_fraction;
  r["seed_claimed_saved_fraction"] = 0.4;
  r["touch_seconds"] = result.touch_seconds;
  return r;
}

std::vector<MarkdownColumn> sharing_markdown_columns() {
  using Kind = MarkdownColumn::Kind;
  return {{"model", "model_type", Kind::text, ""},           {"size", "model_size", Kind::bytes, ""},
          {"processes", "processes", Kind::number, ""},       {"sum Rss", "sum_rss_bytes", Kind::bytes, ""},
          {"sum Pss", "sum_pss_bytes", Kind::bytes, ""},      {"saved", "saved_fraction", Kind::number, ""},
          {"model saved", "model_saved_fraction", Kind::number, ""}, {"seed claimed", "seed_claimed_saved_fraction", Kind::number, ""}};
}

void add_suite_reference(Record& r, const SuiteReference& s) {
  r["suite"] = s.suite;
  r["suite_command"] = s.command;
  r["reference"] = s.reference;
  r["reference_rate"] = s.rate;
  r["reference_unit"] = s.unit;
  r["work_per_token"] = s.work_per_token;
}

std::vector<MarkdownColumn> point_markdown_columns(const std::vector<BenchPoint>& points, bool roof_pairs) {
  using Kind = MarkdownColumn::Kind;
  std::vector<MarkdownColumn> columns = {{"model", "model_type", Kind::text, ""},
                                         {"size", "model_size", Kind::bytes, ""},
                                         {"params", "model_n_params", Kind::count, ""},
                                         {"backend", "backends", Kind::text, ""},
                                         {"threads", "n_threads", Kind::number, ""},
                                         {"isa", "isa", Kind::text, ""}};
  // A dimension gets a column when some point leaves its default, as llama-bench does.
  const BenchPoint defaults;
  auto varies = [&](auto field) {
    for (const BenchPoint& p : points)
      if (p.*field != defaults.*field) return true;
    return false;
  };
  if (varies(&BenchPoint::n_batch)) columns.push_back({"n_batch", "n_batch", Kind::number, ""});
  if (varies(&BenchPoint::n_seq)) columns.push_back({"n_seq", "n_seq", Kind::number, ""});
  if (varies(&BenchPoint::attn_tile)) columns.push_back({"attn_tile", "attn_tile", Kind::text, ""});
  if (varies(&BenchPoint::binding)) columns.push_back({"binding", "binding", Kind::text, ""});
  if (varies(&BenchPoint::placement)) columns.push_back({"placement", "placement", Kind::text, ""});
  if (varies(&BenchPoint::kv_type)) columns.push_back({"kv_type", "kv_type", Kind::text, ""});
  if (varies(&BenchPoint::prefetch)) columns.push_back({"prefetch", "prefetch", Kind::number, ""});
  columns.insert(columns.end(), {{"test", "test", Kind::text, ""},
                                 {"t/s", "avg_ts", Kind::rate, "stddev_ts"},
                                 {"ttft ms", "ttft_ms", Kind::number, ""},
                                 {"tpot ms", "tpot_ms", Kind::number, ""},
                                 {"itl p99 ms", "itl_p99_ms", Kind::number, ""},
                                 {"peak RSS", "peak_rss_bytes", Kind::bytes, ""}});
  if (roof_pairs)
    columns.insert(columns.end(), {{"paired GB/s", "paired_decode_gbs", Kind::number, ""},
                                   {"read GB/s", "paired_read_gbs", Kind::number, ""},
                                   {"of roof", "paired_roof_share", Kind::number, ""},
                                   {"of roof p50", "paired_roof_share_p50", Kind::number, ""}});
  return columns;
}

}  // namespace cpullm
