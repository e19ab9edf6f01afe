// ResultsDb: the schema's migrations, and runs, results, samples and regions in and out, in
// SQL both backends speak.
#include "harness/results/results_db.hpp"

#include <ctime>
#include <map>
#include <regex>
#include <variant>

#include "harness/results/backend.hpp"
#include "harness/results/schema.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// Empty strings and empty optionals are NULL: "not measured", never 0 or "".
SqlValue to_sql(const std::string& value) { return value.empty() ? SqlValue{} : SqlValue{value}; }
SqlValue to_sql(const std::optional<int64_t>& value) { return value ? SqlValue{*value} : SqlValue{}; }
SqlValue to_sql(const std::optional<double>& value) { return value ? SqlValue{*value} : SqlValue{}; }

void from_sql(const SqlValue& value, std::string& out) {
  if (const auto* text = std::get_if<std::string>(&value)) out = *text;
}
void from_sql(const SqlValue& value, std::optional<int64_t>& out) {
  if (const auto* integer = std::get_if<int64_t>(&value)) out = *integer;
}
void from_sql(const SqlValue& value, std::optional<double>& out) {
  if (const auto* real = std::get_if<double>(&value)) out = *real;
  if (const auto* integer = std::get_if<int64_t>(&value)) out = static_cast<double>(*integer);
}
void from_sql(const SqlValue& value, int64_t& out) {
  std::optional<int64_t> integer;
  from_sql(value, integer);
  out = integer.value_or(0);
}
std::string text_of(const SqlValue& value) {
  std::string text;
  from_sql(value, text);
  return text;
}
int64_t integer_of(const SqlValue& value) {
  int64_t integer = 0;
  from_sql(value, integer);
  return integer;
}
double real_of(const SqlValue& value) {
  std::optional<double> real;
  from_sql(value, real);
  return real.value_or(0);
}

// "?, ?, ?" for n values.
std::string placeholders(size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += i ? ", ?" : "?";
  return out;
}

// result_columns(): the `results` columns in table order after id and run_id.
const ResultColumn columns_of_results[] = {
    {"case_name", &ResultRecord::case_name},   {"test", &ResultRecord::test},
    {"model_filename", &ResultRecord::model_filename}, {"model_type", &ResultRecord::model_type},
    {"model_size", &ResultRecord::model_size}, {"model_n_params", &ResultRecord::model_n_params},
    {"format", &ResultRecord::format},         {"isa", &ResultRecord::isa},
    {"n_threads", &ResultRecord::n_threads},   {"binding", &ResultRecord::binding},
    {"cpuset", &ResultRecord::cpuset},         {"numa", &ResultRecord::numa},
    {"placement", &ResultRecord::placement},   {"attn_tile", &ResultRecord::attn_tile},
    {"kv_type", &ResultRecord::kv_type},       {"n_batch", &ResultRecord::n_batch},
    {"n_seq", &ResultRecord::n_seq},           {"n_prompt", &ResultRecord::n_prompt},
    {"n_gen", &ResultRecord::n_gen},           {"prefetch", &ResultRecord::prefetch},
    {"config_json", &ResultRecord::config_json}, {"avg_ns", &ResultRecord::avg_ns},
    {"stddev_ns", &ResultRecord::stddev_ns},   {"avg_ts", &ResultRecord::avg_ts},
    {"stddev_ts", &ResultRecord::stddev_ts},   {"ttft_ms", &ResultRecord::ttft_ms},
    {"tpot_ms", &ResultRecord::tpot_ms},       {"itl_p50_ms", &ResultRecord::itl_p50_ms},
    {"itl_p90_ms", &ResultRecord::itl_p90_ms}, {"itl_p99_ms", &ResultRecord::itl_p99_ms},
    {"peak_rss_bytes", &ResultRecord::peak_rss_bytes}, {"energy_j", &ResultRecord::energy_j},
    {"metrics_json", &ResultRecord::metrics_json}, {"test_time", &ResultRecord::test_time},
    {"gen_ts", &ResultRecord::gen_ts},         {"prompt_ts", &ResultRecord::prompt_ts},
    {"n_depth", &ResultRecord::n_depth},       {"engine", &ResultRecord::engine},
    {"engine_version", &ResultRecord::engine_version}, {"engine_commit", &ResultRecord::engine_commit},
};

std::string result_column_list() {
  std::string list;
  for (const auto& column : columns_of_results) list += std::string(list.empty() ? "" : ", ") + column.name;
  return list;
}

const char* const run_columns =
    "id, kind, command, started_at, finished_at, git_commit, host, cpu_model, cores, sockets, numa_nodes, "
    "memory_bytes, kernel, isa_level, governor, fingerprint";

RunRecord run_from_row(const SqlRow& row) {
  RunRecord run;
  from_sql(row[0], run.id);
  from_sql(row[1], run.kind);
  from_sql(row[2], run.command);
  from_sql(row[3], run.started_at);
  from_sql(row[4], run.finished_at);
  from_sql(row[5], run.git_commit);
  from_sql(row[6], run.host.hostname);
  from_sql(row[7], run.host.cpu_model);
  from_sql(row[8], run.host.cores);
  from_sql(row[9], run.host.sockets);
  from_sql(row[10], run.host.numa_nodes);
  from_sql(row[11], run.host.memory_bytes);
  from_sql(row[12], run.host.kernel);
  from_sql(row[13], run.host.isa_level);
  from_sql(row[14], run.host.governor);
  from_sql(row[15], run.host.fingerprint);
  return run;
}

int stored_version(Connection& connection) {
  return static_cast<int>(integer_of(connection.query("SELECT MAX(version) FROM schema_version")[0][0]));
}

}  // namespace

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::span<const ResultColumn> result_columns() { return columns_of_results; }

std::string without_password(const std::string& text) {
  static const std::pair<std::regex, const char*> passwords[] = {
      {std::regex(R"((postgres(?:ql)?://[^:/@\s]*:)[^@/\s]*@)"), "$1***@"},
      {std::regex(R"(([?&]password=)[^&#\s]*)"), "$1***"},
      {std::regex(R"(((?:^|[\s=])password\s*=\s*)('(?:[^'\\]|\\.)*'|(?:\\.|[^\s\\])+))"), "$1***"}};
  std::string out = text;
  for (const auto& [pattern, replacement] : passwords) out = std::regex_replace(out, pattern, replacement);
  return out;
}

bool is_postgres(const std::string& location) {
  static const std::regex postgres(R"(^(postgres(ql)?://|\s*[A-Za-z_][A-Za-z0-9_]*\s*=))");
  return std::regex_search(location, postgres);
}

std::unique_ptr<Connection> open_connection(const std::string& location, bool create) {
  if (location.empty()) fail("--db: empty path");
  return is_postgres(location) ? open_postgres(location) : open_sqlite(location, create);
}

ResultsDb::ResultsDb(const std::string& location, DbOpen mode)
    : location_(location), connection_(open_connection(location, mode == DbOpen::create)) {
  Transaction transaction(*connection_);
  connection_->lock_schema();
  connection_->execute_script("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);");
  const int current = stored_version(*connection_);
  if (current > latest_schema_version())
    fail_file(connection_->name(), "schema version {} is newer than this cpullm knows ({}): use a newer build", current,
              latest_schema_version());
  for (const Migration& migration : schema_migrations()) {
    if (migration.version <= current) continue;
    connection_->execute_script(migration.sql);
    connection_->query("INSERT INTO schema_version (version) VALUES (?)", {int64_t{migration.version}});
  }
  transaction.commit();
}

ResultsDb::~ResultsDb() = default;

int ResultsDb::schema_version() { return stored_version(*connection_); }

int64_t ResultsDb::begin_run(const std::string& kind, const std::string& command) {
  return begin_run(kind, command, detect_host());
}

int64_t ResultsDb::begin_run(const std::string& kind, const std::string& command, const HostInfo& host) {
  RunRecord run;
  run.kind = kind;
  run.command = command;
  run.started_at = utc_timestamp();
  run.git_commit = build_git_commit();
  run.host = host;
  return add_run(run);
}

int64_t ResultsDb::add_run(const RunRecord& run) {
  const HostInfo& host = run.host;
  const std::vector<SqlValue> values = {run.kind, run.command, run.started_at, to_sql(run.git_commit),
                                        host.hostname, host.cpu_model, host.cores, host.sockets, host.numa_nodes,
                                        host.memory_bytes, host.kernel, host.isa_level, host.governor, host.fingerprint};
  const auto rows = connection_->query(
      "INSERT INTO runs (kind, command, started_at, git_commit, host, cpu_model, cores, sockets, numa_nodes, "
      "memory_bytes, kernel, isa_level, governor, fingerprint) VALUES (" + placeholders(values.size()) + ") RETURNING id",
      values);
  return integer_of(rows.at(0).at(0));
}

int64_t ResultsDb::add_result(int64_t run_id, const ResultRecord& result) {
  if (result.case_name.empty() || result.test.empty())
    fail_file(connection_->name(), "a result needs a case_name and a test (got \"{}\", \"{}\")", result.case_name, result.test);
  Transaction transaction(*connection_);
  const RunRecord owner = run(run_id);
  if (!owner.finished_at.empty())
    fail_file(connection_->name(), "run {} finished at {}: results go to an unfinished run", run_id, owner.finished_at);
  if (!connection_->query("SELECT 1 FROM results WHERE run_id = ? AND case_name = ?", {run_id, result.case_name}).empty())
    fail_file(connection_->name(), "run {} already has a result for case \"{}\" (case names are unique within a run)", run_id,
              result.case_name);

  ResultRecord row = result;  // with what an empty config_json, test_time and engine stand for
  if (row.config_json.empty()) row.config_json = "{}";
  if (row.test_time.empty()) row.test_time = utc_timestamp();
  if (row.engine.empty()) row.engine = "cpullm";
  std::vector<SqlValue> values = {run_id};
  for (const auto& column : columns_of_results)
    values.push_back(std::visit([&](auto member) { return to_sql(row.*member); }, column.field));
  const int64_t result_id = integer_of(
      connection_->query("INSERT INTO results (run_id, " + result_column_list() + ") VALUES (" + placeholders(values.size()) +
                             ") RETURNING id", values).at(0).at(0));
  for (const SampleRecord& sample : result.samples)
    connection_->query("INSERT INTO samples (result_id, repetition, ns, ts, metrics_json) VALUES (?, ?, ?, ?, ?)",
                       {result_id, int64_t{sample.repetition}, sample.ns, to_sql(sample.ts), to_sql(sample.metrics_json)});
  for (const RegionRecord& region : result.regions)
    connection_->query("INSERT INTO regions (result_id, name, calls, seconds, flops, bytes, counters_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       {result_id, to_sql(region.name), region.calls, region.seconds, region.flops, region.bytes,
                        to_sql(region.counters_json)});
  transaction.commit();
  return result_id;
}

void ResultsDb::finish_run(int64_t run_id, const std::string& at) {
  run(run_id);  // an Error when there is no such run
  connection_->query("UPDATE runs SET finished_at = ? WHERE id = ? AND finished_at IS NULL", {at.empty() ? utc_timestamp() : at, run_id});
}

std::optional<RunRecord> ResultsDb::find_unfinished_run(const std::string& kind, const std::string& command) {
  return find_unfinished_run(kind, command, detect_host());
}

std::optional<RunRecord> ResultsDb::find_unfinished_run(const std::string& kind, const std::string& command, const HostInfo& host) {
  const auto rows = connection_->query(
      std::string("SELECT ") + run_columns +
          " FROM runs WHERE kind = ? AND command = ? AND host = ? AND fingerprint = ? AND finished_at IS NULL ORDER BY id DESC LIMIT 1",
      {kind, command, host.hostname, host.fingerprint});
  if (rows.empty()) return std::nullopt;
  return run_from_row(rows[0]);
}

RunRecord ResultsDb::run(int64_t run_id) {
  const auto rows = connection_->query(std::string("SELECT ") + run_columns + " FROM runs WHERE id = ?", {run_id});
  if (rows.empty()) fail_file(connection_->name(), "no run {}", run_id);
  return run_from_row(rows[0]);
}

std::vector<RunRecord> ResultsDb::runs() {
  std::vector<RunRecord> runs;
  for (const SqlRow& row : connection_->query(std::string("SELECT ") + run_columns + " FROM runs ORDER BY id"))
    runs.push_back(run_from_row(row));
  return runs;
}

std::set<std::string> ResultsDb::completed_cases(int64_t run_id) {
  std::set<std::string> cases;
  for (const SqlRow& row : connection_->query("SELECT case_name FROM results WHERE run_id = ?", {run_id}))
    cases.insert(text_of(row[0]));
  return cases;
}

std::vector<StoredResult> ResultsDb::results(int64_t run_id) {
  std::vector<StoredResult> results;
  std::map<int64_t, size_t> index_of;  // result id -> position in results
  for (const SqlRow& row :
       connection_->query("SELECT id, run_id, " + result_column_list() + " FROM results WHERE run_id = ? ORDER BY id", {run_id})) {
    StoredResult& stored = results.emplace_back();
    from_sql(row[0], stored.id);
    from_sql(row[1], stored.run_id);
    for (size_t i = 0; i < std::size(columns_of_results); ++i)
      std::visit([&](auto member) { from_sql(row[i + 2], stored.record.*member); }, columns_of_results[i].field);
    index_of[stored.id] = results.size() - 1;
  }
  for (const SqlRow& row : connection_->query(
           "SELECT s.result_id, s.repetition, s.ns, s.ts, s.metrics_json FROM samples s JOIN results r ON s.result_id = r.id "
           "WHERE r.run_id = ? ORDER BY s.result_id, s.repetition", {run_id})) {
    SampleRecord& sample = results[index_of.at(integer_of(row[0]))].record.samples.emplace_back();
    sample.repetition = static_cast<int32_t>(integer_of(row[1]));
    sample.ns = real_of(row[2]);
    from_sql(row[3], sample.ts);
    from_sql(row[4], sample.metrics_json);
  }
  // Regions have no order of their own: slowest first, as a profile reads.
  for (const SqlRow& row : connection_->query(
           "SELECT g.result_id, g.name, g.calls, g.seconds, g.flops, g.bytes, g.counters_json FROM regions g "
           "JOIN results r ON g.result_id = r.id WHERE r.run_id = ? ORDER BY g.result_id, g.seconds DESC, g.name", {run_id})) {
    RegionRecord& region = results[index_of.at(integer_of(row[0]))].record.regions.emplace_back();
    from_sql(row[1], region.name);
    from_sql(row[2], region.calls);
    region.seconds = real_of(row[3]);
    region.flops = real_of(row[4]);
    region.bytes = real_of(row[5]);
    from_sql(row[6], region.counters_json);
  }
  return results;
}

int64_t resume_run(ResultsDb& db, const std::string& kind, const std::string& command, std::optional<int64_t> resume_id) {
  const HostInfo here = detect_host();
  if (!resume_id) {
    const auto unfinished = db.find_unfinished_run(kind, command, here);
    return unfinished ? unfinished->id : db.begin_run(kind, command, here);
  }
  const RunRecord run = db.run(*resume_id);
  if (run.kind != kind) fail("--resume {}: run {} is a {} run, not {}", *resume_id, run.id, run.kind, kind);
  if (!run.finished_at.empty())
    fail("--resume {}: run {} finished at {}; nothing to resume (without --resume a new run starts)", *resume_id, run.id, run.finished_at);
  if (run.host.fingerprint != here.fingerprint)
    fail("--resume {}: run {} was measured on another machine ({}, {}); this is {}, {}", *resume_id, run.id, run.host.hostname,
         run.host.cpu_model, here.hostname, here.cpu_model);
  return run.id;
}

std::string command_line(int argc, const char* const* argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (i == 0) arg = arg.substr(arg.rfind('/') + 1);  // "cpullm" wherever the binary lives
    if (arg.starts_with("--resume=")) continue;
    if (arg == "--resume") {
      const std::string next = i + 1 < argc ? argv[i + 1] : "";
      if (!next.empty() && next.find_first_not_of("0123456789") == std::string::npos) ++i;  // its RUN_ID
      continue;
    }
    const bool plain = !arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+@%^-") ==
                                           std::string::npos;
    // Masked before quoting (a conninfo password would take the closing quote), quoted or not
    // as the argument itself.
    arg = without_password(arg);
    if (!plain) {
      std::string quoted = "'";
      for (const char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      arg = quoted + "'";
    }
    if (!line.empty()) line += ' ';
    line += arg;
  }
  return line;
}

}  // namespace cpullm
