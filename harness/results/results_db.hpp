// The results database: every measured point cpullm reports is stored here, in SQLite (a file,
// WAL) or PostgreSQL (a postgresql:// URL or a libpq conninfo string, for a team collecting results from many servers).
// The tables are in harness/results/schema.sql and docs/results-db.md.
//
// A writer (cpullm bench, the sweep driver) does:
//   ResultsDb db(path_or_url);                                  // creates or migrates the schema
//   int64_t run = db.begin_run("bench", command_line(argc, argv));
//   for each point: if (!done.contains(case_name)) db.add_result(run, result);  // committed at once
//   db.finish_run(run);
// and for --resume: resume_run(db, kind, command, id) picks the run, completed_cases() the
// points it already has. A process killed mid-run loses at most the point in flight.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "harness/results/host_info.hpp"

namespace cpullm {

// One repetition of a point (table `samples`).
struct SampleRecord {
  int32_t repetition = 0;     // 0, 1, ... in the order they ran (warm-up excluded)
  double ns = 0;              // wall time of the repetition
  std::optional<double> ts;   // tokens/s of the repetition, where it has tokens
  std::string metrics_json;   // anything else, as a JSON object; empty: none
};

// One region's profile for a point (table `regions`, the roofline inputs).
struct RegionRecord {
  std::string name;           // embedding, attn_norm, q_proj, ... lm_head, sampling
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;           // analytic, from shapes and formats
  double bytes = 0;
  std::string counters_json;  // hardware counters where available, else why not; empty: none
};

// One measured point (table `results`): its configuration, summary metrics, repetitions and
// regions. Optional fields left empty are stored as NULL ("not measured", never 0).
struct ResultRecord {
  std::string case_name;                 // unique within a run, stable across runs, e.g. "pp512/q8_0/t2"
  std::string test;                      // pp | tg | pg | load | multiproc | kernel
  std::string model_filename, model_type;
  std::optional<int64_t> model_size, model_n_params;
  std::string format, isa, binding, cpuset, numa, placement, attn_tile, kv_type;  // empty: NULL
  std::optional<int64_t> n_threads, n_batch, n_seq, n_prompt, n_gen, prefetch;
  std::optional<int64_t> n_depth;  // positions filled before the test (llama-bench's -d)
  std::string config_json = "{}";        // every option of the point, long names, as a JSON object
  std::optional<double> avg_ns, stddev_ns, avg_ts, stddev_ts;
  std::optional<double> gen_ts, prompt_ts;  // generated tokens / the whole time; prompt tokens / the prefill's
  std::optional<double> ttft_ms, tpot_ms, itl_p50_ms, itl_p90_ms, itl_p99_ms;
  std::optional<int64_t> peak_rss_bytes;
  std::optional<double> energy_j;
  std::string metrics_json;              // anything else, as a JSON object; empty: NULL
  std::string test_time;                 // ISO 8601 UTC when the point ran; empty: now
  std::string engine;                    // which engine measured it: cpullm (empty stands for it) or llama.cpp
  std::string engine_version, engine_commit;  // its version and build commit, where known; empty: NULL
  std::vector<SampleRecord> samples;
  std::vector<RegionRecord> regions;
};

// The `results` columns a ResultRecord fills, each with its field: one list for the SQL, and
// for anything that prints or exports a result under the schema's names (cpullm db).
using ResultField = std::variant<std::string ResultRecord::*, std::optional<int64_t> ResultRecord::*,
                                 std::optional<double> ResultRecord::*>;
struct ResultColumn {
  const char* name;   // the column, e.g. "avg_ts"
  ResultField field;  // e.g. &ResultRecord::avg_ts
};
std::span<const ResultColumn> result_columns();

// A row of `runs`.
struct RunRecord {
  int64_t id = 0;
  std::string kind;          // bench | sweep | nightly | kernels | tune
  std::string command;       // the command line, without --resume
  std::string started_at;    // ISO 8601 UTC
  std::string finished_at;   // empty while unfinished
  std::string git_commit;    // the build's commit, "-dirty" when its tree was
  HostInfo host;
};

// A row of `results` as stored (what `cpullm db results` and the tests read back).
struct StoredResult {
  int64_t id = 0;
  int64_t run_id = 0;
  ResultRecord record;       // samples and regions filled too
};

class Connection;  // the backend: SQLite or PostgreSQL (backend.hpp)

enum class DbOpen {
  create,    // writers: an absent SQLite file is created
  existing,  // readers (cpullm db): an absent SQLite file is an Error, not a new empty database
};

class ResultsDb {
 public:
  // A file path (SQLite; created if absent), a postgresql:// (or postgres://) URL or a libpq
  // conninfo string (`host=... dbname=...`, backend.hpp's is_postgres). Creates
  // the tables or migrates an older schema; a newer schema than this build knows is an Error.
  explicit ResultsDb(const std::string& location, DbOpen mode = DbOpen::create);
  ~ResultsDb();
  ResultsDb(const ResultsDb&) = delete;
  ResultsDb& operator=(const ResultsDb&) = delete;

  const std::string& location() const { return location_; }
  int schema_version();

  // A new unfinished run on this host (detect_host()) with this build's git commit.
  int64_t begin_run(const std::string& kind, const std::string& command);
  int64_t begin_run(const std::string& kind, const std::string& command, const HostInfo& host);
  // A run as given (cpullm db import): every field of `run` but its id and finished_at (a new run
  // is unfinished: finish_run() once its points are in). Returns the new run's id.
  int64_t add_run(const RunRecord& run);
  // Stores one point with its samples and regions in one transaction: when this returns the
  // point is committed and visible to every other connection. Returns the result's id.
  // A case_name the run already has is an Error (names must be unique within a run).
  int64_t add_result(int64_t run_id, const ResultRecord& result);
  // at: when it finished (ISO 8601 UTC, what an import was given); empty: now.
  void finish_run(int64_t run_id, const std::string& at = "");

  // The last unfinished run of this kind and command line on this host (same hostname and
  // fingerprint: a server sharing a PostgreSQL database never resumes another's run).
  std::optional<RunRecord> find_unfinished_run(const std::string& kind, const std::string& command);
  std::optional<RunRecord> find_unfinished_run(const std::string& kind, const std::string& command, const HostInfo& host);
  RunRecord run(int64_t run_id);                      // Error when there is no such run
  std::vector<RunRecord> runs();                      // every run, oldest first
  std::set<std::string> completed_cases(int64_t run_id);  // case names the run has results for
  std::vector<StoredResult> results(int64_t run_id);  // in the order they were added

 private:
  std::string location_;
  std::unique_ptr<Connection> connection_;
};

// What --resume means. resume_id set: that run (Error if absent, of another kind, or
// finished). Otherwise the last unfinished run of the same kind and command on this host, or,
// when there is none, a new run. Returns the run id.
int64_t resume_run(ResultsDb& db, const std::string& kind, const std::string& command, std::optional<int64_t> resume_id);

// The command line as stored in runs.command: arguments joined by spaces, shell-quoted where
// needed, with `--resume`, `--resume N` and `--resume=N` removed, so that the resumed
// invocation matches the original one, and PostgreSQL passwords masked (without_password).
std::string command_line(int argc, const char* const* argv);

// Now, as runs.started_at and results.test_time hold it: ISO 8601 UTC to the second, e.g.
// "2026-11-30T10:12:13Z" (sorts as text).
std::string utc_timestamp();

// The git commit this binary was built from ("unknown" outside a git checkout).
const char* build_git_commit();

}  // namespace cpullm
