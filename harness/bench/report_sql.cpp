// SQL as llama-bench's -o sql: CREATE TABLE IF NOT EXISTS from the first record's fields, then
// one INSERT per point, ready for `| sqlite3 results.db`. Arrays are left out, as in CSV.
#include <fmt/format.h>

#include "harness/bench/reporters.hpp"

namespace cpullm {
namespace {

std::string sql_type(const nlohmann::ordered_json& value) {
  if (value.is_number_integer() || value.is_boolean()) return "INTEGER";
  if (value.is_number_float()) return "REAL";
  return "TEXT";
}

std::string sql_literal(const nlohmann::ordered_json& value) {
  if (value.is_null()) return "NULL";
  std::string out = "'";
  for (char c : plain_text(value)) {
    if (c == '\'') out += '\'';  // a quote inside is doubled
    out += c;
  }
  return out + "'";
}

class SqlReporter : public Reporter {
 public:
  SqlReporter(std::FILE* out, std::string table) : out_(out), table_(std::move(table)) {}

  void add(const Record& record) override {
    std::string columns, values;
    std::string create = fmt::format("CREATE TABLE IF NOT EXISTS {} (\n", table_);
    for (const auto& [key, value] : record.items()) {
      if (value.is_array()) continue;
      create += fmt::format("{}  {} {}", columns.empty() ? "" : ",\n", key, sql_type(value));
      columns += (columns.empty() ? "" : ", ") + key;
      values += (values.empty() ? "" : ", ") + sql_literal(value);
    }
    if (!created_) std::fprintf(out_, "%s\n);\n\n", create.c_str());
    created_ = true;
    std::fprintf(out_, "INSERT INTO %s (%s) VALUES (%s);\n", table_.c_str(), columns.c_str(), values.c_str());
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  std::string table_;
  bool created_ = false;
};

}  // namespace

std::unique_ptr<Reporter> make_sql_reporter(std::FILE* out, const std::string& table) {
  return std::make_unique<SqlReporter>(out, table);
}

}  // namespace cpullm
