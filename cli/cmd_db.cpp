// cpullm db: what the results database holds, for people: its runs, or one run's points, as a
// table or as JSON under the schema's column names (docs/results-db.md); and `import`, which
// stores that JSON, for the programs that measure but do not write the database themselves.
#include <charconv>
#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "cli/db_import.hpp"
#include "harness/bench/reporters.hpp"
#include "harness/results/results_db.hpp"
#include "engine/util/error.hpp"
#include "engine/util/text.hpp"

namespace cpullm::cli {
namespace {

struct DbOptions {
  std::string location;     // SQLite file or postgresql:// URL
  std::string what;         // runs | results | import
  std::string argument;     // results: the run id; import: the JSON file ("-": stdin)
  bool export_json = false;
  bool resume = false;      // import: into the unfinished run of the same kind and command
  std::string host;         // import of llama-bench output: the machine it ran on; empty: this one
};

// Text as the database holds it, which a file (SQLite) may hold in any bytes.
Record json_text(const std::string& text) { return valid_utf8(text); }
// Empty strings and optionals are the database's NULLs.
Record json_value(const std::string& text) { return text.empty() ? Record() : json_text(text); }
template <typename T>
Record json_value(const std::optional<T>& value) { return value ? Record(*value) : Record(); }

Record run_json(const RunRecord& run, size_t points) {
  return {{"id", run.id}, {"kind", json_text(run.kind)}, {"command", json_text(run.command)},
          {"started_at", json_text(run.started_at)}, {"finished_at", json_value(run.finished_at)},
          {"git_commit", json_value(run.git_commit)}, {"host", json_text(run.host.hostname)},
          {"cpu_model", json_text(run.host.cpu_model)}, {"cores", run.host.cores}, {"sockets", run.host.sockets},
          {"numa_nodes", run.host.numa_nodes}, {"memory_bytes", run.host.memory_bytes},
          {"kernel", json_text(run.host.kernel)}, {"isa_level", json_text(run.host.isa_level)},
          {"governor", json_text(run.host.governor)}, {"fingerprint", json_text(run.host.fingerprint)},
          {"points", points}};
}

Record result_json(const StoredResult& result) {
  Record out = {{"id", result.id}, {"run_id", result.run_id}};
  for (const ResultColumn& column : result_columns())
    out[column.name] = std::visit([&](auto member) { return json_value(result.record.*member); }, column.field);
  out["samples"] = Record::array();
  for (const SampleRecord& s : result.record.samples)
    out["samples"].push_back({{"repetition", s.repetition}, {"ns", s.ns}, {"ts", json_value(s.ts)}, {"metrics_json", json_value(s.metrics_json)}});
  out["regions"] = Record::array();
  for (const RegionRecord& r : result.record.regions)
    out["regions"].push_back({{"name", json_text(r.name)}, {"calls", r.calls}, {"seconds", r.seconds}, {"flops", r.flops}, {"bytes", r.bytes},
                              {"counters_json", json_value(r.counters_json)}});
  return out;
}

// JSON (one document) or a markdown table of `columns` (bench's reporter), one row per record.
void print(const std::vector<Record>& records, bool export_json, std::vector<MarkdownColumn> columns) {
  if (export_json) {
    std::printf("%s\n", Record(records).dump(2).c_str());
    return;
  }
  const auto table = make_reporter("md", stdout, std::move(columns), "");
  for (const Record& record : records) table->add(record);
  table->finish();
}

void run_db(const DbOptions& o) {
  if (o.what == "import") {
    if (o.argument.empty()) fail("cpullm db import: which file? (cpullm db --db {} import FILE, - for stdin)", o.location);
    ResultsDb db(o.location, DbOpen::create);
    import_runs(db, o.argument, o.resume, o.host);
    return;
  }
  ResultsDb db(o.location, DbOpen::existing);
  using Kind = MarkdownColumn::Kind;
  std::vector<Record> records;
  if (o.what == "runs") {
    for (const RunRecord& run : db.runs()) records.push_back(run_json(run, db.completed_cases(run.id).size()));
    if (records.empty() && !o.export_json) std::printf("no runs in %s\n", o.location.c_str());
    print(records, o.export_json,
          {{"id", "id", Kind::number, ""},
           {"kind", "kind", Kind::text, ""},
           {"started_at", "started_at", Kind::text, ""},
           {"finished_at", "finished_at", Kind::text, ""},  // "-": unfinished
           {"points", "points", Kind::number, ""},
           {"host", "host", Kind::text, ""},
           {"git_commit", "git_commit", Kind::text, ""},
           {"command", "command", Kind::text, ""}});
    return;
  }
  if (o.argument.empty()) fail("cpullm db results: which run? (cpullm db --db {} results RUN_ID)", o.location);
  int64_t run_id = -1;
  if (const auto [end, error] = std::from_chars(o.argument.data(), o.argument.data() + o.argument.size(), run_id);
      error != std::errc() || end != o.argument.data() + o.argument.size() || run_id < 0)
    fail("cpullm db results {}: a run id is a number from `cpullm db runs`", o.argument);
  const RunRecord run = db.run(run_id);  // an Error naming the run when there is none
  for (const StoredResult& result : db.results(run.id)) records.push_back(result_json(result));
  if (o.export_json) {
    std::printf("%s\n", Record{{"run", run_json(run, records.size())}, {"results", records}}.dump(2).c_str());
    return;
  }
  std::printf("run %ld (%s, %s): %s\n\n", static_cast<long>(run.id), run.kind.c_str(),
              run.finished_at.empty() ? "unfinished" : ("finished " + run.finished_at).c_str(), run.command.c_str());
  print(records, false,
        {{"id", "id", Kind::number, ""},
         {"case", "case_name", Kind::text, ""},
         {"test", "test", Kind::text, ""},
         {"format", "format", Kind::text, ""},
         {"isa", "isa", Kind::text, ""},
         {"threads", "n_threads", Kind::number, ""},
         {"n_prompt", "n_prompt", Kind::number, ""},
         {"n_gen", "n_gen", Kind::number, ""},
         {"n_depth", "n_depth", Kind::number, ""},
         {"t/s", "avg_ts", Kind::rate, "stddev_ts"},
         {"ttft_ms", "ttft_ms", Kind::number, ""},
         {"tpot_ms", "tpot_ms", Kind::number, ""},
         {"peak RSS", "peak_rss_bytes", Kind::bytes, ""}});
}

}  // namespace

void register_db(CLI::App& app) {
  auto options = std::make_shared<DbOptions>();
  CLI::App* command = app.add_subcommand("db", "What a results database holds: its runs, or one run's points; import runs from JSON");
  command->add_option("--db", options->location, "SQLite file or postgresql:// URL")->required();
  command->add_option("what", options->what, "runs: every run; results: one run's points; import: runs from JSON")
      ->required()->check(CLI::IsMember({"runs", "results", "import"}));
  command->add_option("argument", options->argument, "results: the run (an id from `runs`); import: a JSON file as "
                                                      "`results --export-json` prints it, or an array of them, or "
                                                      "llama-bench's -o json, jsonl or sql output (-: stdin)");
  command->add_flag("--export-json", options->export_json, "Print JSON under the schema's column names instead of a table");
  command->add_option("--host", options->host, "import of llama-bench output: the machine it ran on (default: this one)");
  command->add_flag("--resume", options->resume, "import: add to the unfinished run of the same kind and command on the "
                                                 "same host, skipping cases it has");
  command->callback([options] { run_db(*options); });
}

}  // namespace cpullm::cli
