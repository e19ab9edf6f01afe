// JSON documents to RunRecord and ResultRecord, by the schema's column names, then through
// ResultsDb like every other write.
#include "cli/db_import.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "engine/util/error.hpp"
#include "engine/util/text.hpp"
#include "harness/results/llama_bench_output.hpp"

namespace cpullm::cli {
namespace {

using Json = nlohmann::json;

// Where an Error points: the file, then the run and the field within it.
struct Place {
  const std::string& path;
  std::string where;  // e.g. "run 2, result 'tg16/t1'"
};

void set(const Place& at, const std::string& key, const Json& value, std::string& out) {
  if (value.is_null()) return;
  // A *_json column may come as the JSON itself; it is stored as its text.
  if (key.ends_with("_json") && value.is_object()) {
    out = value.dump();
    return;
  }
  if (!value.is_string()) fail_file(at.path, "{}: {} must be a string, not {}", at.where, key, value.dump());
  out = value.get<std::string>();
}
void set(const Place& at, const std::string& key, const Json& value, std::optional<int64_t>& out) {
  if (value.is_null()) return;
  if (!value.is_number_integer()) fail_file(at.path, "{}: {} must be an integer, not {}", at.where, key, value.dump());
  out = value.get<int64_t>();
}
void set(const Place& at, const std::string& key, const Json& value, std::optional<double>& out) {
  if (value.is_null()) return;
  if (!value.is_number()) fail_file(at.path, "{}: {} must be a number, not {}", at.where, key, value.dump());
  out = value.get<double>();
}
void set(const Place& at, const std::string& key, const Json& value, int64_t& out) {
  std::optional<int64_t> integer;
  set(at, key, value, integer);
  if (!integer) fail_file(at.path, "{}: {} must be an integer, not null", at.where, key);
  out = *integer;
}
void set(const Place& at, const std::string& key, const Json& value, double& out) {
  std::optional<double> number;
  set(at, key, value, number);
  if (!number) fail_file(at.path, "{}: {} must be a number, not null", at.where, key);
  out = *number;
}

const Json& object_at(const Place& at, const Json& value) {
  if (!value.is_object()) fail_file(at.path, "{}: must be a JSON object, not {}", at.where, value.dump());
  return value;
}

// here: this host, whose fields stand for those the document leaves out.
RunRecord read_run(const Place& at, const Json& doc, const HostInfo& here) {
  RunRecord run;
  run.started_at = utc_timestamp();
  run.git_commit = build_git_commit();
  run.host = here;
  HostInfo& host = run.host;
  bool host_given = false, fingerprint_given = false;
  for (const auto& [key, value] : object_at(at, doc).items()) {
    if (key == "id" || key == "points") continue;  // what the export adds: this database numbers its own
    if (key == "kind") set(at, key, value, run.kind);
    else if (key == "command") set(at, key, value, run.command);
    else if (key == "started_at") set(at, key, value, run.started_at);
    else if (key == "finished_at") set(at, key, value, run.finished_at);
    else if (key == "git_commit") set(at, key, value, run.git_commit);
    else if (key == "fingerprint") set(at, key, value, host.fingerprint), fingerprint_given = true;
    else if (key == "host") set(at, key, value, host.hostname), host_given = true;
    else if (key == "cpu_model") set(at, key, value, host.cpu_model), host_given = true;
    else if (key == "cores") set(at, key, value, host.cores), host_given = true;
    else if (key == "sockets") set(at, key, value, host.sockets), host_given = true;
    else if (key == "numa_nodes") set(at, key, value, host.numa_nodes), host_given = true;
    else if (key == "memory_bytes") set(at, key, value, host.memory_bytes), host_given = true;
    else if (key == "kernel") set(at, key, value, host.kernel), host_given = true;
    else if (key == "isa_level") set(at, key, value, host.isa_level), host_given = true;
    else if (key == "governor") set(at, key, value, host.governor), host_given = true;
    else fail_file(at.path, "{}: unknown field '{}' (runs has no such column)", at.where, key);
  }
  if (run.kind.empty() || run.command.empty()) fail_file(at.path, "{}: a run needs a kind and a command", at.where);
  if (host_given && !fingerprint_given) host.fingerprint = host_fingerprint(host);  // another machine's
  return run;
}

SampleRecord read_sample(const Place& at, const Json& doc) {
  SampleRecord sample;
  std::optional<int64_t> repetition;
  bool has_ns = false;
  for (const auto& [key, value] : object_at(at, doc).items()) {
    if (key == "repetition") set(at, key, value, repetition);
    else if (key == "ns") set(at, key, value, sample.ns), has_ns = true;
    else if (key == "ts") set(at, key, value, sample.ts);
    else if (key == "metrics_json") set(at, key, value, sample.metrics_json);
    else fail_file(at.path, "{}: unknown field '{}' (samples has no such column)", at.where, key);
  }
  if (!repetition || !has_ns) fail_file(at.path, "{}: a sample needs a repetition and ns", at.where);
  sample.repetition = static_cast<int32_t>(*repetition);
  return sample;
}

RegionRecord read_region(const Place& at, const Json& doc) {
  RegionRecord region;
  for (const auto& [key, value] : object_at(at, doc).items()) {
    if (key == "name") set(at, key, value, region.name);
    else if (key == "calls") set(at, key, value, region.calls);
    else if (key == "seconds") set(at, key, value, region.seconds);
    else if (key == "flops") set(at, key, value, region.flops);
    else if (key == "bytes") set(at, key, value, region.bytes);
    else if (key == "counters_json") set(at, key, value, region.counters_json);
    else fail_file(at.path, "{}: unknown field '{}' (regions has no such column)", at.where, key);
  }
  if (region.name.empty()) fail_file(at.path, "{}: a region needs a name", at.where);
  return region;
}

const Json& array_at(const Place& at, const Json& value) {
  if (!value.is_array()) fail_file(at.path, "{}: must be a JSON array, not {}", at.where, value.dump());
  return value;
}

ResultRecord read_result(const Place& at, const Json& doc) {
  ResultRecord result;
  for (const auto& [key, value] : object_at(at, doc).items()) {
    if (key == "id" || key == "run_id") continue;  // numbered by this database
    if (key == "samples") {
      for (const Json& sample : array_at({at.path, at.where + ", samples"}, value))
        result.samples.push_back(read_sample({at.path, at.where + ", a sample"}, sample));
      continue;
    }
    if (key == "regions") {
      for (const Json& region : array_at({at.path, at.where + ", regions"}, value))
        result.regions.push_back(read_region({at.path, at.where + ", a region"}, region));
      continue;
    }
    bool known = false;
    for (const ResultColumn& column : result_columns()) {
      if (key != column.name) continue;
      std::visit([&](auto member) { set(at, key, value, result.*member); }, column.field);
      known = true;
    }
    if (!known) fail_file(at.path, "{}: unknown field '{}' (results has no such column)", at.where, key);
  }
  return result;
}

std::string read_text(const std::string& path) {
  std::ostringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail_file(path, "cannot open");
    text << in.rdbuf();
  }
  return text.str();
}

Json parse_json(const std::string& path, const std::string& text) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    fail_file(path, "not JSON (cpullm's export) nor llama-bench output: {}", e.what());
  }
}

// llama-bench's output as one finished run of kind "import" on `host_name` (empty: this machine):
// another machine is known by its name and llama-bench's cpu_info only.
void import_llama_bench(ResultsDb& db, const std::string& path, const std::string& text, const std::string& host_name) {
  const LlamaBenchOutput output = read_llama_bench_output(text, path);
  RunRecord run;
  run.kind = "import";
  run.command = "llama-bench output " + valid_utf8(path);
  run.started_at = output.results.front().test_time.empty() ? utc_timestamp() : output.results.front().test_time;
  run.git_commit = build_git_commit();
  run.host = detect_host();
  if (!host_name.empty() && host_name != run.host.hostname) {
    run.host = HostInfo{};
    run.host.hostname = host_name;
    run.host.cpu_model = output.cpu_info;
    run.host.fingerprint = host_fingerprint(run.host);
  }
  const int64_t run_id = db.add_run(run);
  for (const ResultRecord& result : output.results) db.add_result(run_id, result);
  db.finish_run(run_id, output.results.back().test_time);
  std::printf("run %ld (import): %zu llama-bench tests imported (llama.cpp build %s, %s), host %s\n",
              static_cast<long>(run_id), output.results.size(), output.results.front().engine_version.c_str(),
              output.results.front().engine_commit.c_str(), run.host.hostname.c_str());
}

}  // namespace

void import_runs(ResultsDb& db, const std::string& path, bool resume, const std::string& host_name) {
  const std::string text = read_text(path);
  if (is_llama_bench_output(text)) {
    if (resume) fail_file(path, "llama-bench output is imported as a run of its own: no --resume");
    import_llama_bench(db, path, text, host_name);
    return;
  }
  if (!host_name.empty()) fail_file(path, "--host names the machine of llama-bench output; cpullm's JSON names its own");
  const Json input = parse_json(path, text);
  const Json documents = input.is_array() ? input : Json::array({input});
  const HostInfo here = detect_host();
  for (size_t i = 0; i < documents.size(); ++i) {
    const Place doc_at{path, fmt::format("document {}", i + 1)};
    const Json& doc = object_at(doc_at, documents[i]);
    if (!doc.contains("run")) fail_file(path, "{}: no \"run\"", doc_at.where);
    RunRecord run = read_run({path, doc_at.where + ", run"}, doc["run"], here);
    std::vector<ResultRecord> results;
    if (doc.contains("results"))
      for (const Json& result : array_at({path, doc_at.where + ", results"}, doc["results"]))
        results.push_back(read_result({path, fmt::format("{}, result {}", doc_at.where, results.size() + 1)}, result));
    for (const auto& [key, value] : doc.items())
      if (key != "run" && key != "results") fail_file(path, "{}: unknown field '{}' (a document has run and results)", doc_at.where, key);

    const std::optional<RunRecord> unfinished = resume ? db.find_unfinished_run(run.kind, run.command, run.host) : std::nullopt;
    const int64_t run_id = unfinished ? unfinished->id : db.add_run(run);
    const std::set<std::string> done = db.completed_cases(run_id);
    size_t added = 0;
    for (const ResultRecord& result : results) {
      if (done.contains(result.case_name)) continue;
      db.add_result(run_id, result);
      ++added;
    }
    if (!run.finished_at.empty()) db.finish_run(run_id, run.finished_at);
    std::printf("run %ld (%s): %zu points imported, %zu already there\n", static_cast<long>(run_id), run.kind.c_str(), added,
                results.size() - added);
  }
}

}  // namespace cpullm::cli
