// cpullm bench: llama-bench's flags, meanings and outputs, plus cpullm's dimensions (ISA,
// attention tile, binding, placement, KV type, sequences), latency metrics, the results
// database, named workloads, and two scenarios: load (Poisson arrivals against continuous
// batching) and multi-process sharing. docs/bench.md describes every flag and field.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "cli/commands.hpp"
#include "cli/data_dir.hpp"
#include "cli/config_file.hpp"
#include "cli/run_options.hpp"
#include "harness/bench/bench_db.hpp"
#include "harness/bench/bench_plan.hpp"
#include "harness/bench/bench_record.hpp"
#include "harness/bench/bench_runner.hpp"
#include "harness/bench/llama_numa.hpp"
#include "harness/bench/load_scenario.hpp"
#include "harness/bench/multiprocess.hpp"
#include "harness/bench/peer_engine.hpp"
#include "harness/bench/reporters.hpp"
#include "harness/bench/value_lists.hpp"
#include "harness/bench/workloads.hpp"
#include "harness/results/results_db.hpp"
#include "engine/model/kv_cache.hpp"
#include "engine/util/error.hpp"
#include "engine/util/input_file.hpp"
#include "engine/util/text.hpp"

namespace cpullm::cli {
namespace {

// The flags as given: lists stay text until parse_int_list / parse_word_list read them, so
// every list flag accepts llama-bench's commas, ranges and repetition (-n 16 -n 32).
struct BenchOptions {
  std::vector<std::string> models, n_prompt{"512"}, n_gen{"128"}, prompt_gen, n_depth{"0"}, threads{"0"}, n_batch{"512"},
      n_seq{"1"}, isa, attn_tile{kDefaultAttentionTiles}, binding{"none"}, placement{"first-touch"}, kv_type{std::string(kv_type_name(kDefaultKvType))},
      prefetch{"0"};
  int repetitions = 5;
  std::string output = "md";
  std::string numa;
  RunConfig run;  // --cpuset and --housekeeping: the same for every point
  bool cold = false;
  double inject_delay_ms = 0;
  std::string workload;
  std::string workloads_file = data_path("suites/workloads.json").string();
  std::string workload_dir = "models/workloads";
  std::string db;
  bool regions = true;  // with --db: the instrumented repetition and the roofs (--no-regions: neither)
  bool roof_pairs = false;  // the paired repetition: each decode step against a read of memory after it
  SuiteReference suite;     // --suite and its reference: stored with every point
  std::optional<int64_t> resume_id;
  bool resume = false;
  std::string command;  // the command line, for the results database
  std::string config_file;  // --config
  // The load scenario (--load) and the multi-process scenario (--processes N).
  bool load = false;
  std::vector<std::string> rates{"1"};
  int requests = 16;
  uint64_t seed = 42;
  LoadBounds bounds;
  bool search_rate = false;
  int search_steps = 4;
  int processes = 0;
  ServiceLevels slo;         // --slo-ttft, --slo-tpot: goodput's per-request bounds
  std::string url;           // --url: the load scenario against a server
  double duration_s = 0;     // --duration: arrivals for this long instead of --requests
  std::string prompts_file;  // --prompts: texts for --url's requests
  std::string label;         // --label: the server's name in the results
  std::vector<std::string> engines;  // --engine: peers measured at every point beside cpullm
};

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

std::vector<int64_t> ints(const std::vector<std::string>& given, const std::string& flag, int64_t min, int64_t max) {
  return parse_int_list(joined(given), flag, min, max);
}

// A workload fills in the model and the lengths the command line did not give.
void apply_workload(BenchOptions& o, const CLI::App& command) {
  const Workload w = find_workload(o.workloads_file, o.workload);
  std::fprintf(stderr, "cpullm: bench: workload %s: %s\n", w.name.c_str(), w.description.c_str());
  auto given = [&](const char* flag) { return command.count(flag) > 0; };
  if (!given("--model")) o.models = {ensure_workload_model(w, o.workload_dir)};
  if (!given("--n-prompt") && !given("--n-gen") && !given("--pg")) {  // one test: pp, tg or pp+tg
    const bool both = w.n_prompt > 0 && w.n_gen > 0;
    o.n_prompt = {std::to_string(both ? 0 : w.n_prompt)};
    o.n_gen = {std::to_string(both ? 0 : w.n_gen)};
    o.prompt_gen.clear();
    if (both) o.prompt_gen.push_back(fmt::format("{},{}", w.n_prompt, w.n_gen));
  }
  if (!given("--np")) o.n_seq = {std::to_string(w.n_seq)};
  if (!given("--batch-size")) o.n_batch = {std::to_string(w.n_batch)};
  if (!given("--repetitions")) o.repetitions = w.repetitions;
  if (!given("--kv-type")) o.kv_type = {w.kv_type};
}

BenchParams bench_params(const BenchOptions& o) {
  BenchParams p;
  p.models = parse_word_list(joined(o.models), "-m");
  p.n_prompt = ints(o.n_prompt, "-p", 0, 1 << 20);
  p.n_gen = ints(o.n_gen, "-n", 0, 1 << 20);
  for (const auto& pg : o.prompt_gen) p.prompt_gen.push_back(parse_prompt_gen_pair(pg));
  p.n_depth = ints(o.n_depth, "-d", 0, 1 << 20);
  p.threads = ints(o.threads, "-t", 0, 4096);
  p.n_batch = ints(o.n_batch, "-b", 1, 1 << 20);
  p.n_seq = ints(o.n_seq, "-np", 1, 4096);
  p.isa = o.isa.empty() ? std::vector<std::string>{""}  // "": the best level this CPU has
                        : parse_word_list(joined(o.isa), "--isa", {"scalar", "avx2", "avx512"});
  p.attn_tile = parse_word_list(joined(o.attn_tile), "--attn-tile");
  p.binding = parse_word_list(joined(o.binding), "--bind", {"none", "compact", "scatter", "numa"});
  p.placement = parse_word_list(joined(o.placement), "--placement", {"first-touch", "interleave", "replicate", "shard"});
  p.kv_type = parse_word_list(joined(o.kv_type), "--kv-type", kv_type_names());
  p.prefetch = ints(o.prefetch, "--prefetch", 0, 1);
  p.cpuset = o.run.cpuset;
  p.housekeeping = o.run.housekeeping;
  p.repetitions = o.repetitions;
  p.cold = o.cold;
  p.inject_delay_ms = o.inject_delay_ms;
  if (!o.numa.empty()) {  // llama-bench's --numa replaces the binding, CPU set and placement
    const NumaMapping mapping = map_llama_numa(o.numa, detect_topology());
    p.numa = o.numa;
    p.binding = {mapping.binding};
    p.placement = {mapping.placement};
    p.cpuset = mapping.cpuset;
  }
  for (const auto& tile : p.attn_tile) parse_attention_tiles(tile);  // an Error now, not after an hour of points
  return p;
}

// The results database's run for this command: a new one, or with --resume the unfinished one.
struct DbRun {
  std::unique_ptr<ResultsDb> db;
  int64_t run_id = 0;
  std::set<std::string> done;  // case names already stored (resumed runs)
};

DbRun open_db_run(const BenchOptions& o) {
  DbRun run;
  if (o.db.empty()) {
    if (o.resume) fail("--resume needs --db: the results database holds the unfinished run");
    return run;
  }
  run.db = std::make_unique<ResultsDb>(o.db);
  run.run_id = o.resume ? resume_run(*run.db, "bench", o.command, o.resume_id) : run.db->begin_run("bench", o.command);
  run.done = run.db->completed_cases(run.run_id);
  if (!run.done.empty())
    std::fprintf(stderr, "cpullm: bench: resuming run %ld: %zu points already stored\n", static_cast<long>(run.run_id),
                 run.done.size());
  return run;
}

// The command line as given (before prepare_arguments respells it), for the database's runs.command.
std::string& bench_command_line() {
  static std::string text;
  return text;
}

std::vector<double> load_rates(const BenchOptions& o) {
  std::vector<double> rates;
  for (const auto& text : o.rates) {
    try {
      rates.push_back(std::stod(text));
    } catch (const std::exception&) {
      fail("--rate: '{}' is not a number of requests per second", text);
    }
    if (!(rates.back() > 0)) fail("--rate: {} is not a positive rate", text);
  }
  return rates;
}

// --load: the configuration's model serves requests at each --rate, then (--search-rate) at
// the rates the search probes. Every run is one record.
void run_load_scenario(const BenchOptions& o, const BenchPoint& point, DbRun& db) {
  const HostInfo host = detect_host();
  Session session(run_config(point));  // applied as generate applies the same flags
  const RunReport& machine = session.report();
  const ModelFacts facts = describe_model(session.model().file());
  const std::unique_ptr<Reporter> reporter = make_reporter(o.output, stdout, load_markdown_columns(), "load_test");
  LoadSettings settings;
  settings.requests = o.requests;
  settings.n_prompt = point.n_prompt;
  settings.n_gen = point.n_gen;
  settings.n_batch = point.n_batch;
  settings.seed = o.seed;
  std::map<double, Record> measured;  // by rate: the search does not repeat a --rate already run
  auto run_at = [&](double rate) {
    if (measured.contains(rate)) return measured[rate];
    settings.rate = rate;
    std::fprintf(stderr, "cpullm: bench: load at %.4g requests/s (%d requests)\n", rate, o.requests);
    const Record record = load_record(point, machine, facts, settings, run_load(session, settings), o.bounds, o.slo, host);
    reporter->add(record);
    if (db.db) db.db->add_result(db.run_id, result_record(record, "load"));
    return measured[rate] = record;
  };
  const std::vector<double> rates = load_rates(o);
  for (double rate : rates) run_at(rate);
  if (o.search_rate) {
    if (!o.bounds.given()) fail("--search-rate needs --ttft-bound-ms and/or --tpot-bound-ms");
    std::optional<Record> best;  // the highest passing run
    const double max_rate = find_max_rate([&](double rate) {
      const Record record = run_at(rate);
      const bool met = load_meets_bounds(record, o.bounds);
      if (met && (!best || rate > (*best)["rate"].get<double>())) best = record;
      return met;
    }, rates.front(), o.search_steps);
    std::fprintf(stderr, "cpullm: bench: highest rate meeting p99 TTFT <= %g ms and p99 TPOT <= %g ms: %.4g requests/s\n",
                 o.bounds.ttft_p99_ms, o.bounds.tpot_p99_ms, max_rate);
    if (best) {  // the answer as its own record: the run at that rate, named for it
      (*best)["test"] = "load-max-rate";
      (*best)["case_name"] = "max-rate/" + (*best)["case_name"].get<std::string>();
      reporter->add(*best);
      if (db.db) db.db->add_result(db.run_id, result_record(*best, "load"));
    }
  }
  reporter->finish();
}

// --prompts FILE: a JSON array of strings, or one JSON string per line.
std::vector<std::string> read_prompts(const std::string& path) {
  const std::string text = read_input_file(path, "the prompts (--prompts)", 64u << 20);
  std::vector<std::string> prompts;
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_discarded() && doc.is_array()) {
    for (const auto& p : doc) {
      if (!p.is_string()) fail_file(path, "--prompts wants a JSON array of strings, or one JSON string per line");
      prompts.push_back(p.get<std::string>());
    }
  } else {
    std::size_t line_number = 0, begin = 0;
    while (begin < text.size()) {
      const std::size_t end = std::min(text.find('\n', begin), text.size());
      const std::string line = text.substr(begin, end - begin);
      begin = end + 1;
      ++line_number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const nlohmann::json p = nlohmann::json::parse(line, nullptr, false);
      if (p.is_discarded() || !p.is_string()) fail_file(path, "line {}: not a JSON string", line_number);
      prompts.push_back(p.get<std::string>());
    }
  }
  if (prompts.empty()) fail_file(path, "no prompts");
  return prompts;
}

// --load --url: the same arrivals against a server, one record per --rate.
void run_url_load_scenario(const BenchOptions& o, std::pair<int64_t, int64_t> lengths, DbRun& db) {
  const ServerIdentity server = query_server(o.url);
  const std::string engine = !o.label.empty() ? o.label
                             : server.owned_by == "llamacpp" ? "llama.cpp"
                             : !server.owned_by.empty() ? server.owned_by : "server";
  std::fprintf(stderr, "cpullm: bench: --url %s serves %s (%s)%s\n", o.url.c_str(), server.model.c_str(), engine.c_str(),
               server.vocab > 0 || !o.prompts_file.empty() ? ""
                                                           : "; it does not report its vocabulary (meta.n_vocab): "
                                                             "prompts use token ids below 1000");
  UrlLoadSettings settings;
  settings.requests = o.requests;
  settings.duration_s = o.duration_s;
  settings.n_prompt = lengths.first;
  settings.n_gen = lengths.second;
  settings.seed = o.seed;
  if (!o.prompts_file.empty()) settings.prompts = read_prompts(o.prompts_file);
  const HostInfo host = detect_host();
  const std::unique_ptr<Reporter> reporter = make_reporter(o.output, stdout, url_load_markdown_columns(), "load_test");
  for (double rate : load_rates(o)) {
    settings.rate = rate;
    std::fprintf(stderr, "cpullm: bench: load at %.4g requests/s against %s\n", rate, o.url.c_str());
    const Record record = url_load_record(server, engine, settings, run_url_load(server, settings), o.slo, host);
    reporter->add(record);
    if (db.db) db.db->add_result(db.run_id, result_record(record, "load"));
  }
  reporter->finish();
}

// --processes N: N processes generate on the model at once; their memory is read while they run.
void run_sharing_scenario(const BenchOptions& o, const BenchPoint& point, DbRun& db) {
  SharingSettings settings;
  settings.cpullm = std::filesystem::read_symlink("/proc/self/exe").string();
  settings.model = point.model;
  settings.processes = o.processes;
  settings.threads = std::max(1, point.threads);
  const SharingResult result = run_shared_processes(settings);
  const Record record = sharing_record(point, settings, result, describe_model(GgufFile(point.model)), detect_host());
  std::fprintf(stderr, "cpullm: bench: %d processes: sharing saves %.1f%% of their memory (%.1f%% of the model's "
               "pages); the seed claimed 40%%\n", o.processes, result.saved_fraction * 100, result.model_saved_fraction * 100);
  const std::unique_ptr<Reporter> reporter = make_reporter(o.output, stdout, sharing_markdown_columns(), "multiproc_test");
  reporter->add(record);
  reporter->finish();
  if (db.db) db.db->add_result(db.run_id, result_record(record, "multiproc"));
}

// --suite comes with its whole reference, and the reference flags only with --suite.
void check_suite_reference(const BenchOptions& o, const CLI::App& command) {
  const char* flags[] = {"--suite-command", "--reference", "--reference-rate", "--reference-unit", "--work-per-token"};
  for (const char* flag : flags) {
    if (o.suite.suite.empty() && command.count(flag)) fail("{}: describes a --suite's point; give --suite NAME", flag);
    if (!o.suite.suite.empty() && !command.count(flag))
      fail("--suite: needs {} (every suite point stores its reference and the command that reproduces it)", flag);
  }
  if (!o.suite.suite.empty() && (o.load || o.processes)) fail("--suite: stores the points' reference, not a --load or --processes scenario's");
}

// Each peer's results at `point`, printed on stderr and stored with --db. A peer point met
// twice (cpullm points that differ only in what the peer has no option for) is measured once, and
// one a --resume'd run holds is not measured again.
void measure_peers(const std::vector<std::unique_ptr<PeerEngine>>& peers, const BenchPoint& point, DbRun& db,
                   std::set<std::string>& measured, std::set<std::string>& printed_notes) {
  for (const std::unique_ptr<PeerEngine>& peer : peers) {
    if (const std::string why = peer->cannot_measure(point); !why.empty()) {
      if (printed_notes.insert(peer->name() + why).second)
        std::fprintf(stderr, "cpullm: note: %s not measured at %s: %s\n", peer->name().c_str(), point.test_name().c_str(), why.c_str());
      continue;
    }
    const std::string key = fmt::format("{}/{}/{}/{}/{}/{}/{}/{}/{}", peer->name(), point.model, point.n_prompt, point.n_gen,
                                        point.n_depth, point.threads, point.n_batch, point.kv_type, point.repetitions);
    if (!measured.insert(key).second) continue;
    for (const ResultRecord& result : peer->measure(point)) {
      std::fprintf(stderr, "cpullm: bench: %s (build %s %s) %s t%ld: %.2f +- %.2f tokens/s\n", result.engine.c_str(),
                   result.engine_version.c_str(), result.engine_commit.c_str(), point.test_name().c_str(),
                   static_cast<long>(result.n_threads.value_or(0)), result.avg_ts.value_or(0), result.stddev_ts.value_or(0));
      if (db.db && !db.done.contains(result.case_name)) db.db->add_result(db.run_id, result);
    }
  }
}

void run_bench(BenchOptions& o, const CLI::App& command) {
  if (!o.url.empty()) {  // a server's model: no model file, no engine flags; lengths from -pg or the workload
    if (!o.load) fail("--url drives the load scenario against a server: give --load");
    if (!o.models.empty() || !o.engines.empty() || o.processes || o.search_rate)
      fail("--url measures a server: -m, --engine, --processes and --search-rate do not apply");
    std::pair<int64_t, int64_t> lengths;
    if (!o.workload.empty()) {
      const Workload w = find_workload(o.workloads_file, o.workload);
      lengths = {w.n_prompt, w.n_gen};
    }
    if (!o.prompt_gen.empty() || o.workload.empty()) {
      if (o.prompt_gen.size() != 1) fail("--load --url needs the request lengths as one -pg PROMPT,GEN (or a --workload)");
      lengths = parse_prompt_gen_pair(o.prompt_gen.front());
    }
    if (lengths.first < 1 || lengths.second < 1) fail("--load --url: -pg needs a prompt and a generation of at least 1 token");
    DbRun db = open_db_run(o);
    run_url_load_scenario(o, lengths, db);
    if (db.db) db.db->finish_run(db.run_id);
    return;
  }
  if (o.duration_s > 0 || !o.prompts_file.empty() || !o.label.empty())
    fail("--duration, --prompts and --label describe a --url load test");
  if (!o.workload.empty()) apply_workload(o, command);
  if (o.models.empty()) fail("bench: give a model with -m FILE (or a --workload NAME)");
  if (o.load && o.processes) fail("--load and --processes are separate scenarios: give one");
  if (o.roof_pairs && (o.load || o.processes)) fail("--roof-pairs measures the points' decode steps, not the --load or --processes scenario");
  check_suite_reference(o, command);
  BenchParams params = bench_params(o);
  const bool deep = std::any_of(params.n_depth.begin(), params.n_depth.end(), [](int64_t d) { return d > 0; });
  if (deep && (o.load || o.processes)) fail("-d fills the context before a test; the --load and --processes scenarios take none");
  if (deep && o.cold)
    fail("-d with --cold: a cold repetition's time starts before the model loads, so the depth's fill would fall "
         "inside it; run them apart");
  if (o.load) {  // requests have both a prompt and a generation: -pg's first pair
    if (params.prompt_gen.size() != 1) fail("--load needs the request lengths as one -pg PROMPT,GEN (or a --workload)");
    params.n_prompt.clear();
    params.n_gen.clear();
  }
  const std::vector<BenchPoint> points = expand_points(params);
  if (points.empty()) fail("bench: nothing to run: every -p and -n is 0 and no -pg is given");
  if (o.load && points.size() != 1)
    fail("--load runs one configuration, but the flags give {}: one value per flag", points.size());

  DbRun db = open_db_run(o);
  if ((o.load || o.processes) && !o.engines.empty())
    fail("--engine measures a peer at bench's points; the --load and --processes scenarios have none");
  if (o.load || o.processes) {
    if (o.resume) fail("--resume continues point sweeps; a scenario run starts afresh");
    if (o.load) run_load_scenario(o, points.front(), db);
    else run_sharing_scenario(o, points.front(), db);
    if (db.db) db.db->finish_run(db.run_id);
    return;
  }
  std::vector<std::unique_ptr<PeerEngine>> peers;
  for (const std::string& spec : o.engines) peers.push_back(make_peer_engine(spec));
  const std::unique_ptr<Reporter> reporter = make_reporter(o.output, stdout, point_markdown_columns(points, o.roof_pairs), "test");
  const HostInfo host = detect_host();
  std::set<std::string> printed_notes;  // each note once, not once per point
  std::set<std::string> peer_points;    // the peers' points measured so far
  // With --db each point also gets an instrumented repetition after its timed ones: the regions table.
  PointRequest request;
  request.profile = db.db != nullptr && o.regions;
  request.roof_pairs = o.roof_pairs;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const BenchPoint& point = points[i];
    if (db.done.contains(point.case_name())) continue;
    std::fprintf(stderr, "cpullm: bench: point %zu/%zu: %s %s\n", i + 1, points.size(), point.model.c_str(),
                 point.case_name().c_str());
    // The peers run just before cpullm at every other point, just after at the rest, so neither
    // engine always meets the machine as the other left it.
    if (i % 2 == 1) measure_peers(peers, point, db, peer_points, printed_notes);
    const PointMeasurement measurement = run_point(point, request);
    if (i % 2 == 0) measure_peers(peers, point, db, peer_points, printed_notes);
    for (const auto& note : measurement.machine.notes)
      if (printed_notes.insert(note).second) std::fprintf(stderr, "cpullm: note: %s\n", note.c_str());
    Record record = point_record(point, measurement, host);
    if (!o.suite.suite.empty()) add_suite_reference(record, o.suite);
    reporter->add(record);
    if (!db.db) continue;
    if (!measurement.energy_unavailable.empty() && printed_notes.insert(measurement.energy_unavailable).second)
      std::fprintf(stderr, "cpullm: note: energy_j not stored: %s\n", measurement.energy_unavailable.c_str());
    db.db->add_result(db.run_id, point_result_record(record, measurement,
                                                     point.n_gen == 0 ? "pp" : point.n_prompt == 0 ? "tg" : "pg"));
  }
  reporter->finish();
  if (db.db) db.db->finish_run(db.run_id);
}

}  // namespace

std::vector<std::string> prepare_arguments(int argc, const char* const* argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() < 2) return args;
  const std::string command = args[1];
  if (command == "bench") bench_command_line() = valid_utf8(command_line(argc, argv));
  if (command != "bench" && command != "generate" && command != "profile") return args;
  for (std::string& arg : args)
    if (arg == "-np" || (command == "bench" && arg == "-pg")) arg = "-" + arg;
  return args;
}

void register_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* command = app.add_subcommand("bench", "Benchmark like llama-bench: every combination of the flags' values");
  add_config_option(*command, o->config_file);
  command->footer("LIST flags take comma lists and ranges first-last, first-last+step, first-last*factor "
                  "(e.g. -p 64-512*2), or the flag repeated; every combination is run. See docs/bench.md.");
  auto list = [&](const std::string& name, std::vector<std::string>& values, const std::string& help) {
    command->add_option(name, values, help)->type_name("LIST")->capture_default_str();
  };
  list("-m,--model", o->models, "GGUF model files");
  list("-p,--n-prompt", o->n_prompt, "Prompt tokens: prompt-processing tests");
  list("-n,--n-gen", o->n_gen, "Generated tokens: text-generation tests");
  command->add_option("--pg", o->prompt_gen, "PROMPT,GEN: prompt then generation in one test (also spelled -pg)");
  list("-d,--n-depth", o->n_depth, "Context positions filled, untimed, before each test (llama-bench's depth)");
  // The run options under generate's names and help (cli/run_options.hpp), each taking a LIST.
  auto run_list = [&](RunFlag flag, std::vector<std::string>& values, const std::string& values_help = "") {
    const RunFlagText text = run_flag_text(flag);
    list(text.names, values, text.help + values_help);
  };
  run_list(RunFlag::threads, o->threads);
  list("-b,--batch-size", o->n_batch, "Prompt tokens per forward call");
  run_list(RunFlag::sequences, o->n_seq);
  command->add_option("-r,--repetitions", o->repetitions, "Repetitions of each test")->check(CLI::Range(1, 1000000000))->capture_default_str();
  command->add_option("-o,--output", o->output, "Output format on stdout")
      ->check(CLI::IsMember({"md", "csv", "json", "jsonl", "sql"}))->capture_default_str();
  command->add_option("--numa", o->numa, "llama-bench's NUMA mode, mapped onto --bind/--cpuset/--placement")
      ->check(CLI::IsMember({"distribute", "isolate", "numactl"}));
  run_list(RunFlag::isa, o->isa);
  run_list(RunFlag::attn_tile, o->attn_tile);
  run_list(RunFlag::bind, o->binding);
  // One CPU set and housekeeping for the whole run.
  add_run_options(*command, o->run, {RunFlag::cpuset, RunFlag::housekeeping});
  run_list(RunFlag::placement, o->placement);
  run_list(RunFlag::kv_type, o->kv_type);
  run_list(RunFlag::prefetch, o->prefetch, " (0, 1)");
  command->add_flag("--cold", o->cold, "Drop the model from the page cache before every repetition (no warm-up)");
  command->add_option("--inject-delay-ms", o->inject_delay_ms, "Sleep this long after every generated token (the "
                      "deliberately slowed build for regression tests)")->check(CLI::Range(0.0, 60000.0));
  command->add_option("--workload", o->workload, "A named workload from the workloads file (model, lengths, sequences)");
  command->add_option("--workloads-file", o->workloads_file, "Workloads file")->capture_default_str();
  command->add_option("--workload-dir", o->workload_dir, "Where workload models are written and found")->capture_default_str();
  command->add_option("--db", o->db, "Results database: SQLite file or postgresql:// URL; every point committed at once");
  command->add_flag("!--no-regions", o->regions, "With --db, skip the instrumented repetition that stores each point's "
                    "regions and the roofs it measures (about a second per thread count): for callers running bench many times");
  command->add_flag("--roof-pairs", o->roof_pairs, "One more repetition, each decode step followed by a read of memory on the "
                    "same threads: the decode's weight bandwidth against the read roof, pair by pair (docs/bench.md)");
  command->add_option("--suite", o->suite.suite, "The suites/ script this run belongs to: every point stores it with "
                      "the reference below, for cpullm report's suites section (docs/bench.md)");
  command->add_option("--suite-command", o->suite.command, "--suite: the script's command line that reproduces the run");
  command->add_option("--reference", o->suite.reference, "--suite: what the points are held against, in words");
  command->add_option("--reference-rate", o->suite.rate, "--suite: that roof or peak, in --reference-unit per second")
      ->check(CLI::PositiveNumber);
  command->add_option("--reference-unit", o->suite.unit, "--suite: bytes or operations")
      ->check(CLI::IsMember({"bytes", "operations"}));
  command->add_option("--work-per-token", o->suite.work_per_token, "--suite: --reference-unit one token takes")
      ->check(CLI::PositiveNumber);
  command->add_option("--engine", o->engines, "A peer measured at every point beside cpullm, alternating: llama.cpp (its "
                                              "llama-bench on $PATH) or llama.cpp=PATH (llama-bench or its folder)");
  command->add_flag("--load", o->load, "The load scenario: Poisson arrivals against continuous batching (docs/bench.md)");
  command->add_option("--rate", o->rates, "--load: requests per second, comma list")->delimiter(',')->capture_default_str();
  command->add_option("--requests", o->requests, "--load: requests per run")->check(CLI::Range(1, 1000000))->capture_default_str();
  add_seed_option(*command, "--seed", o->seed, "--load: seed of the arrivals and tokens")->capture_default_str();
  command->add_option("--ttft-bound-ms", o->bounds.ttft_p99_ms, "--load: bound on p99 time to first token")->check(CLI::Range(0.0, 1e9));
  command->add_option("--tpot-bound-ms", o->bounds.tpot_p99_ms, "--load: bound on p99 time per output token")->check(CLI::Range(0.0, 1e9));
  command->add_option("--slo-ttft", o->slo.ttft_ms, "--load: a request's time to first token bound (ms) for goodput")
      ->check(CLI::Range(0.0, 1e9));
  command->add_option("--slo-tpot", o->slo.tpot_ms, "--load: a request's time per output token bound (ms) for goodput")
      ->check(CLI::Range(0.0, 1e9));
  command->add_option("--url", o->url, "--load: against an OpenAI-compatible server (http://HOST:PORT) instead of in process");
  command->add_option("--duration", o->duration_s, "--load --url: send arrivals for this many seconds instead of --requests")
      ->check(CLI::Range(0.0, 1e7));
  command->add_option("--prompts", o->prompts_file, "--load --url: prompt texts (a JSON array, or a JSON string per line) "
                                                    "instead of token-id prompts of -pg's length")->check(CLI::ExistingFile);
  command->add_option("--label", o->label, "--load --url: the server's name in the results (default: its owned_by)");
  command->add_flag("--search-rate", o->search_rate, "--load: find the highest rate meeting the bounds, from the first --rate");
  command->add_option("--search-steps", o->search_steps, "--load: bisection steps of the search")->check(CLI::Range(0, 20))->capture_default_str();
  command->add_option("--processes", o->processes, "The multi-process scenario: N processes share the mapped model")
      ->check(CLI::Range(2, 256));
  command->add_option("--resume", o->resume_id, "Continue the last unfinished run of this command (or run RUN_ID) in --db")
      ->expected(0, 1);
  command->callback([o, command] {
    apply_config_file(*command, o->config_file);
    o->resume = command->count("--resume") > 0;
    o->command = bench_command_line();
    run_bench(*o, *command);
  });
}

}  // namespace cpullm::cli
