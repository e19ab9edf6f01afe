#include "harness/results/llama_bench_output.hpp"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "engine/util/error.hpp"
#include "engine/util/text.hpp"

namespace cpullm {
namespace {

using Json = nlohmann::json;

// The fields a test's measurement fills; everything else describes the test (config_json).
const std::set<std::string> kMeasured = {"avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "samples_ns", "samples_ts",
                                         "test_time"};

std::string first_line(const std::string& text) {
  const size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return "";
  return text.substr(start, text.find('\n', start) - start);
}

bool is_test(const Json& doc) { return doc.is_object() && doc.contains("build_commit") && doc.contains("avg_ts"); }

// One test's fields as llama-bench wrote them. SQL gives every value as quoted text, so a number
// may come as a string holding it.
struct Test {
  const Json& doc;
  const std::string& path;
  size_t index;  // 1-based, for errors

  const Json& at(const char* key) const {
    if (!doc.contains(key) || doc[key].is_null()) fail_file(path, "test {}: no {}", index, key);
    return doc[key];
  }
  std::string text(const char* key) const {
    const Json& v = at(key);
    if (!v.is_string()) fail_file(path, "test {}: {} must be text, not {}", index, key, v.dump());
    return v.get<std::string>();
  }
  double number(const char* key) const {
    const Json& v = at(key);
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      char* end = nullptr;
      const double x = std::strtod(s.c_str(), &end);
      if (!s.empty() && end == s.c_str() + s.size()) return x;
    }
    fail_file(path, "test {}: {} must be a number, not {}", index, key, v.dump());
  }
  int64_t integer(const char* key) const {
    const Json& v = at(key);
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      int64_t x = 0;
      const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), x);
      if (!s.empty() && error == std::errc() && end == s.data() + s.size()) return x;
    }
    fail_file(path, "test {}: {} must be an integer, not {}", index, key, v.dump());
  }
  bool has(const char* key) const { return doc.contains(key) && !doc[key].is_null(); }
};

// "llama 7B Q4_K - Medium" -> "q4_k"; "llama 1B all F32" -> "f32": the type after the
// architecture and the size, in lower case.
std::string format_of(const std::string& model_type) {
  std::istringstream words(model_type);
  std::string architecture, size, type;
  words >> architecture >> size >> type;
  if (type == "all") words >> type;
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return type;
}

ResultRecord read_test(const Test& t) {
  ResultRecord r;
  r.engine = "llama.cpp";
  r.engine_commit = t.text("build_commit");
  r.engine_version = std::to_string(t.integer("build_number"));
  r.model_filename = valid_utf8(t.text("model_filename"));
  r.model_type = valid_utf8(t.text("model_type"));
  r.format = format_of(r.model_type);
  if (t.has("model_size")) r.model_size = t.integer("model_size");
  if (t.has("model_n_params")) r.model_n_params = t.integer("model_n_params");
  const int64_t n_prompt = t.integer("n_prompt"), n_gen = t.integer("n_gen");
  const int64_t n_depth = t.has("n_depth") ? t.integer("n_depth") : 0;  // absent before llama-bench had -d
  if (n_prompt < 0 || n_gen < 0 || n_depth < 0 || n_prompt + n_gen == 0)
    fail_file(t.path, "test {}: n_prompt {}, n_gen {} and n_depth {} describe no test", t.index, n_prompt, n_gen, n_depth);
  r.n_prompt = n_prompt, r.n_gen = n_gen, r.n_depth = n_depth;
  r.test = n_gen == 0 ? "pp" : n_prompt == 0 ? "tg" : "pg";
  r.n_threads = t.integer("n_threads");
  if (t.has("n_batch")) r.n_batch = t.integer("n_batch");
  r.n_seq = 1;
  const std::string type_k = t.has("type_k") ? t.text("type_k") : "f16", type_v = t.has("type_v") ? t.text("type_v") : type_k;
  r.kv_type = type_k == type_v ? type_k : type_k + "/" + type_v;
  r.avg_ns = t.number("avg_ns");
  if (t.has("stddev_ns")) r.stddev_ns = t.number("stddev_ns");
  r.avg_ts = t.number("avg_ts");
  if (t.has("stddev_ts")) r.stddev_ts = t.number("stddev_ts");
  if (r.test == "tg") r.gen_ts = r.avg_ts;
  if (r.test == "pp") r.prompt_ts = r.avg_ts;
  if (t.has("test_time")) r.test_time = t.text("test_time");
  if (t.has("samples_ns")) {
    const Json& ns = t.at("samples_ns");
    const Json ts = t.has("samples_ts") ? t.at("samples_ts") : Json::array();
    if (!ns.is_array() || !ts.is_array() || (!ts.empty() && ts.size() != ns.size()))
      fail_file(t.path, "test {}: samples_ns and samples_ts must be arrays of one length", t.index);
    for (size_t i = 0; i < ns.size(); ++i) {
      if (!ns[i].is_number() || (!ts.empty() && !ts[i].is_number()))
        fail_file(t.path, "test {}: sample {} is not a number", t.index, i + 1);
      SampleRecord sample{static_cast<int32_t>(i), ns[i].get<double>(), std::nullopt, ""};
      if (!ts.empty()) sample.ts = ts[i].get<double>();
      r.samples.push_back(sample);
    }
  }
  Json config = Json::object();
  for (const auto& [key, value] : t.doc.items())
    if (!kMeasured.contains(key)) config[key] = value;
  r.config_json = config.dump(-1, ' ', false, Json::error_handler_t::replace);
  const std::string flash = t.has("flash_attn") ? std::to_string(t.integer("flash_attn")) : "-";
  const std::string ubatch = t.has("n_ubatch") ? std::to_string(t.integer("n_ubatch")) : "-";
  r.case_name = fmt::format("{}/{}{}/t{}/b{}/ub{}/fa{}/k{}", valid_utf8(std::filesystem::path(r.model_filename).stem().string()),
                            llama_bench_test_name(n_prompt, n_gen), n_depth > 0 ? fmt::format("@d{}", n_depth) : "", *r.n_threads,
                            r.n_batch ? std::to_string(*r.n_batch) : "-", ubatch, flash, r.kv_type);
  return r;
}

// SQL's 'text' literal at `at` (doubled quotes inside), advancing `at` past it.
std::string sql_string(const std::string& sql, size_t& at, const std::string& path, size_t index) {
  if (at >= sql.size() || sql[at] != '\'') fail_file(path, "insert {}: a value must be a quoted string", index);
  std::string out;
  for (++at; at < sql.size(); ++at) {
    if (sql[at] != '\'') {
      out += sql[at];
    } else if (at + 1 < sql.size() && sql[at + 1] == '\'') {
      out += '\'';
      ++at;
    } else {
      ++at;
      return out;
    }
  }
  fail_file(path, "insert {}: a quoted string does not end", index);
}

// The tests of `-o sql`: each "INSERT INTO llama_bench (columns) VALUES ('value', ...);" as an
// object of its columns' text.
std::vector<Json> sql_tests(const std::string& sql, const std::string& path) {
  static const std::string insert = "INSERT INTO llama_bench (", values = ") VALUES (";
  std::vector<Json> tests;
  for (size_t at = sql.find(insert); at != std::string::npos; at = sql.find(insert, at)) {
    const size_t index = tests.size() + 1;
    const size_t columns_end = sql.find(values, at);
    if (columns_end == std::string::npos) fail_file(path, "insert {}: no VALUES", index);
    std::vector<std::string> columns;
    std::istringstream list(sql.substr(at + insert.size(), columns_end - at - insert.size()));
    for (std::string column; std::getline(list, column, ',');) {
      const size_t first = column.find_first_not_of(' '), last = column.find_last_not_of(' ');
      if (first == std::string::npos) fail_file(path, "insert {}: an empty column name", index);
      columns.push_back(column.substr(first, last - first + 1));
    }
    at = columns_end + values.size();
    Json test = Json::object();
    for (size_t c = 0; c < columns.size(); ++c) {
      if (c > 0) {
        if (sql.compare(at, 2, ", ") != 0) fail_file(path, "insert {}: {} columns but fewer values", index, columns.size());
        at += 2;
      }
      test[columns[c]] = sql_string(sql, at, path, index);
    }
    if (sql.compare(at, 2, ");") != 0) fail_file(path, "insert {}: more values than its {} columns", index, columns.size());
    tests.push_back(std::move(test));
  }
  return tests;
}

std::vector<Json> json_tests(const std::string& text, const std::string& path) {
  std::vector<Json> tests;
  try {
    if (first_line(text).starts_with("[")) {
      const Json all = Json::parse(text);
      if (!all.is_array()) fail_file(path, "not a JSON array of tests");
      for (const Json& test : all) tests.push_back(test);
      return tests;
    }
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (line.find_first_not_of(" \t\r") != std::string::npos) tests.push_back(Json::parse(line));
  } catch (const Json::exception& e) {
    fail_file(path, "test {}: not JSON: {}", tests.size() + 1, e.what());
  }
  return tests;
}

}  // namespace

std::string llama_bench_test_name(int64_t n_prompt, int64_t n_gen) {
  if (n_gen == 0) return fmt::format("pp{}", n_prompt);
  if (n_prompt == 0) return fmt::format("tg{}", n_gen);
  return fmt::format("pp{}+tg{}", n_prompt, n_gen);
}

bool is_llama_bench_output(const std::string& text) {
  if (text.find("INSERT INTO llama_bench (") != std::string::npos ||
      text.find("CREATE TABLE IF NOT EXISTS llama_bench") != std::string::npos)
    return true;
  const std::string line = first_line(text);
  try {
    if (line.starts_with("[")) {
      const Json all = Json::parse(text);
      return all.is_array() && !all.empty() && is_test(all[0]);
    }
    if (line.starts_with("{")) return is_test(Json::parse(line));
  } catch (const Json::exception&) {
  }
  return false;  // cpullm's own JSON, or not JSON: the caller's error to give
}

LlamaBenchOutput read_llama_bench_output(const std::string& text, const std::string& path) {
  const bool sql = text.find("INSERT INTO llama_bench (") != std::string::npos ||
                   text.find("CREATE TABLE IF NOT EXISTS llama_bench") != std::string::npos;
  const std::vector<Json> tests = sql ? sql_tests(text, path) : json_tests(text, path);
  LlamaBenchOutput out;
  std::map<std::string, int> seen;  // case name -> times, so that a repeated test gets /#2, /#3
  for (size_t i = 0; i < tests.size(); ++i) {
    if (!tests[i].is_object()) fail_file(path, "test {}: must be an object, not {}", i + 1, tests[i].dump());
    const Test test{tests[i], path, i + 1};
    ResultRecord r = read_test(test);
    if (const int times = ++seen[r.case_name]; times > 1) r.case_name += fmt::format("/#{}", times);
    if (i == 0 && test.has("cpu_info")) out.cpu_info = valid_utf8(test.text("cpu_info"));
    out.results.push_back(std::move(r));
  }
  if (out.results.empty()) fail_file(path, "llama-bench output with no tests");
  return out;
}

}  // namespace cpullm
