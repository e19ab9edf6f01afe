#include "harness/bench/bench_db.hpp"

namespace cpullm {
namespace {

// The keys that describe the configuration rather than the measurement.
constexpr const char* kConfigKeys[] = {"model_filename", "n_prompt", "n_gen", "n_depth", "n_threads", "n_batch", "n_seq",
                                       "isa", "attn_tile", "binding", "cpuset", "housekeeping", "numa",
                                       "placement", "kv_type", "prefetch", "cold", "inject_delay_ms",
                                       "repetitions", "rate", "requests", "processes", "ttft_bound_ms",
                                       "tpot_bound_ms", "sparsity", "server_url", "duration_s",
                                       "slo_ttft_ms", "slo_tpot_ms"};

std::string text_or_empty(const Record& r, const char* key) {
  return r.contains(key) && r[key].is_string() ? r[key].get<std::string>() : "";
}

template <typename T>
std::optional<T> number_or_none(const Record& r, const char* key) {
  if (!r.contains(key) || r[key].is_null()) return std::nullopt;
  if (r[key].is_boolean()) return static_cast<T>(r[key].get<bool>());
  return r[key].get<T>();
}

}  // namespace

ResultRecord result_record(const Record& r, const std::string& test) {
  ResultRecord out;
  out.case_name = text_or_empty(r, "case_name");
  out.test = test;
  out.model_filename = text_or_empty(r, "model_filename");
  out.model_type = text_or_empty(r, "model_type");
  out.model_size = number_or_none<int64_t>(r, "model_size");
  out.model_n_params = number_or_none<int64_t>(r, "model_n_params");
  out.format = text_or_empty(r, "format");
  out.isa = text_or_empty(r, "isa");
  out.binding = text_or_empty(r, "binding");
  out.cpuset = text_or_empty(r, "cpuset");
  out.numa = text_or_empty(r, "numa");
  out.placement = text_or_empty(r, "placement");
  out.attn_tile = text_or_empty(r, "attn_tile");
  out.kv_type = text_or_empty(r, "kv_type");
  out.n_threads = number_or_none<int64_t>(r, "n_threads");
  out.n_batch = number_or_none<int64_t>(r, "n_batch");
  out.n_seq = number_or_none<int64_t>(r, "n_seq");
  out.n_prompt = number_or_none<int64_t>(r, "n_prompt");
  out.n_gen = number_or_none<int64_t>(r, "n_gen");
  out.n_depth = number_or_none<int64_t>(r, "n_depth");
  out.prefetch = number_or_none<int64_t>(r, "prefetch");
  out.avg_ns = number_or_none<double>(r, "avg_ns");
  out.stddev_ns = number_or_none<double>(r, "stddev_ns");
  out.avg_ts = number_or_none<double>(r, "avg_ts");
  out.stddev_ts = number_or_none<double>(r, "stddev_ts");
  out.gen_ts = number_or_none<double>(r, "gen_ts");
  out.prompt_ts = number_or_none<double>(r, "prompt_ts");
  out.ttft_ms = number_or_none<double>(r, "ttft_ms");
  out.tpot_ms = number_or_none<double>(r, "tpot_ms");
  out.itl_p50_ms = number_or_none<double>(r, "itl_p50_ms");
  out.itl_p90_ms = number_or_none<double>(r, "itl_p90_ms");
  out.itl_p99_ms = number_or_none<double>(r, "itl_p99_ms");
  out.peak_rss_bytes = number_or_none<int64_t>(r, "peak_rss_bytes");
  out.energy_j = number_or_none<double>(r, "energy_j");
  out.test_time = text_or_empty(r, "test_time");
  // A load test against a server (bench --load --url) names its engine; everything else is cpullm's own run.
  out.engine = r.contains("engine") ? r["engine"].get<std::string>() : "cpullm";
  if (!r.contains("engine")) out.engine_commit = build_git_commit();

  Record config = Record::object(), metrics = Record::object();
  for (const char* key : kConfigKeys)
    if (r.contains(key)) config[key] = r[key];
  // Everything the summary columns and the configuration do not hold (load-scenario rates,
  // sharing savings, notes) goes into metrics_json.
  for (const auto& [key, value] : r.items())
    if (!config.contains(key) && !value.is_array()) metrics[key] = value;
  out.config_json = config.dump();
  out.metrics_json = metrics.dump();

  if (r.contains("samples_ns"))
    for (std::size_t i = 0; i < r["samples_ns"].size(); ++i) {
      SampleRecord sample;
      sample.repetition = static_cast<int32_t>(i);
      sample.ns = r["samples_ns"][i].get<double>();
      if (r.contains("samples_ts")) sample.ts = r["samples_ts"][i].get<double>();
      out.samples.push_back(sample);
    }
  return out;
}

ResultRecord point_result_record(const Record& r, const PointMeasurement& m, const std::string& test) {
  ResultRecord out = result_record(r, test);
  Record metrics = Record::parse(out.metrics_json);
  if (m.energy_j.empty()) {
    metrics["energy_unavailable"] = m.energy_unavailable;
  } else if (r["n_gen"].get<double>() > 0) {  // per generated token, as the TCO's throughput counts them
    metrics["energy_j_per_generated_token"] = *out.energy_j / (r["n_seq"].get<double>() * r["n_gen"].get<double>());
  }
  if (m.profile) {
    const PointProfile& p = *m.profile;
    metrics["profile_seconds"] = p.seconds;  // the instrumented repetition, not one of the samples
    metrics["roof_memory_bytes_per_s"] = p.roofs.bytes_per_s;
    metrics["roof_memory_source"] = p.roofs.memory_source;
    metrics["roof_flops_per_s"] = p.roofs.flops_per_s;
    metrics["roof_compute_source"] = p.roofs.compute_source;
    Record unavailable = Record::object();
    for (const UnavailableCounter& u : p.unavailable) unavailable[u.name] = u.reason;
    for (int i = 0; i < kRegionCount; ++i) {
      const RegionTotals& t = p.regions.regions[i];
      if (t.calls == 0) continue;
      Record counters = Record::object();
      for (std::size_t c = 0; c < p.regions.counter_names.size(); ++c) counters[p.regions.counter_names[c]] = t.counters[c];
      if (t.shared_calls) counters["shared_calls"] = t.shared_calls;  // time split with fused regions (regions.hpp)
      if (!unavailable.empty()) counters["unavailable"] = unavailable;
      out.regions.push_back({std::string(region_name(static_cast<Region>(i))), t.calls, t.seconds, t.flops, t.bytes,
                             counters.dump()});
    }
  }
  out.metrics_json = metrics.dump();
  return out;
}

}  // namespace cpullm
