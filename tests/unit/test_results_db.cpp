// The results database through its API, on SQLite and, when tests/python/test_postgres.py has
// started a server and set CPULLM_TEST_POSTGRES_URL, the same tests on PostgreSQL.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>

#include "harness/results/backend.hpp"
#include "harness/results/results_db.hpp"
#include "harness/results/schema.hpp"
#include "engine/util/error.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

using test::TempDir;

// A made-up machine, so runs from "other hosts" can be written on this one.
HostInfo test_host(const std::string& hostname = "bench-01", const std::string& cpu_model = "Test CPU @ 2.0GHz") {
  HostInfo host;
  host.hostname = hostname;
  host.cpu_model = cpu_model;
  host.cores = 40;
  host.sockets = 4;
  host.numa_nodes = 4;
  host.memory_bytes = int64_t{256} << 30;  // above 2^31: PostgreSQL must store it as BIGINT
  host.kernel = "6.1.0-test";
  host.isa_level = "avx2";
  host.governor = "performance";
  host.fingerprint = host_fingerprint(host);
  return host;
}

ResultRecord test_result(const std::string& case_name) {
  ResultRecord r;
  r.case_name = case_name;
  r.test = "pp";
  r.model_filename = "models/llama-7b-q8_0.gguf";
  r.model_type = "llama 7B Q8_0";
  r.model_size = 7'161'000'000;  // above 2^31
  r.model_n_params = 6'738'415'616;
  r.format = "q8_0";
  r.isa = "avx2";
  r.n_threads = 40;
  r.binding = "numa";
  r.cpuset = "4-43";
  r.placement = "interleave";
  r.attn_tile = "64x64";
  r.kv_type = "f16";
  r.n_batch = 512;
  r.n_seq = 1;
  r.n_prompt = 512;
  r.n_gen = 0;
  r.prefetch = 1;
  r.config_json = R"({"threads": 40, "bind": "numa"})";
  r.avg_ns = 1.5e9;
  r.stddev_ns = 0.1 + 0.2;  // not exactly 0.3: must come back bit for bit
  r.avg_ts = 341.33333333333331;
  r.stddev_ts = 2.5;
  r.ttft_ms = 1500.25;
  r.peak_rss_bytes = int64_t{9} << 30;
  r.metrics_json = R"({"note": "it's quoted"})";  // a quote in a value
  r.test_time = "2026-11-30T10:00:00Z";
  r.engine = "llama.cpp";  // a peer's point, with its build
  r.engine_version = "1";
  r.engine_commit = "de3ff81";
  r.samples = {{0, 1.4e9, 365.7, ""}, {1, 1.6e9, 320.0, R"({"rss": 1})"}};
  r.regions = {{"q_proj", 32, 0.25, 1e12, 4e9, ""}, {"attention", 32, 0.5, 2e11, 1e9, R"({"why": "no PMU"})"}};
  return r;  // tpot_ms, itl_*, energy_j left unmeasured: NULL
}

void expect_same(const ResultRecord& a, const ResultRecord& b) {
  for (const ResultColumn& column : result_columns())
    std::visit([&](auto member) { EXPECT_EQ(a.*member, b.*member) << column.name; }, column.field);
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (size_t i = 0; i < a.samples.size(); ++i) {
    EXPECT_EQ(a.samples[i].repetition, b.samples[i].repetition);
    EXPECT_EQ(a.samples[i].ns, b.samples[i].ns);
    EXPECT_EQ(a.samples[i].ts, b.samples[i].ts);
    EXPECT_EQ(a.samples[i].metrics_json, b.samples[i].metrics_json);
  }
  ASSERT_EQ(a.regions.size(), b.regions.size());
  for (size_t i = 0; i < a.regions.size(); ++i) {
    EXPECT_EQ(a.regions[i].name, b.regions[i].name);
    EXPECT_EQ(a.regions[i].calls, b.regions[i].calls);
    EXPECT_EQ(a.regions[i].seconds, b.regions[i].seconds);
    EXPECT_EQ(a.regions[i].flops, b.regions[i].flops);
    EXPECT_EQ(a.regions[i].bytes, b.regions[i].bytes);
    EXPECT_EQ(a.regions[i].counters_json, b.regions[i].counters_json);
  }
}

// The error message of `action`, or "" when it did not throw cpullm::Error.
template <typename Action>
std::string error_of(Action action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* postgres_url() { return std::getenv("CPULLM_TEST_POSTGRES_URL"); }

// "sqlite" always; "postgres" only when a server was started for the test (at ctest's
// discovery there is none, so these cases are not listed; test_postgres.py runs them).
std::vector<std::string> backends() {
  std::vector<std::string> names = {"sqlite"};
  if (postgres_url()) names.push_back("postgres");
  return names;
}

class ResultsDbTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "sqlite") {
      location = dir.file("results.db");
      return;
    }
    location = postgres_url();
    open_connection(location, true)->execute_script("DROP SCHEMA public CASCADE; CREATE SCHEMA public;");  // a fresh database
  }
  TempDir dir;
  std::string location;
};

TEST_P(ResultsDbTest, CreatesTheSchemaAtTheLatestVersion) {
  ASSERT_GE(latest_schema_version(), 2);
  {
    ResultsDb db(location);
    EXPECT_EQ(db.schema_version(), latest_schema_version());
    EXPECT_TRUE(db.runs().empty());
  }
  ResultsDb again(location);  // opening a current database changes nothing
  EXPECT_EQ(again.schema_version(), latest_schema_version());
}

TEST_P(ResultsDbTest, StoresARunAndAResultAndReadsThemBack) {
  ResultsDb db(location);
  const int64_t run_id = db.begin_run("bench", "cpullm bench -m x.gguf -p 512", test_host());
  const ResultRecord written = test_result("pp512/q8_0/t40");
  const int64_t result_id = db.add_result(run_id, written);

  const RunRecord run = db.run(run_id);
  EXPECT_EQ(run.kind, "bench");
  EXPECT_EQ(run.command, "cpullm bench -m x.gguf -p 512");
  EXPECT_EQ(run.git_commit, build_git_commit());
  EXPECT_EQ(run.started_at.size(), std::string("2026-11-30T10:00:00Z").size());
  EXPECT_TRUE(run.finished_at.empty());
  const HostInfo host = test_host();
  EXPECT_EQ(run.host.hostname, host.hostname);
  EXPECT_EQ(run.host.cpu_model, host.cpu_model);
  EXPECT_EQ(run.host.cores, host.cores);
  EXPECT_EQ(run.host.sockets, host.sockets);
  EXPECT_EQ(run.host.numa_nodes, host.numa_nodes);
  EXPECT_EQ(run.host.memory_bytes, host.memory_bytes);
  EXPECT_EQ(run.host.kernel, host.kernel);
  EXPECT_EQ(run.host.isa_level, host.isa_level);
  EXPECT_EQ(run.host.governor, host.governor);
  EXPECT_EQ(run.host.fingerprint, host.fingerprint);

  const auto results = db.results(run_id);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].id, result_id);
  EXPECT_EQ(results[0].run_id, run_id);
  ResultRecord expected = written;
  std::swap(expected.regions[0], expected.regions[1]);  // regions come back slowest first
  expect_same(results[0].record, expected);
  EXPECT_FALSE(results[0].record.energy_j.has_value()) << "unmeasured is NULL, never 0";

  db.finish_run(run_id);
  EXPECT_FALSE(db.run(run_id).finished_at.empty());
}

TEST_P(ResultsDbTest, FillsConfigTestTimeAndEngineWhenLeftEmpty) {
  ResultsDb db(location);
  const int64_t run_id = db.begin_run("bench", "cmd", test_host());
  ResultRecord minimal;
  minimal.case_name = "tg128";
  minimal.test = "tg";
  minimal.config_json.clear();
  db.add_result(run_id, minimal);
  const ResultRecord stored = db.results(run_id).at(0).record;
  EXPECT_EQ(stored.config_json, "{}");
  EXPECT_EQ(stored.test_time.substr(0, 2), "20");
  EXPECT_EQ(stored.engine, "cpullm");  // a writer that names no engine is cpullm
  EXPECT_TRUE(stored.engine_commit.empty());
  EXPECT_FALSE(stored.n_threads.has_value());
  EXPECT_TRUE(stored.samples.empty());
}

TEST_P(ResultsDbTest, MigratesAVersion1Database) {
  {  // A database as schema version 1 left it, with a run and a point in it.
    auto connection = open_connection(location, true);
    connection->execute_script("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);");
    connection->execute_script(schema_migrations().at(0).sql);
    connection->query("INSERT INTO schema_version (version) VALUES (1)");
    connection->query(
        "INSERT INTO runs (id, kind, command, started_at, host, cores, memory_bytes, fingerprint) "
        "VALUES (7, 'sweep', 'cpullm sweep old', '2026-01-01T00:00:00Z', 'old-host', 8, 17179869184, 'abc')");
    connection->query(
        "INSERT INTO results (run_id, case_name, test, n_threads, config_json, avg_ts) VALUES (7, 'tg128/t8', 'tg', 8, '{}', 12.5)");
  }
  ResultsDb db(location);
  EXPECT_EQ(db.schema_version(), latest_schema_version());
  const RunRecord old = db.run(7);
  EXPECT_EQ(old.command, "cpullm sweep old");
  EXPECT_EQ(old.host.memory_bytes, int64_t{16} << 30);
  EXPECT_TRUE(old.finished_at.empty());
  const auto results = db.results(7);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].record.avg_ts, 12.5);
  EXPECT_EQ(results[0].record.n_threads, 8);
  EXPECT_TRUE(results[0].record.placement.empty());  // a column version 2 added: NULL for old points
  EXPECT_EQ(results[0].record.engine, "cpullm");      // version 5: every point before it was cpullm's
  // Version 2's columns take values, and its unique (run, case) index holds.
  ResultRecord point = test_result("pp512");
  db.add_result(7, point);
  EXPECT_EQ(db.results(7).at(1).record.placement, "interleave");
  EXPECT_EQ(db.results(7).at(1).record.prefetch, 1);
  EXPECT_EQ(db.completed_cases(7), (std::set<std::string>{"pp512", "tg128/t8"}));
}

TEST_P(ResultsDbTest, RefusesASchemaNewerThanThisBuild) {
  { ResultsDb db(location); }
  open_connection(location, true)->query("INSERT INTO schema_version (version) VALUES (?)", {int64_t{latest_schema_version() + 1}});
  const std::string error = error_of([&] { ResultsDb db(location); });
  EXPECT_NE(error.find("is newer than this cpullm knows"), std::string::npos) << error;
}

TEST_P(ResultsDbTest, AResultIsVisibleToAnotherConnectionAsSoonAsAddResultReturns) {
  ResultsDb writer(location);
  ResultsDb reader(location);
  const int64_t run_id = writer.begin_run("bench", "cmd", test_host());
  writer.add_result(run_id, test_result("pp512"));
  EXPECT_EQ(reader.completed_cases(run_id), std::set<std::string>{"pp512"});
  EXPECT_EQ(reader.results(run_id).at(0).record.samples.size(), 2u);
}

TEST_P(ResultsDbTest, AKilledWriterLosesOnlyThePointInFlight) {
  // The child writes points without end; it is killed (no clean close, no destructor) once
  // three are visible here, most likely in the middle of the next one's transaction.
  const std::string command = "cpullm sweep --space s.json";
  const pid_t child = fork();
  if (child == 0) {
    try {
      ResultsDb db(location);
      const int64_t run_id = db.begin_run("sweep", command, test_host());
      for (int p = 0;; ++p) db.add_result(run_id, test_result("point-" + std::to_string(p)));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "writer: %s\n", e.what());
    }
    _exit(2);
  }
  ResultsDb db(location);
  std::optional<RunRecord> run;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a loaded CI machine is slow, never this slow
  while ((!run || db.completed_cases(run->id).size() < 3) && std::chrono::steady_clock::now() < deadline) {
    if (!run) run = db.find_unfinished_run("sweep", command, test_host());
    usleep(5000);
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the writer stopped by itself: status " << status;
  ASSERT_TRUE(run.has_value());

  ResultsDb after(location);  // a new connection, after the writer's death
  EXPECT_TRUE(after.run(run->id).finished_at.empty());
  const auto results = after.results(run->id);
  ASSERT_GE(results.size(), 3u);
  for (size_t i = 0; i < results.size(); ++i) {  // every point whole, none skipped
    EXPECT_EQ(results[i].record.case_name, "point-" + std::to_string(i));
    EXPECT_EQ(results[i].record.samples.size(), 2u);
    EXPECT_EQ(results[i].record.regions.size(), 2u);
  }
}

TEST_P(ResultsDbTest, AFailedPointLeavesNothingBehind) {
  ResultsDb db(location);
  const int64_t run_id = db.begin_run("bench", "cmd", test_host());
  ResultRecord broken = test_result("pp512");
  broken.regions[1].name.clear();  // NULL into a NOT NULL column: fails after the result and its samples went in
  EXPECT_NE(error_of([&] { db.add_result(run_id, broken); }), "");
  EXPECT_TRUE(db.completed_cases(run_id).empty());
  auto connection = open_connection(location, true);
  EXPECT_EQ(std::get<int64_t>(connection->query("SELECT COUNT(*) FROM samples")[0][0]), 0);
  EXPECT_EQ(std::get<int64_t>(connection->query("SELECT COUNT(*) FROM regions")[0][0]), 0);
  db.add_result(run_id, test_result("pp512"));  // the connection is usable after the rollback
  EXPECT_EQ(db.completed_cases(run_id).size(), 1u);
}

TEST_P(ResultsDbTest, RefusesDuplicateCasesAndFinishedOrMissingRuns) {
  ResultsDb db(location);
  const int64_t run_id = db.begin_run("bench", "cmd", test_host());
  db.add_result(run_id, test_result("pp512"));
  std::string error = error_of([&] { db.add_result(run_id, test_result("pp512")); });
  EXPECT_NE(error.find("already has a result for case \"pp512\""), std::string::npos) << error;
  error = error_of([&] { db.add_result(run_id + 100, test_result("x")); });
  EXPECT_NE(error.find("no run"), std::string::npos) << error;
  ResultRecord unnamed = test_result("");
  EXPECT_NE(error_of([&] { db.add_result(run_id, unnamed); }).find("needs a case_name"), std::string::npos);
  db.finish_run(run_id);
  error = error_of([&] { db.add_result(run_id, test_result("tg128")); });
  EXPECT_NE(error.find("finished"), std::string::npos) << error;
  EXPECT_EQ(db.results(run_id).size(), 1u);
}

TEST_P(ResultsDbTest, ResumeFindsTheLastUnfinishedRunOfTheSameCommandOnThisHost) {
  ResultsDb db(location);
  const std::string command = "cpullm bench -m x.gguf -t 1,2";
  const int64_t finished = db.begin_run("bench", command, test_host());
  db.finish_run(finished);
  const int64_t wanted = db.begin_run("bench", command, test_host());
  db.add_result(wanted, test_result("t1"));
  db.add_result(wanted, test_result("t2"));
  db.begin_run("bench", "cpullm bench -m other.gguf", test_host());              // another command
  db.begin_run("sweep", command, test_host());                                    // another kind
  db.begin_run("bench", command, test_host("bench-02"));                          // another server
  db.begin_run("bench", command, test_host("bench-01", "Other CPU @ 3.0GHz"));    // same name, other machine

  const auto found = db.find_unfinished_run("bench", command, test_host());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, wanted);
  EXPECT_EQ(db.completed_cases(wanted), (std::set<std::string>{"t1", "t2"}));
  db.finish_run(wanted);
  EXPECT_FALSE(db.find_unfinished_run("bench", command, test_host()).has_value());
}

TEST_P(ResultsDbTest, ResumeRunContinuesOrStartsAfresh) {
  ResultsDb db(location);
  const std::string command = "cpullm bench -p 64";
  const int64_t first = resume_run(db, "bench", command, std::nullopt);  // nothing to resume: a new run
  EXPECT_EQ(resume_run(db, "bench", command, std::nullopt), first);    // this host's unfinished run
  EXPECT_EQ(resume_run(db, "bench", command, first), first);
  EXPECT_NE(error_of([&] { resume_run(db, "sweep", command, first); }).find("is a bench run, not sweep"), std::string::npos);
  EXPECT_NE(error_of([&] { resume_run(db, "bench", command, first + 100); }).find("no run"), std::string::npos);
  const int64_t elsewhere = db.begin_run("bench", command, test_host("far-away", "Far CPU"));
  EXPECT_NE(error_of([&] { resume_run(db, "bench", command, elsewhere); }).find("another machine"), std::string::npos);
  db.finish_run(first);
  EXPECT_NE(error_of([&] { resume_run(db, "bench", command, first); }).find("nothing to resume"), std::string::npos);
  const int64_t fresh = resume_run(db, "bench", command, std::nullopt);
  EXPECT_NE(fresh, first);
  EXPECT_NE(fresh, elsewhere);
}

TEST_P(ResultsDbTest, ConcurrentWritersOnAFreshDatabaseLoseNothing) {
  // Four processes open the same new database at once (all racing to create the schema) and
  // each writes its own run of points.
  constexpr int writers = 4, points = 10;
  std::vector<pid_t> children;
  for (int w = 0; w < writers; ++w) {
    const pid_t pid = fork();
    if (pid == 0) {
      try {
        ResultsDb db(location);
        const int64_t run_id = db.begin_run("sweep", "writer " + std::to_string(w), test_host());
        for (int p = 0; p < points; ++p) db.add_result(run_id, test_result("point-" + std::to_string(p)));
        db.finish_run(run_id);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", w, e.what());
        _exit(2);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  ResultsDb db(location);
  EXPECT_EQ(db.schema_version(), latest_schema_version());
  const auto runs = db.runs();
  ASSERT_EQ(runs.size(), static_cast<size_t>(writers));
  for (const RunRecord& run : runs) {
    EXPECT_FALSE(run.finished_at.empty());
    EXPECT_EQ(db.completed_cases(run.id).size(), static_cast<size_t>(points));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ResultsDbTest, ::testing::ValuesIn(backends()),
                         [](const auto& info) { return info.param; });

TEST(ResultsDbLocation, BadPathsAndUrlsAreClearErrors) {
  TempDir dir;
  std::string error = error_of([] { ResultsDb db("/nonexistent-folder/results.db"); });
  EXPECT_NE(error.find("/nonexistent-folder/results.db: cannot open"), std::string::npos) << error;

  error = error_of([&] { ResultsDb db(dir.file("absent.db"), DbOpen::existing); });
  EXPECT_NE(error.find("absent.db: no such results database"), std::string::npos) << error;

  std::ofstream(dir.file("notes.txt")) << "These are notes, not an SQLite database. " << std::string(200, 'x');
  error = error_of([&] { ResultsDb db(dir.file("notes.txt")); });
  EXPECT_NE(error.find("notes.txt: SQLite: file is not a database"), std::string::npos) << error;

  error = error_of([] { ResultsDb db(""); });
  EXPECT_NE(error.find("--db: empty"), std::string::npos) << error;

  // Port 1 on the loopback: refused at once, no server needed. The password is never printed.
  error = error_of([] { ResultsDb db("postgresql://cpullm:s3cret@127.0.0.1:1/results"); });
  EXPECT_NE(error.find("postgresql://cpullm:***@127.0.0.1:1/results: cannot connect to PostgreSQL"), std::string::npos) << error;
  EXPECT_EQ(error.find("s3cret"), std::string::npos) << error;
}

TEST(ResultsDbCommandLine, DropsResumeAndQuotesWhatTheShellWould) {
  const char* argv[] = {"/work/build/cpullm", "bench", "--resume", "12", "-p", "64-512*2", "--db", "my results.db", "--resume=3",
                        "--resume", "-n", "it's"};
  EXPECT_EQ(command_line(12, argv), "cpullm bench -p '64-512*2' --db 'my results.db' -n 'it'\\''s'");
  const char* with_url[] = {"cpullm", "sweep", "--db=postgresql://team:s3cret@db.lab:5432/results"};
  EXPECT_EQ(command_line(3, with_url), "cpullm sweep --db=postgresql://team:***@db.lab:5432/results");
  const char* with_conninfo[] = {"cpullm", "bench", "--db", "host=db.lab password='s3 cr\\'et' dbname=results",
                                 "--db=postgresql://team@db.lab/results?password=s3cret&sslmode=require"};
  EXPECT_EQ(command_line(5, with_conninfo), "cpullm bench --db 'host=db.lab password=*** dbname=results' "
                                            "'--db=postgresql://team@db.lab/results?password=***&sslmode=require'");
}

TEST(ResultsDbLocation, ConninfoIsPostgresAndItsPasswordMasked) {
  EXPECT_TRUE(is_postgres("host=db.lab dbname=results"));
  EXPECT_TRUE(is_postgres(" dbname = results"));
  EXPECT_TRUE(is_postgres("postgres://db.lab/results"));
  EXPECT_FALSE(is_postgres("results.db"));
  EXPECT_FALSE(is_postgres("./run=3.db"));
  EXPECT_EQ(without_password("host=h password=se\\ cret dbname=d"), "host=h password=*** dbname=d");
  EXPECT_EQ(without_password("--db=password=s3cret host=h"), "--db=password=*** host=h");
  EXPECT_EQ(without_password("postgresql://u:s3cret@h/d"), "postgresql://u:***@h/d");
}

TEST(ResultsDbSchema, MigrationsAreNumberedFromOneWithTheListedTables) {
  const auto migrations = schema_migrations();
  for (size_t i = 0; i < migrations.size(); ++i) EXPECT_EQ(migrations[i].version, static_cast<int>(i) + 1);
  for (const char* table : {"CREATE TABLE IF NOT EXISTS runs", "CREATE TABLE IF NOT EXISTS results", "CREATE TABLE IF NOT EXISTS samples",
                            "CREATE TABLE IF NOT EXISTS regions"})
    EXPECT_NE(migrations[0].sql.find(table), std::string::npos) << table;
  EXPECT_EQ(migrations[0].sql.find("--"), std::string::npos) << "comments are stripped";
}

TEST(ResultsDbHost, DetectsThisMachine) {
  const HostInfo host = detect_host();
  EXPECT_FALSE(host.hostname.empty());
  EXPECT_NE(host.cpu_model, "unknown");
  EXPECT_GE(host.cores, 1);
  EXPECT_GE(host.sockets, 1);
  EXPECT_GE(host.numa_nodes, 1);
  EXPECT_GT(host.memory_bytes, int64_t{1} << 28);
  EXPECT_FALSE(host.kernel.empty());
  EXPECT_FALSE(host.governor.empty());
  EXPECT_EQ(host.fingerprint, host_fingerprint(host));
  EXPECT_EQ(host.fingerprint.size(), 16u);
  HostInfo same = host;
  same.memory_bytes += 5 << 20;  // MemTotal moves a little between kernels: still the same machine
  same.kernel = "other";
  EXPECT_EQ(host_fingerprint(same), host.fingerprint);
  same.cores += 1;
  EXPECT_NE(host_fingerprint(same), host.fingerprint);
}

}  // namespace
}  // namespace cpullm
